"""The full optimization and pick_best: trace -> decide -> predict -> rebuild -> measure alike.

1. **Before the fact.** The user's pipeline is traced, the consumer's ceiling, the runtime's
   hand-off and cache-read costs and the disk are measured; the plan (LP parallelism, a cache
   under the memory budget, a prefetch) is decided and its throughput *predicted* from those
   measurements only (:mod:`plumbkit.planning.predict`): one :class:`Prediction` for the layout
   that ships, which every view shows beside its own binding limit. Later rounds
   (``rounds > 1``) let an LP on a trace of the rewritten pipeline move threads; the prediction
   is still the layout's, from the measurements of your pipeline.
2. **Measured alike.** Yours, plumbkit's plan and (with ``compare``) the naive, heuristic,
   AUTOTUNE and "AUTOTUNE + the same cache and prefetch" baselines run under one protocol
   (:mod:`plumbkit.engine.compare`): built fresh every round, caches filled, steady state,
   interleaved rounds, median and interquartile range.
3. **Never worse than what you wrote.** Your caches and prefetches stay. If the plan is not
   measurably faster than your pipeline (the speed-up's interval, printed with its coverage, does
   not lie wholly above 1: docs/measuring.md),
   plumbkit says so and hands back your pipeline unchanged.

Every throughput called *measured* was measured in this process on the pipeline it names; every
one called *predicted* comes from the model and is labelled so.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..model.demand import ModelDemand
from ..model.pipeline import Pipeline
from ..model.plan import CacheDecision, Change, Option
from ..planning.decisions import Decisions, decide, decided_again, priced_options, resaid
from ..planning.fill import fill_seconds, fills_a_cache, predict_fill
from ..planning.disk_tier import TierPlan, plan_tier
from ..planning.lp import LPSolution
from ..planning.right_size import RightSizing
from ..planning.worth_shipping import plan_worth_its_changes, threads_worth_their_cost
from ..planning.predict import (
    Evidence,
    Prediction,
    RuntimeCosts,
    evidence_from_trace,
    layout_as_traced,
    layout_with,
    predict,
    predict_training,
    prediction_error,
)
from ..tfdata.graph import dataset_at, pipeline_of, resolve_pipeline, serialized_graph
from ..tfdata.graph_edits import RewriteError
from ..tfdata.memory_guard import fill_cache
from ..tfdata.rebuild import apply_changes
from ..tfdata.run import count_elements
from ..tfdata.runtime_costs import cache_read_cost, consumer_ceiling, handoff_cost, pool_idle_per_element
from . import baselines as configurations
from .calibration import own_pool_idle, with_parallel_costs
from .compare import QUICK, Comparison, Contender, Protocol, Speedup
from .compare import compare as measure_alike
from .disk_tier import decide_tiered, fill_tier, read_tier_back, remove_unused_tier
from .demand import check_step_arguments, ideal_alike, measure_model, training_alike, training_figures
from .right_sizing import right_size_planned, ships_for_training
from .measuring import Progress, disk_bound, measure, one_epoch_batches
from .partial import partial_pick, partial_plan
from .restarts import measure_restarts, with_counted_epoch
from .scheduler import checkpoint, operation, stop_event
from .trace_result import Trace
from .tracing import PipelineLike

if TYPE_CHECKING:
    import tensorflow as tf

#: Names of the configurations compared, in the order they are shown.
YOURS, PLUMBKIT = "yours", "plumbkit"
AUTOTUNE_WITH = "autotune + same cache"
AUTOTUNE_WITH_DISK = "autotune + same disk cache"  # only where the plan holds a disk tier
CONFIGURATIONS = (YOURS, "naive", "heuristic", "autotune", AUTOTUNE_WITH, AUTOTUNE_WITH_DISK, PLUMBKIT)


def _quiet(_: str, __: float) -> None:
    pass


@dataclass
class Plan:
    """The full optimization's result.

    ``prediction`` is the one prediction of the plan: the layout that ships, predicted before any
    rewrite ran from what was measured on your pipeline (:func:`plumbkit.planning.predict.predict`),
    with the limit that binds it and every other limit; ``predicted_throughput`` is its
    throughput, and every view shows that figure beside that binding. ``allocation`` is the CPU LP
    whose cores per operator (``theta_by_label``) set the threads; its own throughput is an input
    of the decisions, not a prediction of the plan. Everything in ``comparison``, ``baselines``,
    ``measured_throughput`` and ``baseline_throughput`` was measured under one protocol.
    ``dataset`` is the plan's pipeline when it was measurably faster than yours (``applied``),
    else yours, unchanged.
    """

    dataset: "tf.data.Dataset"
    changes: list[Change]  # what was applied to ``dataset`` (empty when yours came back unchanged)
    prediction: Prediction  # the plan's prediction: its throughput, its binding limit and the others
    measured_throughput: float  # the plan's configuration, median over the protocol's rounds (0: failed)
    baseline_throughput: float  # yours, the same way
    allocation: LPSolution
    cache: CacheDecision
    theta_by_label: dict[str, float]  # the allocation's cores per operator of yours
    trace: Trace  # the user's pipeline as given
    final_trace: Trace | None = None  # the rewritten pipeline, traced (only with rounds > 1)
    baselines: dict[str, float] = field(default_factory=dict)  # measured medians, minibatches/s
    predictions: dict[str, float] = field(default_factory=dict)  # each configuration's own prediction
    disk_bound: float | None = None
    bounds: dict[str, float] = field(default_factory=dict)  # measured ceilings the model used
    notes: list[str] = field(default_factory=list)
    warmup_batches: int = 0  # minibatches that fill the plan's cache before measuring
    yours_warmup_batches: int = 0  # minibatches that fill your own caches before measuring
    proposed_changes: list[Change] = field(default_factory=list)  # the plan, applied or not
    applied: bool = False
    speedup: Speedup | None = None  # plan over yours, measured
    comparison: Comparison | None = None
    charged: dict[str, float] = field(default_factory=dict)  # pseudo-operator -> cores the LP charged
    free: list[str] = field(default_factory=list)  # operators that cost nothing in steady state
    runtime: RuntimeCosts | None = None
    partial: bool = False  # cut short (Cancel, Ctrl-C): nothing applied, notes say what was measured
    options: list[Option] = field(default_factory=list)  # offered, not applied: each says what it changes
    #: the disk tier the plan holds: where, how large, its steady state (``prediction``) and its
    #: filling epoch predicted (None: no tier; an offered one is among ``options``)
    tier: TierPlan | None = None
    #: with optimize(..., model=/step=): the training step's demand, and training steps/s measured
    #: alike with the step in the loop (yours, the plan, AUTOTUNE; ``measured_steps_per_s``: the plan's)
    model: ModelDemand | None = None
    measured_steps_per_s: float | None = None
    steps_baselines: dict[str, float] = field(default_factory=dict)
    ideal_steps_per_s: float | None = None  # the model on ideal input, measured alike beside them
    steps_comparison: Comparison | None = None
    #: the model of the pipeline you gave (the export finds the operators your cell builds in it)
    user_pipeline: Pipeline | None = None

    #: the plan's training steps/s predicted before the fact, the step's CPU charged beside the
    #: pipeline's (:func:`plumbkit.planning.predict.predict_training`); yours and the plan's by name
    step_prediction: Prediction | None = None
    steps_predictions: dict[str, float] = field(default_factory=dict)
    #: where the model binds training: the plan trimmed to its demand (fewest threads, no cache or
    #: inner prefetch it does not need) and what that gave back; None: not right-sized
    right_sizing: RightSizing | None = None

    @property
    def training_speedup(self) -> Speedup | None:
        """The plan's training steps/s over yours, measured alike with the step in the loop."""
        if self.steps_comparison is None or not self.proposed_changes:
            return None
        return self.steps_comparison.speedup(PLUMBKIT, YOURS)

    @property
    def predicted_training_speedup(self) -> float | None:
        """The plan's training steps/s over yours, both predicted before the fact (one model)."""
        planned, yours = self.steps_predictions.get(PLUMBKIT), self.steps_predictions.get(YOURS)
        return planned / yours if planned and yours else None

    @property
    def predicted_speedup(self) -> float | None:
        """The plan's prediction over the prediction for yours, the configuration the measured
        speed-up is over, both made from the same trace (so the machine's drift between the trace
        and the comparison cancels, as it does in the speed-up measured alike). None: not
        measured alike, or either prediction is missing."""
        yours = self.predictions.get(self.speedup.over) if self.speedup is not None else None
        return self.compared_prediction.throughput / yours if yours else None

    @property
    def rival_speedup(self) -> Speedup | None:
        """The plan over its fair rival, measured alike: AUTOTUNE given the plan's own caches
        (its disk tier too, where it has one) and final prefetch. Below 1, tf.data's tuning of
        the same layout beat the plan's settings: shown, so a headline over yours never hides it.
        None: no changes, or not measured alike."""
        if self.comparison is None or not self.proposed_changes:
            return None
        rival = AUTOTUNE_WITH_DISK if AUTOTUNE_WITH_DISK in self.comparison.results else AUTOTUNE_WITH
        return self.comparison.speedup(PLUMBKIT, rival)

    @property
    def predicted_steps_per_s(self) -> float | None:
        """Training steps/s of the plan predicted before the fact (None without a model):
        ``step_prediction.throughput``, beside its own binding limit."""
        return self.step_prediction.throughput if self.step_prediction is not None else None
    #: the plan's first epoch, while its caches fill (predict_fill; None: no cache fills), and
    #: the seconds it takes when the epoch's length is known
    fill_prediction: Prediction | None = None
    fill_seconds: float | None = None
    #: every configuration was measured in its first epoch (the plan's cache could not fill in
    #: the protocol's time): the plan's measured figure is the first epoch's, beside ``fill_prediction``
    first_epoch: bool = False

    @property
    def predicted_throughput(self) -> float:
        """The plan's predicted throughput: ``prediction.throughput`` (one figure, one model)."""
        return self.prediction.throughput

    @property
    def compared_prediction(self) -> Prediction:
        """The prediction of what the comparison measured: the steady state's, or the first
        epoch's where every configuration was measured in its first epoch."""
        return self.fill_prediction if self.first_epoch and self.fill_prediction is not None else self.prediction

    @property
    def prediction_error(self) -> float:
        """Before the fact: |predicted - measured| / measured, for the plan's configuration (like
        with like: the first epoch's prediction where the first epoch was measured)."""
        return prediction_error(self.compared_prediction.throughput, self.measured_throughput)

    @property
    def returned_throughput(self) -> float:
        """Measured throughput of what ``dataset`` holds (the plan's, or yours when unchanged)."""
        return self.measured_throughput if self.applied else self.baseline_throughput

    @property
    def verdict(self) -> str:
        if not self.proposed_changes:
            return "nothing to change: your pipeline is returned unchanged"
        if self.right_sizing is not None and self.steps_comparison is not None:  # training decides
            trains = self.steps_comparison.speedup(PLUMBKIT, YOURS)
            said = trains.verdict if trains is not None else "not measured alike"
            kept = "it is returned" if self.applied else "your pipeline is returned unchanged"
            return f"plumbkit's plan, right-sized to the model's demand, against yours in training steps/s: {said}; {kept}"
        if self.speedup is None:
            return "not measured alike: your pipeline is returned unchanged"
        if self.applied:
            return f"plumbkit's plan is {self.speedup.verdict} than yours: it is returned"
        if self.speedup.measurable:
            return f"plumbkit's plan was {self.speedup.verdict}: your pipeline is returned unchanged"
        return f"{self.speedup.verdict}: your pipeline is returned unchanged"

    def rewrite_source(self, source: str) -> str:
        """The user's cell ``source`` with this plan's changes written in (see plumbkit.export),
        and the options it offers but does not apply as comments saying how to turn them on."""
        from ..export.source import note_options, rewrite_source
        return note_options(rewrite_source(source, self.changes, pipeline=self.user_pipeline), self.options)

    def __str__(self) -> str:
        if self.partial:
            from ..render.text import partial_plan_text
            return partial_plan_text(self)
        from ..render.text import plan_text
        return plan_text(self)

    def _repr_html_(self) -> str:
        from ..render.html import partial_plan_html, plan_html
        return partial_plan_html(self) if self.partial else plan_html(self)


