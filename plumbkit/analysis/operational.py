"""Trace -> analysis: operational analysis of a traced pipeline (Plumber §4.4, Appendix A).

From the runtime counters over a steady-state window this derives, per user operator: visit
ratio ``V_i``, CPU core-seconds ``U_i``, resource-accounted rate ``R_i = (C_i / U_i) / V_i``,
CPU share and utilization, bytes per element, cardinality and materialized size, and whether
the operator may be cached. ``U_i`` is the operator's CPU per element *calibrated alone*
(:mod:`plumbkit.analysis.costs`) times the elements it produced in the pipeline; without a
calibration (a live trace still running) it falls back to the traced wall self time, scaled so
the operators' sum matches the process CPU, and says so. Pure Python: it reads
:mod:`plumbkit.model` records only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from ..model.costs import Calibration
from ..model.pipeline import FILE_SOURCE_KINDS, Operator, Pipeline, family
from ..model.samples import NodeSample, RawTrace, Snapshot
from ..tunables import STRING_HEADER_BYTES
from .costs import CALIBRATED, capacity, operator_cost
from .runtime_map import RuntimeMap, map_runtime

#: Bytes of framing per record that a reader consumes but does not produce.
RECORD_FRAMING_BYTES = {"tfrecord": 16, "text_line": 1, "fixed_length_record": 0}
#: Operators below this share of the process CPU are not named as the bottleneck.
MIN_BOTTLENECK_SHARE = 0.02


@dataclass(frozen=True)
class OpStats:
    """One operator's measured and derived numbers (None where it cannot be known)."""

    name: str
    label: str
    kind: str
    parallelism: int | None  # what really ran (after tf.data's rewrites and autotuning)
    sequential: bool  # cannot run on more than one core
    visit_ratio: float | None  # V_i: elements of this operator per minibatch
    rate_per_core: float | None  # R_i: minibatches per second per core (inf = costs nothing)
    cpu_share: float  # share of the process CPU spent in this operator
    utilization: float | None  # cores busy here / cores it may use
    cpu_seconds: float  # U_i, calibrated
    elements: int  # C_i over the window
    elements_per_second: float
    bytes_per_element: float | None
    cardinality: float | None  # elements in one pass (inf when infinite, None unknown)
    materialized_bytes: float | None  # size if cached here (None when infinite or random)
    cacheable: bool
    cache_note: str  # why (not) cacheable
    random: bool  # this operator or one below draws random numbers
    buffer_fill: float | None  # buffered elements / buffer size for async operators
    runtime: str  # runtime node name(s), e.g. "ParallelMapV2", "MapAndBatch"
    note: str = ""  # e.g. "fused with batch(32) into MapAndBatch by tf.data"
    injected: bool = False  # added by tf.data, not in the user's code
    #: cacheable were the variables and tables read below it frozen (what an option offers)
    cacheable_if_state_frozen: bool = False
    # The three facts (see plumbkit.analysis.costs) and where each figure comes from.
    cpu_per_element: float | None = None  # c_i, CPU seconds per element
    cpu_from: str = ""  # "calibrated alone" or "trace wall time, scaled"
    latency_per_element: float | None = None  # l_i, wall seconds per element, one call at a time
    latency_from: str = ""
    wall_per_element: float | None = None  # traced self time per element, in the pipeline
    bound: str | None = None  # "cpu" or "latency"
    holds_gil: bool = False  # runs Python: shares one core with every other GIL holder
    python_per_element: float | None = None  # seconds per element holding the GIL (GIL holders)
    python_from: str = ""
    #: CPU seconds per element in its parallel form with ``parallel_calls`` calls in flight,
    #: calibrated alone (an operator that ran one call at a time; None: not measured)
    parallel_cpu_per_element: float | None = None
    parallel_calls: int = 0
    #: its CPU was calibrated inside the MapAndBatch tf.data fused it into, as the pipeline
    #: runs it: charged as measured, not scaled (see :func:`in_pipeline_scale`)
    calibrated_fused: bool = False
    #: seconds one thread is busy per element run one call at a time, calibrated alone (its
    #: kernels may use other threads too: the CPU clock reads more); None: not so calibrated
    thread_per_element: float | None = None

    @property
    def capacity(self) -> float:
        """Throughput this operator sustains with its current parallelism, ignoring how many
        cores the machine has (see :func:`current_capacity` for the machine's)."""
        if self.rate_per_core is None:
            return math.inf
        if self.cpu_per_element is None:
            return self.rate_per_core * (self.parallelism or 1)
        unlimited = 1 << 30
        return capacity(visit_ratio=self.visit_ratio, cpu=self.cpu_per_element, latency=self.latency_per_element,
                        bound=self.bound, holds_gil=self.holds_gil, python=self.python_per_element,
                        parallelism=self.parallelism,
                        sequential=self.sequential, cores=unlimited, threadpool=unlimited)


