"""A size limit for a memory cache, in tf.data itself: stock ``cache()`` has none.

A plan places a cache where its *estimated* size fits the budget; an estimate from a few
seconds of tracing can be wrong (the last files hold bigger records, a length varies). So the
plan's cache is fed through a guard: a ``scan`` right below it that adds up the bytes of every
element entering the cache (per iterator, so an abandoned partial fill starts again from zero)
and fails the fill with a message starting with :data:`GUARD_MARKER` the moment the total
passes the limit. The cache's memory is then bounded by the limit plus one element, the fill's
partial buffer is freed with its iterator. :func:`fill_cache` fills a plan's cache once before
anything is measured, and the optimizer falls back to no cache when the guard stopped it
(:func:`plumbkit.engine.optimization.optimize`), and says so.
"""

from __future__ import annotations

import threading
import time

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from ..model.units import human_bytes
from ..tunables import STRING_HEADER_BYTES
from .graph_walk import node_ref, pruned, reachable

#: Every guard error starts with this, so the engine can tell it from the pipeline's own.
GUARD_MARKER = "plumbkit memory guard"
#: Name of the guard's function (the operator shows as ``scan(plumbkit_cache_guard)``).
GUARD_FUNCTION = "plumbkit_cache_guard"


def element_bytes(components) -> tf.Tensor:
    """Bytes of one element's tensors (int64 scalar); variants (nested datasets, ragged
    encodings) count as nothing: their size is not visible here."""
    total = tf.constant(0, tf.int64)
    for t in tf.nest.flatten(components):
        if t.dtype == tf.string:
            total += tf.reduce_sum(tf.cast(tf.strings.length(t), tf.int64))
            total += STRING_HEADER_BYTES * tf.size(t, out_type=tf.int64)
        elif t.dtype not in (tf.variant, tf.resource):
            total += tf.size(t, out_type=tf.int64) * t.dtype.size
    return total


def guard_message(label: str, limit: float) -> str:
    return (f"{GUARD_MARKER}: the cache after {label} passed its limit of {human_bytes(limit)} while "
            f"filling (the estimate was too low); the fill was stopped")


def insert_guard(graph_def: graph_pb2.GraphDef, cache_node: str, limit: float, label: str) -> graph_pb2.GraphDef:
    """``graph_def`` with a guard between the cache ``cache_node`` and its input.

    The guard is built as Python's ``Dataset.scan`` builds one, on the cache's input
    sub-pipeline (so its function has the right signature), and grafted into the graph.
    """
    from . import graph as graph_module
    from .graph_edits import _copy, _node, root_name

    graph_def = _copy(graph_def)
    cache = _node(graph_def, cache_node)
    below = cache.input[0]
    template = graph_module.dataset_at(graph_def, below)
    limit_bytes = int(limit)
    message = guard_message(label, limit)

    @tf.autograph.experimental.do_not_convert
    def plumbkit_cache_guard(total, *components):
        total = total + element_bytes(components)
        check = tf.debugging.Assert(total <= limit_bytes, [tf.constant(message)], summarize=1)
        with tf.control_dependencies([check]):
            total = tf.identity(total)
        return total, components[0] if len(components) == 1 else components

    guarded = template.scan(tf.constant(0, tf.int64), plumbkit_cache_guard)
    grafted = graph_module.serialized_graph(guarded)[0]
    # the guard is the graph's output: a scan of the user's own below it is not the guard
    scan = _node(grafted, root_name(grafted))
    assert scan.op == "ScanDataset", scan.op
    prefix = f"{cache_node}/plumbkit_guard/"
    wanted = reachable(grafted, scan.input[1:]) | {scan.name}
    have_functions = {f.signature.name for f in graph_def.library.function}
    for fdef in grafted.library.function:
        if fdef.signature.name not in have_functions:
            graph_def.library.function.add().CopyFrom(fdef)
    renamed = {name: prefix + name for name in wanted}
    for node in grafted.node:
        if node.name not in wanted:
            continue
        copy = graph_def.node.add()
        copy.CopyFrom(node)
        copy.name = renamed[node.name]
        del copy.input[:]
        for k, spec in enumerate(node.input):
            ref = node_ref(spec)
            if node is scan and k == 0:
                copy.input.append(below)
            elif ref in renamed:
                copy.input.append(spec.replace(ref, renamed[ref], 1))
            else:
                copy.input.append(spec)
    cache.input[0] = renamed[scan.name]
    return pruned(graph_def)


def fill_cache(ds: tf.data.Dataset, batches: int, *, seconds: float,
               stop: threading.Event | None = None) -> str | None:
    """Consume ``batches`` minibatches of ``ds`` (epochs repeated), filling its guarded cache
    before anything is measured, so its true size is known.

    Returns the guard's sentence if the cache passed its limit, else None (filled, or the time
    ran out first: the measurement's own warm-up then carries on; or ``stop`` was set, a Cancel
    or a Ctrl-C: the caller's next checkpoint ends the operation). Other errors propagate.
    """
    from .run import measurable
    it = iter(measurable(ds))
    deadline = time.perf_counter() + seconds
    try:
        for _ in range(batches):
            next(it)
            if time.perf_counter() > deadline or (stop is not None and stop.is_set()):
                return None
    except tf.errors.InvalidArgumentError as err:
        if is_guard_error(err.message):
            return guard_text(err.message)
        raise
    finally:
        del it  # a partial fill's buffer goes with its iterator
    return None


def is_guard_error(message: str | None) -> bool:
    return bool(message) and GUARD_MARKER in message


def guard_text(message: str) -> str:
    """The guard's own sentence out of TensorFlow's ``assertion failed: [...]`` error."""
    start = message.find(GUARD_MARKER)
    if start < 0:
        return message
    end = message.find("]", start)
    return message[start:end if end > 0 else None]
