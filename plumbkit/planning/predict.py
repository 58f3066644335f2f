"""Before the fact: a configuration's throughput predicted from what was measured on the user's
pipeline before any rewrite ran (method.md, "Predict before the fact"; Plumber §4.3–4.4).

What a prediction is made from (:class:`Evidence`), all measured on the user's pipeline as given:

- each operator's CPU cost per minibatch ``w_i = V_i c_i = 1 / R_i``, from the trace's
  :class:`~plumbkit.analysis.OpStats` (``rate_per_core``), or from a per-operator calibration
  passed in ``costs`` (seconds of CPU per element) — so calibrated costs plug in unchanged;
- the runtime's own costs (:class:`RuntimeCosts`): the consumer's ceiling (one element
  replayed, ``take(1).cache().repeat()``, the tf.data papers' ideal; its repeat stands for the
  pipeline's own, :func:`in_the_consumers_ceiling`) with a prefetch above it and without one (a
  prefetch costs the consumer a wake-up per element), the CPU of handing an element from
  one thread to another (a parallel operator's pool, a prefetch), the CPU of reading an element
  back from a memory cache;
- the disk's ceiling ``BW(p) / D``, binding only while a reader still runs.

A configuration (:class:`Layout`) says which operators run in a parallel form with how many
threads, whose output is cached and where prefetches sit. In steady state an operator below a
cache costs nothing; the cache read and everything above it cost what they cost. Work runs on
threads: the consumer's, a prefetch's, a parallel operator's pool (its own function) and its
runner (the sequential operators below it, up to the next thread boundary). The prediction is
the smallest of: each thread's capacity (1 / the seconds it is busy per minibatch: an operator's
CPU, or the wall time one call at a time took when calibrated so, where its kernels also ran on
other threads and the CPU clock read more), each parallel operator's
``min(threads, cores) / w_i``, the cores over the CPU per minibatch (operators, hand-offs,
cache reads, the consumer), the disk, and, where an operator waits or runs Python, the resource
LP (:func:`plumbkit.planning.lp.solve_resource_lp`) at the layout's own concurrency: calls in
flight (Little's law) and one core for all Python, which the thread and CPU limits do not see.
Where a short finite epoch is repeated, that steady rate is stretched by each restart's start-up
(:class:`EpochRestarts`, measured on the user's pipeline): the epoch-averaged rate, named so.

This module owns the prediction: :func:`predict` is the one function that turns evidence and a
layout into a :class:`Prediction`, and every figure shown as "predicted" (the plan's headline,
the per-configuration table, an option's figures, the widget, the bench) is one such object's
``throughput`` beside its own ``binding`` and ``limits``. Pure Python.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from dataclasses import replace
from typing import Iterable, Mapping, Protocol

from ..analysis.costs import GIL_QUEUED
from ..analysis.operational import Analysis, OpStats, cpu_per_minibatch, parallel_cpu_per_minibatch
from ..model.demand import ModelDemand
from ..model.pipeline import SHUFFLE_KINDS, Operator, Pipeline
from ..model.plan import Change
from ..tunables import MAX_CONCURRENCY, MID_EPOCH_EDGE, NEIGHBOUR_FLOOR
from .lp import GIL, Demand, LPSolution, solve_cpu_lp, solve_resource_lp

#: Pseudo-operators the LP charges besides the user's operators (never shown as an allocation).
CONSUMER = "(consumer: your loop's next(), measured)"
HANDOFFS = "(tf.data thread hand-offs, measured)"
CACHE_READS = "(cache reads, measured)"
DISK = "disk bandwidth / bytes per minibatch"
#: The limit a disk tier's reads set in steady state (its directory's read bandwidth, measured).
TIER_READ = "disk tier read bandwidth"
PSEUDO = frozenset({CONSUMER, HANDOFFS, CACHE_READS})


@dataclass(frozen=True)
class RuntimeCosts:
    """The runtime's own costs on this machine, measured before any rewrite.

    ``consumer``: minibatches/s the consumer takes from a pipeline that costs nothing, through a
    prefetch (None: not measured). ``consumer_plain``: the same with no prefetch, the consumer
    pulling from the cache itself (None: not measured, ``consumer`` stands for it): measured on
    TF 2.21, minibatches of eight scalars, 33-35k/s against 16-19k/s through a prefetch, whose
    buffer the consumer wakes the producer from on every element. ``handoff``: CPU seconds per element passed to another thread (a parallel
    operator's pool, a prefetch's buffer). ``cache_read``: CPU seconds per element read back from
    a memory cache. ``pool_idle``: core-seconds the busy cores leave idle per element through a
    parallel operator's pool (a woken thread starts late), so the CPU limit is the free cores
    over the CPU *and* that idle time per minibatch: the probe's (planted work), or
    ``own_pool_idle``'s for an operator whose own pool was measured so (its function, its calls
    in flight: :func:`plumbkit.engine.calibration.with_parallel_costs`).
    """

    consumer: float | None = None
    handoff: float = 0.0
    cache_read: float = 0.0
    consumer_plain: float | None = None
    pool_idle: float = 0.0
    #: CPU seconds per element written into a memory cache while it fills (None: as a read)
    cache_put: float | None = None
    #: a short finite epoch repeated, and what each restart of it costs (None: not measured, or
    #: the epoch is infinite, unknown or long)
    restarts: EpochRestarts | None = None
    #: operator -> core-seconds left idle per element of it, read on its own parallel form (its
    #: function leaves the cores idler or busier than the probe's planted work: speech's mask with
    #: three calls idled 7-10 µs an element in its plan, where the probe read 17-19)
    own_pool_idle: Mapping[str, float] = field(default_factory=dict)

    def idle_per_element(self, pools: Iterable[str]) -> float:
        """Idle core-seconds per element charged to ``pools`` (the busiest ones, all with as many
        elements a minibatch): an own reading where one was taken, else the probe's."""
        own = [self.own_pool_idle[name] for name in pools if name in self.own_pool_idle]
        return max(own) if own else self.pool_idle

    @property
    def cache_write(self) -> float:
        """CPU per element a filling cache spends storing it (a read's when not measured)."""
        return self.cache_read if self.cache_put is None else self.cache_put

    def consumer_work(self, prefetched: bool) -> float:
        """Seconds of the consumer thread per minibatch of a pipeline that costs nothing: through
        a prefetch, or pulling itself (less the one cache read its ceiling's pipeline holds, which
        the model charges where it happens)."""
        if prefetched or not self.consumer_plain:
            return 1.0 / self.consumer if self.consumer else 0.0
        return max(0.0, 1.0 / self.consumer_plain - self.cache_read)

    @property
    def best_consumer(self) -> float | None:
        """The consumer's ceiling in its better form (the allocation LP's)."""
        return max((c for c in (self.consumer, self.consumer_plain) if c), default=None)