@dataclass
class Analysis:
    """Everything derived from one trace; the fields a :class:`~plumbkit.Trace` exposes."""

    throughput: float
    window: tuple[float, float]
    ops: list[OpStats]
    cpu_seconds: float
    attributed_cpu_seconds: float
    unattributed_share: float
    cores: int
    source_bytes: int | None = None
    source_files: int = 0
    source_exact: bool = True
    files_opened: int = 0
    bytes_read: int = 0
    records_read: int = 0
    max_rss: int = 0
    runtime_map: RuntimeMap = field(default_factory=RuntimeMap)
    calibrated: bool = False  # CPU per operator measured alone (else: traced wall time, scaled)
    consumer_cpu_per_batch: float | None = None  # the Python consumer's own next(), holds the GIL
    threadpool: int = 0  # tf.data's thread pool for parallel calls (0: one thread per core)
    over_attributed_share: float = 0.0  # calibrated CPU above the process CPU (noise, or cheaper in the pipeline)
    neighbour_cores: float | None = None  # cores competing processes kept busy over the window (None: unknown)

    @property
    def minibatches(self) -> float:
        """Minibatches the root produced over the window (what CPU over the window is per)."""
        return self.throughput * (self.window[1] - self.window[0])

    @property
    def cpu_per_batch(self) -> float | None:
        """Process CPU seconds per minibatch over the window: everything the process spent,
        the figure the in-pipeline scale and the prediction start from (None: nothing ran)."""
        return self.cpu_seconds / self.minibatches if self.minibatches > 0 else None


#: Fewer snapshots than this after warm-up: measure from the start (zero counters) instead.
MIN_WINDOW_SNAPSHOTS = 4


def steady_window(snaps: list[Snapshot], warmup_seconds: float = 0.0) -> tuple[int, int]:
    """Indices (start, end) of the measurement window: skip warm-up (the first quarter, <= 1 s).

    ``start == -1`` means "from the beginning": too short a run to afford skipping warm-up.
    """
    if not snaps:
        return -1, -1
    end = len(snaps) - 1
    t_start = warmup_seconds + min(1.0, 0.25 * (snaps[end].t - warmup_seconds))
    for i, s in enumerate(snaps):
        if s.t >= t_start and s.batches > 0 and end - i >= MIN_WINDOW_SNAPSHOTS:
            return i, end
    if warmup_seconds > 0:  # never measure the warm-up (e.g. a cache filling)
        return next((i for i, s in enumerate(snaps) if s.t >= warmup_seconds and i < end), end - 1 if end else -1), end
    return -1, end


def _deltas(snaps: list[Snapshot], start: int, end: int) -> dict[int, tuple[NodeSample, NodeSample | None]]:
    """Per runtime node: (last sample seen up to ``end``, sample at ``start`` or None if newer)."""
    last: dict[int, NodeSample] = {}
    for s in snaps[max(start, 0):end + 1]:
        last.update(s.nodes)
    base = snaps[start].nodes if start >= 0 else {}
    return {i: (n, base.get(i)) for i, n in last.items()}


def _d(pair: tuple[NodeSample, NodeSample | None], attr: str) -> int:
    now, then = pair
    return getattr(now, attr) - (getattr(then, attr) if then is not None else 0)


@dataclass(frozen=True)
class _Window:
    """The steady-state window of a trace: its snapshots at either end, and what ran between."""

    first: Snapshot
    last: Snapshot
    deltas: dict[int, tuple[NodeSample, NodeSample | None]]  # per runtime node, see _deltas
    seconds: float  # T
    cpu_seconds: float  # the process CPU over the window
    minibatches: int  # C_0: elements the root produced

    @property
    def throughput(self) -> float:
        """X_0 = C_0 / T, minibatches/s."""
        return self.minibatches / self.seconds


@dataclass(frozen=True)
class _Attributed:
    """Per user operator over the window: traced self time (unsampled epochs restored), the
    runtime node that stands for it, elements counted and produced, its visit ratio; and the
    factor that turns traced wall time into CPU (the process CPU over all traced time, <= 1)."""

    wall: dict[str, float]
    own: dict[str, NodeSample]
    elements: dict[str, float]
    produced: dict[str, float]
    visits: dict[str, float]
    scale: float


@dataclass(frozen=True)
class _Evidence:
    """All one trace says, gathered before each operator's figures are derived from it."""

    pipeline: Pipeline
    rmap: RuntimeMap
    window: _Window
    attributed: _Attributed
    cardinalities: dict[str, float | None]
    random_below: dict[str, bool]
    writes_below: dict[str, bool]
    reads_below: dict[str, bool]
    cores: int
    calibration: Calibration | None


