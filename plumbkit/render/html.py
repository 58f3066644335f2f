"""Render results as static HTML for notebooks (``_repr_html_``): a trace's table, a plan's panel."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from ..model.units import human_bytes
from .table import COLUMNS, row_cells
from .text import plan_figures, plan_rows, summary_lines

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
    """The optimize panel: every figure labelled (a configuration's own prediction, the LP bound
    of the best allocation, or a measurement); the allocation over the user's operators."""
    measured = [v for v in plan.baselines.values() if v]
    top = max(measured or [1.0])
    rows = []
    for name, value, spread, predicted in plan_rows(plan):
        number = plan.baselines.get(name)
        bar = (f"<div style='background:#1f77b4;height:10px;width:{200 * number / top:.0f}px'></div>"
               if number else "")
        rows.append(f"<tr><td>{html.escape(name)}</td><td>{html.escape(value)}</td><td>{html.escape(spread)}</td>"
                    f"<td>{html.escape(predicted)}</td><td>{bar}</td></tr>")
    protocol = plan.comparison.protocol.describe() if plan.comparison is not None else "not measured"
    table = ("<table class='plumbkit-plan' style='font-size:12px'><tr><th>configuration</th>"
             "<th>measured (median)</th><th>spread</th><th>its own prediction</th><th></th></tr>"
             + "".join(rows) + "</table>"
             f"<div style='font-size:11px;color:#555'>measured alike: {html.escape(protocol)}</div>")
    figures = "".join(f"<li>{html.escape(what)}: <b>{html.escape(value)}</b></li>" for what, value in plan_figures(plan))
    lp = "".join(f"<li>{html.escape(k)}: {v:.2f} cores</li>" for k, v in plan.theta_by_label.items())
    charged = "".join(f"<li>{html.escape(k)}: {v:.2f} cores</li>" for k, v in plan.charged.items())
    free = html.escape(", ".join(plan.free)) if plan.free else ""
    cache = plan.cache
    cache_line = (f"cache at <b>{html.escape(cache.label)}</b>: {human_bytes(cache.bytes)} of a "
                  f"{human_bytes(cache.budget)} budget" if cache.label else "no new cache")
    title = "changes (applied)" if plan.applied else "changes proposed (not applied: yours is returned)"
    changes = "".join(f"<li>{html.escape(str(c))}</li>" for c in plan.proposed_changes) or "<li>none</li>"
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in plan.notes)
    offered = "".join(f"<li>{html.escape(str(o))}</li>" for o in getattr(plan, "options", ()))
    return (f"<div><div><b>{html.escape(plan.verdict)}</b></div><ul>{figures}</ul>"
            f"<b>minibatches/s</b>{table}"
            f"<div><b>LP allocation over your operators</b><ul>{lp or '<li>none</li>'}</ul>"
            + (f"also charged:<ul>{charged}</ul>" if charged else "")
            + (f"free in steady state (below a cache): {free}" if free else "") + "</div>"
            f"<div><b>cache</b>: {cache_line} — {html.escape(cache.why)}</div>"
            f"<div><b>{title}</b><ul>{changes}</ul></div>"
            + (f"<div><b>notes</b><ul>{notes}</ul></div>" if notes else "")
            + (f"<div><b>options (not applied: they change the order)</b><ul>{offered}</ul></div>" if offered else "")
            + "</div>")


def partial_plan_html(plan: "Plan") -> str:
    """A cut-short optimization: why it ended and what it measured until then."""
    head, *rest = plan.notes or ["cut short"]
    items = "".join(f"<li>{html.escape(line)}</li>" for line in rest)
    return (f"<div class='plumbkit-plan-partial'><b>plumbkit plan (partial)</b>: {html.escape(head)}"
            + (f"<ul>{items}</ul>" if items else "") + "</div>")
