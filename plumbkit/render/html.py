"""Render results as static HTML for notebooks (``_repr_html_``): a trace's table, a plan's panel."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from .table import COLUMNS, pct, row_cells
from .text import (FIRST_EPOCH_PROTOCOL, IDEAL_ROW, OPTIONS_TITLE, cache_row, first_epoch_line, rival_line,
                   summary_lines, training_rows, training_speedup_line, unshown_notes)

if TYPE_CHECKING:
    from ..engine.optimization import Plan
    from ..engine.trace_result import Trace

#: Bars of the plan view: the longest bar's width (px) and the two series' colours.
BAR_WIDTH = 240
PREDICTED_COLOR, MEASURED_COLOR = "#aec7e8", "#1f77b4"
#: What the plan view says where a configuration has no prediction of its own.
AUTOTUNE_NOTE = "no prediction (AUTOTUNE picks at run time)"


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


def plan_headline(plan: "Plan") -> str:
    """The answer in one line: the plan against yours, measured, then as predicted."""
    if not plan.proposed_changes:
        return "nothing to change: your pipeline is returned unchanged"
    if plan.right_sizing is not None and plan.steps_comparison is not None:
        return plan.verdict  # right-sized to the model: training steps/s measured alike decide
    predicted = plan.predicted_speedup
    then = f"; predicted {predicted:.1f}×" if predicted is not None else ""
    speedup = plan.speedup
    if speedup is None:
        return f"not measured alike{then}"
    if not speedup.measurable:
        return f"{speedup.verdict}{then}"
    if speedup.faster:
        return f"{speedup.ratio:.1f}× faster than yours, measured{then}"
    return f"slower than yours: {speedup.ratio:.2f}× its throughput, measured{then}"


def _returned(plan: "Plan") -> str:
    """What ``plan.dataset`` holds, and the measured ratio with its interval when it is one."""
    what = "plumbkit's plan is returned" if plan.applied else "your pipeline is returned unchanged"
    speedup = plan.speedup
    return f"{what} · {speedup.verdict}" if speedup is not None and speedup.measurable else what


def _rival(plan: "Plan") -> str:
    """The plan against AUTOTUNE given its own caches and prefetch, measured alike ('' if none)."""
    line = rival_line(plan)
    if line is None:
        return ""
    what, said = line
    return f"<div class='plumbkit-rival' style='color:#555'>{html.escape(what)}: {html.escape(said)}</div>"


def _pair(predicted: float | None, measured: float | None, top: float) -> str:
    """Two bars on one scale: the configuration's prediction (light) over its measurement (dark)."""
    def bar(value: float | None, color: str) -> str:
        width = 0 if not value else max(1, round(BAR_WIDTH * value / top))
        return (f"<div style='height:8px;margin:1px 0;width:{width}px;background:{color}'></div>")
    return bar(predicted, PREDICTED_COLOR) + bar(measured, MEASURED_COLOR)


def _configuration_rows(plan: "Plan") -> str:
    """One row per configuration: measured (with its spread), predicted, and the paired bars."""
    comparison = plan.comparison
    names = list(comparison.results) if comparison is not None else []
    names += [n for n in plan.baselines if n not in names]
    values = [v for n in names for v in (plan.baselines.get(n), plan.predictions.get(n)) if v]
    top = max(values or [1.0])
    rows = []
    for name in names:
        result = comparison.results.get(name) if comparison is not None else None
        measured = plan.baselines.get(name)
        if result is not None and not result.ok:
            measured_cell = f"<span style='color:#b00'>failed: {html.escape(str(result.failed))}</span>"
            measured = None
        elif measured is None:
            measured_cell = "—"
        else:
            measured_cell = f"{measured:,.1f}{_spread(result.quartiles if result is not None else None)}"
        predicted = plan.predictions.get(name)
        if predicted is not None:
            predicted_cell = f"{predicted:,.1f}"
        else:
            why = AUTOTUNE_NOTE if name.startswith("autotune") else "no prediction"
            predicted_cell = f"<span style='color:#777;font-size:11px'>{why}</span>"
        rows.append(f"<tr class='plumbkit-config'><td>{html.escape(name)}</td><td>{measured_cell}</td>"
                    f"<td>{predicted_cell}</td><td>{_pair(predicted, measured, top)}</td></tr>")
    return "".join(rows)