def analyze(pipeline: Pipeline, raw: RawTrace, *, cardinalities: Mapping[str, int] | None = None,
            file_sizes: Mapping[str, int] | None = None, source_exact: bool = True,
            calibration: Calibration | None = None) -> Analysis:
    """Operational analysis of ``raw`` for ``pipeline`` (see the module docstring)."""
    snaps = raw.snapshots
    cardinalities = cardinalities or {}
    if len(snaps) < 1 or snaps[-1].batches == 0:
        ops = [_empty_stats(pipeline, op.name) for op in pipeline]
        return Analysis(throughput=0.0, window=(0.0, 0.0), ops=ops, cpu_seconds=0.0,
                        attributed_cpu_seconds=0.0, unattributed_share=0.0, cores=raw.cores)
    rmap = _runtime_map(pipeline, raw)
    window = _window(snaps, raw.warmup_seconds, rmap)
    attributed = _attribute(pipeline, rmap, window)
    reader = _reader_totals(pipeline, rmap, snaps)
    card = _cardinalities(pipeline, cardinalities, attributed.elements, file_sizes or {}, reader)
    evidence = _Evidence(pipeline, rmap, window, attributed, card, _random_below(pipeline),
                         _below(pipeline, lambda op: op.writes_state), _below(pipeline, lambda op: op.reads_state),
                         raw.cores, calibration)
    threadpool = int(pipeline.options.get("threadpool") or 0) or raw.cores
    ops = [_op_stats(op, evidence) for op in pipeline]
    _insert_injected(ops, evidence)
    cpu_total = window.cpu_seconds
    attributed_cpu = sum(o.cpu_seconds for o in ops)
    unattributed = max(0.0, cpu_total - attributed_cpu) / cpu_total if cpu_total > 0 else 0.0
    over = max(0.0, attributed_cpu - cpu_total) / cpu_total if cpu_total > 0 else 0.0
    files = {f for op in pipeline for f in op.files}
    sizes = file_sizes or {}
    source_bytes = sum(sizes.get(f, 0) for f in files) if files else None
    return Analysis(
        throughput=window.throughput, window=(window.first.t, window.last.t), ops=ops, cpu_seconds=cpu_total,
        attributed_cpu_seconds=attributed_cpu, unattributed_share=unattributed, cores=raw.cores,
        source_bytes=source_bytes, source_files=len(files), source_exact=source_exact,
        files_opened=_files_opened(pipeline, rmap, snaps), bytes_read=reader["bytes"] + reader["framing"],
        records_read=reader["records"], max_rss=max(s.rss for s in snaps), runtime_map=rmap,
        calibrated=calibration is not None and any(o.cpu_from.startswith(CALIBRATED) for o in ops),
        consumer_cpu_per_batch=calibration.consumer_cpu_per_batch if calibration is not None else None,
        threadpool=threadpool, over_attributed_share=over, neighbour_cores=_neighbour_cores(window),
    )


def _neighbour_cores(window: _Window) -> float | None:
    """Cores other competing processes kept busy over the window (their CPU over its wall time)."""
    if window.first.others is None or window.last.others is None:
        return None
    return max(0.0, window.last.others - window.first.others) / window.seconds


def _runtime_map(pipeline: Pipeline, raw: RawTrace) -> RuntimeMap:
    """Every runtime node any snapshot saw, mapped to the user's operators."""
    rmap = RuntimeMap()
    seen: set[int] = set()
    for s in raw.snapshots:
        if not set(s.nodes) <= seen:
            map_runtime(pipeline, s.nodes, into=rmap, epochs_repeated=raw.epochs_repeated)
            seen |= set(s.nodes)
    return rmap


def _window(snaps: list[Snapshot], warmup_seconds: float, rmap: RuntimeMap) -> _Window:
    """The steady-state window (:func:`steady_window`) and the root's minibatches in it."""
    start, end = steady_window(snaps, warmup_seconds)
    deltas = _deltas(snaps, start, end)
    last = snaps[end]
    first = snaps[start] if start >= 0 else Snapshot(t=0.0, cpu=0.0, rss=0, nodes={}, others=0.0)
    root_id = next(i for i, r in rmap.role.items() if r == "root")
    minibatches = _d(deltas[root_id], "elements") if root_id in deltas else last.batches
    return _Window(first, last, deltas, max(last.t - first.t, 1e-9), last.cpu - first.cpu, minibatches)


def _attribute(pipeline: Pipeline, rmap: RuntimeMap, window: _Window) -> _Attributed:
    """Raw (uncalibrated) self time, elements and visit ratios per user operator."""
    wall: dict[str, float] = {op.name: 0.0 for op in pipeline}
    own: dict[str, NodeSample] = {}
    wall_unowned = 0.0
    for rid, pair in window.deltas.items():
        role, owner = rmap.role.get(rid), rmap.owner.get(rid)
        ns = _d(pair, "processing_ns") / 1e9
        if role in (None, "root", "injected", "epochs"):
            wall_unowned += ns
            continue
        wall[owner] = wall.get(owner, 0.0) + ns
        if role in ("op", "fused") and (owner not in own or own[owner].id < rid):
            own[owner] = pair[0]  # the newest runtime node stands for the operator
    elements = _elements(pipeline, rmap, window.deltas, own)
    C0 = window.minibatches
    visits = _visit_ratios(pipeline, rmap, own, _pass_through(pipeline, rmap, elements), C0)
    under_caches = frozenset(d.name for op in pipeline if op.kind == "cache" for d in pipeline.descendants(op.name))
    wall, produced = _unsampled_epochs_restored(wall, elements, visits, C0, under_caches)
    wall_total = sum(wall.values()) + wall_unowned
    scale = min(1.0, window.cpu_seconds / wall_total) if wall_total > 0 else 1.0
    return _Attributed(wall, own, elements, produced, visits, scale)


