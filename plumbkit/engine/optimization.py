"""The full optimization and pick_best: trace -> decide -> rebuild -> measure, against baselines.

Every throughput called *measured* here was measured in this process on the pipeline it
names; every one called *predicted* comes from the model (the LP) and is labelled so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from ..model.plan import CacheDecision, Change, Option
from ..planning.decisions import decide
from ..planning.lp import LPSolution
from ..tfdata.graph import pipeline_of, resolve_pipeline
from ..tfdata.memory_guard import fill_cache
from ..tfdata.rebuild import apply_changes
from . import baselines as configurations
from .measuring import Progress, disk_bound, ideal_throughput, measure, one_epoch_batches
from .partial import partial_pick, partial_plan
from .scheduler import operation
from .trace_result import Trace
from .tracing import PipelineLike

if TYPE_CHECKING:
    import tensorflow as tf

#: Longest plumbkit waits for one epoch to fill a cache before measuring the steady state.
MAX_WARMUP_SECONDS = 60.0


def _quiet(_: str, __: float) -> None:
    pass


@dataclass
class Plan:
    """The full optimization's result. ``predicted_*`` are the model's; the rest were measured."""

    dataset: "tf.data.Dataset"
    changes: list[Change]
    predicted_throughput: float
    measured_throughput: float
    baseline_throughput: float
    lp: LPSolution
    cache: CacheDecision
    theta_by_label: dict[str, float]
    trace: Trace  # the user's pipeline as given
    final_trace: Trace  # the optimized pipeline, measured
    baselines: dict[str, float] = field(default_factory=dict)  # measured, minibatches/s
    predictions: dict[str, float] = field(default_factory=dict)
    disk_bound: float | None = None
    bounds: dict[str, float] = field(default_factory=dict)  # measured ceilings given to the LP
    notes: list[str] = field(default_factory=list)
    warmup_batches: int = 0  # batches consumed to fill the cache before measuring
    partial: bool = False  # cut short (Cancel, Ctrl-C): nothing applied, notes say what was measured
    options: list[Option] = field(default_factory=list)  # offered, not applied: they change the order

    @property
    def prediction_error(self) -> float:
        return abs(self.predicted_throughput - self.measured_throughput) / max(self.measured_throughput, 1e-9)

    def rewrite_source(self, source: str) -> str:
        """The user's cell ``source`` with this plan's changes written in (see plumbkit.codegen)."""
        from ..export.source import rewrite_source
        return rewrite_source(source, self.changes)

    def __str__(self) -> str:
        if self.partial:
            from ..render.text import partial_plan_text
            return partial_plan_text(self)
        lines = [f"plumbkit plan: measured {self.measured_throughput:.2f} minibatches/s "
                 f"(yours {self.baseline_throughput:.2f}; predicted {self.predicted_throughput:.2f})"]
        lines += [f"  - {c}" for c in self.changes]
        lines += [f"  {k}: {v:.2f} minibatches/s (measured)" for k, v in self.baselines.items()]
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  {o}" for o in self.options]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from ..render.html import partial_plan_html, plan_html
        return partial_plan_html(self) if self.partial else plan_html(self)


@operation("optimize", partial=lambda *cut_short: partial_plan(Plan, *cut_short))
def optimize(pipeline: PipelineLike, *, cores: int | None = None, memory_budget: float | None = None,
             seconds: float = 5.0, rounds: int = 2, compare: bool = True,
             on_progress: Progress | None = None) -> Plan:
    """The method's passes (LP parallelism, cache under ``memory_budget``, prefetch), twice, then
    measure the result against the user's pipeline and the naive / heuristic / AUTOTUNE baselines."""
    progress = on_progress or _quiet
    ds = resolve_pipeline(pipeline)
    total = rounds + (4 if compare else 1)
    progress("tracing your pipeline", 0.0)
    original = measure(ds, seconds=seconds, cores=cores, calibrate=True)
    cores = cores or original.cores
    user_root = pipeline_of(ds).root
    progress("measuring the consumer's ideal bound and the disk", 0.5 / total)
    bounds = {"consumer (ideal pipeline, measured)": ideal_throughput(ds)}
    disk = disk_bound(original, parallelism=int(cores))
    decisions = decide(original, cores=cores, memory_budget=memory_budget, root=user_root,
                       bounds=bounds, disk_bound=disk)
    changes, cache = list(decisions.changes), decisions.cache
    progress("round 1: LP parallelism, cache, prefetch", 1 / total)
    candidate = apply_changes(ds, decisions.changes, cache_limit=cache.budget if cache.node else None)
    warm = one_epoch_batches(original, cache.node) if cache.node else 0
    notes: list[str] = list(decisions.notes)
    if warm and warm / max(original.throughput, 1e-9) > MAX_WARMUP_SECONDS:
        notes.append(f"one epoch takes ~{warm / original.throughput:.0f} s, longer than plumbkit waits "
                     f"to fill the cache ({MAX_WARMUP_SECONDS:.0f} s): the measured throughput is "
                     f"with a cold cache, the prediction is for a warm one; the cache's fill is "
                     f"guarded and stops with an error naming it if it passes the budget")
        warm = 0
    overflow = fill_cache(candidate, warm, seconds=2 * MAX_WARMUP_SECONDS) if warm else None
    if overflow:  # the estimate was too low: plan again without a cache
        budget = cache.budget
        decisions = decide(original, cores=cores, memory_budget=0, root=user_root, bounds=bounds,
                           disk_bound=disk)
        changes, warm = list(decisions.changes), 0
        cache = dataclasses.replace(decisions.cache, budget=budget, why=f"{overflow}; nothing is cached")
        decisions.cache = cache
        candidate = apply_changes(ds, decisions.changes)
        notes.append(f"{overflow}: the plan caches nothing (what was measured is without a cache); "
                     f"to cache anyway, on disk, add .cache('/path/on/disk') there")
    for r in range(1, rounds):
        # Rates shift once parallelism changes: re-solve the LP on rates measured on the
        # rewritten pipeline (keeping the cache and prefetch already placed). Its bound is the
        # prediction; the result is then measured separately.
        progress(f"round {r + 1}: LP on the rewritten pipeline", (r + 1) / total)
        rewritten = measure(candidate, seconds=seconds, warmup_batches=warm, cores=cores,
                            calibrate=original.calibration or False)
        again = decide(rewritten, cores=cores, memory_budget=memory_budget,
                       root=pipeline_of(candidate).root, cache=False, prefetch=False, bounds=bounds,
                       disk_bound=None if cache.node else disk, include_overhead=True)
        decisions.lp, decisions.predicted_throughput = again.lp, again.predicted_throughput
        decisions.theta_by_label = again.theta_by_label
        moved = [c for c in again.changes if c.what == "parallelism"]
        if not moved:
            break
        candidate = apply_changes(candidate, moved)
        changes = _merge(changes, moved)
    progress("measuring the optimized pipeline", (rounds + 0.5) / total)
    current_trace = measure(candidate, seconds=seconds, warmup_batches=warm, cores=cores)
    decisions.changes = changes
    plan = Plan(
        dataset=candidate, changes=decisions.changes, predicted_throughput=decisions.predicted_throughput,
        measured_throughput=current_trace.throughput, baseline_throughput=original.throughput,
        lp=decisions.lp, cache=decisions.cache, theta_by_label=decisions.theta_by_label,
        trace=original, final_trace=current_trace, disk_bound=disk, bounds=bounds, notes=notes,
        warmup_batches=warm, options=decisions.options,
    )
    plan.baselines["yours"] = original.throughput
    plan.predictions["yours"] = original.lp_bound(cores)
    if compare:
        for i, (name, make) in enumerate(configurations.ALL.items()):
            progress(f"measuring the {name} baseline", (rounds + 1 + i) / total)
            plan.baselines[name] = measure(make(ds, cores), seconds=seconds, cores=cores).throughput
    plan.baselines["plumbkit"] = plan.measured_throughput
    plan.predictions["plumbkit"] = plan.predicted_throughput
    progress("done", 1.0)
    return plan