def _spread(q: tuple[float, float] | None) -> str:
    return f" <span style='color:#777;font-size:11px'>IQR {q[0]:,.1f}–{q[1]:,.1f}</span>" if q else ""


def _training_rows(plan: "Plan") -> str:
    """Training steps/s, one row per configuration measured with the step in the loop (the model
    alone on ideal input last): measured, its own prediction (the plan's beside its binding), bars."""
    rows = training_rows(plan)
    top = max([v for r in rows for v in (r.measured, r.predicted) if v] or [1.0])
    out = []
    for r in rows:
        measured_cell = "—" if r.measured is None else f"{r.measured:,.1f}{_spread(r.quartiles)}"
        if r.predicted is not None:
            predicted_cell = f"{r.predicted:,.1f}" + (
                f" <span style='color:#777;font-size:11px'>bound by {html.escape(r.binding)}</span>" if r.binding else "")
        else:
            why = (AUTOTUNE_NOTE if r.name.startswith("autotune")
                   else "measured only: the model's demand" if r.name == IDEAL_ROW else "no prediction")
            predicted_cell = f"<span style='color:#777;font-size:11px'>{why}</span>"
        out.append(f"<tr class='plumbkit-training-config'><td>{html.escape(r.name)}</td><td>{measured_cell}</td>"
                   f"<td>{predicted_cell}</td><td>{_pair(r.predicted, r.measured, top)}</td></tr>")
    return "".join(out)


def _training_table(plan: "Plan", legend: str) -> str:
    """The training steps/s table below the minibatches/s one (nothing without a model)."""
    rows = _training_rows(plan)
    if not rows:
        return ""
    return (f"<div style='margin-top:4px'><b>training steps/s</b> (the step in the loop) · {legend}</div>"
            "<table class='plumbkit-training' style='font-size:12px;white-space:nowrap'>"
            "<thead style='text-align:left'><tr><th>configuration</th><th>measured</th>"
            "<th>predicted</th><th></th></tr></thead><tbody>" + rows + "</tbody></table>")


def _training_headline(plan: "Plan") -> str:
    """Under the headline, with a model in the loop: what bounds training, and what the
    right-sized plan gives back (threads, the cache's memory) where it was right-sized."""
    if plan.model is None:
        return ""
    out = (f"<div class='plumbkit-training-verdict'><b>training</b> ({html.escape(plan.model.kind)}): "
           f"{html.escape(plan.model.verdict)}</div>")
    if (line := training_speedup_line(plan)) is not None:
        out += f"<div class='plumbkit-training-speedup'><b>training speed-up over yours</b>: {html.escape(line)}</div>"
    if plan.right_sizing is not None:
        out += (f"<div class='plumbkit-right-sizing'><b>right-sized</b>: "
                f"{html.escape(plan.right_sizing.note)}</div>")
    return out


