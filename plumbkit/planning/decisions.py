"""Trace -> plan: the optimizer's decisions (Plumber §4.3, Appendix B), pure Python.

Passes, in the paper's order: LP over CPU cores for parallelism (with a hedge so cheap
operators are never starved), a cache at the operator closest to the root that is
deterministic, finite and fits the memory budget, and a prefetch where the pipeline idles.
Each decision is a :class:`Change` that says what, where and why; turning changes into a new
Dataset is :mod:`plumbkit.tfdata.rebuild`'s job and into new source code :mod:`plumbkit.export`'s.

Each pass reads a *traced pipeline*: anything with ``.pipeline`` (the model) and ``.analysis``
(its operational analysis), such as :class:`plumbkit.Trace`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Mapping

from ..analysis.operational import Analysis, OpStats, current_capacity, in_pipeline_scale
from ..model.plan import CacheDecision, Change, Option
from ..model.units import human_bytes
from ..tunables import (
    ESTIMATE_MARGIN,
    HEDGE_PARALLELISM,
    HEDGE_THETA,
    MAX_CONCURRENCY,
    MAX_SOURCE_COPIES,
    FILL_GAIN,
    PARALLEL_BATCH_GAIN,
    PREFETCH_LOSS,
    SPARE_CALLS,
    SPARE_THREADS,
)
from .budget import fits, usable_budget
from .lp import Demand, LPSolution, solve_resource_lp
from .predict import (
    DISK,
    PSEUDO,
    Evidence,
    Layout,
    Prediction,
    RuntimeCosts,
    TierRead,
    Traced,
    best_allocation,
    demands,
    evidence_from_trace,
    free_in_steady_state,
    layout_with,
    parallelism_caps,
    predict,
)
from .fill import fills_a_cache, predict_fill
from .frozen_option import frozen_option

if TYPE_CHECKING:
    from .disk_tier import TierPlan

#: Name of the pseudo-operator for CPU no operator accounts for (thread pools, the consumer).
OVERHEAD = "(unattributed overhead)"


@dataclass(frozen=True)
class Declined:
    """Changes the plan weighed and left out, said with two predictions: the plan that ships and
    the layout it was weighed against (the plan plus ``changes``; with ``whole``, ``changes``
    alone: a disk tier's plan). Why kept apart from the other notes: :func:`plumbkit.optimize`
    predicts the layout that ships again on other evidence (its parallel forms calibrated), and
    says these again from it (:meth:`said`), so the figures beside the reason are those of the
    model whose prediction is shown (on the image row's disk-tier plan, "554 predicted so" beside
    a plan predicted at 625)."""

    changes: tuple[Change, ...]
    reason: Callable[[Prediction, Prediction], str]  # (the plan's prediction, the other's) -> the note
    note: str  # as said on decide()'s evidence (in ``Decisions.notes``)
    whole: bool = False

    @classmethod
    def weighed(cls, changes: list[Change], reason: Callable[[Prediction, Prediction], str], plan: Prediction,
                other: Prediction, *, whole: bool = False) -> "Declined":
        """Its note said from ``plan`` and ``other``, the predictions it was weighed on."""
        return cls(tuple(changes), reason, reason(plan, other), whole)

    def said(self, ev: Evidence, plan: Prediction, changes: list[Change]) -> str:
        """The note on ``ev``, beside ``plan``: the prediction of the plan that ships ``changes``."""
        other = list(self.changes) if self.whole else changes + list(self.changes)
        return self.reason(plan, predict(ev, layout_with(ev, other)))


def resaid(notes: list[str], declined: list[Declined], ev: Evidence, plan: Prediction,
           changes: list[Change]) -> list[str]:
    """``notes`` with each declined change's note said again on ``ev`` beside ``plan``, the one
    prediction of the plan that ships ``changes`` (dropped where nothing ships: there is no plan
    to have left them out of)."""
    again = {d.note: d.said(ev, plan, changes) if changes else None for d in declined}
    said = (again.get(n, n) for n in notes)
    return [n for n in said if n is not None]


def decided_again(notes: list[str], first: list[Declined], again_notes: list[str],
                  again_declined: list[Declined]) -> tuple[list[str], list[Declined]]:
    """The notes and the declined changes of a plan decided a second time (its cache overflowed
    its budget while filling): ``notes`` are the first decision's, with what was added to them.
    A change the first weighed against its own plan goes with that plan (the second weighs its
    own); a whole layout it left out (a disk tier) still stands beside the plan that ships, and
    is kept to be said again (:func:`resaid`) beside the second plan's prediction."""
    dropped = {d.note for d in first if not d.whole}
    kept = [n for n in notes if n not in dropped]
    declined = list(again_declined) + [d for d in first if d.whole and d not in again_declined]
    return kept + [n for n in again_notes if n not in kept], declined


@dataclass
class Decisions:
    """What the passes chose for one trace, and the model's prediction for the result.

    ``prediction`` is the chosen layout's :class:`Prediction` from this trace's evidence (the
    decisions were made on it; :func:`plumbkit.optimize` predicts the layout that ships again
    once the operators it parallelizes are calibrated in that form). ``allocation`` is the CPU LP
    under the chosen cache with the runtime's costs charged, whose cores per operator set the
    threads (``theta_by_label``; pseudo-operators it charged are in ``charged``): its throughput
    is an input of the decisions, never shown as a prediction.
    """

    changes: list[Change]
    allocation: LPSolution
    cache: CacheDecision
    prediction: Prediction
    theta_by_label: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. the memory budget was capped
    options: list[Option] = field(default_factory=list)  # offered, not applied (they change order)
    charged: dict[str, float] = field(default_factory=dict)  # pseudo-operator -> cores the LP charged
    free: list[str] = field(default_factory=list)  # labels of operators that cost nothing in steady state
    #: the disk tier the plan holds (:mod:`.disk_tier`: where, how large, its steady state and
    #: its fill predicted), and what reading each measured candidate back costs
    tier: "TierPlan | None" = None
    tiers: dict[str, TierRead] = field(default_factory=dict)
    #: the chosen layout's first epoch, while its caches fill (:func:`.fill.predict_fill`); None:
    #: no cache fills
    fill_prediction: Prediction | None = None
    #: changes weighed and left out, each note among ``notes`` (:func:`resaid` says them again)
    declined: list[Declined] = field(default_factory=list)


def default_memory_budget() -> float:
    return usable_budget(None).bytes


def _user_memory_caches(trace: Traced, mine: set[str]) -> list[tuple[str, float]]:
    """(operator, bytes) of the user's own memory caches (a file cache costs no memory)."""
    out = []
    stats = {o.name: o for o in trace.analysis.ops}
    for op in trace.pipeline:
        if op.kind == "cache" and op.name in mine and not op.tunables.get("filename"):
            size = stats[op.name].materialized_bytes if op.name in stats else None
            out.append((op.name, size or 0.0))
    return out


def decide_cache(trace: Traced, budget: float, root: str | None = None) -> CacheDecision:
    """Cache at the operator closest to the root that is deterministic, finite and fits ``budget``
    (never a source whose data are in memory already: a copy read back gains nothing).

    Walks down the main chain (first inputs) from the root. The user's own caches stay where
    they are (they are part of what the pipeline yields) and count against the budget; below
    one there is nothing left to cache. Never goes above a random or infinite operator (a
    cache freezes randomness: the operators below the user's cache are frozen already).
    """
    p = trace.pipeline
    start: str | None = root or p.root
    mine = {start} | {o.name for o in p.descendants(start)}
    theirs = _user_memory_caches(trace, mine)
    room = budget - sum(size for _, size in theirs)
    held = (f" (your cache at {', '.join(p[n].label for n, _ in theirs)} holds "
            f"{human_bytes(budget - room)} of it)") if theirs else ""
    name: str | None = start
    closest_too_big: tuple[str, float] | None = None
    while name is not None:
        op = p[name]
        if op.kind == "cache":
            why = (f"your own cache at {op.label} stays (it is part of what your pipeline yields) "
                   f"and everything below it is already free after the first epoch")
            if closest_too_big:
                why += f"; {closest_too_big[0]} above it would need {human_bytes(closest_too_big[1])}"
            return CacheDecision(label=None, node=None, bytes=None, budget=budget, why=why)
        stats = next((o for o in trace.analysis.ops if o.name == name), None)
        if stats is not None and op.gains_from_a_cache and stats.cacheable:
            size = stats.materialized_bytes or 0.0
            if fits(size, room):
                why = (f"closest to the root that is deterministic and finite; "
                       f"{human_bytes(size)} (+{ESTIMATE_MARGIN:.0%} for the estimate's error) fits "
                       f"the {human_bytes(budget)} budget{held}")
                if closest_too_big:
                    why += f" ({closest_too_big[0]} would need {human_bytes(closest_too_big[1])})"
                return CacheDecision(label=op.label, node=name, bytes=size, budget=budget, why=why)
            closest_too_big = closest_too_big or (op.label, size)
        name = op.inputs[0] if op.inputs else None
    if closest_too_big:
        why = (f"nothing fits: every deterministic candidate on the way down needs more than the "
               f"{human_bytes(budget)} budget{held} with a {ESTIMATE_MARGIN:.0%} margin for the estimate "
               f"({closest_too_big[0]}: {human_bytes(closest_too_big[1])}), so nothing is cached")
    else:
        reasons = sorted({o.cache_note for o in trace.analysis.ops if not o.cacheable and not o.injected})
        why = "no operator can be cached: " + "; ".join(reasons)
    return CacheDecision(label=None, node=None, bytes=None, budget=budget, why=why)


def solve(trace: Traced, *, cores: float, skip: set[str] = frozenset(),
          include_overhead: bool = False, hedge: bool = False,
          bounds: dict[str, float] | None = None,
          max_threads: dict[str, float] | None = None) -> LPSolution:
    """The resource LP on this trace, leaving out ``skip`` (cached) operators.

    Each operator's CPU, latency and GIL (:func:`demand`); the Python consumer's own cost per
    minibatch counts against the GIL when calibration measured it. ``max_threads`` caps an
    operator's concurrency (e.g. 1: as it is; more: an option the user may turn on).

    With ``include_overhead``, CPU no operator accounts for becomes an extra parallel
    pseudo-operator: right for a trace of an already parallel pipeline (thread hand-offs,
    copies; the refinement after one rewrite), wrong for a sequential one (there it is mostly
    idle pools spinning). The before-the-fact LP charges the runtime's measured costs instead
    (:func:`plumbkit.planning.predict.best_allocation`).
    """
    a = trace.analysis
    caps = {**parallelism_caps(trace.pipeline), **(max_threads or {})}  # an interleave: its cycle length
    needs = demands(a, skip=skip, max_threads=caps)
    overhead_cpu = a.cpu_seconds - a.attributed_cpu_seconds
    if include_overhead and overhead_cpu > 0 and a.throughput > 0:
        needs.append(Demand(OVERHEAD, cpu=overhead_cpu / a.minibatches))
    floors = {d.name: HEDGE_THETA * cores for d in needs} if hedge else None
    if floors and sum(floors.values()) > cores:
        floors = None
    return solve_resource_lp(needs, cores=cores, consumer_gil=a.consumer_cpu_per_batch or 0.0,
                             min_theta=floors, extra_bounds=bounds)


def _threads_for(theta: float, cores: float) -> int:
    """Threads for an operator the LP gives ``theta`` cores: ceil(theta), a spare thread above one
    core, never fewer than the hedge, never more than twice the cores."""
    target = max(HEDGE_PARALLELISM, math.ceil(theta - 1e-6) + (SPARE_THREADS if theta > 1 + 1e-6 else 0))
    return min(target, max(HEDGE_PARALLELISM, int(math.ceil(cores)) * 2))


def decide(trace: Traced, *, cores: float | None = None, memory_budget: float | None = None,
           prefetch: bool = True, cache: bool = True, root: str | None = None,
           bounds: dict[str, float] | None = None, disk_bound: float | None = None,
           include_overhead: bool = False, runtime: RuntimeCosts | None = None,
           costs: Mapping[str, float] | None = None, cache_at: CacheDecision | None = None,
           tiers: Mapping[str, TierRead] | None = None) -> Decisions:
    """Run the passes on one trace of the user's pipeline: cache, LP parallelism, prefetch.

    Everything is decided and predicted from this trace and the measured ceilings: ``runtime``
    (the consumer's ceiling, hand-off and cache-read costs), ``disk_bound`` (binds only while a
    reader still runs in steady state) and ``bounds`` (other measured ceilings). ``costs``
    (operator -> CPU seconds per element, e.g. calibrated) replace the trace's rates where given.
    ``root`` is the user's top operator when the trace ran a wrapped pipeline (epochs repeated
    for measuring); only it and what lies below it are changed. The user's own caches and
    prefetches are kept. ``cache_at`` places the cache there instead of deciding it (a disk
    tier, :mod:`.disk_tier`, whose read costs ``tiers`` holds). ``include_overhead`` (a later round, on a trace of the rewritten
    pipeline) charges the trace's unattributed CPU in the LP instead of the runtime's costs.
    """
    cores = cores or trace.analysis.cores
    usable = usable_budget(memory_budget)
    p = trace.pipeline
    root = root or p.root
    mine = {root} | {o.name for o in p.descendants(root)}
    cache_decision = cache_at or (decide_cache(trace, usable.bytes, root) if cache else  # a later round keeps it
                                  CacheDecision(None, None, None, usable.bytes, "kept from the previous round"))
    ev = evidence_from_trace(trace, cores=cores, runtime=runtime, disk=disk_bound, costs=costs, ceilings=bounds,
                             tiers=tiers)
    cached = frozenset({cache_decision.node}) if cache_decision.node else frozenset()
    skip = free_in_steady_state(ev, Layout(cached=cached))
    tunable = _tunable(trace, mine, skip)
    if include_overhead:
        extra = dict(bounds or {})
        if disk_bound and any(op.reads_files and op.name not in skip for op in p):
            extra[DISK] = disk_bound
        allocation = solve(trace, cores=cores, skip=skip, bounds=extra, include_overhead=True)
    else:
        allocation = best_allocation(ev, Layout(cached=cached), tunable=[s.name for s in tunable])
    resource_lp = solve(trace, cores=cores, skip=skip, bounds=bounds)  # latency and the GIL (plumbkit.planning.lp)
    steady = (tunable, allocation, resource_lp, "")
    changes = _parallelism_changes(trace, [steady], cores=cores, root=root)
    if cache_decision.node is not None:
        on_disk = cache_decision.tier == "disk"
        changes.append(Change("disk_tier" if on_disk else "cache", cache_decision.label, cache_decision.node,
                              cache_decision.directory if on_disk else "", cache_decision.why))
    below = [s for s in _tunable(trace, mine, set()) if s.name in skip]  # they run while the cache fills
    changes = _with_fill_threads(trace, ev, changes, steady, below, cores=cores, root=root, bounds=bounds)
    prediction = predict(ev, layout_with(ev, changes))
    declined: list[Declined] = []
    if prefetch:
        changes, prediction, declined = _with_prefetch(trace, ev, changes, prediction, root)
    changes, prediction, kept = batches_as_written(ev, changes, prediction)
    declined += kept
    layout = layout_with(ev, changes)
    fill = predict_fill(ev, layout) if fills_a_cache(ev, layout) else None
    labels = {o.name: o.label for o in trace.analysis.ops}
    options = priced_options(ev, changes, offered_options(trace, resource_lp, cores=cores, skip=skip, bounds=bounds,
                                                          mine=mine), prediction)
    frozen = frozen_option(trace, ev, changes, prediction, usable.bytes, root) if cache and not cache_at else None
    return Decisions(
        changes=changes, allocation=allocation, cache=cache_decision, prediction=prediction,
        # the allocation shown is over the user's own operators (not the measuring wrapper, not
        # the pseudo-operators the LP charged, which are listed apart)
        theta_by_label={labels.get(k, k): v for k, v in allocation.theta.items() if k in mine},
        charged={k: v for k, v in allocation.theta.items() if k in PSEUDO or k == OVERHEAD},
        free=[labels.get(n, n) for n in p.operators if n in skip and n in mine],
        options=options + ([frozen] if frozen else []), fill_prediction=fill, tiers=dict(tiers or {}),
        notes=[n for n in (usable.note, _scale_note(trace.analysis)) if n] + [d.note for d in declined],
        declined=declined)


def _tunable(trace: Traced, mine: set[str], skip: set[str]) -> list[OpStats]:
    """The user's operators whose parallelism the plan may set.

    Operators that cost nothing in the trace keep the form you wrote: a batch tf.data fused with
    the map below it (MapAndBatch) costs nothing of its own, and a parallel batch would break
    the fusion (measured, expert-tuned image pipeline: +1 ms of CPU per minibatch).
    """
    p = trace.pipeline
    return [s for s in trace.analysis.ops if not s.injected and s.name in mine and s.name not in skip
            and p[s.name].parallelizable and s.rate_per_core is not None and math.isfinite(s.rate_per_core)]


def _parallelism_changes(trace: Traced, groups: list[tuple[list[OpStats], LPSolution, LPSolution, str]], *,
                         cores: float, root: str) -> list[Change]:
    """Threads for each tunable operator (the allocation's cores; a waiting operator the calls
    in flight the resource LP says it needs), and the thread pool the waiting calls need.

    ``groups``: (operators, CPU allocation, resource LP, why's prefix) — the operators that run
    in steady state with the LPs under the cache; then, where a cache fills, those below it with
    the LP of the first epoch (nothing free), whose calls in flight the pool holds too.
    """
    p = trace.pipeline
    changes: list[Change] = []
    calls_in_flight = 0
    for stats, allocation, resource_lp, prefix in ((s, *rest) for group, *rest in groups for s in group):
        op = p[stats.name]
        target, why = _threads_and_why(stats, allocation, resource_lp, cores)
        why = prefix + why
        if op.max_parallelism is not None and target > op.max_parallelism:
            target = op.max_parallelism  # TensorFlow refuses an interleave above its cycle length
            why += f" (capped at its cycle length {target})"
        if stats.bound == "latency":
            calls_in_flight += target
        in_parallel_form = op.in_parallel_form
        if target != op.parallelism or not in_parallel_form:
            changes.append(Change("parallelism", op.label, op.name, target, why))
    pool = threadpool_size(calls_in_flight, cores)
    if pool > (trace.analysis.threadpool or int(cores)):
        changes.append(Change("threadpool", p[root].label, root, pool,
                              f"{calls_in_flight} calls of waiting operators in flight, beside "
                              f"{int(cores)} threads for the rest: tf.data's pool is one thread per core"))
    return changes


def _threads_and_why(stats: OpStats, allocation: LPSolution, resource_lp: LPSolution,
                     cores: float) -> tuple[int, str]:
    if stats.bound == "latency":
        calls = resource_lp.threads.get(stats.name, 0.0)
        target = max(HEDGE_PARALLELISM, min(MAX_CONCURRENCY, math.ceil(calls * SPARE_CALLS - 1e-6)))
        return target, (f"waits {_ms(stats.latency_per_element)} per element for {_ms(stats.cpu_per_element)} "
                        f"of CPU: {calls:.1f} calls in flight keep up with the bound, {target} with room "
                        f"for the GIL and the cores (order kept)")
    theta = allocation.theta.get(stats.name, 0.0)
    if stats.holds_gil:
        return HEDGE_PARALLELISM, (f"LP gives it {theta:.2f} of {cores:g} cores; it runs Python, so more "
                                   f"threads share one core (the GIL)")
    return _threads_for(theta, cores), f"LP gives it {theta:.2f} of {cores:g} cores"


def _with_fill_threads(trace: Traced, ev: Evidence, changes: list[Change], steady: tuple, filling: list[OpStats],
                       *, cores: float, root: str, bounds: dict[str, float] | None) -> list[Change]:
    """``changes`` with threads for the operators below a cache (``filling``) where the first
    epoch's resource LP (nothing free, every operator charged, every core) fills the cache
    clearly faster with them than as written (:data:`FILL_GAIN`).

    Below a cache an operator is free in steady state, but the first epoch runs it: left as
    written, an 8 ms fetch under a cache of the whole epoch fills it one call at a time (method.md,
    "The filling epoch counts"). A waiting one gets the calls in flight the LP says it needs, a
    computing one its cores; its parallel form keeps the order (deterministic), so what the
    pipeline yields does not change. Judged on every core, as threads are set (the prediction
    counts the cores neighbours leave free; the threads do not depend on them).
    """
    if not filling or not fills_a_cache(ev, layout_with(ev, changes)):
        return changes
    p = trace.pipeline
    fill_lp = solve(trace, cores=cores, bounds=bounds)
    as_written = {s.name: float(ev.threads_seen.get(s.name)  # as it ran: tf.data's own threads count
                                or (p[s.name].parallelism if (p[s.name].parallelism or 0) > 0 else cores))
                  for s in filling}
    if fill_lp.throughput < FILL_GAIN * solve(trace, cores=cores, bounds=bounds, max_threads=as_written).throughput:
        return changes
    why = "below the cache, it runs only while the cache fills (the first epoch): "
    threads = _parallelism_changes(trace, [steady, (filling, fill_lp, fill_lp, why)], cores=cores, root=root)
    return threads + [c for c in changes if c.what not in ("parallelism", "threadpool")]


def _with_prefetch(trace: Traced, ev: Evidence, changes: list[Change], prediction: Prediction,
                   root: str) -> tuple[list[Change], Prediction, list[Declined]]:
    """Add a prefetch at the top unless the model predicts the pipeline clearly faster without it."""
    more = _prefetch_change(trace, root)
    if not more:
        return changes, prediction, []
    prefetched = predict(ev, layout_with(ev, changes + more))
    if prefetched.throughput * PREFETCH_LOSS >= prediction.throughput:
        return changes + more, prefetched, []
    return changes, prediction, [Declined.weighed(more, _no_prefetch, prediction, prefetched)]


def _no_prefetch(without: Prediction, with_it: Prediction) -> str:
    return (f"no prefetch at the top: {without.throughput:,.0f} minibatches/s are predicted without one, "
            f"{with_it.throughput:,.0f} with one (a prefetch costs your loop a wake-up of its thread per "
            f"minibatch, more than what it would overlap)")


def batches_as_written(ev: Evidence, changes: list[Change],
                       prediction: Prediction) -> tuple[list[Change], Prediction, list[Declined]]:
    """Keep a batch you wrote sequential unless its parallel form is predicted clearly faster.

    The hedge gives every parallelizable operator two threads, and the model charges a parallel
    batch one hand-off per minibatch; it costs more than that, and the sequential one is fused
    with the parallel map below it (MapAndBatch). Measured on the plans of two bench pipelines,
    the same plan with the batch sequential: speech 1,144-1,233 -> 1,379-1,414 minibatches/s
    (CPU per minibatch 1.45-1.55 -> 1.32-1.36 ms), random flip 275-325 -> 354-370.
    """
    p = ev.pipeline
    left_out: list[Declined] = []
    for change in [c for c in changes if c.what == "parallelism"]:
        op = p[change.node]
        if op.kind != "batch" or op.in_parallel_form:
            continue
        rest = [c for c in changes if c is not change]
        without = predict(ev, layout_with(ev, rest))
        if without.throughput * PARALLEL_BATCH_GAIN >= prediction.throughput:
            left_out.append(Declined.weighed([change], _sequential_batch(op.label), without, prediction))
            changes, prediction = rest, without
    return changes, prediction, left_out


def _sequential_batch(label: str) -> Callable[[Prediction, Prediction], str]:
    return lambda without, with_it: (f"{label} keeps the form you wrote (sequential): {without.throughput:,.0f} "
                                     f"minibatches/s are predicted so, {with_it.throughput:,.0f} with a parallel "
                                     f"batch, which costs more than the model charges it")


def _scale_note(analysis: Analysis) -> str | None:
    if in_pipeline_scale(analysis) > 0.95:
        return None
    return (f"calibrated alone, your operators add up to {1 + analysis.over_attributed_share:.2f}x the CPU the "
            f"process spent while the pipeline ran; the plan and its prediction use each operator's calibrated "
            f"share of what the process spent")


def threadpool_size(calls_in_flight: int, cores: float) -> int:
    """Threads tf.data's pool needs: the waiting operators' calls, plus one per core for the rest."""
    return int(calls_in_flight + math.ceil(cores)) if calls_in_flight else 0


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def offered_options(trace: Traced, lp: LPSolution, *, cores: float, skip: set[str],
                    bounds: dict[str, float] | None, mine: set[str]) -> list[Option]:
    """Changes worth offering but not applying: more concurrency that changes element order.

    A latency-bound operator that cannot run in parallel (a generator source, a sequential
    reader) gets more calls in flight only by reading several copies of it side by side
    (``interleave(..., deterministic=False)``): the order of elements changes, and each copy
    must read its own share of the data. Offered with the model's predicted gain.
    """
    out: list[Option] = []
    for stats in trace.analysis.ops:
        if (stats.injected or stats.name in skip or stats.name not in mine or stats.bound != "latency"
                or not stats.sequential or not stats.latency_per_element or not stats.visit_ratio):
            continue
        calls = stats.visit_ratio * stats.latency_per_element * lp.throughput  # == 1 when it binds
        if lp.binding != stats.name and calls < 0.9:
            continue  # it does not hold the pipeline back
        copies = _copies_needed(trace, stats, cores=cores, skip=skip, bounds=bounds)
        if copies < 2:
            continue
        better = solve(trace, cores=cores, skip=skip, bounds=bounds, max_threads={stats.name: copies})
        if better.throughput <= lp.throughput * 1.05:
            continue
        change = Change("interleave_sources", stats.label, stats.name, copies,
                        f"it waits {_ms(stats.latency_per_element)} per element, one call at a time")
        out.append(Option(
            title=f"read {copies} copies of {stats.label} side by side", changes=(change,),
            predicted_throughput=better.throughput, plan_throughput=lp.throughput,  # priced by predict() below
            note=("changes the order of elements (interleave with deterministic=False), and each "
                  "copy must yield its own share of the data (e.g. shard the generator's input by "
                  "the copy's index): not applied, turn it on yourself")))
    return out


def priced_options(ev: Evidence, changes: list[Change], options: list[Option],
                   plan: Prediction) -> list[Option]:
    """Each option priced by the one prediction: the plan's layout with the option on, against
    the plan's own prediction (an option the model does not predict faster is dropped)."""
    out = []
    for option in options:
        with_it = predict(ev, layout_with(ev, list(changes) + list(option.changes)))
        if with_it.throughput > plan.throughput:
            out.append(replace(option, predicted_throughput=with_it.throughput, plan_throughput=plan.throughput))
    return out


def _copies_needed(trace: Traced, stats: OpStats, *, cores: float, skip: set[str],
                   bounds: dict[str, float] | None) -> int:
    """The fewest copies past which the model predicts no further gain (at most MAX_SOURCE_COPIES)."""
    best = solve(trace, cores=cores, skip=skip, bounds=bounds,
                 max_threads={stats.name: float(MAX_SOURCE_COPIES)}).throughput
    calls = stats.visit_ratio * stats.latency_per_element * best
    return max(1, min(MAX_SOURCE_COPIES, math.ceil(calls - 1e-6)))


def _prefetch_change(trace: Traced, root: str) -> list[Change]:
    """A prefetch above the user's top operator; the user's own final prefetch is kept, and only
    deepened when plumbkit's buffer would be deeper (never below theirs, never over AUTOTUNE)."""
    p = trace.pipeline
    buffer = prefetch_buffer(trace)
    why = "overlap producing the next minibatch with consuming this one"
    top = p[root]
    if top.kind == "prefetch" and top.inputs:
        theirs = top.tunables.get("buffer_size")
        if theirs is None or theirs < 0 or theirs >= buffer:
            return []
        below = p[top.inputs[0]]
        return [Change("prefetch", below.label, below.name, buffer, why + f" (deepens your prefetch({theirs}))")]
    return [Change("prefetch", top.label, top.name, buffer, why)]


def prefetch_buffer(trace: Traced) -> int:
    """Prefetch depth in proportion to idleness: the more the root waits, the deeper the buffer."""
    root = next((o for o in trace.analysis.ops if o.name == trace.pipeline.root), None)
    idle = 1.0 - min(1.0, root.utilization or 0.0) if root else 1.0
    return max(2, int(round(2 + 2 * idle * trace.analysis.cores)))


def bottleneck_choice(trace: Traced) -> str | None:
    """The operator a bottleneck step gives one more thread: lowest capacity among tunable ones
    (CPU, latency and the GIL counted, :func:`plumbkit.analysis.operational.current_capacity`)."""
    p = trace.pipeline
    tunable = [o for o in trace.analysis.ops if not o.injected and o.name in p.operators
               and p[o.name].can_take_more_parallelism(o.parallelism) and o.rate_per_core is not None]
    if not tunable:
        return None
    return min(tunable, key=lambda o: current_capacity(o, trace.analysis)).name
