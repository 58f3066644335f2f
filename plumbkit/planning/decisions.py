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
from dataclasses import dataclass, field
from typing import Protocol

from ..analysis.costs import MAX_CONCURRENCY
from ..analysis.operational import Analysis, OpStats, current_capacity
from ..model.pipeline import Pipeline
from ..model.plan import CacheDecision, Change, Option
from ..model.units import human_bytes
from .budget import ESTIMATE_MARGIN, fits, usable_budget
from .lp import Demand, LPSolution, solve_resource_lp

#: Never give a parallelizable operator fewer threads than this (the paper's hedge).
HEDGE_PARALLELISM = 2
#: Threads beyond ceil(theta) for an operator the LP gives more than one core: a parallel map's
#: threads also wait on hand-offs and on its output buffer, so ceil(theta) threads deliver less
#: than theta cores (measured, speech mask at theta 1.98: 2 threads 1871, 3 threads 2112,
#: 4 threads 2264 minibatches/s against an LP bound of 2160).
SPARE_THREADS = 1
#: Share of the LP's cores every costly operator keeps, so a cheap one is never starved.
HEDGE_THETA = 0.05
#: Name of the pseudo-operator for CPU no operator accounts for (thread pools, the consumer).
OVERHEAD = "(unattributed overhead)"
#: Name of the disk bound in the LP.
DISK = "disk bandwidth / bytes per minibatch"


@dataclass
class Decisions:
    """What the passes chose for one trace, and the model's prediction for the result."""

    changes: list[Change]
    lp: LPSolution
    cache: CacheDecision
    predicted_throughput: float
    theta_by_label: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. the memory budget was capped
    options: list[Option] = field(default_factory=list)  # offered, not applied (they change order)


class Traced(Protocol):
    """What the passes read: the pipeline model and its analysis (a :class:`plumbkit.Trace`)."""

    pipeline: Pipeline
    analysis: Analysis


def default_memory_budget() -> float:
    return usable_budget(None).bytes


def lp_rates(analysis: Analysis) -> tuple[dict[str, float], set[str]]:
    """(R_i of every operator that costs CPU, the sequential ones) for the LP."""
    rates = {o.name: o.rate_per_core for o in analysis.ops
             if o.rate_per_core is not None and math.isfinite(o.rate_per_core) and not o.injected}
    sequential = {o.name for o in analysis.ops if o.sequential}
    return rates, sequential


def demand(o: OpStats, *, max_threads: float | None = None) -> Demand | None:
    """What operator ``o`` needs per minibatch (None: idle, or costs nothing measurable).

    CPU ``V_i c_i``; a latency-bound operator also waits ``V_i l_i`` per minibatch per call in
    flight; up to :data:`MAX_CONCURRENCY` calls (1 for a sequential operator).
    """
    if o.injected or o.rate_per_core is None or not o.visit_ratio:
        return None
    cpu = 1.0 / o.rate_per_core if o.rate_per_core > 0 and math.isfinite(o.rate_per_core) else 0.0
    latency = o.visit_ratio * o.latency_per_element if o.bound == "latency" and o.latency_per_element else 0.0
    if cpu <= 0 and latency <= 0:
        return None
    cap = max_threads if max_threads is not None else (1.0 if o.sequential else float(MAX_CONCURRENCY))
    return Demand(o.name, cpu=cpu, latency=latency, gil=o.holds_gil, max_threads=cap)


def demands(analysis: Analysis, *, skip: set[str] = frozenset(),
            max_threads: dict[str, float] | None = None) -> list[Demand]:
    """Every costly operator's :class:`Demand` (``max_threads`` overrides an operator's cap)."""
    out = []
    for o in analysis.ops:
        if o.name in skip:
            continue
        d = demand(o, max_threads=(max_threads or {}).get(o.name))
        if d is not None:
            out.append(d)
    return out