def _op_stats(op: Operator, ev: _Evidence) -> OpStats:
    """One user operator's figures over the window: its calibrated CPU where there is one."""
    a, rmap, T, cpu_total = ev.attributed, ev.rmap, ev.window.seconds, ev.window.cpu_seconds
    C = a.produced.get(op.name)
    U = a.wall.get(op.name, 0.0) * a.scale
    V = a.visits.get(op.name)
    cost = operator_cost(op.name, op.label, holds_gil=op.holds_gil, calibration=ev.calibration,
                         traced_cpu=U / C if C else None,
                         traced_wall=a.wall.get(op.name, 0.0) / C if C else None)
    fused_into = rmap.fused.get(op.name)
    idle = not C and op.name in rmap.below_filled_cache  # e.g. under a filled cache
    runtime = rmap.runtime_name.get(op.name, "—" if op.name in rmap.eliminated else "")
    sample = a.own.get(op.name)
    parallelism = _parallelism(op, sample)
    if cost.cpu_from.startswith(CALIBRATED) and C:
        U = cost.cpu * C  # CPU measured alone, times the elements it produced here
    elif fused_into and op.kind != "map" and sample is None:
        U = 0.0  # the fused node's work is the map's
    rate = None
    if C and V:
        rate = math.inf if U <= 0 else (C / U) / V
    bpe = _bytes_per_element(op, ev.pipeline, rmap, ev.window.deltas)
    if bpe is None:  # not sampled (a trace shorter than its first epoch's nodes lived): as declared
        bpe = op.static_bytes
    n = ev.cardinalities.get(op.name)
    materialized = None
    if n is not None and math.isfinite(n) and bpe is not None and not ev.random_below[op.name]:
        materialized = n * bpe
    cacheable, cache_note = _cacheability(op.name, ev.pipeline, ev, materialized)
    frozen = cacheable or _cacheability(op.name, ev.pipeline, ev, materialized, state_frozen=True)[0]
    theta = min(parallelism or 1, ev.cores)
    return OpStats(
        name=op.name, label=op.label, kind=op.kind, parallelism=parallelism,
        sequential=not op.parallelizable, visit_ratio=V, rate_per_core=rate,
        cpu_share=U / cpu_total if cpu_total > 0 else 0.0,
        utilization=U / (T * theta) if C else None, cpu_seconds=U, elements=int(C or 0),
        # X_i = V_i X_0 (sampling misses the short-lived nodes under a fast repeat)
        elements_per_second=V * ev.window.throughput if V is not None and not idle else (C or 0) / T,
        bytes_per_element=bpe, cardinality=n,
        materialized_bytes=materialized, cacheable=cacheable, cache_note=cache_note,
        cacheable_if_state_frozen=frozen, random=ev.random_below[op.name], buffer_fill=_buffer_fill(sample), runtime=runtime,
        note=_op_note(op, ev, C, sample, runtime), cpu_per_element=(U / C if C else cost.cpu),
        cpu_from=cost.cpu_from if C else "",
        latency_per_element=cost.latency, latency_from=cost.latency_from,
        wall_per_element=a.wall.get(op.name, 0.0) / C if C else None,
        bound=cost.bound if C else None, holds_gil=op.holds_gil,
        python_per_element=cost.python, python_from=cost.python_from,
        parallel_cpu_per_element=cost.parallel_cpu if C else None, parallel_calls=cost.parallel_calls if C else 0,
        calibrated_fused=bool(C) and cost.fused, thread_per_element=cost.thread if C else None,
    )


def _op_note(op: Operator, ev: _Evidence, produced: float | None, sample: NodeSample | None, runtime: str) -> str:
    """What tf.data did to the operator, if anything: fused, idle under a cache, removed,
    idle, run as another kind, parallelized."""
    rmap, pipeline = ev.rmap, ev.pipeline
    fused_into = rmap.fused.get(op.name)
    if fused_into:
        partner = [o.label for o in pipeline if rmap.fused.get(o.name) == fused_into and o.name != op.name]
        return f"fused with {', '.join(partner)} into {fused_into} by tf.data"
    if not produced and op.name in rmap.below_filled_cache:
        return (f"not running: below the filled {rmap.below_filled_cache[op.name]} "
                f"(it ran while the cache filled)")
    if op.name in rmap.eliminated:
        return "removed by tf.data's static optimizations"
    if not produced and sample is None:
        return "did not run during the trace"
    if runtime and family(runtime) != family(op.op):
        return f"runs as {runtime}"
    if sample is not None and op.op.startswith(("Map", "Batch")) and runtime.startswith("Parallel"):
        return "parallelized by tf.data (map_parallelization)"
    return ""