def _builder(pipeline: PipelineLike, ds: "tf.data.Dataset") -> tuple[Callable[[], "tf.data.Dataset"], str | None]:
    """A factory for fresh copies of the user's pipeline (fresh caches each call), and a note
    when only the same Dataset object can be used."""
    if callable(pipeline):
        return lambda: resolve_pipeline(pipeline), None
    try:
        apply_changes(ds, [])
        return lambda: apply_changes(ds, []), None
    except RewriteError:
        return lambda: ds, ("your pipeline could not be rebuilt from its graph, so every round ran the "
                            "same Dataset object (its caches stay filled between rounds)")


def _fill(trace: Trace, nodes: list[str], ds: "tf.data.Dataset | None" = None, limit: float = 60.0) -> int:
    """Minibatches that fill every cache at ``nodes`` (one epoch at the slowest-filling one).

    Where the trace could not size a cache's input (the user's cache over an interleave of files
    TensorFlow cannot count), the elements under it are counted once, within ``limit`` seconds.
    """
    fills = []
    for node in nodes:
        n = one_epoch_batches(trace, node)
        if not n and ds is not None:
            visit = next((o.visit_ratio for o in trace.ops if o.name == node), None)
            graph_def, _ = serialized_graph(ds)
            count = count_elements(dataset_at(graph_def, node), limit=limit) if visit else None
            n = math.ceil(count / visit) + 2 if count else 0
        fills.append(n)
    return max(fills or [0])