def decide_cache(trace: Traced, budget: float, root: str | None = None) -> CacheDecision:
    """Cache at the operator closest to the root that is deterministic, finite and fits ``budget``.

    Walks down the main chain (first inputs) from the root; skips the user's own caches and
    prefetches (they are re-decided), and never goes above a random or infinite operator.
    """
    p = trace.pipeline
    name: str | None = root or p.root
    closest_too_big: tuple[str, float] | None = None
    while name is not None:
        op = p[name]
        stats = next((o for o in trace.analysis.ops if o.name == name), None)
        if stats is not None and op.kind not in ("prefetch", "cache") and stats.cacheable:
            size = stats.materialized_bytes or 0.0
            if fits(size, budget):
                why = (f"closest to the root that is deterministic and finite; "
                       f"{human_bytes(size)} (+{ESTIMATE_MARGIN:.0%} for the estimate's error) fits "
                       f"the {human_bytes(budget)} budget")
                if closest_too_big:
                    why += f" ({closest_too_big[0]} would need {human_bytes(closest_too_big[1])})"
                return CacheDecision(label=op.label, node=name, bytes=size, budget=budget, why=why)
            closest_too_big = closest_too_big or (op.label, size)
        name = op.inputs[0] if op.inputs else None
    if closest_too_big:
        why = (f"nothing fits: every deterministic candidate on the way down needs more than the "
               f"{human_bytes(budget)} budget with a {ESTIMATE_MARGIN:.0%} margin for the estimate "
               f"({closest_too_big[0]}: {human_bytes(closest_too_big[1])}), so nothing is cached")
    else:
        reasons = sorted({o.cache_note for o in trace.analysis.ops if not o.cacheable and not o.injected})
        why = "no operator can be cached: " + "; ".join(reasons)
    return CacheDecision(label=None, node=None, bytes=None, budget=budget, why=why)


def _cached_below(trace: Traced, cache_node: str | None) -> set[str]:
    """Operators that cost nothing in steady state because a cache sits above them."""
    if cache_node is None:
        return set()
    return {cache_node} | {o.name for o in trace.pipeline.descendants(cache_node)}


def solve(trace: Traced, *, cores: float, skip: set[str] = frozenset(),
          include_overhead: bool = False, hedge: bool = False,
          bounds: dict[str, float] | None = None,
          max_threads: dict[str, float] | None = None) -> LPSolution:
    """The resource LP on this trace, leaving out ``skip`` (cached) operators.

    Each operator's CPU, latency and GIL (:func:`demand`); the Python consumer's own cost per
    minibatch counts against the GIL when calibration measured it. ``max_threads`` caps an
    operator's concurrency (e.g. 1: as it is; more: an option the user may turn on).

    With ``include_overhead``, CPU no operator accounts for becomes an extra parallel
    pseudo-operator. Off by default: measured here, most of it is idle thread pools spinning
    (72% of a sequential pipeline's CPU, ~0% once it is parallel), which does not scale with
    throughput and made predictions 35% low. The consumer's own limit enters as a measured
    bound instead. The LP itself is not hedged (a hedge would only lower the bound); the
    hedge is applied when rounding cores to threads (:data:`HEDGE_PARALLELISM`).
    """
    a = trace.analysis
    needs = demands(a, skip=skip, max_threads=max_threads)
    overhead_cpu = a.cpu_seconds - a.attributed_cpu_seconds
    if include_overhead and overhead_cpu > 0 and a.throughput > 0:
        window = a.window[1] - a.window[0]
        needs.append(Demand(OVERHEAD, cpu=overhead_cpu / (a.throughput * window)))
    floors = {d.name: HEDGE_THETA * cores for d in needs} if hedge else None
    if floors and sum(floors.values()) > cores:
        floors = None
    return solve_resource_lp(needs, cores=cores, consumer_gil=a.consumer_cpu_per_batch or 0.0,
                             min_theta=floors, extra_bounds=bounds)


