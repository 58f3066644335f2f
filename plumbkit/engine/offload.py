"""Offloading to tf.data service: decide, size and apply (``plumbkit.offload``).

Measures, in a client process pinned to the client's cores (so TensorFlow sizes its pools for
them): the consumer's ceiling (``take(1).cache().repeat()``), the local pipeline, and for
each candidate cut the remote part's CPU (alone), the client part's CPU (alone, on a cached
sample of the cut's elements), the cost of moving the cut's elements through the service, and
the pipeline served by the workers running now. The model
(:mod:`plumbkit.planning.offload`) turns the costs into predicted throughput against worker
count, picks the cut and sizes the workers; the served and local pipelines are measured again
side by side to check the prediction. Every number called *measured* was measured here; the
rest are *predicted*. Measuring uses job names of plumbkit's own, never the user's job.
"""

from __future__ import annotations

import dataclasses
import hashlib
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from ..model.offload import Distribute
from ..model.pipeline import AUTOTUNE, Operator, Pipeline
from ..planning.offload import (SPEEDUP_THRESHOLD, CutCosts, Decision, Setting, candidate_cuts, curve, decide,
                                invalid_cuts, plateau, predict, predict_local, sequential_caps, unhelpful_cuts)
from ..service.client import InProcessClient, MeasuringClient, Watch, shared_client
from ..service.cluster import ServiceCluster, reachable
from ..service.errors import ServiceError
from ..service.processes import usable_cores
from ..tfdata.graph import pipeline_of, resolve_pipeline, static_cardinalities
from ..tfdata.offload_graph import encode_spec, graph_of, python_nodes
from ..tunables import DEDICATED
from .measuring import Progress, measure
from .offload_plan import OffloadPlan, Run
from .scheduler import operation
from .trace_result import Trace
from .tracing import PipelineLike

#: Workers plumbkit predicts for, at most, in the curve it shows.
CURVE_WORKERS = 8
#: Elements of the cut cached to measure the client part alone and the cost of moving them.
SAMPLE = 16


def _quiet(_: str, __: float) -> None:
    pass


# -- measuring ------------------------------------------------------------------------------------

def _rate(result: dict[str, float]) -> float:
    return result["elements"] / max(result["wall"], 1e-12)


def _per(result: dict[str, Any], key: str) -> float:
    """``key`` per element over the whole window."""
    return result[key] / max(result["elements"], 1)


def _best_rate(result: dict[str, Any]) -> float:
    """Elements/s in the least disturbed slice of the window (a ceiling: neighbours only lower it)."""
    slices = [s for s in result.get("slices", ()) if s["elements"] > 0 and s["wall"] > 0]
    if len(slices) < 2:
        return _rate(result)
    return max(s["elements"] / s["wall"] for s in slices)


def _least(result: dict[str, Any], key: str) -> float:
    """``key`` per element in the least disturbed slice of the window (a cost: neighbours on a
    busy machine only add to it); the whole window when it had no full slice."""
    slices = [s for s in result.get("slices", ()) if s["elements"] > 0]
    if len(slices) < 2:
        return _per(result, key)
    return min(s[key] / s["elements"] for s in slices)


def _infinite_below(pipeline: Pipeline, node: str, cardinalities: dict[str, int]) -> bool:
    if cardinalities.get(node) == -1:
        return True
    below = [pipeline[node]] + pipeline.descendants(node)
    return any(o.kind == "repeat" and o.tunables.get("count", -1) == -1 for o in below)


def _job_name(graph: bytes) -> str:
    return "plumbkit-" + hashlib.sha1(graph).hexdigest()[:10]


class _Service:
    """The dispatcher plumbkit measures through: given (an address or a cluster) or its own."""

    def __init__(self, dispatcher: "str | ServiceCluster | None", client_cores: list[int] | None):
        self.own = dispatcher is None
        if dispatcher is None:
            cores = usable_cores()
            reserve = client_cores if client_cores is not None else (cores[:1] if len(cores) > 1 else None)
            self.cluster: ServiceCluster | None = ServiceCluster(1, client_cores=reserve).start()
        elif isinstance(dispatcher, ServiceCluster):
            self.cluster = dispatcher if dispatcher.dispatcher is not None else dispatcher.start()
        else:
            self.cluster = None
        self.address = self.cluster.address if self.cluster is not None else str(dispatcher)
        if not reachable(self.address):
            raise ServiceError(f"no tf.data service dispatcher answers at {self.address}")

    @property
    def worker_pids(self) -> list[int]:
        return self.cluster.worker_pids if self.cluster is not None else []

    def workers(self) -> int | None:
        return len(self.cluster.live_workers) if self.cluster is not None else None

    def close(self) -> None:
        if self.own and self.cluster is not None:
            self.cluster.stop()