@dataclass(frozen=True)
class EpochRestarts:
    """A finite epoch repeated: every epoch builds the part below the repeat again (its iterators
    and threads, its shuffle buffers refilled, the first elements through its depth) while the
    cores idle. Measured on the user's pipeline when traced
    (:func:`plumbkit.engine.restarts.measure_restarts`).

    ``minibatches``: root minibatches per epoch. ``startup``: seconds each restart of the user's
    pipeline as traced added to its epoch beyond ``minibatches`` at its mid-epoch rate.
    ``below``: the operator whose subtree restarts (the root for a finite pipeline, the input of
    its ``repeat()`` otherwise). ``epoch``: the median epoch's seconds, its restart included
    (None: not measured). Where a shuffle buffer spans the mid-epoch, what a prediction charges
    per restart is read against the model's own steady epoch (:attr:`Evidence.restart_as_traced`):
    there the mid-epoch rate is not the steady one (a buffer as long as the epoch is filled by the
    operators below it at the restart, and the operators above drain it alone: mid-epoch only
    those run).
    """

    minibatches: float
    startup: float
    below: str
    epoch: float | None = None

    def stretched(self, steady: float, startup: float) -> float:
        """The epoch-averaged rate of a steady ``steady`` minibatches/s: ``N / (N / R + T)``."""
        if not (steady > 0 and math.isfinite(steady)) or self.minibatches <= 0:
            return steady
        return self.minibatches / (self.minibatches / steady + startup)


@dataclass(frozen=True)
class TierRead:
    """Reading one disk tier back (:mod:`plumbkit.planning.disk_tier`), measured before the fact
    in its directory (:mod:`plumbkit.tfdata.disk_probe`, page cache evicted)."""

    cpu_per_element: float  # CPU seconds per element read back
    bytes_per_element: float  # the cached operator's elements
    read_bandwidth: float  # bytes/s the directory reads
    #: of ``cpu_per_element``, what the thread pulling from the tier spends (the shards are read
    #: on the reader's own threads); None: all of it, as before it was measured apart
    thread_cpu_per_element: float | None = None
    #: CPU seconds per element a fill spends writing the tier (on the save's own threads); 0: not measured
    write_cpu_per_element: float = 0.0

    def thread_cost(self) -> float:
        """CPU per element on the pulling thread's own time."""
        share = self.thread_cpu_per_element
        return self.cpu_per_element if share is None else min(share, self.cpu_per_element)

    def limit(self, visits: float) -> float:
        """Minibatches/s the directory reads at ``visits`` elements per minibatch."""
        per_batch = self.bytes_per_element * visits
        return self.read_bandwidth / per_batch if per_batch > 0 else math.inf


class Traced(Protocol):
    """What planning reads: the pipeline model and its analysis (a :class:`plumbkit.Trace`)."""

    pipeline: Pipeline
    analysis: Analysis