def _user_caches(trace: Trace, root: str) -> list[str]:
    p = trace.pipeline
    mine = {root} | {o.name for o in p.descendants(root)}
    return [op.name for op in p if op.kind == "cache" and op.name in mine]


def _by_user_names(changes: list[Change], user: "Mapping[str, str]") -> list[Change]:
    """Changes decided on a rebuilt pipeline, renamed to the user's graph nodes (by label)."""
    return [Change(c.what, c.where, user.get(c.where, c.node), c.value, c.why) for c in changes]


@dataclass
class _Planned:
    """What planning decided before anything was measured alike (one optimize call's state)."""

    decisions: Decisions
    changes: list[Change]
    cache: CacheDecision
    cache_limit: float | None
    fill: int  # minibatches that fill the plan's caches
    yours_fill: int  # minibatches that fill your own caches
    notes: list[str]
    final_trace: Trace | None = None
    rival_fill: int = 0  # minibatches that fill "AUTOTUNE + the same cache"'s caches, where not ``fill``
    declined: bool = False  # the plan was predicted no faster than yours: its changes do not ship
    fill_took: float | None = None  # seconds the guarded fill of the plan's cache ran (None: none ran)


@operation("optimize", partial=lambda *cut_short: partial_plan(Plan, *cut_short))
def optimize(pipeline: PipelineLike, *, cores: int | None = None, memory_budget: float | None = None,
             disk_budget: float | None = None, cache_dir: str | None = None, seconds: float = 5.0, rounds: int = 1, compare: bool = True, protocol: Protocol | None = None,
             costs: Mapping[str, float] | None = None, before_each: Callable[[str], None] | None = None,
             should_stop: Callable[[], bool] | None = None, on_progress: Progress | None = None,
             model: Any = None, step: Callable[[Any], Any] | None = None) -> Plan:
    """Decide and predict a plan before the fact, then measure it against yours (and, with
    ``compare``, the baselines) under one protocol; return it only if it is measurably faster.
    Without a model in the loop, a plan predicted less than 2% faster than yours is declined
    before it is measured (:func:`plumbkit.planning.worth_shipping.plan_worth_its_changes`).

    ``protocol`` sets the measurement (default :data:`plumbkit.engine.compare.QUICK`: 3 rounds of
    0.3 s windows, up to 8 while the plan's rounds against yours disagree; the bench uses
    ``FULL``: 5 rounds of 1 s windows, up to 9).
    ``rounds`` > 1 traces the rewritten pipeline and lets the LP on that trace move threads (the
    prediction is still made before the fact, for the layout that ships). ``costs`` (operator
    label -> CPU seconds per element, e.g. a per-operator calibration) replace the trace's rates.
    ``disk_budget`` (bytes; None: off) lets a cache memory cannot hold go to a disk tier in
    ``cache_dir`` (default ``~/.cache/plumbkit``) where reading it back is predicted faster than
    recomputing it; without one the tier is offered (an option with the space it needs), never
    written. The directory is measured first (~100 MB written, removed).
    ``before_each(name)`` runs before every measured run (e.g. to drop the data from the page cache).
    ``should_stop()`` is asked between measured runs (a Cancel button): when it says yes, the
    comparison ends there, incomplete, and your pipeline comes back unchanged.
    ``model`` (a compiled Keras model) or ``step`` (a callable taking one minibatch): training
    steps/s too, predicted and measured alike with the step in the loop (:func:`_in_the_loop`).
    """
    progress = on_progress or _quiet
    protocol = protocol or QUICK
    check_step_arguments(model, step)  # before anything runs: a model not compiled is said at once
    ds = resolve_pipeline(pipeline)
    build_yours, note = _builder(pipeline, ds)
    progress("tracing your pipeline", 0.0)
    if before_each is not None:
        before_each(YOURS)
    original, runtime = _measured_yours(ds, build_yours, seconds=seconds, cores=cores, protocol=protocol,
                                        progress=progress)
    cores = cores or original.cores
    user = pipeline_of(ds)
    disk = disk_bound(original, parallelism=int(cores))
    demand = None  # the model's demand, measured before planning: where the model binds, the plan is right-sized
    if model is not None or step is not None:
        progress("the model's demand: its step on one replayed minibatch, then on yours", 0.17)
        demand = measure_model(ds, model=model, step=step, pipeline_alone=original.throughput)
    planned = _plan_before_the_fact(ds, original, cores=cores, memory_budget=memory_budget, runtime=runtime,
                                    disk=disk, costs=costs, protocol=protocol, progress=progress,
                                    disk_budget=disk_budget, cache_dir=cache_dir, should_stop=should_stop)
    if note:
        planned.notes.insert(0, note)
    for r in range(1, rounds):
        progress(f"round {r + 1}: the LP on a trace of the rewritten pipeline moves threads", 0.2)
        if not _moved_by_a_trace_of_the_rewrite(ds, planned, cores=cores, seconds=seconds,
                                                memory_budget=memory_budget, disk=disk,
                                                calibrate=original.calibration or False):
            break
    original, ev, sizing = _changes_that_ship(ds, original, planned, cores=cores, runtime=runtime, disk=disk,
                                              costs=costs, demand=demand, progress=progress)
    runtime = ev.runtime  # with the idle of the pools calibrated there: what the prediction charged
    changes = planned.changes
    # the one prediction: the layout that ships (yours as it ran, where nothing changes)
    prediction = predict(ev, layout_with(ev, changes) if changes else layout_as_traced(ev))
    # what the plan left out, said beside that prediction, on its evidence
    planned.notes = resaid(planned.notes, planned.decisions.declined, ev, prediction, changes)
    fill, fill_time, first_epoch = _first_epoch(ev, changes, planned, prediction, protocol)

    contenders = _contenders(ds, build_yours, planned, cores=cores, compare=compare)
    comparison = measure_alike(contenders, protocol, before_each=before_each, should_stop=should_stop,
                               first_epoch=first_epoch,  # the plan's cache cannot fill in time: like with like
                               settle=[(PLUMBKIT, YOURS)] if changes else [],  # extra rounds only decide what ships
                               on_progress=lambda msg, f: progress(f"measuring alike, {msg}", 0.3 + 0.7 * f))
    planned.notes += [n for n in (cores_note(ev), comparison.load_change(original.analysis.neighbour_cores),
                                  comparison.drift(YOURS, original.analysis.cpu_per_batch)) if n]
    plan = _plan_from(ds, build_yours, planned, comparison, prediction=prediction, trace=original,
                      runtime=runtime, disk=disk, user=user)
    plan.fill_prediction, plan.fill_seconds, plan.first_epoch = fill, fill_time, first_epoch
    _predicted_figures(plan, ev, user, planned, cores)
    plan.right_sizing = sizing
    _in_the_loop(plan, ds, contenders, protocol, ev, model=model, step=step, should_stop=should_stop,
                 progress=progress, demand=demand, build_yours=build_yours)
    progress("done", 1.0)
    return plan


