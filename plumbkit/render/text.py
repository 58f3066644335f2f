"""Render results as text for terminals: a trace's table and summary, a walk's steps.

Presentation only: every number here was computed by the analysis, the planner or measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.units import human_bytes
from .table import COLUMNS, num, pct, row_cells

if TYPE_CHECKING:
    from ..engine.stepping import Walk
    from ..engine.trace_result import Trace


def summary_lines(trace: "Trace") -> list[str]:
    a = trace.analysis
    b = trace.bottleneck
    lines = [
        f"throughput {trace.throughput:.2f} minibatches/s (measured over {a.window[1] - a.window[0]:.1f} s, "
        f"trace ended: {trace.ended})",
        f"bottleneck: {b.label} ({num(b.rate_per_core)} minibatches/s/core × {b.parallelism or 1})"
        if b else "bottleneck: none found (no operator used measurable CPU)",
    ]
    try:
        lines.append(f"LP upper bound with {trace.cores} cores: {trace.lp_bound():.2f} minibatches/s (prediction)")
    except Exception as err:  # noqa: BLE001 - the report must render whatever the solver says
        lines.append(f"LP upper bound: unavailable ({err})")
    lines.append(f"process CPU {a.cpu_seconds:.2f} core-s; {pct(1 - a.unattributed_share)} attributed "
                 f"to operators, {pct(a.unattributed_share)} unattributed (thread pools, Python consumer)")
    if a.source_bytes is not None:
        exact = "exact" if a.source_exact else "estimated from a sample"
        lines.append(f"source: {a.source_files} files, {human_bytes(a.source_bytes)} ({exact}); "
                     f"opened {a.files_opened}, read {human_bytes(a.bytes_read)}")
    lines.extend(f"note: {n}" for n in trace.notes)
    return lines


def text_report(trace: "Trace") -> str:
    rows = [list(COLUMNS)] + [row_cells(o) for o in trace.ops]
    bottleneck = trace.bottleneck.name if trace.bottleneck else None
    marks = [""] + ["◀ bottleneck" if o.name == bottleneck else (f"({o.note})" if o.note else "") for o in trace.ops]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + ("  " + m if m else "")
           for r, m in zip(rows, marks)]
    return "\n".join(summary_lines(trace) + [""] + out)


def walk_text(walk: "Walk") -> str:
    """One line per step: the operator given a thread and the throughput measured after it."""
    lines = [f"{walk.policy} walk: {len(walk.steps)} steps, minibatches/s measured (LP bound predicted)"]
    bounds = walk.lp_bounds
    for i, value in enumerate(walk.throughputs):
        op = "start" if i == 0 else f"+1 thread for {walk.steps[i - 1].operator}"
        bound = f" (LP bound {bounds[i]:.1f})" if i < len(bounds) else ""
        lines.append(f"  {i}: {value:10.1f}{bound}  {op}")
    return "\n".join(lines)


def partial_plan_text(plan) -> str:
    """A cut-short optimization: why it ended and what it measured until then."""
    head, *rest = plan.notes or ["cut short"]
    return "\n".join([f"plumbkit plan (partial): {head}"] + [f"  {line}" for line in rest])