def demand(analysis: Analysis, o: OpStats, *, max_threads: float | None = None) -> Demand | None:
    """What operator ``o`` of ``analysis`` needs per minibatch (None: idle, or costs nothing
    measurable): the resource LP's input for it.

    CPU ``V_i c_i`` as spent in the pipeline (:func:`cpu_per_minibatch`, which applies the
    in-pipeline scale); a latency-bound operator also waits ``V_i l_i`` per minibatch per call in
    flight; up to :data:`MAX_CONCURRENCY` calls (1 for a sequential operator).
    """
    if o.injected or not o.visit_ratio:
        return None
    cpu = cpu_per_minibatch(analysis, o)
    if cpu is None:
        return None
    latency = o.visit_ratio * o.latency_per_element if o.bound == "latency" and o.latency_per_element else 0.0
    if cpu <= 0 and latency <= 0:
        return None
    cap = max_threads if max_threads is not None else (1.0 if o.sequential else float(MAX_CONCURRENCY))
    python = None
    if o.holds_gil and o.python_per_element is not None and o.cpu_per_element:
        if o.python_from == GIL_QUEUED:  # a wall-clock ceiling measured alone: not a CPU to scale
            python = o.visit_ratio * o.python_per_element
        else:
            python = cpu * min(1.0, o.python_per_element / o.cpu_per_element)  # scaled as its CPU is
    return Demand(o.name, cpu=cpu, latency=latency, gil=o.holds_gil, max_threads=cap, python=python)


def demands(analysis: Analysis, *, skip: Iterable[str] = frozenset(),
            max_threads: Mapping[str, float] | None = None) -> list[Demand]:
    """Every costly operator's :class:`Demand` (``max_threads`` overrides an operator's cap)."""
    out = []
    for o in analysis.ops:
        if o.name in skip:
            continue
        d = demand(analysis, o, max_threads=(max_threads or {}).get(o.name))
        if d is not None:
            out.append(d)
    return out


def parallelism_caps(pipeline: Pipeline) -> dict[str, float]:
    """Most cores TensorFlow lets each capped operator use (an interleave: its cycle length)."""
    return {op.name: float(op.max_parallelism) for op in pipeline if op.max_parallelism is not None}


@dataclass(frozen=True)
class Evidence:
    """Everything a prediction may use: measured on the user's pipeline before any rewrite."""

    pipeline: Pipeline
    cost: Mapping[str, float]  # operator -> CPU seconds per minibatch (1 / R_i); absent: unknown
    visits: Mapping[str, float]  # operator -> V_i
    sequential: frozenset[str]  # operators with no parallel form
    cores: float  # cores the plan may run on (threads are counted for these)
    runtime: RuntimeCosts = field(default_factory=RuntimeCosts)
    disk: float | None = None  # minibatches/s the disk allows while a reader runs
    ceilings: Mapping[str, float] = field(default_factory=dict)  # other measured ceilings, always binding
    cost_source: str = "trace"  # "trace", or "calibrated" when ``costs`` were given
    threads_seen: Mapping[str, int] = field(default_factory=dict)  # parallelism that ran (traced)
    injected_prefetch: bool = False  # tf.data added a prefetch at the root when it ran
    #: operator -> CPU seconds per minibatch in its parallel form (calibrated with calls in
    #: flight, same scale as ``cost``), for operators that ran one call at a time
    parallel_cost: Mapping[str, float] = field(default_factory=dict)
    #: every costly operator's CPU, wait and GIL per minibatch (the resource LP's input), and the
    #: Python consumer's own seconds per minibatch (it holds the GIL too)
    demands: tuple[Demand, ...] = ()
    consumer_gil: float = 0.0
    #: operator -> what reading a disk tier of its output back costs (measured; a layout's
    #: ``on_disk`` operators are charged these instead of a memory cache's read)
    tiers: Mapping[str, TierRead] = field(default_factory=dict)
    #: operator -> seconds per minibatch one thread is busy running it one call at a time, where
    #: that is below its CPU (its kernels also ran on other threads): what it costs the thread
    #: it runs on; its CPU is what it costs the cores
    thread_cost: Mapping[str, float] = field(default_factory=dict)
    #: cores other processes that compete with this one kept busy during the trace (of ``cores``;
    #: below NEIGHBOUR_FLOOR: none): the CPU limits count only the cores left free
    neighbours: float = 0.0
    #: seconds each epoch restart adds to the steady epoch this evidence predicts for your
    #: pipeline as traced: the measured epoch less its minibatches at that steady rate
    #: (:func:`evidence_from_trace`; None: the restart's measured start-up is charged as is)
    restart_as_traced: float | None = None

    @property
    def free_cores(self) -> float:
        """Cores the prediction's CPU limits count: ``cores`` less the neighbours'. What they took
        was measured while the trace competed with them, so it is what they take beside this
        pipeline (per session with autogroups, per thread without: see plumbkit.host.machine)."""
        return max(NEIGHBOUR_FLOOR, self.cores - self.neighbours)

    @property
    def cpu_limit_name(self) -> str:
        """The CPU limit's name: the cores it counts, and the cores found free when not all were."""
        if not self.neighbours:
            return f"CPU ({self.cores:g} cores)"
        return f"CPU ({self.free_cores:.1f} of {self.cores:g} cores free)"

    @property
    def runtime_in_costs(self) -> bool:
        """Costs read off a trace absorb the runtime's costs of the traced run: each operator's
        self time is scaled so the operators together account for the process CPU, hand-offs of
        the operators that already ran in parallel included. Calibrated costs are the operators'
        own, and every hand-off is charged on top."""
        return self.cost_source == "trace"


