"""The offloaded pipeline as a graph: the cut, the remote part, and ``distribute()`` spliced in.

A *cut* at operator ``k`` means what stock tf.data service does with ``distribute()`` placed
after ``k``: ``k`` and everything below it run on the workers, the operators above it on the
client. Built on the graph round trip (:mod:`plumbkit.tfdata.graph_edits`):

- the remote part is the sub-pipeline ending at ``k`` (the user's ``tf.data.Options`` kept), as
  a Dataset of flat tensors; ``distribute()`` registers it with the dispatcher;
- the client part is the user's graph above ``k`` with ``k``'s output replaced by the
  distributed dataset's own (serialized) nodes, so any operators above the cut, Python ones
  included, keep working on the client; then a client-side prefetch.

What the measuring client runs with these is in :mod:`plumbkit.tfdata.offload_requests`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import struct_pb2
from tensorflow.python.saved_model import nested_structure_coder

from ..model.offload import Distribute
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
    """:func:`offloaded` for a pipeline named as in a measuring request (its graph and spec as bytes)."""
    return offloaded(graph_pb2.GraphDef.FromString(pipeline["graph"]), decode_spec(pipeline["spec"]), plan, address)


def cached_sample(ds: tf.data.Dataset, elements: int) -> tf.data.Dataset:
    """``elements`` real elements, computed once and repeated: what moving them costs, alone."""
    return ds.take(elements).cache().repeat()


__all__ = ["PYTHON_OPS", "cached_sample", "client_part", "decode_spec", "distributed", "encode_spec",
           "graph_of", "offloaded", "offloaded_from_request", "offloaded_graph", "python_nodes", "spliced",
           "sub_pipeline", "sub_pipeline_graph"]