def _changes_that_ship(ds: tf.data.Dataset, original: Trace, planned: _Planned, *, cores: float,
                       runtime: RuntimeCosts, disk: Any, costs: Mapping[str, float] | None,
                       demand: ModelDemand | None, progress: Progress) -> tuple[Trace, Evidence, RightSizing | None]:
    """Settle ``planned.changes``: the operators it parallelizes calibrated again with their calls
    in flight, then the threads and changes that do not pay for themselves handed back. Returns
    the trace with those parallel figures, the evidence the one prediction reads, and the
    right-sizing (None: no model, or the pipeline binds)."""
    parallelized = {c.node: int(c.value) for c in planned.changes
                    if c.what == "parallelism" and int(c.value) != 1}
    if parallelized and costs is None:
        progress("calibrating the operators the plan parallelizes, with calls in flight", 0.25)
        original = with_parallel_costs(ds, original, parallelized)
        runtime = dataclasses.replace(runtime, own_pool_idle=own_pool_idle(original))
    ev = evidence_from_trace(original, cores=cores, runtime=runtime, disk=disk, costs=costs,
                             tiers=planned.decisions.tiers)
    planned.changes, as_written = threads_worth_their_cost(ev, planned.changes)
    planned.notes += as_written
    if demand is None:  # with a model in the loop the training step judges the plan (right-sizing)
        planned.changes, stays = plan_worth_its_changes(ev, planned.changes)
        if stays:
            _keep_yours(planned, stays)
    return original, ev, right_size_planned(planned, ev, demand)