def evidence_from_trace(trace: Traced, *, cores: float | None = None,
                        runtime: RuntimeCosts | None = None, disk: float | None = None,
                        costs: Mapping[str, float] | None = None,
                        ceilings: Mapping[str, float] | None = None,
                        tiers: Mapping[str, TierRead] | None = None) -> Evidence:
    """The evidence in a trace of the user's pipeline, plus the measured ceilings.

    ``costs`` (operator name or label -> CPU seconds per element, e.g. from a per-operator
    calibration) replace the trace's own ``rate_per_core`` for the operators they name.
    """
    a = trace.analysis
    p = trace.pipeline
    by_label = {o.label: o.name for o in a.ops}
    calibrated = {by_label.get(k, k): v for k, v in (costs or {}).items()}
    cost: dict[str, float] = {}
    visits: dict[str, float] = {}
    threads: dict[str, int] = {}
    parallel: dict[str, float] = {}
    thread: dict[str, float] = {}
    for o in a.ops:
        if o.injected or o.name not in p.operators:
            continue
        if o.visit_ratio is not None:
            visits[o.name] = o.visit_ratio
        if o.name in calibrated and o.visit_ratio is not None:
            cost[o.name] = calibrated[o.name] * o.visit_ratio
        elif (cpu := cpu_per_minibatch(a, o)) is not None:  # as spent in the pipeline (in-pipeline scale)
            cost[o.name] = cpu
        if ran_parallel(o.runtime, p[o.name].op) and o.parallelism:
            threads[o.name] = int(o.parallelism)
        if (o.name in cost and o.name not in calibrated and o.parallel_cpu_per_element is not None
                and o.cpu_per_element and ran_one_call_at_a_time(o.runtime, p[o.name].op, o.parallelism)):
            parallel[o.name] = parallel_cpu_per_minibatch(a, o)
        if (o.name in cost and o.name not in calibrated and o.thread_per_element is not None and o.visit_ratio
                and not ran_parallel(o.runtime, p[o.name].op)):
            thread[o.name] = min(cost[o.name], o.thread_per_element * o.visit_ratio)
    return restarts_read_against_the_model(Evidence(
        pipeline=p, cost=cost, visits=visits,
        sequential=frozenset(op.name for op in p if not op.parallelizable), cores=float(cores or a.cores),
        runtime=runtime or RuntimeCosts(), disk=disk, ceilings=dict(ceilings or {}), cost_source="calibrated" if calibrated else "trace",
        threads_seen=threads, injected_prefetch=any(o.injected and o.kind == "prefetch" for o in a.ops),
        parallel_cost=parallel, thread_cost=thread, demands=tuple(demands(a, max_threads=parallelism_caps(p))),
        consumer_gil=a.consumer_cpu_per_batch or 0.0, tiers=dict(tiers or {}), neighbours=neighbours_within(a, cores),
    ))


def restarts_read_against_the_model(ev: Evidence) -> Evidence:
    """``ev`` with each epoch restart charged what the measured epoch of your pipeline took beyond
    the steady epoch this evidence predicts for it, where a shuffle buffer fills or drains across
    the middle of the epoch (:func:`_buffer_spans_mid_epoch`). There the start-up measured beyond
    the mid-epoch rate misleads: the operators below a buffer as long as the epoch fill it at the
    restart, the mid-epoch rate is the operators above alone, while the steady rate charges both;
    that start-up added to that steady epoch counts the lower operators' work twice (a planted
    short epoch: predicted 0.71-0.85x its measured rate so, 0.87-1.06x read this way).
    Elsewhere the measured start-up is charged as is: read against the model, the restart would
    also carry the model's own error on the whole epoch (speech, session 53: a 2.5 ms start-up read
    as 22.9 ms, because the model read its steady rate 5% fast)."""
    r = ev.runtime.restarts
    if r is None or r.epoch is None or r.minibatches <= 0 or not _buffer_spans_mid_epoch(ev, r):
        return ev
    steady = predict(replace(ev, restart_as_traced=0.0), layout_as_traced(ev)).throughput
    if not (steady > 0 and math.isfinite(steady)):
        return ev
    return replace(ev, restart_as_traced=max(0.0, r.epoch - r.minibatches / steady))


def _buffer_spans_mid_epoch(ev: Evidence, r: EpochRestarts) -> bool:
    """A shuffle that restarts holds at least :data:`MID_EPOCH_EDGE` of its epoch's elements: it
    still fills, or already drains, while the restart measurement times the mid-epoch rate."""
    for op in _restart_scope(ev, r):
        buffer, visits = op.tunables.get("buffer_size"), ev.visits.get(op.name)
        if op.kind in SHUFFLE_KINDS and isinstance(buffer, (int, float)) and visits:
            if buffer >= MID_EPOCH_EDGE * visits * r.minibatches:
                return True
    return False


def _restart_scope(ev: Evidence, r: EpochRestarts) -> list[Operator]:
    """The operators an epoch restart starts again: the one it is measured below and all under it
    (none where that operator is not in the pipeline)."""
    p = ev.pipeline
    return [p[r.below], *p.descendants(r.below)] if r.below in p.operators else []