@dataclass(frozen=True)
class _Options:
    """What the caller of :func:`offload` asked for (see its docstring), as it travels on."""

    target: float | None
    workers: int | None
    cores_per_worker: float | None
    max_workers: int
    bandwidth: float | None
    sharding: str | None
    job_name: str | None
    compression: str | None
    seconds: float
    rounds: int
    max_cuts: int
    stall_after: float


@dataclass(frozen=True)
class _Subject:
    """The pipeline planned for: its operators, its graph and element spec as bytes (what the
    measuring client rebuilds it from), the nodes that run Python, and its trace."""

    pipe: Pipeline
    cardinalities: dict[str, int]
    graph: bytes
    spec: bytes
    python: dict[str, str]
    trace: Trace

    def sharding_at(self, node: str, asked: str | None) -> str:
        """The policy asked for, else OFF when the part up to ``node`` repeats forever (every
        worker yields all of it) and DYNAMIC when it ends (each element once per epoch)."""
        return asked or ("OFF" if _infinite_below(self.pipe, node, self.cardinalities) else "DYNAMIC")


@dataclass
class _Planning:
    """One call of :func:`offload` under way: the pipeline, what was asked, the measuring client
    and the service it measures through, and the notes gathered for the plan."""

    subject: _Subject
    options: _Options
    client: MeasuringClient | InProcessClient
    service: _Service
    notes: list[str]
    progress: Callable[[str, float], None]

    worker_pids: list[int] = field(init=False)  # the workers running as measuring starts
    dispatcher_pids: list[int] = field(init=False)
    watch: Watch = field(init=False)

    def __post_init__(self) -> None:
        self.worker_pids = self.service.worker_pids
        cluster = self.service.cluster
        self.dispatcher_pids = [cluster.dispatcher.pid] if cluster is not None else []
        self.watch = Watch(stall_after=self.options.stall_after)

    def loop(self, what: str, **extra: Any) -> dict[str, Any]:
        """A run of the pipeline ``what`` names, pulled by a Python loop as the consumer pulls."""
        request = {"kind": "loop", "pipeline": self._pipeline(what, **extra), "seconds": self.options.seconds,
                   "warmup": 0.5 * self.options.seconds, "repeat": True, "worker_pids": self.worker_pids,
                   "dispatcher_pids": self.dispatcher_pids}
        return self.client.call(request, self.watch)

    def pull(self, what: str, length: float = 1.0, **extra: Any) -> dict[str, Any]:
        """A run pulled by a TensorFlow loop (a part's own CPU, no consumer's)."""
        seconds = self.options.seconds
        # "upper" and "moved" read a cached sample: warm up past the elements that fill it.
        request = {"kind": "graph", "pipeline": self._pipeline(what, sample=SAMPLE, **extra),
                   "seconds": length * seconds, "warmup": 0.3 * seconds, "warmup_elements": 4 * SAMPLE,
                   "worker_pids": self.worker_pids, "dispatcher_pids": self.dispatcher_pids}
        # Progress comes a chunk at a time here: bound the whole request instead.
        return self.client.call(request, Watch(first_within=self.watch.first_within, stall_after=None,
                                               deadline=90 + 10 * seconds))

    def core_shares(self) -> tuple[float, list[float]]:
        """The share of a core a spinning probe gets now: the client's, and the workers' (only
        of workers plumbkit started)."""
        client = self.client.call({"kind": "share"}, Watch())
        cluster = self.service.cluster
        return client, ([cluster.worker_core_share()] if cluster is not None else [])

    def _pipeline(self, what: str, **extra: Any) -> dict[str, Any]:
        return {"graph": self.subject.graph, "spec": self.subject.spec, "what": what, **extra}


@dataclass(frozen=True)
class _Layout:
    """The cores measured on: the client's, and the workers running now."""

    client_cores: float
    workers_now: int
    cores_per_worker: float