def _keep_yours(planned: _Planned, notes: list[str]) -> None:
    """The plan is predicted no faster than yours: nothing ships, and nothing shown says otherwise
    (no cache, no tier; the rivals built with "the same cache" get none)."""
    planned.notes += notes
    planned.declined = True
    planned.cache = CacheDecision(None, None, None, planned.cache.budget,
                                  "none: your pipeline stays as you wrote it (see the notes)")
    planned.decisions = dataclasses.replace(planned.decisions, tier=None)
    planned.fill = planned.rival_fill = planned.yours_fill


def _predicted_figures(plan: Plan, ev: Evidence, user: Any, planned: _Planned, cores: float) -> None:
    """Every configuration's own prediction, the options priced, the disk tier's predictions: all
    from the evidence the plan's own prediction is made from."""
    changes = planned.changes
    plan.predictions = _predictions(ev, user, changes, cores, plan.compared_prediction, filling=plan.first_epoch)
    plan.options = priced_options(ev, changes, planned.decisions.options, plan.prediction)
    plan.tier = _tier_of(ev, changes, planned.decisions.tier)
    if plan.tier is not None:  # the tier's first epoch: the directory's write bandwidth binds it too
        plan.fill_prediction, plan.fill_seconds = plan.tier.fill, plan.tier.fill_seconds
        plan.notes.append(str(plan.tier))  # with the figures of the prediction shown


def _measured_yours(ds: "tf.data.Dataset", build_yours: Callable[[], "tf.data.Dataset"], *, seconds: float,
                    cores: int | None, protocol: Protocol, progress: Progress) -> tuple[Trace, RuntimeCosts]:
    """Yours traced (calibrated), then what the runtime costs beside it, and the trace sized by the
    epoch its restarts counted where TensorFlow could not tell its length (a generator's)."""
    original = measure(ds, seconds=seconds, cores=cores, calibrate=True)
    runtime = _runtime_costs(ds, build_yours, original, protocol, progress)
    return with_counted_epoch(original, runtime.restarts), runtime


def _runtime_costs(ds: "tf.data.Dataset", build_yours: Callable[[], "tf.data.Dataset"], original: Trace,
                   protocol: Protocol, progress: Progress) -> RuntimeCosts:
    """What tf.data and the consumer cost besides your operators, measured before planning (the
    restarts on fresh copies of yours: the traced object runs its later epochs slower)."""
    progress("measuring the consumer's ceiling, the runtime's costs and the disk", 0.15)
    window = min(0.5, protocol.window)  # the ceiling's windows no longer than the comparison's (FULL: 0.5 s)
    return RuntimeCosts(consumer=consumer_ceiling(ds, window=window),
                        consumer_plain=consumer_ceiling(ds, window=window, prefetched=False),
                        handoff=handoff_cost(), cache_read=cache_read_cost(),
                        pool_idle=pool_idle_per_element(int(original.cores)),
                        restarts=measure_restarts(build_yours, original))  # a short epoch repeated