def neighbours_within(a: Analysis, cores: float | None) -> float:
    """Cores other processes kept busy during the trace that ``cores`` of the machine's
    ``a.cores`` had to share (those the plan leaves out took their share first; below
    NEIGHBOUR_FLOOR: none)."""
    measured = a.neighbour_cores or 0.0
    within = max(0.0, measured - max(0.0, a.cores - (cores or a.cores)))
    return within if within >= NEIGHBOUR_FLOOR else 0.0


def _fused(runtime: str | None) -> bool:
    """tf.data ran the operator fused with its batch (``MapAndBatch``)."""
    return "MapAndBatch" in (runtime or "")


def ran_parallel(runtime: str, op_type: str) -> bool:
    """The operator ran in a parallel form (as written, or parallelized by tf.data)."""
    names = runtime or op_type
    return any(n.startswith(("Parallel", "MapAndBatch")) for n in names.split(",")) or op_type.startswith("Parallel")


def ran_one_call_at_a_time(runtime: str, op_type: str, parallelism: float | None) -> bool:
    """No calls of the operator overlapped: its plain form, or a ``MapAndBatch`` tf.data fused
    from a sequential map (a pool thread, one call in flight). A plan that gives it more calls
    changes its CPU per element (the speech pipeline's fused mask: 0.94 ms per minibatch with
    one call, 0.54 with three, measured side by side), so it is calibrated again in that form."""
    if not ran_parallel(runtime, op_type):
        return True
    return _fused(runtime) and (parallelism or 1) <= 1


@dataclass(frozen=True)
class Layout:
    """How a configuration of the user's operators runs (operator names of the user's graph).

    ``threads``: operators in a parallel form and their threads (absent: the plain, sequential
    form). ``cached``: operators whose output a cache inserted directly above them holds (the
    user's own ``cache()`` operators are read from the pipeline). ``prefetched``: operators with a
    prefetch inserted directly above them (the user's ``prefetch()`` operators likewise).
    """

    threads: Mapping[str, int] = field(default_factory=dict)
    cached: frozenset[str] = frozenset()
    prefetched: frozenset[str] = frozenset()
    on_disk: frozenset[str] = frozenset()  # cached operators whose cache is a disk tier


def layout_as_traced(ev: Evidence) -> Layout:
    """The user's pipeline as it ran when traced (tf.data's own parallelization included)."""
    root = ev.pipeline.root
    return Layout(threads=dict(ev.threads_seen),
                  prefetched=frozenset({root}) if ev.injected_prefetch else frozenset())


def layout_with(ev: Evidence, changes: Iterable[Change], *, autotune_threads: int | None = None,
                options_kept: bool = True) -> Layout:
    """The user's pipeline with plumbkit's ``changes`` applied (names of the user's graph).

    Operators the changes leave alone keep the form they ran in: an AUTOTUNE-valued one counts
    with the parallelism it ran at (or ``autotune_threads``), and a plain map tf.data parallelized
    as it ran counts so too, since a rewrite keeps your options (a cache's first epoch ran twice
    as fast as a layout with such maps sequential predicted it, on the demo's image pipeline).
    ``options_kept=False``: a configuration built with options of its own that turn tf.data's
    rewrites off (the naive baseline): written forms only, no prefetch injected.
    """
    p = ev.pipeline
    threads: dict[str, int] = {}
    for op in p:
        if op.in_parallel_form:
            value = op.parallelism or 1
            if value < 0:
                value = ev.threads_seen.get(op.name) or autotune_threads or int(ev.cores)
            threads[op.name] = max(1, value)
        elif options_kept and ev.threads_seen.get(op.name, 1) > 1:
            threads[op.name] = ev.threads_seen[op.name]  # parallelized by tf.data: it will be again
    cached, prefetched, on_disk = set(), set(), set()
    for c in changes:
        if c.what == "parallelism":
            threads[c.node] = int(c.value) if int(c.value) > 0 else (autotune_threads or int(ev.cores))
        elif c.what == "sequential":
            threads.pop(c.node, None)
        elif c.what == "interleave_sources":  # copies read side by side, each its own call
            threads[c.node] = int(c.value)
        elif c.what == "cache":
            cached.add(c.node)
        elif c.what == "disk_tier":  # read back from a directory: a cache with the tier's costs
            cached.add(c.node)
            on_disk.add(c.node)
        elif c.what == "prefetch" and p[c.node].kind != "prefetch":
            prefetched.add(c.node)
    if options_kept and ev.injected_prefetch and p[p.root].kind != "prefetch":
        prefetched.add(p.root)  # tf.data injects it again: the options are the user's
    return Layout(threads=threads, cached=frozenset(cached), prefetched=frozenset(prefetched),
                  on_disk=frozenset(on_disk))


def free_in_steady_state(ev: Evidence, layout: Layout) -> set[str]:
    """Operators that cost nothing once every cache is filled (below a cache, or cached)."""
    p = ev.pipeline
    free: set[str] = set()
    for name in layout.cached:
        free |= {name} | {o.name for o in p.descendants(name)}
    for op in p:
        if op.kind == "cache":
            free |= {o.name for o in p.descendants(op.name)}
    return free