@dataclass(frozen=True)
class _OperatorCosts:
    """The operators' costs from the trace: each one's share of the pipeline's CPU, its CPU per
    minibatch (the local run's pipeline CPU split by those shares), the sequential ones, and
    the bytes per minibatch each one's output carries."""

    shares: dict[str, float]
    cpu: dict[str, float]
    sequential: list[str]
    volume: dict[str, float]


@dataclass(frozen=True)
class _Baseline:
    """What was measured before any cut: the setting the model plans in, the cores, the costs."""

    setting: Setting
    layout: _Layout
    costs: _OperatorCosts


@operation("offload")
def offload(pipeline: PipelineLike, *, target: float | None = None,
            dispatcher: "str | ServiceCluster | None" = None, workers: int | None = None,
            client_cores: list[int] | None = None, cores_per_worker: float | None = None,
            max_workers: int = 32, bandwidth: float | None = None, sharding: str | None = None,
            job_name: str | None = None, compression: str | None = None, seconds: float = 1.0,
            rounds: int = 2, max_cuts: int = 3, stall_after: float = 10.0,
            on_progress: Progress | None = None) -> OffloadPlan:
    """Decide whether, where and how much to offload ``pipeline`` to tf.data service workers.

    ``target``: minibatches/s the consumer needs (default: its measured ceiling).
    ``max_workers``: the most workers to size for (the cut is chosen for what they can reach).
    ``dispatcher``: a :class:`ServiceCluster` plumbkit started (it then knows the workers'
    cores and processes), an address ``grpc://host:port`` (then say ``workers`` and
    ``cores_per_worker``), or None (a one-worker cluster on this machine, for measuring only).
    ``client_cores``: the cores of the measuring client process (default: the cluster's
    reserved client cores). ``bandwidth``: bytes/s between workers and client when it is not
    this machine's loopback. ``sharding``: "OFF" or "DYNAMIC" (default: DYNAMIC when the
    remote part is finite, so each element is seen once per epoch; OFF when it repeats forever).
    ``seconds`` per measurement; ``rounds`` more runs of local and served, interleaved, to check
    the chosen cut; ``max_cuts`` candidate cuts measured; ``stall_after`` seconds without an
    element before a run through the service counts as stalled (:class:`ServiceStall`).
    """
    progress = on_progress or _quiet
    ds = resolve_pipeline(pipeline)
    if sharding is not None and sharding not in ("OFF", "DYNAMIC"):
        raise ValueError(f"sharding must be 'OFF' or 'DYNAMIC', not {sharding!r}")
    options = _Options(target=target, workers=workers, cores_per_worker=cores_per_worker, max_workers=max_workers,
                       bandwidth=bandwidth, sharding=sharding, job_name=job_name, compression=compression,
                       seconds=seconds, rounds=rounds, max_cuts=max_cuts, stall_after=stall_after)
    progress("reaching the tf.data service", 0.0)
    service = _Service(dispatcher, client_cores)
    try:
        progress("reading and tracing the pipeline", 0.02)
        subject = _subject(ds, seconds)
    except BaseException:
        service.close()
        raise
    notes: list[str] = list(service.cluster.notes) if service.cluster is not None else []
    client, shared = _measuring_client(service, client_cores, subject.python, notes)
    try:
        return _plan(_Planning(subject, options, client, service, notes, progress))
    finally:
        if not shared:
            client.close()
        service.close()


def _subject(ds: Any, seconds: float) -> _Subject:
    """Read the pipeline's operators and graph, and trace it."""
    pipe = pipeline_of(ds)
    cardinalities = static_cardinalities(ds, pipe)
    graph = graph_of(ds)
    graph_bytes, spec_bytes = graph.SerializeToString(), encode_spec(ds.element_spec)
    python = python_nodes(graph)
    return _Subject(pipe, cardinalities, graph_bytes, spec_bytes, python, measure(ds, seconds=max(1.0, 1.5 * seconds)))


def _measuring_client(service: _Service, client_cores: list[int] | None, python: dict[str, str],
                      notes: list[str]) -> tuple[MeasuringClient | InProcessClient, bool]:
    """The client that runs the measurements, and whether it is the cluster's shared one (not
    to be closed here): in this process when the pipeline calls Python (which exists only
    here), else a process pinned to ``client_cores`` (default: the cluster's client cores)."""
    if client_cores is None and service.cluster is not None:
        client_cores = service.cluster.client_cores
    if python:
        notes.append("the pipeline calls Python, which exists only in this process: measured here, "
                     "not in a pinned client process")
        return InProcessClient(cluster=service.cluster), False
    if service.cluster is not None and client_cores == service.cluster.client_cores:
        return shared_client(service.cluster), True  # started with the cluster (its own too), stopped with it
    return MeasuringClient(client_cores, cluster=service.cluster), False