def decide(trace: Traced, *, cores: float | None = None, memory_budget: float | None = None,
           prefetch: bool = True, cache: bool = True, root: str | None = None,
           bounds: dict[str, float] | None = None, disk_bound: float | None = None,
           include_overhead: bool = False) -> Decisions:
    """Run the passes on one trace: LP parallelism, cache, prefetch.

    ``include_overhead`` charges the CPU no operator accounts for as a pseudo-operator: right
    for a trace of an already parallel pipeline (thread hand-offs, copies), wrong for a
    sequential one (there it is mostly idle pools spinning).
    ``root`` is the user's top operator when the trace ran a wrapped pipeline (epochs repeated
    for measuring); only it and what lies below it are changed. ``bounds`` are throughput
    ceilings measured elsewhere (the consumer) that the LP must respect; ``disk_bound`` binds
    only while a file reader still runs in steady state (not under a warm cache).
    """
    cores = cores or trace.analysis.cores
    usable = usable_budget(memory_budget)
    budget = usable.bytes
    p = trace.pipeline
    root = root or p.root
    mine = {root} | {o.name for o in p.descendants(root)}
    if cache:
        cache_decision = decide_cache(trace, budget, root)
    else:  # a later round keeps the cache and prefetch decided before
        cache_decision = CacheDecision(None, None, None, budget, "kept from the previous round")
    skip = _cached_below(trace, cache_decision.node)
    bounds = dict(bounds or {})
    if disk_bound and any(op.reads_files and op.name not in skip for op in p):
        bounds[DISK] = disk_bound
    lp = solve(trace, cores=cores, skip=skip, bounds=bounds, include_overhead=include_overhead)
    changes: list[Change] = []
    for op in (p[n] for n in p.operators if n in mine and cache):
        if op.kind in ("prefetch", "cache"):
            changes.append(Change("remove", op.label, op.name, op.kind,
                                  "plumbkit re-decides caches and prefetches itself"))
    calls_in_flight = 0
    for stats in trace.analysis.ops:
        if stats.injected or stats.name in skip or stats.name not in mine:
            continue
        op = p[stats.name]
        if not op.parallelizable or stats.rate_per_core is None:
            continue  # not tunable, or idle in this trace (e.g. below a warm cache)
        theta = lp.theta.get(stats.name, 0.0)
        if stats.bound == "latency":
            calls = lp.threads.get(stats.name, 0.0)
            target = max(HEDGE_PARALLELISM, min(MAX_CONCURRENCY, math.ceil(calls - 1e-6)))
            why = (f"waits {_ms(stats.latency_per_element)} per element for {_ms(stats.cpu_per_element)} of CPU: "
                   f"{calls:.1f} calls in flight keep up with the bound (order kept)")
        else:
            target = max(HEDGE_PARALLELISM, math.ceil(theta - 1e-6) + (SPARE_THREADS if theta > 1 + 1e-6 else 0))
            target = min(target, max(HEDGE_PARALLELISM, int(math.ceil(cores)) * 2))
            why = f"LP gives it {theta:.2f} of {cores:g} cores"
            if stats.holds_gil:
                target = HEDGE_PARALLELISM
                why += "; it runs Python, so more threads share one core (the GIL)"
        if op.max_parallelism is not None and target > op.max_parallelism:
            target = op.max_parallelism  # TensorFlow refuses an interleave above its cycle length
            why += f" (capped at its cycle length {target})"
        if stats.bound == "latency":
            calls_in_flight += target
        if target != stats.parallelism:
            changes.append(Change("parallelism", op.label, op.name, target, why))
    pool = threadpool_size(calls_in_flight, cores)
    if pool > (trace.analysis.threadpool or int(cores)):
        changes.append(Change("threadpool", p[root].label, root, pool,
                              f"{calls_in_flight} calls of waiting operators in flight, beside "
                              f"{int(cores)} threads for the rest: tf.data's pool is one thread per core"))
    if cache_decision.node is not None:
        changes.append(Change("cache", cache_decision.label, cache_decision.node, "", cache_decision.why))
    if prefetch:
        top = root
        while p[top].kind in ("prefetch", "cache") and p[top].inputs:
            top = p[top].inputs[0]  # the user's own are removed: prefetch above what they wrapped
        buffer = prefetch_buffer(trace)
        changes.append(Change("prefetch", p[top].label, top, buffer,
                              "overlap producing the next minibatch with consuming this one"))
    labels = {o.name: o.label for o in trace.analysis.ops}
    theta_by_label = {labels.get(k, k): v for k, v in lp.theta.items()}
    options = offered_options(trace, lp, cores=cores, skip=skip, bounds=bounds, mine=mine)
    return Decisions(changes=changes, lp=lp, cache=cache_decision, predicted_throughput=lp.throughput,
                     theta_by_label=theta_by_label, options=options,
                     notes=[usable.note] if usable.note else [])


def threadpool_size(calls_in_flight: int, cores: float) -> int:
    """Threads tf.data's pool needs: the waiting operators' calls, plus one per core for the rest."""
    return int(calls_in_flight + math.ceil(cores)) if calls_in_flight else 0


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


#: Copies of a waiting source the interleave option reads side by side, at most.
MAX_SOURCE_COPIES = 16


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
            predicted_throughput=better.throughput, baseline_throughput=lp.throughput,
            note=("changes the order of elements (interleave with deterministic=False), and each "
                  "copy must yield its own share of the data (e.g. shard the generator's input by "
                  "the copy's index): not applied, turn it on yourself")))
    return out


def _copies_needed(trace: Traced, stats: OpStats, *, cores: float, skip: set[str],
                   bounds: dict[str, float] | None) -> int:
    """The fewest copies past which the model predicts no further gain (at most MAX_SOURCE_COPIES)."""
    best = solve(trace, cores=cores, skip=skip, bounds=bounds,
                 max_threads={stats.name: float(MAX_SOURCE_COPIES)}).throughput
    calls = stats.visit_ratio * stats.latency_per_element * best
    return max(1, min(MAX_SOURCE_COPIES, math.ceil(calls - 1e-6)))


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
