"""Render results as text for terminals: a trace's table and summary, a walk's steps.

Presentation only: every number here was computed by the analysis, the planner or measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ..model.units import human_bytes
from .table import COLUMNS, num, pct, row_cells, seconds

if TYPE_CHECKING:
    from ..engine.optimization import Plan
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


def allocation_bound_line(trace: "Trace") -> str:
    """The one bound a trace view shows, named for what it bounds and under which costs."""
    try:
        bound = trace.allocation_bound()
    except Exception as err:  # noqa: BLE001 - the report must render whatever the solver says
        return f"allocation bound: unavailable ({err})"
    return (f"allocation bound with {trace.cores} cores: {bound:,.1f} minibatches/s (the most your "
            f"operators allow with the cores ideally allocated; your loop, hand-offs and cache reads "
            f"not charged)")


def neighbours_line(trace: "Trace") -> str | None:
    """The cores other processes took during the trace, where they took a tenth of one or more
    (a plan counts the rest)."""
    others = trace.analysis.neighbour_cores
    if others is None or f"{others:.1f}" == "0.0":
        return None
    return (f"other processes kept {others:.1f} of {trace.cores} cores busy during the trace: a plan "
            f"counts only the cores they left free")


def summary_lines(trace: "Trace") -> list[str]:
    a = trace.analysis
    lines = [
        f"throughput {trace.throughput:.2f} minibatches/s (measured over {a.window[1] - a.window[0]:.1f} s, "
        f"trace ended: {trace.ended})",
        bottleneck_line(trace),
    ]
    if trace.model is not None:
        lines.append(f"training step ({trace.model.kind}), in the loop: {trace.model.verdict}")
    lines.append(allocation_bound_line(trace))
    if (neighbours := neighbours_line(trace)) is not None:
        lines.append(neighbours)
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
    lines = [f"{walk.policy} walk: {len(walk.steps)} steps, minibatches/s measured (allocation bound of each "
             f"step's trace)"]
    bounds = walk.allocation_bounds
    for i, value in enumerate(walk.throughputs):
        op = "start" if i == 0 else f"+1 thread for {walk.steps[i - 1].operator}"
        bound = f" (allocation bound {bounds[i]:.1f})" if i < len(bounds) else ""
        lines.append(f"  {i}: {value:10.1f}{bound}  {op}")
    return "\n".join(lines)


def partial_plan_text(plan) -> str:
    """A cut-short optimization: why it ended and what it measured until then."""
    head, *rest = plan.notes or ["cut short"]
    return "\n".join([f"plumbkit plan (partial): {head}"] + [f"  {line}" for line in rest])


def plan_rows(plan: "Plan") -> list[tuple[str, str, str, str]]:
    """(configuration, measured, spread, its own prediction) for every configuration compared."""
    rows = []
    comparison = plan.comparison
    names = list(comparison.results) if comparison is not None else []
    names += [n for n in plan.baselines if n not in names]
    for name in names:
        result = comparison.results.get(name) if comparison is not None else None
        if result is not None and not result.ok:
            measured, spread = f"failed: {result.failed}", ""
        else:
            value = plan.baselines.get(name)
            measured = "—" if value is None else f"{value:,.1f}"
            q = result.quartiles if result is not None else None
            spread = f"IQR {q[0]:,.1f}–{q[1]:,.1f}" if q else ""
        predicted = plan.predictions.get(name)
        rows.append((name, measured, spread, "—" if predicted is None else f"{predicted:,.1f}"))
    return rows


#: What the protocol's description gains where every configuration was measured in its first epoch.
def cache_row(plan: "Plan") -> str:
    """Which tier the plan's cache is in, where, how large, and what filling it costs (its first
    epoch, as predicted: ``plan.fill_prediction``, the disk tier's own where it holds one): read
    off the plan, nothing computed."""
    cache, fill = plan.cache, plan.fill_prediction
    if not cache.label:
        return "none new"
    if cache.tier != "disk":
        row = f"in memory at {cache.label}: {human_bytes(cache.bytes)} of a {human_bytes(cache.budget)} budget"
    else:
        row = f"on disk at {cache.label}: {human_bytes(cache.bytes)} in {cache.directory}"
    if fill is not None:
        disk = cache.tier == "disk"
        if plan.fill_seconds is None:
            took = ""
        elif disk:  # the tier is written whole, then read back: the first epoch is both
            took = f", then reads it back: ~{plan.fill_seconds:,.1f} s in all"
        else:
            took = f", ~{plan.fill_seconds:,.1f} s"
        row += (f"; its first epoch {'writes' if disk else 'fills'} it at "
                f"{fill.throughput:,.1f} minibatches/s predicted ({fill.binding}){took}")
    return row


FIRST_EPOCH_PROTOCOL = "; here no cache was filled first: every configuration measured in its first epoch"


def first_epoch_line(plan: "Plan") -> str | None:
    """The plan's first epoch (its caches filling) beside its steady state, both as predicted."""
    fill = plan.fill_prediction
    if fill is None:
        return None
    took = f", ~{plan.fill_seconds:,.1f} s" if plan.fill_seconds is not None else ""
    return (f"predicted {fill.throughput:,.1f} minibatches/s{took} (bound by {fill.binding}); "
            f"then {plan.prediction.throughput:,.1f} minibatches/s")


