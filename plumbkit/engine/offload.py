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
from typing import Any, Callable

from ..model.offload import Distribute
from ..model.pipeline import AUTOTUNE, Pipeline
from ..planning.offload import (SPEEDUP_THRESHOLD, CutCosts, Setting, candidate_cuts, curve, decide, invalid_cuts,
                                plateau, predict, predict_local, sequential_caps, unhelpful_cuts)
from ..service.client import InProcessClient, MeasuringClient, Watch, shared_client
from ..service.cluster import ServiceCluster, reachable
from ..service.errors import ServiceError
from ..service.processes import usable_cores
from ..tfdata.graph import pipeline_of, resolve_pipeline, static_cardinalities
from ..tfdata.offload_graph import encode_spec, graph_of, python_nodes
from .measuring import Progress, measure
from .offload_plan import OffloadPlan, Run
from .scheduler import operation
from .trace_result import Trace
from .tracing import PipelineLike

#: Workers plumbkit predicts for, at most, in the curve it shows.
CURVE_WORKERS = 8
#: A client core that gives a spinning probe less than this is shared with other processes.
DEDICATED = 0.8
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
    progress("reaching the tf.data service", 0.0)
    service = _Service(dispatcher, client_cores)
    try:
        progress("reading and tracing the pipeline", 0.02)
        pipe = pipeline_of(ds)
        cardinalities = static_cardinalities(ds, pipe)
        graph = graph_of(ds)
        graph_bytes, spec_bytes = graph.SerializeToString(), encode_spec(ds.element_spec)
        python = python_nodes(graph)
        traced = measure(ds, seconds=max(1.0, 1.5 * seconds))
    except BaseException:
        service.close()
        raise
    notes: list[str] = list(service.cluster.notes) if service.cluster is not None else []
    if client_cores is None and service.cluster is not None:
        client_cores = service.cluster.client_cores
    client: MeasuringClient | InProcessClient
    shared = False
    if python:
        client = InProcessClient(cluster=service.cluster)
        notes.append("the pipeline calls Python, which exists only in this process: measured here, "
                     "not in a pinned client process")
    elif service.cluster is not None and not service.own and client_cores == service.cluster.client_cores:
        client, shared = shared_client(service.cluster), True
    else:
        client = MeasuringClient(client_cores, cluster=service.cluster)
    try:
        return _plan(ds, pipe, cardinalities, graph_bytes, spec_bytes, python, traced, service, client,
                     notes, target=target, workers=workers, cores_per_worker=cores_per_worker,
                     max_workers=max_workers, bandwidth=bandwidth, sharding=sharding, job_name=job_name,
                     compression=compression, seconds=seconds, rounds=rounds, max_cuts=max_cuts,
                     stall_after=stall_after, progress=progress)
    finally:
        if not shared:
            client.close()
        service.close()