def _insert_injected(ops: list[OpStats], ev: _Evidence) -> None:
    """The prefetches tf.data injected (inject_prefetch), each above the operator it follows."""
    for rid, above in ev.rmap.injected.items():
        pair = ev.window.deltas.get(rid)
        if pair is None:
            continue
        ops.insert(_index_of(ops, above), OpStats(
            name=f"{above}/injected_prefetch", label="prefetch (injected)", kind="prefetch",
            parallelism=None, sequential=True, visit_ratio=1.0 if above == ev.pipeline.root else None,
            rate_per_core=None, cpu_share=0.0, utilization=None, cpu_seconds=0.0,
            elements=_d(pair, "elements"), elements_per_second=_d(pair, "elements") / ev.window.seconds,
            bytes_per_element=None, cardinality=None, materialized_bytes=None, cacheable=False,
            cache_note="added by tf.data", random=False, buffer_fill=_buffer_fill(pair[0]),
            runtime=pair[0].name, note="inserted by tf.data (inject_prefetch)", injected=True,
        ))


def _reader_totals(pipeline: Pipeline, rmap: RuntimeMap, snaps: list[Snapshot]) -> dict[str, int]:
    """Records and bytes read from files over the whole run, from the operators that read them.

    Counted at the reading user operator (a reader, or the interleave that opens readers): its
    output is the records themselves, and it outlives the per-file readers that come and go
    between samples.
    """
    totals = {"records": 0, "bytes": 0, "framing": 0}
    last = _last_seen(snaps)
    for op in pipeline:
        if not op.reads_files:
            continue
        kind = op.kind if op.kind in FILE_SOURCE_KINDS else next(k for k in op.inner_kinds if k in FILE_SOURCE_KINDS)
        for rid in rmap.ids_for(op.name, ("op",)):
            if rid in last:
                totals["records"] += last[rid].elements
                totals["bytes"] += last[rid].bytes_produced - STRING_HEADER_BYTES * last[rid].elements
                totals["framing"] += last[rid].elements * RECORD_FRAMING_BYTES[kind]
    return totals


def _last_seen(snaps: list[Snapshot]) -> dict[int, NodeSample]:
    """Every runtime node's latest sample, including nodes that have since gone away."""
    last: dict[int, NodeSample] = {}
    for s in snaps:
        last.update(s.nodes)
    return last


def _index_of(ops: list[OpStats], name: str) -> int:
    return next((i for i, o in enumerate(ops) if o.name == name), 0)


def _bytes_per_element(op, pipeline: Pipeline, rmap: RuntimeMap, deltas) -> float | None:
    """b_i = bytes produced / elements; the halves of a fusion share the fused node's output."""
    fused_batch = op.name in rmap.fused and op.kind != "map" and op.inputs
    owner = op.inputs[0] if fused_batch else op.name
    ids = [i for i, o in rmap.owner.items() if o == owner and rmap.role[i] in ("op", "fused") and i in deltas]
    if not ids:
        return None
    pair = deltas[ids[-1]]
    produced = sum(_d(deltas[i], "bytes_produced") for i in ids)
    count = sum(_d(deltas[i], "elements") for i in ids)
    if not count:
        return None
    per_output = produced / count
    if rmap.role[ids[0]] == "fused" and not fused_batch:
        return per_output / (pair[0].ratio or 1.0)  # one map output is one row of the batch
    return per_output


def _empty_stats(pipeline: Pipeline, name: str) -> OpStats:
    op = pipeline[name]
    return OpStats(name=name, label=op.label, kind=op.kind, parallelism=op.parallelism,
                   sequential=not op.parallelizable, visit_ratio=None, rate_per_core=None,
                   cpu_share=0.0, utilization=None, cpu_seconds=0.0, elements=0,
                   elements_per_second=0.0, bytes_per_element=None, cardinality=None,
                   materialized_bytes=None, cacheable=False, cache_note="not measured",
                   random=op.random, buffer_fill=None, runtime="")


def _parallelism(op, sample: NodeSample | None) -> int | None:
    if sample is not None:
        for key in ("parallelism", "num_parallel_calls"):
            if key in sample.parameters:
                return int(sample.parameters[key])
    p = op.parallelism
    return None if p is None else (p if p > 0 else None)


def _buffer_fill(sample: NodeSample | None) -> float | None:
    if sample is None:
        return None
    size = sample.parameters.get("buffer_size") or sample.parameters.get("parallelism")
    if not size or size <= 0:
        return None
    return min(1.0, sample.buffered_elements / size)


#: Below this share of its expected elements an operator's self time is scaled up (see below).
_MIN_COVERAGE = 0.9


def _unsampled_epochs_restored(wall: dict[str, float], elements: Mapping[str, float], visits: Mapping[str, float],
                               C0: float, below_cache: frozenset[str] = frozenset()
                               ) -> tuple[dict[str, float], dict[str, float]]:
    """Self time of the epochs the sampler never saw.

    Below a repeat, every epoch gets fresh runtime nodes; an epoch shorter than the polling
    period lives and dies between two snapshots, and its elements and time are never seen. The
    observed epochs are a fair sample (R_i = C_i / U_i needs no correction), but the operator's
    share of the process CPU does: scale its time by the elements it must have produced,
    ``V_i C_0``, over those seen, ``C_i``. Returns (self time, elements), both restored.

    Not ``below_cache``: an operator under a cache stops for good once the cache is filled, so
    the elements it did not produce in the window were never produced (restoring them charged
    a decode that ran for the last 0.2 s of a 2 s window as if it had run all along).
    """
    out, produced = dict(wall), dict(elements)
    for name, U in wall.items():
        C, V = elements.get(name), visits.get(name)
        if not C or not V or not C0 or name in below_cache:
            continue  # (no self time of its own, e.g. a fused batch: its count is still restored)
        coverage = C / (V * C0)
        if coverage < _MIN_COVERAGE:
            coverage = max(coverage, 0.005)
            out[name], produced[name] = U / coverage, C / coverage
    return out, produced