def _merge(changes: list[Change], later: list[Change]) -> list[Change]:
    """Later parallelism decisions replace earlier ones for the same operator (by label)."""
    replaced = {c.where: c for c in later}
    merged = [replaced.pop(c.where) if c.what == "parallelism" and c.where in replaced else c for c in changes]
    return merged + list(replaced.values())


@operation("pick_best", partial=lambda *cut_short: partial_pick(Plan, *cut_short))
def pick_best(candidates: Mapping[str, PipelineLike], *, cores: int | None = None,
              memory_budget: float | None = None, seconds: float = 5.0,
              on_progress: Progress | None = None) -> tuple[str, Plan, str]:
    """Optimize each candidate (same element_spec) and return (name, plan, reason) of the fastest."""
    plans: dict[str, Plan] = {}
    specs = set()
    for i, (name, pipeline) in enumerate(candidates.items()):
        if on_progress:
            on_progress(f"optimizing candidate {name!r}", i / len(candidates))
        ds = resolve_pipeline(pipeline)
        specs.add(repr(ds.element_spec))
        plans[name] = optimize(ds, cores=cores, memory_budget=memory_budget, seconds=seconds, compare=False)
    if len(specs) > 1:
        raise ValueError("pick_best candidates must yield the same element_spec; got " + ", ".join(sorted(specs)))
    best = max(plans, key=lambda n: plans[n].measured_throughput)
    others = ", ".join(f"{n} {p.measured_throughput:.1f}" for n, p in plans.items() if n != best)
    cache = plans[best].cache.label
    reason = (f"{best} measured {plans[best].measured_throughput:.1f} minibatches/s after optimization "
              f"(others: {others})" + (f"; it can cache at {cache}" if cache else ""))
    return best, plans[best], reason