def _plan(p: _Planning) -> OffloadPlan:
    """Measure the consumer and the local pipeline, then each candidate cut; decide; measure the
    chosen cut against the local pipeline again, side by side; assemble the plan."""
    p.progress("starting the measuring client", 0.05)
    client_share, worker_shares = p.core_shares()
    ideal = p.loop("ideal")
    p.progress("measuring the local pipeline", 0.1)
    local = p.loop("full")
    base = _baseline(p, ideal, local, client_share)
    setting, n = base.setting, base.layout.workers_now
    pipe, python, options = p.subject.pipe, p.subject.python, p.options
    invalid = {**invalid_cuts(pipe, python), **unhelpful_cuts(pipe, python, base.costs.shares)}
    goal = options.target if options.target is not None else setting.consumer_ceiling
    source = "yours" if options.target is not None else "consumer ceiling (measured)"
    candidates = ([] if setting.local * SPEEDUP_THRESHOLD >= goal else
                  candidate_cuts(pipe, python, cpu_share=base.costs.shares, bytes_per_minibatch=base.costs.volume,
                                 limit=options.max_cuts))
    runs: dict[int, list[Run]] = {0: [Run.of(0, local)]}
    measured_cuts = [_measure_cut(p, base, op, (i, len(candidates))) for i, op in enumerate(candidates)]
    cuts = [cut for cut, _ in measured_cuts]
    served_runs = {cut.node: served for cut, served in measured_cuts}
    if cuts and not p.worker_pids:
        p.notes.append("plumbkit did not start these workers: their cost of sending is assumed equal to the "
                       "client's cost of receiving, and what serving adds on them (DYNAMIC's splits) is unknown")
    decision = decide(setting, cuts, target=goal, max_workers=options.max_workers, invalid=invalid)
    distribute = None
    if decision.action == "offload" and decision.cut is not None:
        distribute = _distribute(p, setting, decision, n)
        served, again = _side_by_side(p, n, distribute)
        runs[n] = [served_runs[decision.cut.node]] + served
        runs[0] += again
    if len(runs[0]) > 1:
        # The local pipeline's cost: the median over the local runs of each one's least disturbed
        # slice. The least of them all ran 19-29% below what the local runs then measured (the
        # best slice of six runs on a noisy machine), which made the 0-worker prediction high.
        setting = dataclasses.replace(setting, local_cpu=statistics.median(r.least_client_cpu for r in runs[0]))
    measured = {k: statistics.median(r.throughput for r in v) for k, v in runs.items()}
    client_after, workers_after = p.core_shares()
    client_shares, worker_shares = [client_share, client_after], worker_shares + workers_after
    busy = _busy_note(client_shares, worker_shares)
    if busy:
        p.notes.append(busy)
    chosen = decision.cut or (max(cuts, key=lambda c: plateau(setting, c, options.max_workers).throughput)
                              if cuts else None)
    points = (curve(setting, chosen, max(CURVE_WORKERS, decision.workers or 0, n))
              if chosen is not None else [predict_local(setting)])
    p.progress("done", 1.0)
    plan = OffloadPlan(
        decision=decision.action, reason=decision.reason, target=goal, target_source=source,
        distribute=distribute, workers=decision.workers, predicted=points, measured=measured,
        runs=runs, cuts=cuts, setting=setting, invalid=invalid, cpu_shares=client_shares,
        worker_core_shares=worker_shares, address=p.service.address if not p.service.own else None,
        workers_available=n, trace=p.subject.trace, notes=p.notes, max_workers=options.max_workers,
        _graph=p.subject.graph, _spec=p.subject.spec)
    if p.service.own and distribute is not None:
        plan.notes.append("measured through a temporary one-worker service plumbkit started; apply the plan "
                          "with plan.dataset_for(address) once your workers run")
    return plan