def _in_the_loop(plan: Plan, ds: "tf.data.Dataset", contenders: list[Contender], protocol: Protocol,
                 ev: Evidence, *, model: Any, step: Callable[[Any], Any] | None,
                 should_stop: Callable[[], bool] | None, progress: Progress, demand: ModelDemand | None = None,
                 build_yours: Callable[[], "tf.data.Dataset"] | None = None) -> None:
    """With a model or step: once yours and the plan are measured, the step runs in the loop (built
    once): its demand on ideal input and on yours (``plan.model``), from which, with the evidence
    of yours, the plan's training steps/s is predicted before the fact (``plan.step_prediction``:
    the step's CPU charged beside the pipeline's); then yours, the plan and AUTOTUNE measured alike
    once more with the step on every minibatch (``plan.measured_steps_per_s``); the model's
    variables are restored, bitwise. A right-sized plan ships on those training figures
    (:func:`~plumbkit.engine.right_sizing.ships_for_training`)."""
    if model is None and step is None:
        return
    progress("the model in the loop: yours, the plan and AUTOTUNE with its step on every minibatch", 0.95)
    trained = [c for c in contenders if c.name in (YOURS, PLUMBKIT, "autotune")]
    demand, steps = training_alike(trained, protocol, ds=ds, model=model, step=step, should_stop=should_stop,
                                   pipeline_alone=plan.trace.throughput, demand=demand,
                                   on_progress=lambda msg, f: progress(f"with the model in the loop, {msg}", 0.95))
    training_figures(plan, demand, steps, yours=YOURS, planned=PLUMBKIT)
    if build_yours is not None:
        ships_for_training(plan, steps, yours=YOURS, planned=PLUMBKIT,
                           rebuild=lambda ch: apply_changes(ds, ch) if ch else build_yours())
    model_alone = ideal_alike(demand, steps)  # the step on ideal input, measured alike
    plan.step_prediction = predict_training(ev, layout_with(ev, plan.proposed_changes), model_alone)
    plan.steps_predictions = {YOURS: predict_training(ev, layout_as_traced(ev), model_alone).throughput,
                              PLUMBKIT: plan.step_prediction.throughput}


def cores_note(ev: Evidence) -> str | None:
    """What the plan was made for when other processes took cores during the trace."""
    if not ev.neighbours:
        return None
    return (f"planned for {ev.free_cores:.1f} of {ev.cores:g} cores: other processes used "
            f"{ev.neighbours:.1f} during the trace")


def _first_epoch(ev: Evidence, changes: list[Change], planned: _Planned, prediction: Prediction,
                 protocol: Protocol) -> tuple[Prediction | None, float | None, bool]:
    """The plan's first epoch predicted (None where no cache fills), its seconds where the
    epoch's length is known, and whether the comparison must measure every configuration in its
    first epoch: the plan's cache took longer than the protocol's time to fill when it was filled
    once under its guard (or, where none ran, is predicted to), so a steady state would never be
    reached and a cold figure would stand beside a warm prediction."""
    layout = layout_with(ev, changes)
    if not fills_a_cache(ev, layout):
        return None, None, False
    fill = predict_fill(ev, layout)
    seconds = fill_seconds(fill, planned.fill) if planned.fill else None
    took = planned.fill_took
    cold = took > protocol.fill_limit if took is not None else seconds is not None and seconds > protocol.fill_limit
    if cold:
        if took is None:
            how = f"is predicted to fill in ~{seconds:,.1f} s ({planned.fill:,} minibatches at {fill.throughput:,.1f}/s)"
        else:
            how = f"took {took:,.1f} s to fill once" + (f" (~{seconds:,.1f} s predicted)" if seconds is not None else "")
        planned.notes.append(
            f"the plan's cache {how}, more than the comparison's {protocol.fill_limit:g} s: every configuration was "
            f"measured in its first epoch (built fresh, caches filling), and the plan's figure is compared with its "
            f"first-epoch prediction; its steady state after the fill ({prediction.throughput:,.1f}/s predicted) "
            f"was not measured")
    return fill, seconds, cold


def _tier_of(ev: Evidence, changes: list[Change], tier: TierPlan | None) -> TierPlan | None:
    """The plan's disk tier with both predictions made from the evidence the plan's own is made
    from (its steady state is then the plan's prediction)."""
    if tier is None:
        return None
    return plan_tier(tier.candidate, ev, changes, tier.recompute, directory=tier.directory,
                     measurement=tier.measurement, applied=True, memory_cache=tier.memory_cache)