@dataclass(frozen=True)
class Prediction:
    """A configuration's own predicted throughput (minibatches/s) and what limits it."""

    throughput: float
    binding: str  # the limit that sets it
    limits: dict[str, float]  # every limit considered: name -> minibatches/s
    cpu_per_batch: float  # CPU seconds per minibatch in steady state (operators + runtime)
    free: frozenset[str]  # operators that cost nothing in steady state
    cost_source: str = "trace"
    idle_per_batch: float = 0.0  # core-seconds the busy cores stay idle per minibatch at pool hand-offs


def _handoffs(ev: Evidence, now: bool, then: bool, V: float) -> float:
    """Hand-off CPU a thread boundary costs per minibatch (``now``: the layout has it; ``then``:
    the traced run had it), beyond what the traced costs already hold."""
    if not ev.runtime_in_costs:
        return ev.runtime.handoff * V if now else 0.0
    return ev.runtime.handoff * V * (int(now) - int(then))


def predict(ev: Evidence, layout: Layout, *, filling: bool = False) -> Prediction:
    """The throughput ``layout`` should reach in steady state (see the module docstring).

    ``filling``: while its caches fill instead (the first epoch, :mod:`.fill`): nothing is free,
    and each cache writes every element that passes through it instead of reading it back.
    """
    p = ev.pipeline
    rt = ev.runtime
    free = set() if filling else free_in_steady_state(ev, layout)
    top = p[p.root]
    stage_work = {"consumer thread": rt.consumer_work(p.root in layout.prefetched or top.kind == "prefetch")}
    limits: dict[str, float] = {}
    cpu = stage_work["consumer thread"]
    pools: list[tuple[float, str]] = []  # (elements per minibatch, operator) of each parallel operator

    def charge(stage: str, seconds: float, thread: float | None = None) -> None:
        """``seconds`` of CPU, ``thread`` of them (default: all) on the stage's own thread."""
        nonlocal cpu
        stage_work[stage] = stage_work.get(stage, 0.0) + (seconds if thread is None else thread)
        cpu += seconds

    traced = layout_as_traced(ev)
    handoffs = functools.partial(_handoffs, ev)
    stack: list[tuple[str, str]] = [(p.root, "consumer thread")]
    while stack:
        name, stage = stack.pop()
        op = p[name]
        V = ev.visits.get(name, 1.0)
        if name in layout.prefetched:  # its own thread fills the buffer above it
            cpu += handoffs(True, name in traced.prefetched, V)
            stage = f"prefetch thread above {op.label}"
            stage_work.setdefault(stage, 0.0)
        if name in layout.cached:  # read back from the cache above it: it and below are free
            tier = ev.tiers.get(name) if name in layout.on_disk else None
            if filling and tier is not None and tier.write_cpu_per_element > 0:
                # written by the save's threads, fed by a Python generator (tfdata/disk_tier.py,
                # _Filler): CPU against the cores, none on the stage's thread
                charge(stage, tier.write_cpu_per_element * V, thread=0.0)
            elif filling:
                charge(stage, rt.cache_write * V)
            else:  # a tier's shards are read on its reader's threads: only its pulling share on the stage
                charge(stage, _read_cost(ev, layout, name) * V, thread=tier.thread_cost() * V if tier else None)
            if tier is not None and not filling:
                limits[f"{TIER_READ} at {op.label}"] = tier.limit(V)
            if not filling:
                continue
        if name in free:
            continue
        if op.kind == "cache":  # the user's own cache: a read per element in steady state
            charge(stage, rt.cache_write * V if filling else rt.cache_read * V)
            if not filling:
                continue
        w = 0.0 if in_the_consumers_ceiling(ev, op) else ev.cost.get(name, 0.0)
        child_stage = stage
        if op.kind == "prefetch":
            cpu += handoffs(True, True, V)
            child_stage = f"prefetch thread of {op.label}"
        elif name in layout.threads:
            k = layout.threads[name]
            pools.append((V, name))
            if k > 1 and name in ev.parallel_cost:  # it ran one call at a time: calibrated with calls in
                w = ev.parallel_cost[name]  # flight, its hand-offs included (measured in its parallel form)
                cpu += w
            else:
                cpu += w + handoffs(True, name in traced.threads, V)
            if w > 0:
                limits[f"{op.label} ({k} thread{'s' if k != 1 else ''})"] = min(k, ev.free_cores) / w
            child_stage = f"runner thread of {op.label}"
        else:
            charge(stage, w, ev.thread_cost.get(name))
            cpu += handoffs(False, name in traced.threads, V)  # a pool the traced run had, gone
        for child in reversed(op.inputs):
            stack.append((child, child_stage))
    busiest = max((v for v, _ in pools), default=0.0)
    idle = busiest * rt.idle_per_element(name for v, name in pools if v == busiest)
    return _bound(ev, layout, free, limits, stage_work, cpu, filling=filling, idle=idle)