def _baseline(p: _Planning, ideal: dict[str, Any], local: dict[str, Any], client_share: float) -> _Baseline:
    """The setting the model plans in, from the consumer's run (``ideal``), the local pipeline's
    run and the trace; ``client_share``: what a probe got of the client's core before them."""
    layout = _layout(p)
    local_cpu = _least(local, "cpu")
    consumer_cpu = min(_least(ideal, "cpu"), local_cpu)
    costs = _operator_costs(p.subject, max(local_cpu - consumer_cpu, 0.0))
    setting = Setting(consumer_ceiling=_best_rate(ideal), consumer_cpu=consumer_cpu, local=_rate(local),
                      local_cpu=local_cpu, client_cores=layout.client_cores, cores_per_worker=layout.cores_per_worker,
                      bandwidth=p.options.bandwidth, local_caps=sequential_caps(costs.cpu, costs.sequential))
    if client_share < DEDICATED:
        # Neighbours took most of the client's core while the local pipeline ran: decide on what
        # its measured CPU gives a core of its own, as every served prediction is made.
        setting = dataclasses.replace(setting, local=predict_local(setting).throughput, local_source="predicted")
    return _Baseline(setting, layout, costs)


def _layout(p: _Planning) -> _Layout:
    """The client's cores and the workers running now (cores per worker: asked, else the
    cluster's, else assumed 1, saying so)."""
    client_cores = len(p.client.cores) if p.client.cores else p.subject.trace.cores
    n_now = p.service.workers() if p.service.workers() is not None else (p.options.workers or 1)
    cores_per_worker = p.options.cores_per_worker
    if cores_per_worker is None:
        if p.service.cluster is not None and p.service.cluster.workers:
            cores_per_worker = p.service.cluster.cores_per_worker()
        else:
            cores_per_worker = 1.0
            p.notes.append("cores per worker not given: assumed 1")
    return _Layout(client_cores, n_now, cores_per_worker)


def _operator_costs(subject: _Subject, pipeline_cpu: float) -> _OperatorCosts:
    """Each operator's share of ``pipeline_cpu`` (client core-seconds per minibatch) by its
    traced share, the sequential operators (a prefetch aside), and bytes per minibatch."""
    ops, pipe = subject.trace.ops, subject.pipe
    shares = {o.name: o.cpu_share for o in ops}
    share_total = sum(shares.values()) or 1.0
    sequential = [o.name for o in ops if o.name in pipe.operators and o.sequential
                  and pipe[o.name].kind not in ("prefetch",)]
    return _OperatorCosts(shares=shares, cpu={n: pipeline_cpu * s / share_total for n, s in shares.items()},
                          sequential=sequential,
                          volume={o.name: (o.visit_ratio or 0) * (o.bytes_per_element or 0) for o in ops})


def _measure_cut(p: _Planning, base: _Baseline, op: Operator, position: tuple[int, int]) -> tuple[CutCosts, Run]:
    """The costs of a cut after ``op`` (its remote part alone, the client part alone, moving its
    elements, serving its remote part), and one run of the pipeline served at it, to check the
    prediction. ``position``: (index, count) of the cut among those measured, for progress."""
    i, count = position
    step = 0.15 + 0.6 * i / max(1, count)
    costs, subject = base.costs, p.subject
    n, address, compression = base.layout.workers_now, p.service.address, p.options.compression
    visit = _visit_ratio(op.name, {o.name: o for o in subject.trace.ops}, subject.cardinalities, subject.pipe)
    p.progress(f"cut after {op.label}: its remote part alone", step)
    remote = p.pull("sub", cut=op.name)
    upper = p.pull("upper", cut=op.name)
    p.progress(f"cut after {op.label}: moving its elements", step + 0.2 / count)
    # Twice as long: moving big elements varied 15-20% between windows of one length.
    moved = p.pull("moved", length=2.0, cut=op.name, service={"address": address, "compression": compression})
    how = {"address": address, "sharding": subject.sharding_at(op.name, p.options.sharding),
           "compression": compression}
    p.progress(f"cut after {op.label}: its remote part served by {n} worker(s)", step + 0.3 / count)
    # (per element of the cut: this run yields the cut's elements, not minibatches)
    serving = Run.of(n, p.loop("remote", cut=op.name, service=how))
    p.progress(f"cut after {op.label}: the pipeline served, to check the prediction", step + 0.45 / count)
    served = Run.of(n, p.loop("served", cut=op.name, cut_label=op.label, service=how))
    ours = bool(p.worker_pids)
    receive = _least(moved, "cpu") * visit
    send = _per(moved, "worker_cpu") * visit if ours else receive  # other processes' CPU: 10 ms ticks
    remote_cpu = _per(remote, "cpu") * visit
    below = {o.name for o in [op] + subject.pipe.descendants(op.name)}
    cut = CutCosts(
        node=op.name, label=op.label, visit_ratio=visit,
        bytes_per_minibatch=costs.volume.get(op.name) or None, remote_cpu=remote_cpu,
        send_cpu=send, receive_cpu=receive, transfer_rate=_rate(moved) / max(visit, 1e-12),
        client_cpu=_least(upper, "cpu"),
        # What the workers spend serving the remote part beyond computing it and sending its
        # elements (task runner, waiting requests, DYNAMIC's splits), in a run of its own:
        # the served pipeline's runs are only what the prediction is checked against.
        service_cpu=max(0.0, serving.worker_cpu * visit - remote_cpu - send) if ours else 0.0,
        dispatcher_cpu=serving.dispatcher_cpu * visit,
        remote_caps=sequential_caps(costs.cpu, [s for s in costs.sequential if s in below]),
        client_caps=sequential_caps(costs.cpu, [s for s in costs.sequential if s not in below]),
        measured={n: served.throughput})
    return cut, served


