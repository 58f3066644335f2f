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

from ..analysis.operational import Analysis
from ..model.pipeline import Pipeline
from ..model.plan import CacheDecision, Change
from ..model.units import human_bytes
from .budget import ESTIMATE_MARGIN, fits, usable_budget
from .lp import LPSolution, solve_cpu_lp

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


def parallelism_caps(pipeline: Pipeline) -> dict[str, float]:
    """Most cores TensorFlow lets each capped operator use (an interleave: its cycle length)."""
    return {op.name: float(op.max_parallelism) for op in pipeline if op.max_parallelism is not None}


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
          bounds: dict[str, float] | None = None) -> LPSolution:
    """The LP on this trace's rates, leaving out ``skip`` (cached) operators.

    With ``include_overhead``, CPU no operator accounts for becomes an extra parallel
    pseudo-operator. Off by default: measured here, most of it is idle thread pools spinning
    (72% of a sequential pipeline's CPU, ~0% once it is parallel), which does not scale with
    throughput and made predictions 35% low. The consumer's own limit enters as a measured
    bound instead. The LP itself is not hedged (a hedge would only lower the bound); the
    hedge is applied when rounding cores to threads (:data:`HEDGE_PARALLELISM`).
    """
    a = trace.analysis
    rates, sequential = lp_rates(a)
    rates = {k: v for k, v in rates.items() if k not in skip}
    overhead_cpu = a.cpu_seconds - a.attributed_cpu_seconds
    if include_overhead and overhead_cpu > 0 and a.throughput > 0:
        window = a.window[1] - a.window[0]
        rates[OVERHEAD] = (a.throughput * window) / overhead_cpu
    floors = {k: HEDGE_THETA * cores for k in rates} if hedge else None
    if floors and sum(floors.values()) > cores:
        floors = None
    return solve_cpu_lp(rates, cores=cores, sequential=sequential, min_theta=floors, extra_bounds=bounds,
                        max_theta=parallelism_caps(trace.pipeline))


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
    for stats in trace.analysis.ops:
        if stats.injected or stats.name in skip or stats.name not in mine:
            continue
        op = p[stats.name]
        if not op.parallelizable or stats.rate_per_core is None:
            continue  # not tunable, or idle in this trace (e.g. below a warm cache)
        theta = lp.theta.get(stats.name, 0.0)
        target = max(HEDGE_PARALLELISM, math.ceil(theta - 1e-6) + (SPARE_THREADS if theta > 1 + 1e-6 else 0))
        target = min(target, max(HEDGE_PARALLELISM, int(math.ceil(cores)) * 2))
        if op.max_parallelism is not None:
            target = min(target, op.max_parallelism)  # interleave: at most its cycle length
        if target != stats.parallelism:
            changes.append(Change("parallelism", op.label, op.name, target,
                                  f"LP gives it {theta:.2f} of {cores:g} cores"))
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
    return Decisions(changes=changes, lp=lp, cache=cache_decision, predicted_throughput=lp.throughput,
                     theta_by_label=theta_by_label, notes=[usable.note] if usable.note else [])


def prefetch_buffer(trace: Traced) -> int:
    """Prefetch depth in proportion to idleness: the more the root waits, the deeper the buffer."""
    root = next((o for o in trace.analysis.ops if o.name == trace.pipeline.root), None)
    idle = 1.0 - min(1.0, root.utilization or 0.0) if root else 1.0
    return max(2, int(round(2 + 2 * idle * trace.analysis.cores)))


def bottleneck_choice(trace: Traced) -> str | None:
    """The operator a bottleneck step gives one more thread: lowest capacity among tunable ones."""
    p = trace.pipeline
    tunable = [o for o in trace.analysis.ops if not o.injected and o.name in p.operators
               and p[o.name].can_take_more_parallelism(o.parallelism) and o.rate_per_core is not None]
    if not tunable:
        return None
    return min(tunable, key=lambda o: o.rate_per_core * max(1, o.parallelism or 1)).name
