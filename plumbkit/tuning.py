"""Stepping, walks, the full optimization and pick_best: trace -> decide -> rewrite -> measure.

Every throughput called *measured* here was measured in this process on the pipeline it
names; every one called *predicted* comes from the model (the LP) and is labelled so.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import tensorflow as tf

from . import baselines as baseline_pipelines
from .api import PipelineLike, trace
from .graph import pipeline_of, resolve_pipeline
from .lp import LPSolution
from .optimizer import CacheDecision, Change, bottleneck_choice, decide
from .rewrite_plan import apply_changes
from .trace import Trace

Progress = Callable[[str, float], None]
#: Longest plumbkit waits for one epoch to fill a cache before measuring the steady state.
MAX_WARMUP_SECONDS = 60.0


def _quiet(_: str, __: float) -> None:
    pass


def measurable(ds: tf.data.Dataset) -> tf.data.Dataset:
    """Finite pipelines are measured over repeated epochs, as training consumes them."""
    cardinality = int(ds.cardinality().numpy())
    return ds if cardinality == tf.data.INFINITE_CARDINALITY else ds.repeat()


def measure(ds: tf.data.Dataset, *, seconds: float, warmup_batches: int = 0, cores: int | None = None) -> Trace:
    """Trace ``ds`` in steady state (epochs repeated; ``warmup_batches`` consumed first)."""
    return trace(measurable(ds), seconds=seconds, warmup_batches=warmup_batches, cores=cores,
                 min_seconds=min(2.0, seconds))


def ideal_throughput(ds: tf.data.Dataset, *, seconds: float = 0.7, repeats: int = 3) -> float:
    """What the consumer could take if the pipeline cost nothing: ``take(1).cache().repeat()``
    (the tf.data papers' ideal bound; prefetched, as plumbkit's plans end), driven by the same
    ``next()`` loop as the tracer. The best of a few short runs: it is a ceiling, and on a
    shared machine noise only ever lowers it."""
    import time
    best = 0.0
    for _ in range(repeats):
        it = iter(ds.take(1).cache().repeat().prefetch(2))
        next(it)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            next(it)
            n += 1
        best = max(best, n / (time.perf_counter() - t0))
    return best


def disk_bound(t: Trace, *, parallelism: int) -> float | None:
    """``BW(p) / D``: minibatches/s the disk allows at read parallelism ``p`` (None: no files)."""
    from .disk import measure_read_bandwidth
    a = t.analysis
    readers = [op for op in t.pipeline if op.reads_files]
    files = sorted({f for op in t.pipeline for f in op.files})
    batches = t.raw.snapshots[-1].batches if t.raw.snapshots else 0
    if not readers or not files or not a.bytes_read or not batches:
        return None
    kind = next(k for k in (readers[0].kind, *readers[0].inner_kinds) if k in ("tfrecord", "text_line"))
    curve = measure_read_bandwidth(files, kind, parallelisms=(1, 2, max(2, parallelism)), seconds=0.3)
    if curve is None:
        return None
    return curve(parallelism) / (a.bytes_read / batches)


def one_epoch_batches(t: Trace, node: str | None = None) -> int:
    """Root minibatches that consume one full pass of ``node``: ``n_node / V_node``.

    That many batches fill a cache placed at ``node`` (0 if its size is infinite or unknown).
    """
    op = next((o for o in t.ops if o.name == (node or t.pipeline.root)), None)
    if op is None or op.cardinality is None or not math.isfinite(op.cardinality) or not op.visit_ratio:
        return 0
    return int(math.ceil(op.cardinality / op.visit_ratio)) + 2


# -- stepping ------------------------------------------------------------------------------

@dataclass
class Step:
    """One step: which operator got one more unit of parallelism, and what that measured."""

    dataset: tf.data.Dataset
    operator: str | None  # label of the operator changed (None: nothing tunable)
    parallelism: int | None
    before: Trace  # trace of the pipeline the step started from
    after: Trace | None  # trace of the new pipeline (its throughput is measured)

    @property
    def throughput(self) -> float:
        return self.after.throughput if self.after else self.before.throughput


def _current_parallelism(t: Trace, name: str) -> int:
    stats = next(o for o in t.ops if o.name == name)
    return max(1, stats.parallelism or 1)


def _choose(t: Trace, policy: str, rng: random.Random) -> str | None:
    if policy == "bottleneck":
        return bottleneck_choice(t)
    if policy == "random":
        tunable = [o.name for o in t.ops if not o.injected and o.name in t.pipeline.operators
                   and t.pipeline[o.name].parallelizable]
        return rng.choice(tunable) if tunable else None
    raise ValueError(f"policy must be 'bottleneck' or 'random', got {policy!r}")


def _step_from(ds: tf.data.Dataset, before: Trace, *, policy: str, rng: random.Random,
               seconds: float, cores: int | None) -> Step:
    name = _choose(before, policy, rng)
    if name is None:
        return Step(dataset=ds, operator=None, parallelism=None, before=before, after=None)
    label = before.pipeline[name].label
    value = _current_parallelism(before, name) + 1
    new = apply_changes(ds, [Change("parallelism", label, name, value, f"{policy} step")])
    after = measure(new, seconds=seconds, cores=cores)
    return Step(dataset=new, operator=label, parallelism=value, before=before, after=after)


def step(pipeline: PipelineLike, *, policy: str = "bottleneck", seed: int | None = None,
         seconds: float = 3.0, cores: int | None = None) -> Step:
    """Trace, give one more unit of parallelism to the bottleneck (or a random tunable operator),
    rebuild, and measure the new pipeline."""
    ds = resolve_pipeline(pipeline)
    before = measure(ds, seconds=seconds, cores=cores)
    return _step_from(ds, before, policy=policy, rng=random.Random(seed), seconds=seconds, cores=cores)


@dataclass
class Walk:
    """A sequence of steps under one policy; ``throughputs[0]`` is the starting pipeline."""

    policy: str
    steps: list[Step] = field(default_factory=list)
    start: Trace | None = None

    @property
    def throughputs(self) -> list[float]:
        start = [self.start.throughput] if self.start else []
        return start + [s.throughput for s in self.steps]

    @property
    def operators(self) -> list[str | None]:
        return [s.operator for s in self.steps]

    @property
    def dataset(self) -> tf.data.Dataset | None:
        return self.steps[-1].dataset if self.steps else None

    @property
    def lp_bounds(self) -> list[float]:
        """The LP's predicted upper bound at the start of each step (and after the last)."""
        traces = ([self.start] if self.start else []) + [s.after for s in self.steps if s.after]
        return [t.lp_bound() for t in traces]

    def __str__(self) -> str:
        from .report import walk_text
        return walk_text(self)

    def _repr_html_(self) -> str:
        import html
        return f"<pre>{html.escape(str(self))}</pre>"

    def steps_to_reach(self, fraction: float = 0.9, peak: float | None = None) -> int | None:
        """Steps until throughput first reaches ``fraction`` of ``peak`` (default: best seen)."""
        values = self.throughputs
        peak = max(values) if peak is None else peak
        return next((i for i, v in enumerate(values) if v >= fraction * peak), None)