def _bound(ev: Evidence, layout: Layout, free: set[str], limits: dict[str, float], stage_work: dict[str, float],
           cpu: float, *, filling: bool, idle: float = 0.0) -> Prediction:
    """The walk's per-operator limits joined by every shared one (each stage's thread, the free
    cores over the CPU per minibatch and the idle its pools' hand-offs leave, the disk, the
    ceilings, waiting calls), the least of them binding, then stretched by the epoch's restarts
    where a short epoch repeats."""
    for stage, work in stage_work.items():
        if work > 0:
            limits[stage] = 1.0 / work
    if cpu > 0:
        limits[ev.cpu_limit_name] = ev.free_cores / (cpu + idle)
    if ev.disk and any(op.reads_files and op.name not in free and (filling or op.name not in layout.cached)
                       for op in ev.pipeline):
        limits[DISK] = ev.disk  # while a reader runs (filling: a cached one too)
    limits.update({k: v for k, v in ev.ceilings.items() if v is not None and math.isfinite(v)})
    if (waiting := waiting_limit(ev, layout, free, filling=filling)) is not None:
        limits[waiting[0]] = waiting[1]
    if not limits:
        return Prediction(math.inf, "nothing measured", {}, cpu, frozenset(free), ev.cost_source)
    binding = min(limits, key=limits.get)
    if not filling and (startup := restart_seconds(ev, layout, free)) > 0:  # a short epoch repeated
        r = ev.runtime.restarts
        rate = r.stretched(limits[binding], startup)
        binding = (f"epoch restarts ({rate / r.minibatches:.1f} per s, {startup * 1e3:.1f} ms each) "
                   f"on {binding}")
        limits[binding] = rate
    return Prediction(limits[binding], binding, limits, cpu, frozenset(free), ev.cost_source, idle_per_batch=idle)


def in_the_consumers_ceiling(ev: Evidence, op: Operator) -> bool:
    """Whether ``op``'s pass-through is already in the consumer's measured ceiling, whose pipeline
    (:func:`plumbkit.tfdata.run.replayed`) ends in one repeat passing one element per minibatch: a repeat so
    (its restarts are :class:`EpochRestarts`'). The trace's figure for it is mostly the tracer's
    bookkeeping around its input's call: 4 µs a minibatch behind a cache of small minibatches,
    where the ceiling's whole pull read 45-49, so charging it too made such plans 7-12% slower
    than they measured."""
    return (op.kind == "repeat" and ev.visits.get(op.name, 1.0) < 1.5  # counted under a prefetch: 1.0003
            and bool(ev.runtime.consumer or ev.runtime.consumer_plain))


def restart_seconds(ev: Evidence, layout: Layout, free: Iterable[str]) -> float:
    """Seconds each epoch restart costs ``layout``: what a restart adds to the user's epoch as
    traced (:attr:`Evidence.restart_as_traced`), scaled by the CPU per minibatch of what restarts
    and still runs in ``layout`` over what did in the user's pipeline as traced (the first
    elements' work through the depth; a cache the layout adds below makes what is under it free,
    and its start-up with it). 0: no restarts measured."""
    r = ev.runtime.restarts
    scope = {o.name for o in _restart_scope(ev, r)} if r is not None else set()
    if not scope:
        return 0.0
    startup = r.startup if ev.restart_as_traced is None else ev.restart_as_traced
    if startup <= 0:
        return 0.0
    as_traced = free_in_steady_state(ev, layout_as_traced(ev))
    traced = sum(ev.cost.get(n, 0.0) for n in scope - as_traced)
    runs = sum(ev.cost.get(n, 0.0) for n in scope - set(free) - set(layout.cached))
    return startup * min(1.0, runs / traced) if traced > 0 else startup


def waiting_limit(ev: Evidence, layout: Layout, free: Iterable[str], *,
                  filling: bool = False) -> tuple[str, float] | None:
    """The resource LP at ``layout``'s own concurrency, where an operator waits or runs Python.

    Each operator gets the calls in flight the layout gives it (its threads; one for a sequential
    one) and no more, and all Python shares one core: what the thread and CPU limits of
    :func:`predict` do not see. Named by what binds in it. None: nothing waits or holds the GIL.
    """
    p = ev.pipeline
    free = set(free) if filling else set(free) | set(layout.cached)
    needs = [d for d in ev.demands if d.name not in free and d.name in p.operators]
    if not any(d.latency > 0 or d.gil for d in needs):
        return None
    capped = [replace(d, max_threads=_calls_in_flight(ev, layout, d)) for d in needs]
    lp = solve_resource_lp(capped, cores=ev.free_cores, consumer_gil=ev.consumer_gil)
    if lp.binding == GIL:
        name = GIL
    elif lp.binding in p.operators:
        calls = next(d.max_threads for d in capped if d.name == lp.binding)
        name = f"{p[lp.binding].label} ({calls:g} call{'s' if calls != 1 else ''} in flight)"
    else:
        name = f"{ev.cpu_limit_name} with waiting operators' calls in flight"
    return name, lp.throughput


def _calls_in_flight(ev: Evidence, layout: Layout, d: Demand) -> float:
    """Calls ``layout`` lets an operator have in flight: its threads, one in its plain form."""
    op = ev.pipeline[d.name]
    if d.name in layout.threads:  # its threads, or the copies of it an option reads side by side
        calls = float(layout.threads[d.name])
    elif op.parallelizable:
        calls = 1.0
    else:
        return d.max_threads
    return min(calls, float(op.max_parallelism)) if op.max_parallelism is not None else calls


