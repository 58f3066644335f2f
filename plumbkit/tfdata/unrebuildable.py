"""What cannot be rebuilt, in plain words: the operator, the reason and what the user can do.

Almost every pipeline can be traced, stepped and optimized in the user's process (Python
functions, generators and resources included, see :mod:`plumbkit.tfdata.live_state`). The few
that cannot are those TensorFlow cannot serialize at all; each known case is in
:data:`KNOWN_CASES` (and in the README's table, each with a test), anything else is refused
with TensorFlow's own reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from ..model.errors import PipelineError
from .held_constants import hold_large_constants
from .live_state import python_objects
from ..model.errors import first_line

#: Protocol buffers (a GraphDef) cannot exceed 2 GiB; TensorFlow then returns an empty graph.
GRAPH_LIMIT_BYTES = 2**31 - 1
#: Refuse before serializing when in-memory constants alone come this close to the limit.
CONSTANTS_MARGIN = 0.9


class UnrebuildableError(PipelineError):
    """The pipeline cannot be rebuilt from its graph; the message names why and what to do."""


@dataclass(frozen=True)
class Case:
    pattern: str  # a regular expression on TensorFlow's serialization error
    what: str  # the operator, as the user wrote it
    why: str
    fix: str


KNOWN_CASES = (
    Case(r"GeneratorDatasetOp::Dataset does not support serialization",
         "prefetch_to_device / copy_to_device (tf.data.experimental)",
         "TensorFlow cannot serialize the device-copy dataset they build",
         "trace and optimize the pipeline without it, then apply it to plan.dataset"),
)


def explain_serialization_failure(err: BaseException) -> str:
    message = getattr(err, "message", None) or str(err)
    for case in KNOWN_CASES:
        if re.search(case.pattern, message):
            return f"plumbkit cannot rebuild a pipeline with {case.what}: {case.why}. What to do: {case.fix}"
    return (f"plumbkit cannot rebuild this pipeline: TensorFlow cannot serialize its graph "
            f"({first_line(message)})")


def too_large_message(size: float) -> str:
    return (f"plumbkit cannot rebuild this pipeline: it holds {size / 2**30:.1f} GiB of in-memory data "
            f"(from_tensors / from_tensor_slices of a large array, or large captured tensors), and a "
            f"pipeline's graph cannot exceed 2 GiB. What to do: write the data to files "
            f"(TFRecord, Dataset.save) and read them, or feed it with Dataset.from_generator")


def in_memory_bytes(ds: tf.data.Dataset) -> int:
    """Bytes of the tensors serialization would copy into the graph: the element tensors of
    ``from_tensors`` / ``from_tensor_slices`` sources, and the constants and tensors the
    pipeline's functions hold or capture. Read from the Dataset objects, without running anything."""
    total = 0
    for obj in python_objects(ds):
        if isinstance(obj, tf.data.Dataset):
            tensors = getattr(obj, "_tensors", None)
            if isinstance(tensors, (list, tuple)):
                total += sum(_tensor_bytes(t) for t in tensors if isinstance(t, tf.Tensor))
        else:
            total += sum(_tensor_bytes(t) for t in obj.function.captured_inputs)
            total += _constant_bytes(obj.function.graph)
    return total


def _constant_bytes(graph) -> int:
    """Bytes of the constants a function's graph holds (``tf.constant(array)`` inside a map)."""
    total = 0
    for op in graph.get_operations():
        if op.type == "Const":
            total += op.node_def.attr["value"].tensor.ByteSize()
    return total


def _tensor_bytes(t: tf.Tensor) -> int:
    if t.dtype == tf.resource:
        return _variable_bytes(t)
    if t.dtype == tf.variant:
        return 0
    if t.dtype == tf.string:
        return int(tf.reduce_sum(tf.strings.length(t)).numpy()) if t.shape.num_elements() else 0
    return int(t.shape.num_elements() or 0) * t.dtype.size


def _variable_bytes(handle: tf.Tensor) -> int:
    """A captured variable's size (serialization copies its value into the graph); 0 for other
    resources or when TensorFlow does not record the shape."""
    from tensorflow.python.ops import resource_variable_ops
    try:
        data = resource_variable_ops.get_eager_safe_handle_data(handle)
    except Exception:  # noqa: BLE001 - not a variable handle: no size to read
        return 0
    if data is None or not data.is_set:
        return 0
    total = 0
    for shape_and_type in data.shape_and_type:
        dims = [d.size for d in shape_and_type.shape.dim]
        if dims and all(d >= 0 for d in dims) and shape_and_type.dtype != tf.string.as_datatype_enum:
            n = 1
            for d in dims:
                n *= d
            total += n * tf.as_dtype(shape_and_type.dtype).size
    return total


def refuse_if_unrebuildable(ds: tf.data.Dataset) -> None:
    """Raise before serializing what cannot fit a graph (2 GiB of in-memory data takes TensorFlow
    tens of seconds and several times that memory to fail on)."""
    size = in_memory_bytes(ds)
    if size > CONSTANTS_MARGIN * GRAPH_LIMIT_BYTES:
        raise UnrebuildableError(too_large_message(size))


def serialize(ds: tf.data.Dataset) -> graph_pb2.GraphDef:
    """``ds``'s GraphDef, references into this process kept; refused with the reason otherwise."""
    from tensorflow.python.data.ops.options import ExternalStatePolicy
    try:
        tensor = ds._as_serialized_graph(external_state_policy=ExternalStatePolicy.IGNORE)  # noqa: SLF001
    except (tf.errors.OpError, ValueError) as err:
        raise UnrebuildableError(explain_serialization_failure(err)) from err
    graph_def = graph_pb2.GraphDef()
    graph_def.ParseFromString(tensor.numpy())
    if not any(n.op == "_Retval" for n in graph_def.node):
        raise UnrebuildableError(too_large_message(GRAPH_LIMIT_BYTES))
    return hold_large_constants(graph_def)  # in-memory arrays held once, not copied per rebuild


