"""What plumbkit's measuring client runs to plan an offload: one request at a time.

The process runner (:mod:`plumbkit.service.client`) sends requests that :func:`handle` runs, in
a client process pinned to its cores or in this process: the consumer's ideal rate, a
pipeline's rate (local or served), a sub-pipeline's CPU cost, the cost of moving elements of a
cut through the service, and one epoch's elements. The pipelines are built from the graph
(:mod:`plumbkit.tfdata.offload_graph`); every run through the service uses a job name of
plumbkit's own, never a user's.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Sequence

import psutil
import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from ..model.offload import Distribute
from ..model.pipeline import AUTOTUNE
from . import graph_edits
from .offload_graph import (cached_sample, client_part, decode_spec, distributed, encode_spec, graph_of, offloaded,
                            sub_pipeline)
from .run import replayed


class Counter:
    """Elements received so far, read by a watchdog on another thread (no lock: one writer)."""

    def __init__(self) -> None:
        self.n = 0


def _cpu_of(pids: Sequence[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


#: Each measured window is read in slices this long: costs are taken from the least disturbed.
SLICE_SECONDS = 0.25


class _CpuClock:
    """CPU seconds of this process, the workers and the dispatcher, read in slices.

    Every slice of the measured window is kept: the totals give throughput, the slices let a
    caller take the CPU per element of the least disturbed one (neighbours on a busy machine
    only ever add to it: caches thrashed, threads woken for nothing).
    """

    def __init__(self, worker_pids: Sequence[int], dispatcher_pids: Sequence[int]):
        self.pids = (list(worker_pids), list(dispatcher_pids))
        self.t0 = time.perf_counter()
        self.slices: list[dict[str, float]] = []
        self._mark = self._now()
        self._elements = 0

    def _now(self) -> tuple[float, float, float, float]:
        return (time.perf_counter(), time.process_time(), _cpu_of(self.pids[0]), _cpu_of(self.pids[1]))

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def tick(self, elements: int, *, force: bool = False) -> None:
        """Record ``elements`` more; close the slice when it is long enough."""
        self._elements += elements
        if force or time.perf_counter() - self._mark[0] >= SLICE_SECONDS:
            now = self._now()
            self.slices.append({"elements": self._elements, "wall": now[0] - self._mark[0],
                                "cpu": now[1] - self._mark[1], "worker_cpu": now[2] - self._mark[2],
                                "dispatcher_cpu": now[3] - self._mark[3]})
            self._mark, self._elements = now, 0

    def read(self) -> dict[str, Any]:
        if self._elements:
            self.tick(0, force=True)
        total = {k: sum(s[k] for s in self.slices) for k in
                 ("elements", "wall", "cpu", "worker_cpu", "dispatcher_cpu")}
        return {**total, "slices": self.slices}


def loop_rate(ds: tf.data.Dataset, *, seconds: float, warmup: float, counter: Counter,
              worker_pids: Sequence[int] = (), dispatcher_pids: Sequence[int] = (),
              warmup_elements: int = 4) -> dict[str, Any]:
    """Elements/s of a plain ``next()`` loop (the consumer's loop) after ``warmup`` seconds and
    ``warmup_elements`` elements, with the CPU seconds of this process, the workers and the
    dispatcher over the measured window (and per slice of it)."""
    it = iter(ds)
    next(it)
    counter.n += 1
    start, pulled = time.perf_counter(), 1
    while time.perf_counter() - start < warmup or pulled < warmup_elements:
        next(it)
        counter.n += 1
        pulled += 1
    clock = _CpuClock(worker_pids, dispatcher_pids)
    while clock.elapsed() < seconds:
        next(it)
        counter.n += 1
        clock.tick(1)
    return clock.read()


def graph_rate(ds: tf.data.Dataset, *, seconds: float, warmup: float, counter: Counter,
               worker_pids: Sequence[int] = (), dispatcher_pids: Sequence[int] = (),
               warmup_elements: int = 0) -> dict[str, Any]:
    """Elements/s and CPU of ``ds`` pulled by a TensorFlow loop (no Python per element, so cheap
    operators are not swamped by the consumer's own cost), from one iterator: chunks grow until
    one takes a twentieth of a second, then run for ``warmup`` s and at least ``warmup_elements``
    elements (a cached sample filled), then for ``seconds`` s, measured."""
    if int(ds.cardinality().numpy()) != tf.data.INFINITE_CARDINALITY:
        ds = ds.repeat()
    iterator = iter(ds)

    @tf.function
    def pull(n: tf.Tensor) -> tf.Tensor:
        for _ in tf.range(n):
            iterator.get_next()
        return n

    n, start, pulled = 1, time.perf_counter(), 0
    while True:
        t0 = time.perf_counter()
        pull(tf.constant(n, tf.int64))
        counter.n += n
        pulled += n
        # the chunk's size is set by time alone: grown on to reach ``warmup_elements`` of a slow
        # part (~10 ms an element), a chunk took 0.64 s, and the 0.7 s measured ran two of them
        if time.perf_counter() - t0 > 0.05 or n >= 1 << 22:
            break
        n *= 2
    while time.perf_counter() - start < warmup or pulled < warmup_elements:
        pull(tf.constant(n, tf.int64))
        counter.n += n
        pulled += n
    clock = _CpuClock(worker_pids, dispatcher_pids)
    while clock.elapsed() < seconds:
        pull(tf.constant(n, tf.int64))
        counter.n += n
        clock.tick(n)
    return clock.read()


def collect(ds: tf.data.Dataset, *, limit: int, counter: Counter) -> list[Any]:
    """Every element of one pass (at most ``limit``), as numpy structures."""
    out = []
    for element in ds.take(limit).as_numpy_iterator():
        out.append(element)
        counter.n += 1
    return out


def served_plan(pipeline: dict[str, Any]) -> Distribute:
    """How a ``served`` request is distributed: under a job name of plumbkit's own unless the
    request names one (plumbkit's measurements never do: they must not read a user's job)."""
    service = pipeline["service"]
    return Distribute(cut=pipeline["cut"], cut_label=pipeline.get("cut_label", ""),
                      sharding=service.get("sharding", "OFF"),
                      job_name=service.get("job_name") or measuring_job_name(),
                      compression=service.get("compression"), prefetch=service.get("prefetch", AUTOTUNE))


def build(pipeline: dict[str, Any]) -> tf.data.Dataset:
    """The Dataset a request names (see :func:`handle`)."""
    graph_def = graph_pb2.GraphDef.FromString(pipeline["graph"])
    spec = decode_spec(pipeline["spec"])
    what = pipeline.get("what", "full")
    if what == "full":
        return graph_edits.dataset_from_graph_def(graph_def, spec)
    if what == "ideal":
        return replayed(graph_edits.dataset_from_graph_def(graph_def, spec))
    if what == "sub":
        return sub_pipeline(graph_def, pipeline["cut"])
    if what == "upper":
        return client_part(graph_def, spec, pipeline["cut"], pipeline.get("sample", 16))
    service = pipeline["service"]
    if what == "moved":  # a cached sample of the cut's elements, served by the workers
        sample = cached_sample(sub_pipeline(graph_def, pipeline["cut"]), pipeline.get("sample", 16))
        return distributed(sample, service["address"], sharding="OFF", job_name=measuring_job_name(),
                           compression=service.get("compression"))
    if what == "remote":  # the part up to the cut, served by the workers and drained: what serving it costs them
        plan = served_plan(pipeline)
        return distributed(sub_pipeline(graph_def, plan.cut), service["address"], sharding=plan.sharding,
                           job_name=plan.job_name, compression=plan.compression)
    if what == "served":
        return offloaded(graph_def, spec, served_plan(pipeline), service["address"])
    raise ValueError(f"unknown pipeline kind {what!r}")


def cpu_share(seconds: float = 0.3) -> float:
    """Share of its cores this process gets right now: a pure Python spin, CPU over wall time
    (about 1 on an idle core, less when neighbours take turns on it)."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - wall0 < seconds:
        sum(range(200))
    return (time.process_time() - cpu0) / max(time.perf_counter() - wall0, 1e-12)


def handle(request: dict[str, Any], counter: Counter) -> Any:
    """Run one measuring request: ``{"kind": "loop" | "graph" | "collect", "pipeline": {...}}``.

    ``pipeline["what"]``: ``full`` (the user's pipeline, local); ``ideal``
    (:func:`~.run.replayed`: the consumer's ceiling); ``sub`` (the part up to the cut,
    local); ``upper`` (the part above the cut, fed a cached sample of the cut's elements);
    ``moved`` (a cached sample of the cut's elements served by the workers: the cost of moving
    them); ``remote`` (the part up to the cut served by the workers, nothing above it: what
    serving it costs them); ``served`` (the pipeline cut and served). ``{"kind": "share"}``: :func:`cpu_share`.
    """
    if request["kind"] == "share":
        counter.n += 1
        return cpu_share(request.get("seconds", 0.3))
    ds = build(request["pipeline"])
    if request.get("repeat"):
        if int(ds.cardinality().numpy()) != tf.data.INFINITE_CARDINALITY:
            ds = ds.repeat()
    kind = request["kind"]
    pids = dict(worker_pids=request.get("worker_pids", ()), dispatcher_pids=request.get("dispatcher_pids", ()))
    if kind == "loop":
        return loop_rate(ds, seconds=request["seconds"], warmup=request.get("warmup", 0.5), counter=counter, **pids)
    if kind == "graph":
        return graph_rate(ds, seconds=request["seconds"], warmup=request.get("warmup", 0.3), counter=counter,
                          warmup_elements=request.get("warmup_elements", 0), **pids)
    if kind == "collect":
        return collect(ds, limit=request.get("limit", 1 << 40), counter=counter)
    raise ValueError(f"unknown request kind {kind!r}")


def measuring_job_name() -> str:
    """A job name of plumbkit's own: its measurements never read from a user's shared job."""
    return f"plumbkit-measure-{uuid.uuid4().hex[:10]}"


def pipeline_request(ds: tf.data.Dataset) -> dict[str, Any]:
    """The part of a request that names ``ds`` (its graph and element_spec, as bytes)."""
    return {"graph": graph_of(ds).SerializeToString(), "spec": encode_spec(ds.element_spec)}


__all__ = ["Counter", "build", "collect", "cpu_share", "graph_rate", "handle", "loop_rate", "measuring_job_name",
           "pipeline_request", "served_plan"]