def walk(pipeline: PipelineLike, *, steps: int = 5, policy: str = "bottleneck", seed: int | None = None,
         seconds: float = 3.0, cores: int | None = None,
         on_step: Callable[[Walk], None] | None = None) -> Walk:
    """Repeat :func:`step` ``steps`` times; each step's trace is the next step's starting point."""
    ds = resolve_pipeline(pipeline)
    rng = random.Random(seed)
    result = Walk(policy=policy, start=measure(ds, seconds=seconds, cores=cores))
    current, before = ds, result.start
    for _ in range(steps):
        s = _step_from(current, before, policy=policy, rng=rng, seconds=seconds, cores=cores)
        result.steps.append(s)
        if on_step is not None:
            on_step(result)
        if s.after is None:
            break
        current, before = s.dataset, s.after
    return result


# -- full optimization -------------------------------------------------------------------------

@dataclass
class Plan:
    """The full optimization's result. ``predicted_*`` are the model's; the rest were measured."""

    dataset: tf.data.Dataset
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

    @property
    def prediction_error(self) -> float:
        return abs(self.predicted_throughput - self.measured_throughput) / max(self.measured_throughput, 1e-9)

    def rewrite_source(self, source: str) -> str:
        """The user's cell ``source`` with this plan's changes written in (see plumbkit.codegen)."""
        from .codegen import rewrite_source
        return rewrite_source(source, self.changes)

    def __str__(self) -> str:
        lines = [f"plumbkit plan: measured {self.measured_throughput:.2f} minibatches/s "
                 f"(yours {self.baseline_throughput:.2f}; predicted {self.predicted_throughput:.2f})"]
        lines += [f"  - {c}" for c in self.changes]
        lines += [f"  {k}: {v:.2f} minibatches/s (measured)" for k, v in self.baselines.items()]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from .report import plan_html
        return plan_html(self)


def optimize(pipeline: PipelineLike, *, cores: int | None = None, memory_budget: float | None = None,
             seconds: float = 5.0, rounds: int = 2, compare: bool = True,
             on_progress: Progress | None = None) -> Plan:
    """The method's passes (LP parallelism, cache under ``memory_budget``, prefetch), twice, then
    measure the result against the user's pipeline and the naive / heuristic / AUTOTUNE baselines."""
    progress = on_progress or _quiet
    ds = resolve_pipeline(pipeline)
    total = rounds + (4 if compare else 1)
    progress("tracing your pipeline", 0.0)
    original = measure(ds, seconds=seconds, cores=cores)
    cores = cores or original.cores
    user_root = pipeline_of(ds).root
    progress("measuring the consumer's ideal bound and the disk", 0.5 / total)
    bounds = {"consumer (ideal pipeline, measured)": ideal_throughput(ds)}
    disk = disk_bound(original, parallelism=int(cores))
    decisions = decide(original, cores=cores, memory_budget=memory_budget, root=user_root,
                       bounds=bounds, disk_bound=disk)
    changes, cache = list(decisions.changes), decisions.cache
    progress("round 1: LP parallelism, cache, prefetch", 1 / total)
    candidate = apply_changes(ds, decisions.changes)
    warm = one_epoch_batches(original, cache.node) if cache.node else 0
    notes: list[str] = []
    if warm and warm / max(original.throughput, 1e-9) > MAX_WARMUP_SECONDS:
        notes.append(f"one epoch takes ~{warm / original.throughput:.0f} s, longer than plumbkit waits "
                     f"to fill the cache ({MAX_WARMUP_SECONDS:.0f} s): the measured throughput is "
                     f"with a cold cache, the prediction is for a warm one")
        warm = 0
    for r in range(1, rounds):
        # Rates shift once parallelism changes: re-solve the LP on rates measured on the
        # rewritten pipeline (keeping the cache and prefetch already placed). Its bound is the
        # prediction; the result is then measured separately.
        progress(f"round {r + 1}: LP on the rewritten pipeline", (r + 1) / total)
        rewritten = measure(candidate, seconds=seconds, warmup_batches=warm, cores=cores)
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
        warmup_batches=warm,
    )
    plan.baselines["yours"] = original.throughput
    plan.predictions["yours"] = original.lp_bound(cores)
    if compare:
        for i, (name, make) in enumerate(baseline_pipelines.ALL.items()):
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