def plan_figures(plan: "Plan") -> list[tuple[str, str]]:
    """(what the figure is, the figure) for the plan's headline numbers, each labelled."""
    p = plan.prediction
    out = [("plan's throughput, predicted before any rewrite",
            f"{p.throughput:,.1f} minibatches/s, bound by {p.binding}"
            + (f" ({p.cpu_per_batch * 1e3:.2f} ms of CPU per minibatch"
               + (f", {p.idle_per_batch * 1e3:.2f} ms of cores idle at hand-offs" if p.idle_per_batch else "") + ")"
               if p.cpu_per_batch else ""))]
    if (first := first_epoch_line(plan)) is not None:
        out.append(("first epoch (fills the cache)", first))
    what = "plan's first epoch (its cache filling)" if plan.first_epoch else "plan's throughput"
    out.append((f"{what}, measured", f"{plan.measured_throughput:,.1f} minibatches/s"))
    against = ", against the first epoch's prediction" if plan.first_epoch else ""
    out.append((f"prediction error (before the fact{against})", pct(plan.prediction_error)))
    if plan.speedup is not None:
        out.append(("speed-up over yours, measured", plan.speedup.verdict))
    if (rival := rival_line(plan)) is not None:
        out.append(rival)
    return out + training_figures(plan)


def rival_line(plan: "Plan") -> tuple[str, str] | None:
    """(what, figure): the plan over AUTOTUNE given the plan's own caches and prefetch, measured
    alike, and what a loss there means. None where no rival was measured."""
    rival = plan.rival_speedup
    if rival is None:
        return None
    said = rival.verdict
    if rival.measurable and not rival.faster:
        said += ": the plan's caches and prefetch are the gain; with them, tf.data's own tuning beat the plan's settings"
    return f"plan over {rival.over} (AUTOTUNE given the plan's caches and prefetch), measured", said


def training_figures(plan: "Plan") -> list[tuple[str, str]]:
    """With a model in the loop: its verdict, and the plan's training steps/s predicted beside
    its binding (each configuration's, measured alike, is in :func:`training_rows`)."""
    if plan.model is None:
        return []
    out = [("training step, in the loop", plan.model.verdict)]
    if plan.step_prediction is not None:
        out.append(("training steps/s of the plan, predicted before any rewrite",
                    f"{plan.step_prediction.throughput:,.1f}, bound by {plan.step_prediction.binding}"))
    if (line := training_speedup_line(plan)) is not None:
        out.append(("training speed-up over yours", line))
    return out


def training_speedup_line(plan: "Plan") -> str | None:
    """The plan's training speed-up over yours, measured alike (with its interval) and predicted."""
    measured, predicted = plan.training_speedup, plan.predicted_training_speedup
    if measured is None and predicted is None:
        return None
    said = measured.verdict if measured is not None else "not measured alike"
    return said + (f"; predicted {predicted:.2f}×" if predicted is not None else "")


#: The row of the model alone on ideal input, in the training steps/s table.
IDEAL_ROW = "ideal input (the model alone)"