def _plan(ds, pipe: Pipeline, cardinalities, graph_bytes, spec_bytes, python, traced: Trace, service: _Service,
          client, notes: list[str], *, target, workers, cores_per_worker, max_workers, bandwidth, sharding,
          job_name, compression, seconds, rounds, max_cuts, stall_after,
          progress: Callable[[str, float], None]) -> OffloadPlan:
    base = {"graph": graph_bytes, "spec": spec_bytes}
    pids = service.worker_pids
    dispatcher_pids = [service.cluster.dispatcher.pid] if service.cluster is not None else []
    watch = Watch(stall_after=stall_after)

    def loop(what: str, **extra: Any) -> dict[str, float]:
        request = {"kind": "loop", "pipeline": {**base, "what": what, **extra}, "seconds": seconds,
                   "warmup": 0.5 * seconds, "repeat": True, "worker_pids": pids, "dispatcher_pids": dispatcher_pids}
        return client.call(request, watch)

    def pull(what: str, length: float = 1.0, **extra: Any) -> dict[str, float]:
        # "upper" and "moved" read a cached sample: warm up past the elements that fill it.
        request = {"kind": "graph", "pipeline": {**base, "what": what, "sample": SAMPLE, **extra},
                   "seconds": length * seconds, "warmup": 0.3 * seconds, "warmup_elements": 4 * SAMPLE,
                   "worker_pids": pids, "dispatcher_pids": dispatcher_pids}
        # Progress comes a chunk at a time here: bound the whole request instead.
        return client.call(request, Watch(first_within=watch.first_within, stall_after=None,
                                          deadline=90 + 10 * seconds))

    progress("starting the measuring client", 0.05)
    probes = [client.call({"kind": "share"}, Watch())]  # is the client's core its own right now?
    worker_probes = [service.cluster.worker_core_share()] if service.cluster is not None else []
    ideal = loop("ideal")
    progress("measuring the local pipeline", 0.1)
    local = loop("full")
    client_cores = len(client.cores) if client.cores else traced.cores
    n_now = service.workers() if service.workers() is not None else (workers or 1)
    if cores_per_worker is None:
        if service.cluster is not None and service.cluster.workers:
            cores_per_worker = service.cluster.cores_per_worker()
        else:
            cores_per_worker = 1.0
            notes.append("cores per worker not given: assumed 1")
    local_cpu = _least(local, "cpu")
    consumer_cpu = min(_least(ideal, "cpu"), local_cpu)
    stats = {o.name: o for o in traced.ops}
    shares = {o.name: o.cpu_share for o in traced.ops}
    share_total = sum(shares.values()) or 1.0
    pipeline_cpu = max(local_cpu - consumer_cpu, 0.0)
    op_cost = {n: pipeline_cpu * s / share_total for n, s in shares.items()}
    sequential = [o.name for o in traced.ops if o.name in pipe.operators and o.sequential
                  and pipe[o.name].kind not in ("prefetch",)]
    volume = {o.name: (o.visit_ratio or 0) * (o.bytes_per_element or 0) for o in traced.ops}
    setting = Setting(consumer_ceiling=_best_rate(ideal), consumer_cpu=consumer_cpu, local=_rate(local),
                      local_cpu=local_cpu, client_cores=client_cores, cores_per_worker=cores_per_worker,
                      bandwidth=bandwidth, local_caps=sequential_caps(op_cost, sequential))
    if probes[0] < DEDICATED:
        # Neighbours took most of the client's core while the local pipeline ran: decide on what
        # its measured CPU gives a core of its own, as every served prediction is made.
        setting = dataclasses.replace(setting, local=predict_local(setting).throughput, local_source="predicted")
    invalid = {**invalid_cuts(pipe, python), **unhelpful_cuts(pipe, python, shares)}
    goal = target if target is not None else setting.consumer_ceiling
    source = "yours" if target is not None else "consumer ceiling (measured)"
    candidates = ([] if setting.local * SPEEDUP_THRESHOLD >= goal else
                  candidate_cuts(pipe, python, cpu_share=shares, bytes_per_minibatch=volume, limit=max_cuts))
    worker_cores = n_now * cores_per_worker if pids else 0.0
    runs: dict[int, list[Run]] = {0: [Run.of(0, local, client_cores, 0.0)]}
    served_runs: dict[str, Run] = {}
    cuts: list[CutCosts] = []
    for i, op in enumerate(candidates):
        step = 0.15 + 0.6 * i / max(1, len(candidates))
        visit = _visit_ratio(op.name, stats, cardinalities, pipe)
        progress(f"cut after {op.label}: its remote part alone", step)
        remote = pull("sub", cut=op.name)
        upper = pull("upper", cut=op.name)
        progress(f"cut after {op.label}: moving its elements", step + 0.2 / len(candidates))
        # Twice as long: moving big elements varied 15-20% between windows of one length.
        moved = pull("moved", length=2.0, cut=op.name, service={"address": service.address, "compression": compression})
        mode = sharding or ("OFF" if _infinite_below(pipe, op.name, cardinalities) else "DYNAMIC")
        how = {"address": service.address, "sharding": mode, "compression": compression}
        progress(f"cut after {op.label}: its remote part served by {n_now} worker(s)", step + 0.3 / len(candidates))
        # (per element of the cut: this run yields the cut's elements, not minibatches)
        serving = Run.of(n_now, loop("remote", cut=op.name, service=how), client_cores, worker_cores)
        progress(f"cut after {op.label}: the pipeline served, to check the prediction", step + 0.45 / len(candidates))
        served_runs[op.name] = Run.of(n_now, loop("served", cut=op.name, cut_label=op.label, service=how),
                                      client_cores, worker_cores)
        receive = _least(moved, "cpu") * visit
        send = _per(moved, "worker_cpu") * visit if pids else receive  # other processes' CPU: 10 ms ticks
        remote_cpu = _per(remote, "cpu") * visit
        below = {o.name for o in [op] + pipe.descendants(op.name)}
        cuts.append(CutCosts(
            node=op.name, label=op.label, visit_ratio=visit,
            bytes_per_minibatch=volume.get(op.name) or None, remote_cpu=remote_cpu,
            send_cpu=send, receive_cpu=receive, transfer_rate=_rate(moved) / max(visit, 1e-12),
            client_cpu=_least(upper, "cpu"),
            # What the workers spend serving the remote part beyond computing it and sending its
            # elements (task runner, waiting requests, DYNAMIC's splits), in a run of its own:
            # the served pipeline's runs are only what the prediction is checked against.
            service_cpu=max(0.0, serving.worker_cpu * visit - remote_cpu - send) if pids else 0.0,
            dispatcher_cpu=serving.dispatcher_cpu * visit,
            remote_caps=sequential_caps(op_cost, [n for n in sequential if n in below]),
            client_caps=sequential_caps(op_cost, [n for n in sequential if n not in below]),
            send_measured=bool(pids), measured={n_now: served_runs[op.name].throughput}))
    if cuts and not pids:
        notes.append("plumbkit did not start these workers: their cost of sending is assumed equal to the "
                     "client's cost of receiving, and what serving adds on them (DYNAMIC's splits) is unknown")
    decision = decide(setting, cuts, target=goal, max_workers=max_workers, invalid=invalid)
    distribute = None
    if decision.action == "offload" and decision.cut is not None:
        cut = decision.cut
        mode = sharding or ("OFF" if _infinite_below(pipe, cut.node, cardinalities) else "DYNAMIC")
        pays = _compression(setting, cut, decision.workers or n_now, compression)
        distribute = Distribute(cut=cut.node, cut_label=cut.label, sharding=mode,
                                job_name=job_name or _job_name(graph_bytes), compression=pays, prefetch=AUTOTUNE)
        runs[n_now] = [served_runs[cut.node]]
        for r in range(rounds):
            progress(f"measuring local and served again, side by side ({r + 1} of {rounds})", 0.8 + 0.15 * r / rounds)
            served = loop("served", cut=cut.node, cut_label=cut.label,
                          service={"address": service.address, "sharding": mode, "compression": pays})
            runs[n_now].append(Run.of(n_now, served, client_cores, worker_cores))
            runs[0].append(Run.of(0, loop("full"), client_cores, 0.0))
        if mode == "DYNAMIC":
            notes.append("DYNAMIC sharding: each element once per epoch while no worker fails; a lost worker's "
                         "elements are skipped for that epoch (at most once)")
    if len(runs[0]) > 1:
        # The local pipeline's cost: the median over the local runs of each one's least disturbed
        # slice. The least of them all ran 19-29% below what the local runs then measured (the
        # best slice of six runs on a noisy machine), which made the 0-worker prediction high.
        setting = dataclasses.replace(setting, local_cpu=statistics.median(r.least_client_cpu for r in runs[0]))
    measured = {n: statistics.median(r.throughput for r in v) for n, v in runs.items()}
    probes.append(client.call({"kind": "share"}, Watch()))
    if service.cluster is not None:
        worker_probes.append(service.cluster.worker_core_share())
    busy = [f"the client's core {min(probes):.0%}"] if min(probes) < DEDICATED else []
    if worker_probes and not min(worker_probes) >= DEDICATED:
        busy.append(f"the workers' core {min(worker_probes):.0%}")
    if busy:
        notes.append(f"busy machine: a spinning probe got {' and '.join(busy)} (other processes took the "
                     f"rest); measured throughput is then a share of what the predictions, made for cores "
                     f"of their own, say (CPU per minibatch moves much less)")
    chosen = decision.cut or (max(cuts, key=lambda c: plateau(setting, c, max_workers).throughput)
                              if cuts else None)
    points = (curve(setting, chosen, max(CURVE_WORKERS, decision.workers or 0, n_now))
              if chosen is not None else [predict_local(setting)])
    progress("done", 1.0)
    plan = OffloadPlan(
        decision=decision.action, reason=decision.reason, target=goal, target_source=source,
        distribute=distribute, workers=decision.workers, predicted=points, measured=measured,
        runs=runs, cuts=cuts, setting=setting, invalid=invalid, cpu_shares=probes, worker_core_shares=worker_probes,
        address=service.address if not service.own else None, workers_available=n_now, trace=traced,
        notes=notes, max_workers=max_workers, _graph=graph_bytes, _spec=spec_bytes)
    if service.own and distribute is not None:
        plan.notes.append("measured through a temporary one-worker service plumbkit started; apply the plan "
                          "with plan.dataset_for(address) once your workers run")
    return plan


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