def best_allocation(ev: Evidence, layout: Layout, *, tunable: Iterable[str] | None = None,
                    charge_runtime: bool = True, hedge: Mapping[str, float] | None = None) -> LPSolution:
    """The best CPU allocation with ``layout``'s caches (Plumber §4.3): its cores per operator set a
    plan's threads; its throughput is an input of the decisions, not the prediction.

    Operators below a cache drop out; with ``charge_runtime`` the CPU no operator accounts for
    is charged as measured: the consumer (a sequential pseudo-operator at its measured ceiling),
    the hand-offs of the operators that would run in parallel (``tunable``, default every
    parallelizable one) and the cache reads. The disk binds while a reader runs.
    """
    p = ev.pipeline
    free = free_in_steady_state(ev, layout)
    rates: dict[str, float] = {}
    sequential = set(ev.sequential)
    for name, w in ev.cost.items():
        if name in free or name not in p.operators or p[name].kind in ("cache", "prefetch"):
            continue
        if charge_runtime and in_the_consumers_ceiling(ev, p[name]):  # charged as the consumer's
            continue
        rates[name] = math.inf if w <= 0 else 1.0 / w
    rt = ev.runtime
    if charge_runtime:
        if rt.best_consumer:
            rates[CONSUMER] = rt.best_consumer
            sequential.add(CONSUMER)
        movers = set(tunable) if tunable is not None else {n for n in rates if n in p.operators
                                                           and p[n].parallelizable}
        if ev.runtime_in_costs:  # the traced run's own hand-offs are in its costs already
            movers -= set(ev.threads_seen)
        handoff = rt.handoff * (sum(ev.visits.get(n, 1.0) for n in movers if n not in free)
                                + (0.0 if ev.runtime_in_costs and ev.injected_prefetch else 1.0))
        if handoff > 0:
            rates[HANDOFFS] = 1.0 / handoff
        reads = sum(ev.visits.get(n, 1.0) * _read_cost(ev, layout, n) for n in layout.cached) + sum(
            ev.visits.get(op.name, 1.0) * rt.cache_read for op in p if op.kind == "cache" and op.name not in free)
        if reads > 0:
            rates[CACHE_READS] = 1.0 / reads
    bounds: dict[str, float] = dict(ev.ceilings)
    if rt.best_consumer and not charge_runtime:
        bounds[CONSUMER] = rt.best_consumer
    if ev.disk and any(op.reads_files and op.name not in free for op in p):
        bounds[DISK] = ev.disk
    floors = dict(hedge) if hedge else None
    if floors:
        floors = {k: v for k, v in floors.items() if k in rates}
        if sum(floors.values()) > ev.cores:
            floors = None
    caps = {op.name: float(op.max_parallelism) for op in p if op.max_parallelism is not None and op.name in rates}
    # threads are set for every core the plan may run on, not only the free ones: a thread
    # more than the free cores costs little, and the scheduler shares cores out per thread
    return solve_cpu_lp(rates, cores=ev.cores, sequential=sequential, extra_bounds=bounds, min_theta=floors,
                        max_theta=caps)  # an interleave uses at most its cycle length


def _read_cost(ev: Evidence, layout: Layout, name: str) -> float:
    """CPU seconds per element read back from the cache above ``name``: a disk tier's, measured,
    or a memory cache's."""
    tier = ev.tiers.get(name) if name in layout.on_disk else None
    return tier.cpu_per_element if tier is not None else ev.runtime.cache_read


#: The training step's own rate on ideal input (measured, ``optimize(..., model=/step=)``): a
#: limit of a training prediction only.
TRAINING_STEP = "the training step on ideal input (measured)"


def predict_training(ev: Evidence, layout: Layout, step: ModelDemand) -> Prediction:
    """Training steps/s of ``layout`` before the fact: the pipeline's own prediction with the
    training step's CPU per step (``step.cpu_per_step``, process CPU measured on ideal input)
    charged as one more consumer of the cores the CPU limit counts, beside the step's own rate on
    ideal input: ``min(ideal steps/s, free cores / (pipeline CPU + step CPU per minibatch), every
    other limit of the pipeline)``. On one machine the model and the pipeline share the cores: a
    pipeline predicted at 3x the model's rate may still slow it. Every other limit (threads, the
    disk, the waiting operators' LP) is the pipeline's as predicted; the step's CPU holds the
    consumer's own ``next()`` on ideal input, which the pipeline's CPU counts too (tens of us).
    """
    p = predict(ev, layout)
    limits = {k: v for k, v in p.limits.items() if k != ev.cpu_limit_name}
    cpu = p.cpu_per_batch + step.cpu_per_step
    if cpu > 0:
        limits[f"{ev.cpu_limit_name}, the training step's CPU charged"] = ev.free_cores / (cpu + p.idle_per_batch)
    if step.ideal_steps_per_s > 0:
        limits[TRAINING_STEP] = step.ideal_steps_per_s
    binding = min(limits, key=limits.get)
    return Prediction(limits[binding], binding, limits, cpu, p.free, p.cost_source, idle_per_batch=p.idle_per_batch)


def prediction_error(predicted: float, measured: float) -> float:
    """|predicted - measured| / measured."""
    return abs(predicted - measured) / max(measured, 1e-12)