class TrainingRow(NamedTuple):
    """One configuration measured with the step in the loop: its median steps/s and quartiles,
    and its own prediction beside its binding (the plan's only; None where there is none)."""

    name: str
    measured: float | None
    quartiles: tuple[float, float] | None
    predicted: float | None
    binding: str | None


def training_rows(plan: "Plan") -> list[TrainingRow]:
    """Training steps/s per configuration (none without a model), the model alone last: read off
    the plan (the plan's row: ``measured_steps_per_s`` and ``step_prediction``)."""
    if plan.model is None:
        return []
    names = list(plan.steps_baselines) + [n for n in plan.steps_predictions if n not in plan.steps_baselines]
    results = plan.steps_comparison.results if plan.steps_comparison is not None else {}
    rows = []
    for name in names:
        result = results.get(name)
        quartiles = result.quartiles if result is not None and result.ok else None
        if name == "plumbkit":
            step = plan.step_prediction
            rows.append(TrainingRow(name, plan.measured_steps_per_s, quartiles, plan.predicted_steps_per_s,
                                    step.binding if step is not None else None))
        else:
            rows.append(TrainingRow(name, plan.steps_baselines.get(name), quartiles,
                                    plan.steps_predictions.get(name), None))
    if plan.ideal_steps_per_s:
        rows.append(TrainingRow(IDEAL_ROW, plan.ideal_steps_per_s, None, None, None))
    return rows


def training_table(plan: "Plan") -> list[str]:
    """The training steps/s table of the plain-text plan (no lines without a model)."""
    rows = training_rows(plan)
    if not rows:
        return []
    cells = [("configuration", "measured", "predicted")] + [
        (r.name, "—" if r.measured is None else f"{r.measured:,.1f}",
         "—" if r.predicted is None else f"{r.predicted:,.1f}" + (f" (bound by {r.binding})" if r.binding else ""))
        for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    return (["  training steps/s, measured alike with the step in the loop; 'predicted' is each "
             "configuration's own prediction:"]
            + ["    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells])


#: What heads the options a plan offers, in every view.
OPTIONS_TITLE = "offered, not applied (each says what it changes besides speed: yours to turn on)"


def plan_text(plan: "Plan") -> str:
    protocol = plan.comparison.protocol.describe() if plan.comparison is not None else "not measured"
    if plan.first_epoch:
        protocol += FIRST_EPOCH_PROTOCOL
    lines = [f"plumbkit plan: {plan.verdict}"]
    if plan.right_sizing is not None:
        lines.append(f"  right-sized: {plan.right_sizing.note}")
    lines += [f"  {what}: {value}" for what, value in plan_figures(plan)]
    lines.append(f"  measured alike, minibatches/s ({protocol}); 'predicted' is each configuration's own prediction:")
    rows = [("configuration", "measured", "spread", "predicted")] + plan_rows(plan)
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines += ["    " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines += training_table(plan)
    title = "changes (applied)" if plan.applied else "changes proposed (not applied: yours is returned)"
    lines.append(f"  {title}:")
    lines += [f"    - {c}" for c in plan.proposed_changes] or ["    (none)"]
    if plan.theta_by_label:
        alloc = ", ".join(f"{k} {v:.2f}" for k, v in plan.theta_by_label.items())
        lines.append(f"  cores the LP gives your operators (sets their threads): {alloc}")
    if plan.charged:
        lines.append("  the LP also charged: " + ", ".join(f"{k} {v:.2f} cores" for k, v in plan.charged.items()))
    if plan.free:
        lines.append("  free in steady state (below a cache): " + ", ".join(plan.free))
    lines.append(f"  cache: {cache_row(plan)} — {plan.cache.why}")
    if plan.options:  # the widget lists them too (render/html.py); the exported cell as comments
        lines.append(f"  {OPTIONS_TITLE}:")
        lines += [f"    - {o}" for o in plan.options]
    lines += [f"  note: {n}" for n in unshown_notes(plan)]
    return "\n".join(lines)


def unshown_notes(plan: "Plan") -> list[str]:
    """The plan's notes less the right-sizing note, which the views show under the verdict."""
    shown = plan.right_sizing.note if plan.right_sizing is not None else None
    return [n for n in plan.notes if n != shown]