def _plan_before_the_fact(ds: "tf.data.Dataset", original: Trace, *, cores: float, memory_budget: float | None,
                          runtime: RuntimeCosts, disk: float | None, costs: Mapping[str, float] | None,
                          protocol: Protocol, progress: Progress, disk_budget: float | None = None,
                          cache_dir: str | None = None, should_stop: Callable[[], bool] | None = None) -> _Planned:
    """Decide the plan on the trace of your pipeline (a disk tier placed, offered or refused:
    :mod:`plumbkit.engine.disk_tier`), and fill its cache once under a guard: where the cache
    outgrows its budget or the disk tier cannot be filled, plan again without it. A filled tier
    is read back in part and the plan decided again on that read (the prediction's disk figures
    are then the tier's own, not the probe's)."""
    root = pipeline_of(ds).root
    args = dict(cores=cores, root=root, disk_bound=disk, runtime=runtime, costs=costs)
    tiered = dict(disk_budget=disk_budget, cache_dir=cache_dir, memory_budget=memory_budget, progress=progress)
    decisions = decide_tiered(original, **tiered, **args)
    yours_fill = _fill(original, _user_caches(original, root), ds, limit=protocol.fill_limit)
    if decisions.tier is not None:
        failed, path = fill_tier(ds, decisions.changes, progress, should_stop)
        read = read_tier_back(path, decisions.tier.measurement, progress) if failed is None else None
        if read is not None:  # decided again on the tier's own read
            decisions = decide_tiered(original, **{**tiered, "progress": _quiet},  # the probes: cached
                                      read_back=(decisions.tier.candidate.node, read), **args)
            if decisions.tier is None:  # read is not None: the fill gave a path
                decisions.notes.append(remove_unused_tier(path))
        if failed is None and decisions.tier is not None:  # filled before anything is measured: every build reads it
            rival_fill = max(yours_fill, _fill(original, [c.node for c in decisions.tier.memory_cache]))
            return _Planned(decisions, list(decisions.changes), decisions.cache, None, yours_fill, yours_fill,
                            list(decisions.notes), rival_fill=rival_fill)  # the tier said once predicted
        if failed is not None:
            decisions = decide(original, memory_budget=memory_budget, **args)
            decisions.notes.append(f"no disk tier: {failed}")
    cache = decisions.cache
    planned = _Planned(decisions, list(decisions.changes), cache, cache.budget if cache.node else None,
                       max(yours_fill, _fill(original, [cache.node] if cache.node else [])), yours_fill,
                       list(decisions.notes))
    if not (cache.node and planned.fill):
        return planned
    # Guard the fill: the estimate may be low, and stock cache() has no limit.
    progress("filling the plan's cache once (guarded by the budget)", 0.18)
    began = time.perf_counter()
    overflow = fill_cache(apply_changes(ds, planned.changes, cache_limit=planned.cache_limit), planned.fill,
                          seconds=2 * protocol.fill_limit, stop=stop_event())
    checkpoint()  # a Cancel or Ctrl-C during the fill ends the operation here
    planned.fill_took = time.perf_counter() - began  # the comparison's fills will take about as long
    if not overflow:
        return planned
    again = decide(original, cores=cores, memory_budget=0, root=root, disk_bound=disk, runtime=runtime, costs=costs)
    cache = dataclasses.replace(again.cache, budget=cache.budget, why=f"{overflow}; nothing is cached")
    again.cache = cache
    notes, again.declined = decided_again(planned.notes, planned.decisions.declined, again.notes, again.declined)
    # past memory, the disk tier (a cache named by its fingerprint, filled under a guard), never a bare cache(path)
    notes.append(f"{overflow}: the plan caches nothing" + ("" if disk_budget is not None else
                 "; to cache it on a local disk instead, give a disk budget (disk_budget=..., %%plumb "
                 "--disk-budget): plumbkit then measures a disk tier"))
    return _Planned(again, list(again.changes), cache, None, yours_fill, yours_fill, notes)


def _moved_by_a_trace_of_the_rewrite(ds: "tf.data.Dataset", planned: _Planned, *, cores: float, seconds: float,
                                     memory_budget: float | None, disk: float | None, calibrate: object) -> bool:
    """One more round: trace the rewritten pipeline and let the LP on that trace (its unattributed
    CPU charged) move the threads; the cache and prefetch stay. False when nothing moved."""
    candidate = apply_changes(ds, planned.changes, cache_limit=planned.cache_limit)
    planned.final_trace = measure(candidate, seconds=seconds, warmup_batches=planned.fill, cores=cores,
                                  calibrate=calibrate)
    again = decide(planned.final_trace, cores=cores, memory_budget=memory_budget,
                   root=pipeline_of(candidate).root, cache=False, prefetch=False,
                   disk_bound=None if planned.cache.node else disk, include_overhead=True)
    user = pipeline_of(ds)
    moved = _by_user_names([c for c in again.changes if c.what == "parallelism"],
                           {op.label: op.name for op in user})
    if moved:
        planned.changes = _merge(planned.changes, moved)
    return bool(moved)


def _contenders(ds: "tf.data.Dataset", build_yours: Callable[[], "tf.data.Dataset"], planned: _Planned, *,
                cores: float, compare: bool) -> list[Contender]:
    """Yours, the plan (when it changes anything) and, with ``compare``, the baselines."""
    changes, limit = planned.changes, planned.cache_limit
    contenders = [Contender(YOURS, build_yours, planned.yours_fill)]
    if changes:
        contenders.append(Contender(PLUMBKIT, lambda: apply_changes(ds, changes, cache_limit=limit), planned.fill))
    tier = planned.decisions.tier
    # with a disk tier, "AUTOTUNE + the same cache" has the memory cache the plan would place without
    # the tier, and "AUTOTUNE + the same disk cache" the tier itself, built and filled as the plan's
    rival = list(tier.memory_cache) + [c for c in changes if c.what == "prefetch"] if tier else changes
    if compare and tier is not None:
        contenders[1:1] = [Contender(AUTOTUNE_WITH_DISK, lambda: configurations.autotune_with_disk(ds, changes, cores),
                                     planned.yours_fill)]
    if compare:
        contenders[1:1] = [
            Contender("naive", lambda: configurations.naive(build_yours(), cores), planned.yours_fill),
            Contender("heuristic", lambda: configurations.heuristic(build_yours(), cores), planned.yours_fill),
            Contender("autotune", lambda: configurations.autotune(build_yours(), cores), planned.yours_fill),
            Contender(AUTOTUNE_WITH, lambda: configurations.autotune_with(ds, rival, cores), planned.rival_fill or planned.fill),
        ]
    return contenders