def _elements(pipeline: Pipeline, rmap: RuntimeMap, deltas, own) -> dict[str, float]:
    """C_i over the window; a map fused into MapAndBatch produced batch_size x its batches."""
    out: dict[str, float] = {}
    for op in pipeline:
        # Below a repeat, each epoch has fresh runtime nodes: sum them.
        ids = [i for i, o in rmap.owner.items()
               if o == op.name and rmap.role[i] in ("op", "fused") and i in deltas]
        if not ids:
            continue
        produced = sum(_d(deltas[i], "elements") for i in ids)
        if rmap.role[ids[0]] == "fused":
            produced *= deltas[ids[0]][0].ratio or 1.0  # the map's elements, before batching
        out[op.name] = produced
    for op in pipeline:  # the batch half of a fusion: the fused node's own output count
        if op.name in rmap.fused and op.name not in out and op.inputs and op.inputs[0] in own:
            out[op.name] = sum(_d(deltas[i], "elements") for i, o in rmap.owner.items()
                               if o == op.inputs[0] and rmap.role[i] == "fused" and i in deltas)
    return out


def _pass_through(pipeline: Pipeline, rmap: RuntimeMap, elements: dict[str, float]) -> dict[str, float]:
    """Element counts where an operator tf.data removed takes the count of what it passed on."""
    out = dict(elements)
    for op in reversed(list(pipeline)):  # sources first
        if op.name not in out and op.name in rmap.eliminated and len(op.inputs) == 1 and op.inputs[0] in out:
            out[op.name] = out[op.inputs[0]]
    return out


def _visit_ratios(pipeline: Pipeline, rmap: RuntimeMap, own, elements, C0) -> dict[str, float]:
    """V_i top-down: tf.data's known ratios where it has them (exact), measured ratios elsewhere."""
    visits: dict[str, float] = {pipeline.root: 1.0}
    stack = [pipeline.root]
    while stack:
        name = stack.pop()
        op = pipeline[name]
        V = visits[name]
        sample = own.get(name)
        known = sample.ratio if sample is not None and rmap.role.get(sample.id) == "op" else 0.0
        if name in rmap.fused and op.kind != "map" and op.inputs:
            fused = own.get(op.inputs[0])
            known = fused.ratio if fused is not None else 0.0
        elif op.kind in ("map", "prefetch", "cache"):
            known = 1.0  # one output per input, whatever runtime node it became
        for child in op.inputs:
            C_child, C_self = elements.get(child), elements.get(name)
            if len(op.inputs) == 1 and known > 0:
                visits[child] = V * known
            elif len(op.inputs) == 1 and (name in rmap.eliminated or C_self is None):
                visits[child] = V
            elif C_child is not None and C_self:
                visits[child] = V * C_child / C_self
            elif C_child is not None and C0:
                visits[child] = C_child / C0
            else:
                continue
            stack.append(child)
    return visits


def _random_below(pipeline: Pipeline) -> dict[str, bool]:
    """True where the operator or anything it reads from draws random numbers that change from
    epoch to epoch. A cache freezes what is below it (every epoch replays the first), so above
    the user's own ``cache()`` the draws below it no longer count."""
    return _below(pipeline, lambda op: op.random)


def _below(pipeline: Pipeline, holds) -> dict[str, bool]:
    """``holds(op)`` for the operator or anything it reads from, up to the user's own caches.

    ``op.writes_state``: it changes the user's state when it runs (a variable assigned, a table
    filled): a cache above it would run it in the first epoch only. ``op.reads_state``: it reads
    state that can change (a variable, a mutable table): a cache above it would replay the first
    epoch's values. Above the user's own ``cache()`` both are already so."""
    out: dict[str, bool] = {}
    for op in reversed(list(pipeline)):  # sources first
        out[op.name] = holds(op) or (op.kind != "cache" and any(out.get(i, False) for i in op.inputs))
    return out