def _distribute(p: _Planning, setting: Setting, decision: Decision, workers_now: int) -> Distribute:
    """How the decided cut is served: sharding, the user's job name (or one of the graph's own),
    compression where the network binds."""
    cut = decision.cut
    mode = p.subject.sharding_at(cut.node, p.options.sharding)
    pays = _compression(setting, cut, decision.workers or workers_now, p.options.compression)
    if mode == "DYNAMIC":
        p.notes.append("DYNAMIC sharding: each element once per epoch while no worker fails; a lost worker's "
                       "elements are skipped for that epoch (at most once)")
    return Distribute(cut=cut.node, cut_label=cut.label, sharding=mode,
                      job_name=p.options.job_name or _job_name(p.subject.graph), compression=pays, prefetch=AUTOTUNE)


def _side_by_side(p: _Planning, n: int, distribute: Distribute) -> tuple[list[Run], list[Run]]:
    """``rounds`` more runs of the served pipeline (``n`` workers) and the local one, interleaved."""
    served_runs, local_runs = [], []
    rounds = p.options.rounds
    how = {"address": p.service.address, "sharding": distribute.sharding, "compression": distribute.compression}
    for r in range(rounds):
        p.progress(f"measuring local and served again, side by side ({r + 1} of {rounds})", 0.8 + 0.15 * r / rounds)
        served = p.loop("served", cut=distribute.cut, cut_label=distribute.cut_label, service=how)
        served_runs.append(Run.of(n, served))
        local_runs.append(Run.of(0, p.loop("full")))
    return served_runs, local_runs


def _busy_note(client_shares: list[float], worker_shares: list[float]) -> str | None:
    """The note for a busy machine: what a spinning probe got of the client's and the workers'
    cores, when under :data:`DEDICATED` (None when both had their cores)."""
    busy = [f"the client's core {min(client_shares):.0%}"] if min(client_shares) < DEDICATED else []
    if worker_shares and not min(worker_shares) >= DEDICATED:
        busy.append(f"the workers' core {min(worker_shares):.0%}")
    if not busy:
        return None
    return (f"busy machine: a spinning probe got {' and '.join(busy)} (other processes took the "
            f"rest); measured throughput is then a share of what the predictions, made for cores "
            f"of their own, say (CPU per minibatch moves much less)")


def _visit_ratio(node: str, stats: dict, cardinalities: dict[str, int], pipe: Pipeline) -> float:
    """Elements of ``node`` per root minibatch: traced, else from TensorFlow's cardinalities."""
    op = stats.get(node)
    if op is not None and op.visit_ratio:
        return float(op.visit_ratio)
    n, root = cardinalities.get(node, -2), cardinalities.get(pipe.root, -2)
    if n > 0 and root > 0:
        return n / root
    return 1.0


def _compression(setting: Setting, cut: CutCosts, n: int, asked: str | None) -> str | None:
    """Compress only when the network is what binds (with a bandwidth given) or when asked."""
    if asked is not None:
        return asked
    point = predict(setting, cut, n)
    return "AUTO" if point.bound == "network" else None


__all__ = ["OffloadPlan", "Run", "ServiceCluster", "offload"]
