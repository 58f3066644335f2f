"""Render results as text for terminals: a trace's table and summary, a walk's steps.

Presentation only: every number here was computed by the analysis, the planner or measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.units import human_bytes
from .table import COLUMNS, num, pct, row_cells, seconds

if TYPE_CHECKING:
    from ..engine.stepping import Walk
    from ..engine.trace_result import Trace


def bottleneck_line(trace: "Trace") -> str:
    """The bottleneck in words: how it is bound, and what holds it there."""
    b = trace.bottleneck
    if b is None:
        return "bottleneck: none found (no operator used measurable CPU)"
    if b.bound == "latency":
        how = (f"latency-bound: waits {seconds(b.latency_per_element)} per element for "
               f"{seconds(b.cpu_per_element)} of CPU, {b.parallelism or 1} call(s) in flight")
    else:
        how = f"{num(b.rate_per_core)} minibatches/s/core × {b.parallelism or 1}"
        if b.bound == "cpu":
            how = "CPU-bound: " + how
    gil = "; runs Python (holds the GIL: one core at most)" if b.holds_gil else ""
    return f"bottleneck: {b.label} ({how}{gil})"


def cpu_basis_line(trace: "Trace") -> str:
    """Where the CPU figures come from: calibrated alone, or wall-time shares for now."""
    if trace.calibrated:
        spent = trace.calibration.seconds if trace.calibration is not None else 0.0
        return (f"CPU per operator: calibrated alone (c), each operator on a sample of its inputs "
                f"({spent:.1f} s); V, elem/s, B/elem measured in the pipeline; R/core derived")
    return ("CPU per operator: traced wall-time shares (w), scaled to the process CPU — not yet "
            "calibrated (wall time includes waiting for a core)")


def summary_lines(trace: "Trace") -> list[str]:
    a = trace.analysis
    lines = [
        f"throughput {trace.throughput:.2f} minibatches/s (measured over {a.window[1] - a.window[0]:.1f} s, "
        f"trace ended: {trace.ended})",
        bottleneck_line(trace),
    ]
    try:
        lines.append(f"LP upper bound with {trace.cores} cores: {trace.lp_bound():.2f} minibatches/s (prediction)")
    except Exception as err:  # noqa: BLE001 - the report must render whatever the solver says
        lines.append(f"LP upper bound: unavailable ({err})")
    lines.append(cpu_basis_line(trace))
    over = f", operators' calibrated CPU {pct(a.over_attributed_share)} above it" if a.over_attributed_share > 0.005 else ""
    lines.append(f"process CPU {a.cpu_seconds:.2f} core-s; {pct(min(1.0, 1 - a.unattributed_share))} accounted "
                 f"for by operators, {pct(a.unattributed_share)} by nobody (thread pools, the Python consumer){over}")
    waiting = [o.label for o in trace.ops if o.bound == "latency"]
    python = [o.label for o in trace.ops if o.holds_gil]
    if waiting:
        lines.append(f"latency-bound (they wait; more calls in flight help, with tf.data's thread pool "
                     f"raised): {', '.join(waiting)}")
    if python:
        lines.append(f"run Python (hold the GIL: together, with the consumer loop, one core at most): "
                     f"{', '.join(python)}")
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