def _cardinalities(pipeline: Pipeline, static: Mapping[str, int], elements, file_sizes, reader) -> dict[str, float | None]:
    """Elements in one pass at every operator: TF's own count when it knows it, else estimated.

    A reader's count is its bytes on disk times records per byte read; other operators scale
    their input's count by their measured output/input ratio (Plumber Appendix A).
    """
    out: dict[str, float | None] = {}
    records_per_byte = reader["records"] / (reader["bytes"] + reader["framing"]) if reader["bytes"] else None
    for op in reversed(list(pipeline)):
        n = static.get(op.name, -2)
        if n >= 0:
            out[op.name] = float(n)
            continue
        if n == -1:
            out[op.name] = math.inf
            continue
        kids = [out.get(i) for i in op.inputs]
        if any(k is not None and math.isinf(k) for k in kids):  # a repeat() below: endless,
            out[op.name] = math.inf  # whatever the files hold (a reader over repeated file names)
            continue
        below_files = {f for o in [op, *pipeline.descendants(op.name)] for f in o.files}
        if op.reads_files and records_per_byte and below_files:
            out[op.name] = sum(file_sizes.get(f, 0) for f in below_files) * records_per_byte
            continue
        if not kids or any(k is None for k in kids):
            out[op.name] = None
            continue
        if op.kind == "concatenate":
            out[op.name] = float(sum(kids))
        elif op.kind in ("zip",):
            out[op.name] = float(min(kids))
        else:
            C, Cin = elements.get(op.name), elements.get(op.inputs[0])
            out[op.name] = kids[0] * C / Cin if C is not None and Cin else None
    return _scaled_from_the_root(pipeline, out, elements)


def _scaled_from_the_root(pipeline: Pipeline, out: dict[str, float | None], elements) -> dict[str, float | None]:
    """Where counting up from the sources finds nothing (a generator: TensorFlow cannot tell its
    length) but an operator above knows its epoch (counted:
    :func:`plumbkit.engine.restarts.with_counted_epoch`), each operator below it counts its
    consumer's count times its elements per consumer element in the trace (the ratio measured, as
    Plumber's Appendix A scales an input's count, read from the top down)."""
    consumer = {i: op.name for op in pipeline for i in op.inputs}
    for op in pipeline:  # the root first: a consumer is settled before its inputs
        up = consumer.get(op.name)
        n, here, there = out.get(up) if up else None, elements.get(op.name), elements.get(up) if up else None
        if out.get(op.name) is None and n is not None and math.isfinite(n) and here and there:
            out[op.name] = n * here / there
    return out


def _cacheability(name: str, pipeline: Pipeline, ev: _Evidence, materialized, *,
                  state_frozen: bool = False) -> tuple[bool, str]:
    """(cacheable, why). ``state_frozen``: as if the variables and tables read below never changed
    (the option :mod:`plumbkit.planning.frozen_option` offers): the reads are the last check, so
    everything else holds where only they stand in the way."""
    below = [pipeline[name], *pipeline.descendants(name)]
    if ev.random_below[name]:
        culprit = next(o.label for o in below if o.random)
        return False, f"random: {culprit} changes every epoch"
    if ev.writes_below[name]:
        culprit = next(o.label for o in below if o.writes_state)
        return False, f"writes state: {culprit} changes your variables or tables each time it runs"
    card = ev.cardinalities
    if card.get(name) is not None and math.isinf(card[name]):
        return False, "infinite: a repeat() below never ends"
    if pipeline.problems:
        return False, "pipeline cannot be rebuilt (see problems)"
    if materialized is None:
        return False, "size unknown"
    if ev.reads_below[name] and not state_frozen:
        reader = next(o.label for o in below if o.reads_state)
        return False, (f"reads state: {reader} reads your variables or tables, which may change while you "
                       f"train: a cache would replay their first epoch's values")
    return True, "deterministic and finite"


def _files_opened(pipeline: Pipeline, rmap: RuntimeMap, snaps: list[Snapshot]) -> int:
    """Files handed to readers so far: elements produced by the operators listing the files."""
    names = {op.name for op in pipeline if op.files and op.kind not in FILE_SOURCE_KINDS}
    total = 0
    last = _last_seen(snaps)
    for rid, owner in rmap.owner.items():
        if owner in names and rmap.role.get(rid) == "op" and rid in last:
            total += last[rid].elements
    return total


def idle_core_share(o: OpStats) -> float:
    """The share of operator ``o``'s one-call figure, calibrated alone, that its parallel form
    measured beside it did not spend (0: not measured, fused, or no cheaper).

    Why it is CPU spent on an idle core and not work: alone, a short one-call map leaves the
    other core idle and its pool's threads spin there; with a call in flight per core they do
    not. Inside a pipeline that keeps the cores busy the map costs what its parallel form does,
    in either form (the random flip inside its plan: 39 us per element one call at a time, 39-33
    with two; calibrated alone, 71-92 one call at a time, 48-55 with two). A map calibrated fused
    with its batch was measured as the pipeline runs it: its parallel form's gain is real there
    (the speech pipeline's mask: 0.94 ms per minibatch with one call, 0.54 with three)."""
    c, p = o.cpu_per_element, o.parallel_cpu_per_element
    if o.calibrated_fused or not c or p is None or p >= c:
        return 0.0
    return 1.0 - p / c


