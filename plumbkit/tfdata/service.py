"""tf.data service from plumbkit: the cut, the ``distribute()`` rewrite, and measuring through it.

A *cut* at operator ``k`` means what stock tf.data service does with ``distribute()`` placed
after ``k``: ``k`` and everything below it run on the workers, the operators above it on the
client. Built on the graph round trip (:mod:`plumbkit.tfdata.graph_edits`):

- the remote part is the sub-pipeline ending at ``k`` (the user's ``tf.data.Options`` kept), as
  a Dataset of flat tensors; ``distribute()`` registers it with the dispatcher;
- the client part is the user's graph above ``k`` with ``k``'s output replaced by the
  distributed dataset's own (serialized) nodes, so any operators above the cut, Python ones
  included, keep working on the client; then a client-side prefetch.

The measuring half (:func:`handle`) runs requests sent by the process runner
(:mod:`plumbkit.tfdata.service_processes`), in a client process pinned to its cores or in this
process: the consumer's ideal rate, a pipeline's rate (local or served), a sub-pipeline's CPU
cost, the cost of moving elements of a cut through the service, and one epoch's elements.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Sequence

import psutil
import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import struct_pb2
from tensorflow.python.saved_model import nested_structure_coder

from ..model.pipeline import AUTOTUNE
from ..model.service import Distribute
from . import graph_edits
from .graph_edits import GraphDef, RewriteError
from .graph_walk import node_ref, pruned

#: Python-calling ops: their functions live in the client process's registry, so a worker
#: cannot run them ("Could not find callback with key=pyfunc_0", measured on TF 2.21).
PYTHON_OPS = ("EagerPyFunc", "PyFunc", "PyFuncStateless")
#: Prefix of the nodes spliced into the user's graph in place of the cut's output.
_SERVICE_PREFIX = "plumbkit_service/"


# -- element specs and graphs across processes ------------------------------------------------

def encode_spec(element_spec: Any) -> bytes:
    """An element_spec as bytes (TensorFlow's own structure coder, as ``distribute`` uses)."""
    return nested_structure_coder.encode_structure(element_spec).SerializeToString()


def decode_spec(data: bytes) -> Any:
    proto = struct_pb2.StructuredValue()
    proto.ParseFromString(data)
    return nested_structure_coder.decode_proto(proto)


def graph_of(ds: tf.data.Dataset) -> GraphDef:
    """The pipeline's graph, Python functions included as references into this process."""
    return graph_edits.graph_def_of(ds, allow_external_state=True)


def python_nodes(graph_def: GraphDef) -> dict[str, str]:
    """Dataset node -> the Python op it runs (``py_function``, ``numpy_function``, generators)."""
    found: dict[str, str] = {}
    for op in PYTHON_OPS:
        for node, _ in graph_edits._users_of_op(graph_def, op):  # noqa: SLF001 - same room
            found.setdefault(node, op)
    return found


def _flat_spec(graph_def: GraphDef, node: str) -> tuple[tf.TensorSpec, ...]:
    node_def = graph_edits._node(graph_def, node)  # noqa: SLF001
    types = graph_edits._attr(node_def, "output_types").list.type  # noqa: SLF001
    shapes = graph_edits._attr(node_def, "output_shapes").list.shape  # noqa: SLF001
    return tuple(tf.TensorSpec(tf.TensorShape(s), tf.dtypes.as_dtype(t)) for t, s in zip(types, shapes))


def _user_options(graph_def: GraphDef) -> list:
    """The OptionsDataset nodes directly under the ``_Retval`` (the user's ``with_options``)."""
    out, node = [], graph_edits._node(graph_def, graph_edits.RETVAL)  # noqa: SLF001
    while True:
        node = graph_edits._node(graph_def, node_ref(node.input[0]))  # noqa: SLF001
        if node.op != "OptionsDataset":
            return out
        out.append(node)


def sub_pipeline_graph(graph_def: GraphDef, node: str) -> GraphDef:
    """The graph of the sub-pipeline ending at ``node``, under the user's options."""
    g = graph_edits._copy(graph_def)  # noqa: SLF001
    node = graph_edits._resolve(g, node)  # noqa: SLF001
    target = graph_edits._node(g, node)  # noqa: SLF001
    top = node
    for options in reversed(_user_options(g)):
        copy = g.node.add()
        copy.CopyFrom(options)
        copy.name = graph_edits._fresh_name(g, "OptionsDataset")  # noqa: SLF001
        del copy.input[:]
        copy.input.append(top)
        copy.attr["output_types"].CopyFrom(graph_edits._attr(target, "output_types"))  # noqa: SLF001
        copy.attr["output_shapes"].CopyFrom(graph_edits._attr(target, "output_shapes"))  # noqa: SLF001
        copy.ClearField("experimental_type")
        top = copy.name
    retval = graph_edits._node(g, graph_edits.RETVAL)  # noqa: SLF001
    del retval.input[:]
    retval.input.append(top)
    return pruned(g)


def sub_pipeline(graph_def: GraphDef, node: str) -> tf.data.Dataset:
    """The sub-pipeline ending at ``node`` as a Dataset of flat tensors (what a worker runs)."""
    spec = _flat_spec(graph_def, graph_edits._resolve(graph_def, node))  # noqa: SLF001
    return graph_edits.dataset_from_graph_def(sub_pipeline_graph(graph_def, node), spec)


# -- the rewrite ----------------------------------------------------------------------------------

def measuring_job_name() -> str:
    """A job name of plumbkit's own: its measurements never read from a user's shared job."""
    return f"plumbkit-measure-{uuid.uuid4().hex[:10]}"


def _policy(name: str):
    return getattr(tf.data.experimental.service.ShardingPolicy, name)


def distributed(remote: tf.data.Dataset, address: str, *, sharding: str = "OFF",
                job_name: str | None = None, compression: str | None = None) -> tf.data.Dataset:
    """``remote`` served by the tf.data service at ``address`` (registers it with the dispatcher)."""
    service = address if "://" in address else f"grpc://{address}"
    return remote.apply(tf.data.experimental.service.distribute(
        processing_mode=_policy(sharding), service=service, job_name=job_name,
        compression=compression))


def spliced(graph_def: GraphDef, cut: str, below: tf.data.Dataset, prefix: str = _SERVICE_PREFIX) -> GraphDef:
    """The user's graph with the output of ``cut`` replaced by the dataset ``below`` (same flat
    element types): ``below``'s serialized nodes join the graph under ``prefix``, its functions
    join the library, and what ``cut`` and its inputs alone needed is dropped. The operators
    above the cut are the user's own nodes, Python functions included."""
    other = graph_edits._parse(below._as_serialized_graph(  # noqa: SLF001
        external_state_policy=tf.data.experimental.ExternalStatePolicy.IGNORE))
    g = graph_edits._copy(graph_def)  # noqa: SLF001
    top = graph_edits.root_name(other)
    taken = {n.name for n in g.node}
    for node in other.node:
        if node.op == "_Retval":
            continue
        new = g.node.add()
        new.CopyFrom(node)
        new.name = prefix + node.name
        if new.name in taken:
            raise RewriteError(f"cannot splice: the graph already has a node {new.name!r}")
        del new.input[:]
        for spec in node.input:
            control = "^" if spec.startswith("^") else ""
            new.input.append(control + prefix + spec.lstrip("^"))
    have = {f.signature.name for f in g.library.function}
    for function in other.library.function:
        if function.signature.name not in have:
            g.library.function.add().CopyFrom(function)
    have_grads = {d.function_name for d in g.library.gradient}
    for gradient in other.library.gradient:
        if gradient.function_name not in have_grads:
            g.library.gradient.add().CopyFrom(gradient)
    graph_edits._redirect(g, graph_edits._resolve(g, cut), prefix + top)  # noqa: SLF001
    return pruned(g)


def offloaded_graph(graph_def: GraphDef, plan: Distribute, address: str) -> GraphDef:
    """The user's graph with ``plan.cut`` and everything below it served by the tf.data service.

    The distributed dataset is built (and registered with the dispatcher) from the remote part
    and spliced in where the cut's output was; a client-side prefetch goes at the end unless
    the pipeline ends with one.
    """
    remote = sub_pipeline(graph_def, plan.cut)
    served = distributed(remote, address, sharding=plan.sharding, job_name=plan.job_name,
                         compression=plan.compression)
    g = spliced(graph_def, plan.cut, served)
    if plan.prefetch is not None:
        root = graph_edits._node(g, graph_edits.root_name(g))  # noqa: SLF001
        if root.op != "PrefetchDataset":
            g, _ = graph_edits.set_prefetch(g, root.name, plan.prefetch)
    return g


def client_part(graph_def: GraphDef, element_spec: Any, cut: str, sample: int = 16) -> tf.data.Dataset:
    """The operators above ``cut`` alone, fed a cached sample of the cut's real elements: what
    the client spends on them once the workers do the rest (measured without the service)."""
    below = cached_sample(sub_pipeline(graph_def, cut), sample)
    return graph_edits.dataset_from_graph_def(spliced(graph_def, cut, below, prefix="plumbkit_sample/"),
                                              element_spec)


def offloaded(graph_def: GraphDef, element_spec: Any, plan: Distribute, address: str) -> tf.data.Dataset:
    """The pipeline served through the tf.data service at ``address``, cut as ``plan`` says."""
    return graph_edits.dataset_from_graph_def(offloaded_graph(graph_def, plan, address), element_spec)


def offloaded_from_request(pipeline: dict[str, Any], plan: Distribute, address: str) -> tf.data.Dataset:
    """:func:`offloaded` for a pipeline named by :func:`pipeline_request` (its graph as bytes)."""
    return offloaded(graph_pb2.GraphDef.FromString(pipeline["graph"]), decode_spec(pipeline["spec"]), plan, address)


def cached_sample(ds: tf.data.Dataset, elements: int) -> tf.data.Dataset:
    """``elements`` real elements, computed once and repeated: what moving them costs, alone."""
    return ds.take(elements).cache().repeat()


# -- measuring (runs in the measuring client) ---------------------------------------------------

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
    one takes a twentieth of a second, run for ``warmup`` s and at least ``warmup_elements``
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
        if (time.perf_counter() - t0 > 0.05 and pulled >= warmup_elements) or n >= 1 << 22:
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
        return graph_edits.dataset_from_graph_def(graph_def, spec).take(1).cache().repeat()
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
    (``take(1).cache().repeat()``: the consumer's ceiling); ``sub`` (the part up to the cut,
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


def pipeline_request(ds: tf.data.Dataset) -> dict[str, Any]:
    """The part of a request that names ``ds`` (its graph and element_spec, as bytes)."""
    return {"graph": graph_of(ds).SerializeToString(), "spec": encode_spec(ds.element_spec)}


__all__ = ["Counter", "PYTHON_OPS", "RewriteError", "build", "cached_sample", "client_part", "collect",
           "cpu_share", "decode_spec", "distributed", "encode_spec", "graph_of", "graph_rate", "handle", "loop_rate",
           "measuring_job_name", "offloaded", "offloaded_from_request", "offloaded_graph", "pipeline_request",
           "python_nodes", "served_plan", "spliced", "sub_pipeline", "sub_pipeline_graph"]