def _plan_from(ds: "tf.data.Dataset", build_yours: Callable[[], "tf.data.Dataset"], planned: _Planned,
               comparison: Comparison, *, prediction: Prediction, trace: Trace, runtime: RuntimeCosts,
               disk: float | None, user: Pipeline) -> Plan:
    """The plan the comparison says to hand back: the rewrite when measurably faster, else yours."""
    changes, notes, decisions = planned.changes, list(planned.notes), planned.decisions
    if not changes and not planned.declined:
        notes.insert(0, "plumbkit has nothing to change: your pipeline already is what it would build")
    speedup = comparison.speedup(PLUMBKIT, YOURS) if changes else None
    applied = speedup is not None and speedup.faster and comparison.complete
    for name, result in comparison.results.items():
        notes += [f"{name}: {n}" for n in result.notes]
        if not result.ok:
            notes.append(f"{name}: failed ({result.failed}); no throughput is reported for it")
    if not comparison.complete:
        notes.append("the comparison was stopped or interrupted before its last round: "
                     "your pipeline is returned unchanged")
    plan = Plan(
        dataset=apply_changes(ds, changes) if applied else build_yours(),
        changes=changes if applied else [], proposed_changes=changes, prediction=prediction,
        measured_throughput=comparison.median(PLUMBKIT if changes else YOURS) or 0.0,
        baseline_throughput=comparison.median(YOURS) or 0.0,
        allocation=decisions.allocation, cache=planned.cache, theta_by_label=decisions.theta_by_label,
        trace=trace, final_trace=planned.final_trace, disk_bound=disk,
        bounds={k: v for k, v in {"consumer (ideal pipeline, measured)": runtime.consumer,
                                  "disk (measured)": disk}.items() if v},
        notes=notes, warmup_batches=planned.fill, yours_warmup_batches=planned.yours_fill, applied=applied,
        speedup=speedup, comparison=comparison, charged=decisions.charged, free=decisions.free, runtime=runtime,
        user_pipeline=user,
    )
    plan.baselines = {name: comparison.median(name) for name in CONFIGURATIONS
                      if name in comparison.results and comparison[name].ok}
    if not changes and YOURS in plan.baselines:
        plan.baselines[PLUMBKIT] = plan.baselines[YOURS]  # the same pipeline
    return plan


def _predictions(ev: Evidence, user, changes: list[Change], cores: int, prediction: Prediction, *,
                 filling: bool = False) -> dict[str, float]:
    """Each configuration's own predicted throughput, where the model has one (AUTOTUNE's
    parallelism is chosen at run time: no prediction); of its first epoch with ``filling``."""
    return {
        YOURS: predict(ev, layout_as_traced(ev), filling=filling).throughput,
        "naive": predict(ev, layout_with(ev, configurations.naive_changes(user), options_kept=False),  # its own options
                         filling=filling).throughput,
        "heuristic": predict(ev, layout_with(ev, configurations.heuristic_changes(user, cores)),
                             filling=filling).throughput,
        PLUMBKIT: prediction.throughput,
    }


def _merge(changes: list[Change], later: list[Change]) -> list[Change]:
    """Later parallelism decisions replace earlier ones for the same operator (by label)."""
    replaced = {c.where: c for c in later}
    merged = [replaced.pop(c.where) if c.what == "parallelism" and c.where in replaced else c for c in changes]
    return merged + list(replaced.values())


@operation("pick_best", partial=lambda *cut_short: partial_pick(Plan, *cut_short))
def pick_best(candidates: Mapping[str, PipelineLike], *, cores: int | None = None,
              memory_budget: float | None = None, seconds: float = 5.0, protocol: Protocol | None = None,
              on_progress: Progress | None = None) -> tuple[str, Plan, str]:
    """Optimize each candidate (same element_spec) and return (name, plan, reason) of the fastest
    (by the measured throughput of what each plan hands back)."""
    plans: dict[str, Plan] = {}
    specs = set()
    for i, (name, pipeline) in enumerate(candidates.items()):
        if on_progress:
            on_progress(f"optimizing candidate {name!r}", i / len(candidates))
        ds = resolve_pipeline(pipeline)
        specs.add(repr(ds.element_spec))
        plans[name] = optimize(pipeline, cores=cores, memory_budget=memory_budget, seconds=seconds,
                               compare=False, protocol=protocol)
    if len(specs) > 1:
        raise ValueError("pick_best candidates must yield the same element_spec; got " + ", ".join(sorted(specs)))
    best = max(plans, key=lambda n: plans[n].returned_throughput)
    others = ", ".join(f"{n} {p.returned_throughput:.1f}" for n, p in plans.items() if n != best)
    cache = plans[best].cache.label if plans[best].applied else None
    reason = (f"{best} measured {plans[best].returned_throughput:.1f} minibatches/s after optimization "
              f"(others: {others}; each measured in its own comparison)"
              + (f"; it can cache at {cache}" if cache else ""))
    return best, plans[best], reason