def in_pipeline_scale(analysis: Analysis, o: OpStats | None = None) -> float:
    """The factor that brings operator ``o``'s calibrated CPU down to what the process really
    spent while the pipeline ran, when calibrated alone the operators add up to more (``o``
    None: the factor of an operator with nothing known about it beyond its one-call figure).

    Why: an operator cut out and run alone pays for thread-pool threads spinning between its
    elements and for the calibration's own loop; inside a busy pipeline it pays less, and these
    costs do not add up (measured: two planted maps cost 1.3-1.6x alone what they cost in the
    pipeline, and the plan was predicted 45% low). Never above 1: CPU that nobody accounts for
    is not spread onto operators.

    Where an operator's parallel form was measured beside its one-call form, what its one-call
    figure spent beyond it is known to be that operator's spin (:func:`idle_core_share`): it is
    taken out of that operator alone, and the scale spreads only the rest of the surplus over
    the others. Spread uniformly, it was taken out of every operator and then, by the parallel
    form's ratio, out of that one again: plans that parallelized such a map were priced 8-27%
    low (benchmarks/results/2026-11-29-flip-in-pipeline).

    A map calibrated inside the MapAndBatch tf.data fused it into (``o.calibrated_fused``) was
    measured as the pipeline runs it, and is charged so (1.0); the others share what the process
    spent beyond it. Measured side by side (2026-11-27 NOTE): a normalizing map fused with its
    batch read 0.78 ms per minibatch so and spent 0.76 inside its pipeline (with two calls: 0.81
    and 0.80); scaled, 0.53, and a plan that gave it two calls was predicted 17% low.
    """
    scale, spin_taken = _spread_scale(analysis, o)
    return scale * (1.0 - idle_core_share(o)) if o is not None and spin_taken else scale


def _spread_scale(analysis: Analysis, o: OpStats | None) -> tuple[float, bool]:
    """The scale spread over operator ``o`` (None: any operator cut out alone), and whether each
    operator's own spin (:func:`idle_core_share`) was taken out of the surplus before it was spread
    (the one place that decides it, for both of an operator's forms)."""
    if o is not None and o.calibrated_fused:
        return 1.0, False
    if analysis.over_attributed_share <= 0:
        return 1.0, False
    spent, attributed = analysis.cpu_seconds, analysis.attributed_cpu_seconds
    fused = sum(x.cpu_seconds for x in analysis.ops if x.calibrated_fused)
    spin = sum(x.cpu_seconds * idle_core_share(x) for x in analysis.ops)
    if not (0 <= fused < spent and attributed - fused - spin > 0):
        return 1.0 / (1.0 + analysis.over_attributed_share), False
    return min(1.0, (spent - fused) / (attributed - fused - spin)), True


def cpu_per_minibatch(analysis: Analysis, o: OpStats) -> float | None:
    """Core-seconds operator ``o`` spends per root minibatch inside the pipeline, with
    :func:`in_pipeline_scale` applied (0.0: costs nothing, an infinite rate; None: unknown).

    The one place an operator's rate becomes CPU per minibatch, so the LP and the predictions
    charge the same scale-correct figure and no caller applies (or forgets) the scale by hand.
    """
    rate = o.rate_per_core
    if rate is None:
        return None
    if not (rate > 0 and math.isfinite(rate)):
        return 0.0
    return in_pipeline_scale(analysis, o) / rate


def parallel_cpu_per_minibatch(analysis: Analysis, o: OpStats) -> float | None:
    """Core-seconds per root minibatch of operator ``o``'s parallel form, from its figure measured
    beside its one-call form (None: not measured or unknown; 0.0: costs nothing).

    Its figure carries none of the one-call form's spin, so it is charged with the scale spread
    over every operator and nothing taken out of it again: where that spin was taken out of the
    one-call form (:func:`in_pipeline_scale`), both forms cost the same, as inside the random
    flip's plan. A map calibrated fused with its batch keeps its ratio (its gain is real there),
    as does a parallel form that costs more than one call at a time (contended)."""
    rate, one, parallel = o.rate_per_core, o.cpu_per_element, o.parallel_cpu_per_element
    if rate is None or parallel is None or not one:
        return None
    if not (rate > 0 and math.isfinite(rate)):
        return 0.0
    return _spread_scale(analysis, o)[0] * parallel / one / rate


def current_capacity(o: OpStats, analysis: Analysis) -> float:
    """Minibatches/s operator ``o`` sustains as configured now, on this machine's cores and
    tf.data's thread pool (see :func:`plumbkit.analysis.costs.capacity`)."""
    if o.rate_per_core is None:
        return math.inf
    if o.cpu_per_element is None or not o.visit_ratio:
        return o.rate_per_core * min(o.parallelism or 1, analysis.cores)
    return capacity(visit_ratio=o.visit_ratio, cpu=o.cpu_per_element, latency=o.latency_per_element,
                    bound=o.bound, holds_gil=o.holds_gil, python=o.python_per_element,
                    parallelism=o.parallelism, sequential=o.sequential,
                    cores=analysis.cores, threadpool=analysis.threadpool or analysis.cores)


def bottleneck(analysis: Analysis) -> OpStats | None:
    """The operator with the lowest capacity under the current configuration (operators below
    :data:`MIN_BOTTLENECK_SHARE` of the process CPU are never named, unless they wait)."""
    candidates = [o for o in analysis.ops if o.rate_per_core is not None and math.isfinite(o.rate_per_core)
                  and (o.cpu_share >= MIN_BOTTLENECK_SHARE or o.bound == "latency") and not o.injected]
    if not candidates:
        return None
    return min(candidates, key=lambda o: current_capacity(o, analysis))
