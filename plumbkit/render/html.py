"""Render results as static HTML for notebooks (``_repr_html_``): a trace's table, a plan's panel."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from ..model.units import human_bytes
from .table import COLUMNS, row_cells
from .text import summary_lines

if TYPE_CHECKING:
    from ..engine.optimization import Plan
    from ..engine.trace_result import Trace


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
    offered = "".join(f"<li>{html.escape(str(o))}</li>" for o in getattr(plan, "options", ()))
    return (f"<div><b>minibatches/s</b>{table}"
            f"<div>prediction error {plan.prediction_error:.0%} (predicted {plan.predicted_throughput:,.1f}, "
            f"measured {plan.measured_throughput:,.1f})</div>"
            f"<div><b>LP allocation</b><ul>{lp}</ul></div><div><b>cache</b>: {cache_line} — "
            f"{html.escape(cache.why)}</div><div><b>changes</b><ul>{changes}</ul></div>"
            + (f"<div><b>notes</b><ul>{notes}</ul></div>" if notes else "")
            + (f"<div><b>options (not applied: they change the order)</b><ul>{offered}</ul></div>" if offered else "")
            + "</div>")