def _details(plan: "Plan") -> str:
    """What the headline rests on, folded: the prediction's binding limit and its other limits,
    the allocation, the cache, the notes and the options."""
    prediction = plan.prediction
    limits = " · ".join(
        (f"<b>{html.escape(name)}: {value:,.1f} (binds)</b>" if name == prediction.binding
         else f"{html.escape(name)}: {value:,.1f}")
        for name, value in sorted(prediction.limits.items(), key=lambda kv: kv[1]))
    against = " in its first epoch, against the first epoch's prediction" if plan.first_epoch else ""
    off = (f"; measured {plan.measured_throughput:,.1f}{against}, {pct(plan.prediction_error)} off"
           if plan.measured_throughput else "")
    parts = [f"<b>prediction</b> (before any rewrite): {prediction.throughput:,.1f} minibatches/s, "
             f"bound by {html.escape(prediction.binding)}{off}.<br>Its limits, minibatches/s: {limits}"]
    alloc = " · ".join(f"{html.escape(k)}: {v:.2f}" for k, v in plan.theta_by_label.items())
    charged = " · ".join(f"{html.escape(k)}: {v:.2f}" for k, v in plan.charged.items())
    parts.append(f"<b>allocation over your operators</b> (cores): {alloc or 'none'}"
                 + (f"<br>also charged (cores): {charged}" if charged else "")
                 + (f"<br>free in steady state (below a cache): {html.escape(', '.join(plan.free))}"
                    if plan.free else ""))
    parts.append(f"<b>cache</b>: {html.escape(cache_row(plan))} — {html.escape(plan.cache.why)}")
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in unshown_notes(plan))
    if notes:
        parts.append(f"<b>notes</b><ul style='margin:2px 0'>{notes}</ul>")
    offered = "".join(f"<li>{html.escape(str(o))}</li>" for o in plan.options)
    if offered:
        parts.append(f"<b>{html.escape(OPTIONS_TITLE)}</b><ul style='margin:2px 0'>{offered}</ul>")
    protocol = plan.comparison.protocol.describe() if plan.comparison is not None else "not measured"
    protocol += FIRST_EPOCH_PROTOCOL if plan.first_epoch else ""
    parts.append(f"<b>measured alike</b>: {html.escape(protocol)}")
    return ("<details class='plumbkit-plan-details'><summary>details: what binds the prediction, "
            "the allocation, the cache, notes</summary>"
            + "".join(f"<div style='margin:4px 0'>{part}</div>" for part in parts) + "</details>")


def _first_epoch(plan: "Plan") -> str:
    """The first epoch (the plan's caches filling) and the steady state after it, as predicted."""
    line = first_epoch_line(plan)
    if line is None:
        return ""
    return f"<div class='plumbkit-first-epoch'><b>first epoch</b> (fills the cache): {html.escape(line)}</div>"


def plan_html(plan: "Plan") -> str:
    """The optimize panel: the answer in one line; each configuration measured and predicted as
    paired bars; the changes; the rest folded. One figure per name: the plan's prediction is
    the only model figure shown (no bound beside it). With a model in the loop, training steps/s
    too, the same way (the plan's predicted figure beside the limit that binds it)."""
    legend = (f"<span style='color:{PREDICTED_COLOR}'>■</span> predicted before the fact · "
              f"<span style='color:{MEASURED_COLOR}'>■</span> measured (median)")
    table = ("<table class='plumbkit-plan' style='font-size:12px;white-space:nowrap'>"
             "<thead style='text-align:left'><tr><th>configuration</th><th>measured</th>"
             "<th>predicted</th><th></th></tr></thead><tbody>" + _configuration_rows(plan) + "</tbody></table>")
    title = "changes (applied)" if plan.applied else "changes proposed (not applied: yours is returned)"
    changes = "".join(f"<li>{html.escape(str(c))}</li>" for c in plan.proposed_changes) or "<li>none</li>"
    return (f"<div class='plumbkit-plan-view'>"
            f"<div class='plumbkit-headline' style='font-size:15px'><b>{html.escape(plan_headline(plan))}</b></div>"
            f"<div style='color:#555'>{html.escape(_returned(plan))}</div>{_rival(plan)}{_training_headline(plan)}"
            f"{_first_epoch(plan)}<div style='margin-top:4px'><b>minibatches/s</b> · {legend}</div>{table}"
            f"{_training_table(plan, legend)}"
            f"<div><b>{title}</b><ul style='margin:2px 0'>{changes}</ul></div>{_details(plan)}</div>")


def partial_plan_html(plan: "Plan") -> str:
    """A cut-short optimization: why it ended and what it measured until then."""
    head, *rest = plan.notes or ["cut short"]
    items = "".join(f"<li>{html.escape(line)}</li>" for line in rest)
    return (f"<div class='plumbkit-plan-partial'><b>plumbkit plan (partial)</b>: {html.escape(head)}"
            + (f"<ul>{items}</ul>" if items else "") + "</div>")
