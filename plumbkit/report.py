"""Render a :class:`~plumbkit.trace.Trace` as a text table (terminals) or static HTML (notebooks).

Presentation only: every number here was computed by :mod:`plumbkit.analysis`.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .analysis import OpStats
    from .trace import Trace
    from .tuning import Plan, Walk

COLUMNS = ("operator", "kind", "par", "V", "R/core", "CPU", "util", "elem/s", "B/elem",
           "materialized", "cache")


def human_bytes(n: float | None) -> str:
    if n is None:
        return "—"
    if math.isinf(n):
        return "∞"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"


def _num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if math.isinf(x):
        return "∞"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def row_cells(o: "OpStats") -> list[str]:
    """The table's cells for one operator (shared by the text, HTML and widget views)."""
    par = "—" if o.parallelism is None else ("AUTO" if o.parallelism < 0 else str(o.parallelism))
    cache = "yes" if o.cacheable else "no"
    return [o.label, o.kind, par, _num(o.visit_ratio), _num(o.rate_per_core), _pct(o.cpu_share),
            _pct(o.utilization), _num(o.elements_per_second), human_bytes(o.bytes_per_element),
            human_bytes(o.materialized_bytes), cache]


def summary_lines(trace: "Trace") -> list[str]:
    a = trace.analysis
    b = trace.bottleneck
    lines = [
        f"throughput {trace.throughput:.2f} minibatches/s (measured over {a.window[1] - a.window[0]:.1f} s, "
        f"trace ended: {trace.ended})",
        f"bottleneck: {b.label} ({_num(b.rate_per_core)} minibatches/s/core × {b.parallelism or 1})"
        if b else "bottleneck: none found (no operator used measurable CPU)",
    ]
    try:
        lines.append(f"LP upper bound with {trace.cores} cores: {trace.lp_bound():.2f} minibatches/s (prediction)")
    except Exception as err:  # noqa: BLE001 - the report must render whatever the solver says
        lines.append(f"LP upper bound: unavailable ({err})")
    lines.append(f"process CPU {a.cpu_seconds:.2f} core-s; {_pct(1 - a.unattributed_share)} attributed "
                 f"to operators, {_pct(a.unattributed_share)} unattributed (thread pools, Python consumer)")
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


def html_report(trace: "Trace") -> str:
    bottleneck = trace.bottleneck.name if trace.bottleneck else None
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = []
    for o in trace.ops:
        style = ' style="background:#ffe0e0;font-weight:bold"' if o.name == bottleneck else ""
        cells = "".join(f"<td>{html.escape(c)}</td>" for c in row_cells(o))
        body.append(f"<tr{style} title=\"{html.escape(o.note or o.cache_note)}\">{cells}</tr>")
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(trace))
    return (f"<div class=\"plumbkit-trace\"><ul>{summary}</ul>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")


def plan_html(plan: "Plan") -> str:
    """Baselines (measured; predicted where the model has one), LP allocation, cache, changes."""
    top = max(plan.baselines.values() or [1.0])
    rows = []
    for name, measured in plan.baselines.items():
        predicted = plan.predictions.get(name)
        bar = f"<div style='background:#1f77b4;height:10px;width:{200 * measured / top:.0f}px'></div>"
        rows.append(f"<tr><td>{name}</td><td>{measured:,.1f}</td>"
                    f"<td>{'' if predicted is None else f'{predicted:,.1f}'}</td><td>{bar}</td></tr>")
    table = ("<table class='plumbkit-plan' style='font-size:12px'><tr><th>pipeline</th>"
             "<th>measured</th><th>predicted</th><th></th></tr>" + "".join(rows) + "</table>")
    lp = "".join(f"<li>{html.escape(k)}: {v:.2f} cores</li>" for k, v in plan.theta_by_label.items())
    cache = plan.cache
    cache_line = (f"cache at <b>{html.escape(cache.label)}</b>: {human_bytes(cache.bytes)} of a "
                  f"{human_bytes(cache.budget)} budget" if cache.label else "no cache")
    changes = "".join(f"<li>{html.escape(str(c))}</li>" for c in plan.changes)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in plan.notes)
    return (f"<div><b>minibatches/s</b>{table}"
            f"<div>prediction error {plan.prediction_error:.0%} (predicted {plan.predicted_throughput:,.1f}, "
            f"measured {plan.measured_throughput:,.1f})</div>"
            f"<div><b>LP allocation</b><ul>{lp}</ul></div><div><b>cache</b>: {cache_line} — "
            f"{html.escape(cache.why)}</div><div><b>changes</b><ul>{changes}</ul></div>"
            + (f"<div><b>notes</b><ul>{notes}</ul></div>" if notes else "") + "</div>")


def walk_text(walk: "Walk") -> str:
    """One line per step: the operator given a thread and the throughput measured after it."""
    lines = [f"{walk.policy} walk: {len(walk.steps)} steps, minibatches/s measured (LP bound predicted)"]
    bounds = walk.lp_bounds
    for i, value in enumerate(walk.throughputs):
        op = "start" if i == 0 else f"+1 thread for {walk.steps[i - 1].operator}"
        bound = f" (LP bound {bounds[i]:.1f})" if i < len(bounds) else ""
        lines.append(f"  {i}: {value:10.1f}{bound}  {op}")
    return "\n".join(lines)
