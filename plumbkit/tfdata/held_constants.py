"""In-memory data held once, by reference, instead of copied into every graph plumbkit edits.

``Dataset.from_tensor_slices((x_train, y_train))`` is how most notebooks start, and serializing
such a pipeline copies the arrays into its GraphDef as constants. plumbkit edits and rebuilds a
pipeline many times per plan (each operator's sub-pipeline for its cardinality, every
calibration, every contender of every round), and each rebuild parsed and copied the arrays
again: with a 123 MB array a trace took 34 s and peaked at 3.4 GB of memory, an optimization
149 s and 3.9 GB (session 58).

So :func:`hold_large_constants` turns every top-level constant of at least
:data:`HELD_BYTES` into a placeholder that names its content (a digest), and keeps one tensor
of that content here. The rebuild binds the placeholder to it (the same import with live
handles that binds lookup tables and variables, :mod:`plumbkit.tfdata.live_state`): the edited
graphs stay small and no rebuild copies the data. Pipelines rebuilt from it capture the tensor
and keep it alive. Inside a plumbkit operation the tensors are held strongly
(:func:`holding`); when the outermost one ends only those a live pipeline still captures are
kept, so a notebook's old arrays are not pinned.

Constants inside the pipeline's functions (an array captured by a ``map``) stay in their
functions' library, and string constants stay in the graph (file names are read from it: the
disk model, the tier's digest of the files): they are copied per rebuild as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import weakref
from typing import Iterator

import tensorflow as tf
from tensorflow.core.framework import graph_pb2, types_pb2

#: A top-level constant this large or larger is held instead of copied. A judgement, not a
#: measurement: below a megabyte a copy per rebuild costs less than a millisecond.
HELD_BYTES = 2**20
#: The placeholder's attribute naming the content it stands for.
HELD_ATTR = "_plumbkit_held"

_lock = threading.Lock()
_strong: dict[str, tf.Tensor] = {}
_weak: "weakref.WeakValueDictionary[str, tf.Tensor]" = weakref.WeakValueDictionary()
_depth = 0


class HeldConstantGone(LookupError):
    """A graph names held data that nothing holds any more (rebuild from the Dataset instead)."""


def hold_large_constants(graph_def: graph_pb2.GraphDef) -> graph_pb2.GraphDef:
    """``graph_def`` (edited in place, and returned) with each large top-level constant replaced
    by a placeholder of the same name, dtype and shape that names its content; the content is
    held here, once per distinct content."""
    for node in graph_def.node:
        if node.op != "Const":
            continue
        proto = node.attr["value"].tensor
        if proto.dtype == types_pb2.DT_STRING or proto.ByteSize() < HELD_BYTES:
            continue  # strings stay: file names are read from the graph (the disk, the tier's digest)
        digest = _digest(proto)
        with _lock:
            if _held(digest) is None:
                _keep(digest, tf.constant(tf.make_ndarray(proto)))
        dtype, shape = node.attr["dtype"].type, proto.tensor_shape
        node.op = "Placeholder"
        node.ClearField("attr")
        node.attr["dtype"].type = dtype
        node.attr["shape"].shape.CopyFrom(shape)
        node.attr[HELD_ATTR].s = digest.encode()
    return graph_def


def held_bindings(graph_def: graph_pb2.GraphDef) -> dict[str, tf.Tensor]:
    """Placeholder name -> the held tensor it stands for, for every held constant of ``graph_def``."""
    out: dict[str, tf.Tensor] = {}
    for node in graph_def.node:
        if node.op == "Placeholder" and HELD_ATTR in node.attr:
            digest = node.attr[HELD_ATTR].s.decode()
            with _lock:
                tensor = _held(digest)
            if tensor is None:
                raise HeldConstantGone(f"the in-memory data behind {node.name} is no longer held; "
                                       f"rebuild the pipeline from its Dataset")
            out[node.name] = tensor
    return out


@contextlib.contextmanager
def holding() -> Iterator[None]:
    """Hold every constant met inside strongly until the outermost ``holding`` ends; then keep
    only what a live pipeline still captures."""
    global _depth
    with _lock:
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _strong.clear()


def held_count() -> int:
    """How many distinct constants are held (strongly or by a live pipeline)."""
    with _lock:
        return len(set(_strong) | set(_weak.keys()))


def _digest(proto) -> str:
    """A digest of the constant's dtype, shape and content (its raw bytes where TensorFlow keeps
    them so: strings and small repeated values are hashed as their serialized proto)."""
    h = hashlib.blake2b(digest_size=20)
    if proto.tensor_content:
        h.update(proto.tensor_shape.SerializeToString() + b"%d\0" % proto.dtype)
        h.update(proto.tensor_content)
    else:
        h.update(proto.SerializeToString())
    return h.hexdigest()


def _held(digest: str) -> tf.Tensor | None:
    tensor = _strong.get(digest)
    if tensor is None:
        tensor = _weak.get(digest)
        if tensor is not None and _depth:
            _strong[digest] = tensor
    return tensor


def _keep(digest: str, tensor: tf.Tensor) -> None:
    _weak[digest] = tensor
    _strong[digest] = tensor  # outside any operation too: until the next outermost one ends


__all__ = ["HELD_ATTR", "HELD_BYTES", "HeldConstantGone", "held_bindings", "held_count",
           "hold_large_constants", "holding"]
