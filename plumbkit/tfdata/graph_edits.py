"""Edit a pipeline's serialized graph and rebuild a working Dataset (a TensorFlow edge).

The round trip of tf.data's own ``experimental/ops/distribute.py``: serialize the pipeline to a
GraphDef, edit the GraphDef, rebuild it with ``DatasetFromGraph`` and wrap the variant in a
``_VariantDataset`` carrying the original ``element_spec``.

Nodes are named as in the serialized GraphDef ("MapDataset/_5"); the ``_Retval`` is "dataset".
Every edit copies its input and returns a new GraphDef, so plans can be replayed and compared.
An edited node keeps its name even when its op changes ("MapDataset/_5" may become a
ParallelMapDatasetV2), so a node's identity survives a plan; added nodes get unique names in
TensorFlow's style ("PrefetchDataset/_plumb_3"), numbered from the graph itself, so the same
edits on the same graph give the same names. Names are only stable within one GraphDef: a
rebuilt dataset serializes again with TensorFlow's own fresh numbering.

Options: the user's ``OptionsDataset`` nodes stay in the graph, so their ``tf.data.Options``
survive the round trip; :func:`plumbkit.tfdata.rebuild.apply_changes` applies more with
``Dataset.with_options`` on the rebuilt dataset (it merges with the user's, as ``with_options``
always does).
"""

from __future__ import annotations

import os
import re
from typing import Any

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, graph_pb2, node_def_pb2
from tensorflow.python.framework import op_def_registry, tensor_util

from ..model.pipeline import AUTOTUNE
from ..model.errors import PipelineError
from . import live_state, unrebuildable
from .graph import rebuilds_with_fresh_state, stateful_op_named
from .graph_walk import node_ref, pruned
from .held_constants import HeldConstantGone, held_bindings
from ..model.errors import first_line

GraphDef = graph_pb2.GraphDef

RETVAL = "dataset"

_CACHES = ("CacheDataset", "CacheDatasetV2")
_PYTHON_OPS = ("EagerPyFunc", "PyFunc", "PyFuncStateless")
# Sequential op -> (its parallel form, constant arguments the parallel form adds besides
# num_parallel_calls), with the arguments Python's own parallel versions pass.
_PARALLEL_FORM = {
    "MapDataset": ("ParallelMapDatasetV2", {}),
    "BatchDatasetV2": ("ParallelBatchDataset", {}),
    "InterleaveDataset": ("ParallelInterleaveDatasetV4",
                          {"buffer_output_elements": AUTOTUNE, "prefetch_input_elements": AUTOTUNE}),
}
_NO_PARALLEL_FORM = {
    "FlatMapDataset": "flat_map runs its function on one element at a time; "
                      "interleave(cycle_length=1) is its parallelizable equivalent",
    # TF 2.21's ParallelFilterDataset kernel serializes itself without num_parallel_calls, so
    # a graph holding one fails when the iterator is made; only TF's own runtime
    # filter_parallelization (after serialization) can use it.
    "FilterDataset": "TensorFlow cannot serialize ParallelFilterDataset (its graph loses "
                     "num_parallel_calls); options.experimental_optimization.filter_parallelization "
                     "parallelizes filters at run time",
}


# Parallel op -> its plain (sequential) form; arguments the plain form lacks are dropped.
_PLAIN_FORM = {
    "ParallelMapDataset": "MapDataset",
    "ParallelMapDatasetV2": "MapDataset",
    "ParallelBatchDataset": "BatchDatasetV2",
    "ParallelInterleaveDatasetV2": "InterleaveDataset",
    "ParallelInterleaveDatasetV3": "InterleaveDataset",
    "ParallelInterleaveDatasetV4": "InterleaveDataset",
}


class RewriteError(PipelineError):
    """The pipeline cannot be serialized or the edit cannot be made; the message says which node and why."""


# -- serialize and rebuild ------------------------------------------------------------------------

def graph_def_of(ds: tf.data.Dataset, *, allow_external_state: bool = True) -> GraphDef:
    """The pipeline's GraphDef, for editing and rebuilding in this process.

    Python functions (``tf.py_function``, ``numpy_function``, ``from_generator``), resources
    (lookup tables, variables, Keras preprocessing layers) and stateful random ops are all
    accepted: the graph keeps references into this process, and :func:`dataset_from_graph_def`
    binds the user's live state again (see :mod:`plumbkit.tfdata.live_state`), so the rebuilt
    Dataset works here, with the same state, though nowhere else. ``allow_external_state`` is
    kept for callers of the earlier API; ``False`` asks for a graph that is also portable to
    another process and raises RewriteError naming what is not.
    Device assignments are kept: stripping them (as ``distribute.py`` does) leaves
    EagerPyFunc with the malformed device "/device::0".
    """
    policy = tf.data.experimental.ExternalStatePolicy
    if allow_external_state:
        return _parse_or_refuse(ds)
    try:
        return _parse(ds._as_serialized_graph(external_state_policy=policy.FAIL))  # noqa: SLF001
    except (tf.errors.FailedPreconditionError, tf.errors.InvalidArgumentError) as err:
        failure = str(err)
    graph_def = _parse_or_refuse(ds)
    named = stateful_op_named(failure)
    if named is None:
        raise RewriteError(f"TensorFlow cannot serialize this pipeline: {first_line(failure)}")
    culprits = [o for o in _PYTHON_OPS if _users_of_op(graph_def, o)]
    if not rebuilds_with_fresh_state(named) and named not in culprits:
        culprits.append(named)
    if not culprits:  # only stateful random ops
        return graph_def
    raise RewriteError(_explain(graph_def, culprits[0], failure))


def _parse_or_refuse(ds: tf.data.Dataset) -> GraphDef:
    """Serialize ``ds``; what TensorFlow cannot serialize at all is refused with the reason
    (an :class:`~plumbkit.tfdata.unrebuildable.UnrebuildableError`)."""
    unrebuildable.refuse_if_unrebuildable(ds)
    return unrebuildable.serialize(ds)


def dataset_from_graph_def(graph_def: GraphDef, element_spec: Any, *,
                           captures: "live_state.Captures | None" = None,
                           keepalive: Any = None) -> tf.data.Dataset:
    """A working Dataset from an (edited) GraphDef; ``element_spec`` is the original's.

    ``captures`` (function name -> the tensors it captures, from
    :func:`~plumbkit.tfdata.live_state.live_captures` of the user's Dataset) binds every
    captured resource to the user's live one instead of the serialized copy; ``keepalive``
    (what :func:`~plumbkit.tfdata.live_state.state_of` says keeps the user's Python functions and
    generators alive) is kept with the result, so they outlive the user's own Dataset.
    Memory caches get a fresh resource: a serialized memory cache holds a handle to the
    *original* dataset's cache, and rebuilding it as is would share (and read back) what the
    original already cached, even when the graph below it has changed.
    """
    from tensorflow.python.data.ops import dataset_ops
    from tensorflow.python.data.util import structure
    from tensorflow.python.ops import gen_experimental_dataset_ops

    graph_def = _fresh_memory_caches(graph_def)
    root = _node(graph_def, root_name(graph_def))
    have = [tf.as_dtype(t) for t in _attr(root, "output_types").list.type]
    want = list(structure.get_flat_tensor_types(element_spec))
    if have and have != want:
        raise RewriteError(f"the graph yields {[t.name for t in have]} but element_spec "
                           f"needs {[t.name for t in want]}")
    graph_def, bindings = live_state.bind_live_resources(graph_def, captures or {})
    try:
        bindings.update(held_bindings(graph_def))  # in-memory data held once (held_constants)
    except HeldConstantGone as err:
        raise RewriteError(str(err)) from err
    builder = None
    try:
        if bindings:
            variant, builder = live_state.variant_with_live_resources(graph_def, bindings)
        else:
            variant = gen_experimental_dataset_ops.dataset_from_graph(graph_def.SerializeToString())
    except (tf.errors.OpError, ValueError) as err:
        message = getattr(err, "message", str(err))
        raise RewriteError(f"TensorFlow could not rebuild the edited graph: {message}") from err
    new = dataset_ops._VariantDataset(variant, element_spec)  # noqa: SLF001
    keep = keepalive if isinstance(keepalive, tuple) else (keepalive,) if keepalive is not None else ()
    return live_state.remember(new, keep, captures or {}, extra=(builder,) if builder else ())


def root_name(graph_def: GraphDef) -> str:
    """The user's last transformation: what the ``_Retval`` returns, below any OptionsDataset."""
    return _resolve(graph_def, RETVAL)


# -- the edits ----------------------------------------------------------------------------------

def set_parallelism(graph_def: GraphDef, node_name: str, value: int) -> GraphDef:
    """Run ``node_name`` with ``value`` parallel calls (-1: AUTOTUNE), in its parallel form.

    map -> ParallelMapDatasetV2, batch -> ParallelBatchDataset,
    interleave -> ParallelInterleaveDatasetV4 (cycle length kept, so parallelism is capped at
    it: TensorFlow refuses more). Ops already parallel (MapAndBatchDataset included) get the
    new ``num_parallel_calls``. ``deterministic`` stays as the user set it ("default" means the
    ``Options.deterministic`` in force, True unless changed), so the order is kept.
    """
    if value != AUTOTUNE and value < 1:
        raise RewriteError(f"parallelism for {node_name} must be >= 1 or -1 (AUTOTUNE), not {value}")
    graph_def = _copy(graph_def)
    node = _node(graph_def, _resolve(graph_def, node_name))
    if node.op not in _PARALLEL_FORM and not _has_arg(node.op, "num_parallel_calls"):
        why = _NO_PARALLEL_FORM.get(node.op, "tf.data has no parallel form of it")
        raise RewriteError(f"{node.name} ({node.op}) cannot be parallelized: {why}")
    if "Interleave" in node.op and value != AUTOTUNE:
        value = min(value, _cycle_length(graph_def, node))
    if node.op in _PARALLEL_FORM:
        new_op, extra = _PARALLEL_FORM[node.op]
        _convert(graph_def, node, new_op, {**extra, "num_parallel_calls": value})
    else:
        _set_arg(graph_def, node, "num_parallel_calls", value)
    return pruned(graph_def)


def set_sequential(graph_def: GraphDef, node_name: str) -> GraphDef:
    """Run ``node_name`` in its plain form (``MapDataset``, ``BatchDatasetV2``,
    ``InterleaveDataset``): one element at a time in its consumer's thread, no pool. A parallel
    form with ``num_parallel_calls=1`` still overlaps with its consumer; this does not. A node
    already plain is left as is; a fused ``MapAndBatchDataset`` (no plain single-node form) gets
    one parallel call."""
    graph_def = _copy(graph_def)
    node = _node(graph_def, _resolve(graph_def, node_name))
    if node.op in _PLAIN_FORM:
        _convert(graph_def, node, _PLAIN_FORM[node.op], {})
    elif _has_arg(node.op, "num_parallel_calls"):
        _set_arg(graph_def, node, "num_parallel_calls", 1)
    return pruned(graph_def)


def set_prefetch(graph_def: GraphDef, after_node: str, buffer_size: int) -> tuple[GraphDef, str]:
    """Prefetch ``buffer_size`` elements (-1: AUTOTUNE) of ``after_node``'s output.

    Inserts a PrefetchDataset above it, or resizes the prefetch already there (directly above,
    or ``after_node`` itself), so setting a prefetch twice is the same as setting it once.
    """
    if buffer_size != AUTOTUNE and buffer_size < 0:
        raise RewriteError(f"prefetch buffer above {after_node} must be >= 0 or -1 (AUTOTUNE), not {buffer_size}")
    graph_def = _copy(graph_def)
    target = _node(graph_def, _resolve(graph_def, after_node))
    existing = target if target.op == "PrefetchDataset" else next(
        (n for n in _consumers(graph_def, target.name) if n.op == "PrefetchDataset"), None)
    if existing is None:
        existing = _insert_above(graph_def, target, "PrefetchDataset", buffer_size=_const(graph_def, buffer_size))
    else:
        _set_arg(graph_def, existing, "buffer_size", buffer_size)
    # What Python's Dataset.prefetch() passes; the op's own default (True) differs.
    existing.attr["legacy_autotune"].b = buffer_size == AUTOTUNE
    name = existing.name
    return pruned(graph_def), name


def insert_cache(graph_def: GraphDef, after_node: str, filename: str = "") -> tuple[GraphDef, str]:
    """Cache ``after_node``'s output: in memory (``filename=""``) or in files at ``filename``.

    Built as Python's ``Dataset.cache()`` builds it: CacheDatasetV2 fed a DummyMemoryCache, so
    each rebuilt dataset owns a fresh cache (shared across its repeats and iterators). A file
    cache that already exists at ``filename`` is read back, whatever pipeline wrote it. A cache
    with the same filename already directly above (or ``after_node`` itself) is reused.
    """
    graph_def = _copy(graph_def)
    target = _node(graph_def, _resolve(graph_def, after_node))
    for node in [target, *_consumers(graph_def, target.name)]:
        if node.op in _CACHES and _const_value(graph_def, node, "filename") == filename:
            return graph_def, node.name
    node = _insert_above(graph_def, target, "CacheDatasetV2",
                         filename=_const(graph_def, filename, tf.string),
                         cache=_dummy_memory_cache(graph_def))
    return graph_def, node.name


def remove_node(graph_def: GraphDef, node_name: str) -> GraphDef:
    """Splice out one single-input transformation (e.g. the user's own cache or prefetch)."""
    graph_def = _copy(graph_def)
    node = _node(graph_def, _resolve(graph_def, node_name))
    _redirect(graph_def, node.name, node_ref(node.input[0]), skip=node.name)
    return pruned(graph_def)


# -- graph plumbing -------------------------------------------------------------------------------

def _parse(tensor) -> GraphDef:
    graph_def = GraphDef()
    graph_def.ParseFromString(tensor.numpy())
    return graph_def


def _copy(graph_def: GraphDef) -> GraphDef:
    copy = GraphDef()
    copy.CopyFrom(graph_def)
    return copy


def _node(graph_def: GraphDef, name: str) -> node_def_pb2.NodeDef:
    for node in graph_def.node:
        if node.name == name:
            return node
    datasets = [n.name for n in graph_def.node if "Dataset" in n.op]
    raise RewriteError(f"no node named {name!r} in this pipeline (its datasets: {', '.join(datasets)})")


def _resolve(graph_def: GraphDef, name: str) -> str:
    """``name``, or for the ``_Retval``/an OptionsDataset the transformation below them."""
    node = _node(graph_def, name)
    while node.op in ("_Retval", "OptionsDataset"):
        node = _node(graph_def, node_ref(node.input[0]))
    return node.name


def _consumers(graph_def: GraphDef, name: str) -> list[node_def_pb2.NodeDef]:
    return [n for n in graph_def.node
            if any(not i.startswith("^") and node_ref(i) == name for i in n.input)]


def _redirect(graph_def: GraphDef, old: str, new: str, *, skip: str = "") -> None:
    """Make every consumer of ``old`` (but ``skip``) read ``new`` instead."""
    for node in _consumers(graph_def, old):
        if node.name == skip:
            continue
        for k, spec in enumerate(node.input):
            if not spec.startswith("^") and node_ref(spec) == old:
                node.input[k] = new


def _fresh_name(graph_def: GraphDef, op: str) -> str:
    taken = {n.name for n in graph_def.node}
    numbers = [int(m.group(1)) for n in taken if (m := re.search(r"/_plumb_(\d+)$", n))]
    k = max(numbers, default=-1) + 1
    while f"{op}/_plumb_{k}" in taken:
        k += 1
    return f"{op}/_plumb_{k}"


def _const(graph_def: GraphDef, value: Any, dtype: tf.DType = tf.int64) -> str:
    node = graph_def.node.add(name=_fresh_name(graph_def, "Const"), op="Const")
    node.attr["dtype"].type = tf.as_dtype(dtype).as_datatype_enum
    node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(value, dtype=dtype))
    return node.name


def _dummy_memory_cache(graph_def: GraphDef) -> str:
    """A DummyMemoryCache node: its handle names no cache, so CacheDatasetV2 makes its own."""
    return graph_def.node.add(name=_fresh_name(graph_def, "DummyMemoryCache"), op="DummyMemoryCache").name


def _fresh_memory_caches(graph_def: GraphDef) -> GraphDef:
    """Feed every CacheDatasetV2 a DummyMemoryCache instead of a serialized cache handle."""
    graph_def = _copy(graph_def)
    for node in [n for n in graph_def.node if n.op == "CacheDatasetV2"]:
        k = _arg_index(node, "cache")
        source = _node(graph_def, node_ref(node.input[k]))
        if source.op == "Const":
            node.input[k] = _dummy_memory_cache(graph_def)
    return pruned(graph_def)


def _attr(node: node_def_pb2.NodeDef, name: str):
    """``node``'s attr ``name`` (a few ops spell ``output_types`` "Toutput_types"); never adds one."""
    for key in (name, "T" + name) if name.startswith("output_") else (name,):
        if key in node.attr:
            return node.attr[key]
    return attr_value_pb2.AttrValue()


def _has_arg(op: str, arg: str) -> bool:
    op_def = op_def_registry.get(op)
    return op_def is not None and any(a.name == arg for a in op_def.input_arg)


def _arg_spans(node: node_def_pb2.NodeDef) -> dict[str, tuple[int, int]]:
    """Input positions [start, end) of each argument of ``node``, expanding list arguments."""
    spans, start = {}, 0
    for arg in op_def_registry.get(node.op).input_arg:
        if arg.type_list_attr:
            width = len(_attr(node, arg.type_list_attr).list.type)
        elif arg.number_attr:
            width = _attr(node, arg.number_attr).i
        else:
            width = 1
        spans[arg.name] = (start, start + width)
        start += width
    return spans


def _arg_index(node: node_def_pb2.NodeDef, arg: str) -> int:
    spans = _arg_spans(node)
    if arg not in spans:
        raise RewriteError(f"{node.name} ({node.op}) has no argument {arg!r}")
    return spans[arg][0]


def _arg_dtype(op: str, arg: str) -> tf.DType:
    return tf.as_dtype(next(a.type for a in op_def_registry.get(op).input_arg if a.name == arg))


def _set_arg(graph_def: GraphDef, node: node_def_pb2.NodeDef, arg: str, value: Any) -> None:
    """Point argument ``arg`` at a new constant (the old one may be shared, so it is not edited)."""
    node.input[_arg_index(node, arg)] = _const(graph_def, value, _arg_dtype(node.op, arg))


def _const_value(graph_def: GraphDef, node: node_def_pb2.NodeDef, arg: str) -> Any:
    source = _node(graph_def, node_ref(node.input[_arg_index(node, arg)]))
    if source.op != "Const":
        return None
    value = tensor_util.MakeNdarray(source.attr["value"].tensor)
    value = value.item() if value.ndim == 0 else value
    return value.decode() if isinstance(value, bytes) else value


def _cycle_length(graph_def: GraphDef, node: node_def_pb2.NodeDef) -> int:
    """The interleave's cycle length; AUTOTUNE means one per schedulable core, as in TF."""
    cycle = _const_value(graph_def, node, "cycle_length")
    if cycle is None:
        return 1 << 30
    return int(cycle) if cycle > 0 else len(os.sched_getaffinity(0))


def _fill_attrs(node: node_def_pb2.NodeDef) -> None:
    """Keep the attrs ``node.op`` has, add its defaults for the others."""
    op_def = op_def_registry.get(node.op)
    known = {a.name for a in op_def.attr}
    for key in [k for k in node.attr if k not in known]:
        del node.attr[key]
    for attr in op_def.attr:
        if attr.name not in node.attr and attr.HasField("default_value"):
            node.attr[attr.name].CopyFrom(attr.default_value)


def _convert(graph_def: GraphDef, node: node_def_pb2.NodeDef, new_op: str, extra: dict[str, Any]) -> None:
    """Change ``node`` to ``new_op`` in place, mapping arguments by name.

    Arguments the new op adds are constants from ``extra``. Attributes shared by name (the function,
    ``output_types``, ``preserve_cardinality``, ``deterministic``...) are kept.
    """
    spans = _arg_spans(node)
    data = [i for i in node.input if not i.startswith("^")]
    control = [i for i in node.input if i.startswith("^")]
    inputs = []
    for arg in op_def_registry.get(new_op).input_arg:
        if arg.name in spans:
            start, end = spans[arg.name]
            inputs.extend(data[start:end])
        elif arg.name in extra:
            inputs.append(_const(graph_def, extra[arg.name], tf.as_dtype(arg.type)))
        else:
            raise RewriteError(f"{node.name}: do not know how to fill {new_op}'s {arg.name!r}")
    node.op = new_op
    del node.input[:]
    node.input.extend(inputs + control)
    _fill_attrs(node)


def _insert_above(graph_def: GraphDef, target: node_def_pb2.NodeDef, op: str, **args: str) -> node_def_pb2.NodeDef:
    """A new unary ``op`` node reading ``target``, read by all of ``target``'s former consumers.

    ``args`` maps the op's other arguments to node names; ``output_types``/``output_shapes``
    and the full type come from ``target``; ``metadata`` is left empty so TensorFlow names it.
    """
    node = graph_def.node.add(name=_fresh_name(graph_def, op), op=op)
    arg_names = [a.name for a in op_def_registry.get(op).input_arg]
    node.input.extend([target.name] + [args[a] for a in arg_names[1:]])
    node.attr["output_types"].CopyFrom(_attr(target, "output_types"))
    node.attr["output_shapes"].CopyFrom(_attr(target, "output_shapes"))
    if target.HasField("experimental_type"):
        node.experimental_type.CopyFrom(target.experimental_type)
    _fill_attrs(node)
    _redirect(graph_def, target.name, node.name, skip=node.name)
    return node


# -- explaining what cannot be serialized ---------------------------------------------------------

def _functions_called(graph_def: GraphDef) -> dict[str, set[str]]:
    """Function -> functions its nodes reference (transitively closed), plus the ops it holds."""
    direct = {f.signature.name: {name for n in f.node_def for name in _func_attrs(n)}
              for f in graph_def.library.function}
    closed: dict[str, set[str]] = {}

    def close(name: str, seen: set[str]) -> set[str]:
        if name in closed:
            return closed[name]
        out = set()
        for callee in direct.get(name, ()):
            if callee not in seen:
                out |= {callee} | close(callee, seen | {callee})
        closed[name] = out
        return out

    return {name: close(name, {name}) for name in direct}


def _func_attrs(node: node_def_pb2.NodeDef) -> set[str]:
    names = set()
    for value in node.attr.values():
        if value.HasField("func"):
            names.add(value.func.name)
        names.update(f.name for f in value.list.func)
    return names


def _users_of_op(graph_def: GraphDef, op: str) -> list[tuple[str, str]]:
    """(dataset node, function) pairs where ``op`` runs inside the node's functions."""
    holders = {f.signature.name for f in graph_def.library.function if any(n.op == op for n in f.node_def)}
    if not holders:
        return []
    calls = _functions_called(graph_def)
    users = []
    for node in graph_def.node:
        for fn in sorted(_func_attrs(node)):
            reached = ({fn} | calls.get(fn, set())) & holders
            users.extend((node.name, h) for h in sorted(reached))
    users.extend((n.name, "") for n in graph_def.node if n.op == op)
    return users


def _explain(graph_def: GraphDef, op: str, failure: str) -> str:
    functions: dict[str, list[str]] = {}
    for node, fn in _users_of_op(graph_def, op):
        functions.setdefault(node, []).extend([fn] if fn else [])
    where = ", ".join(f"{node} (in {', '.join(fns)})" if fns else node
                      for node, fns in functions.items()) or "the pipeline"
    if op in _PYTHON_OPS:
        why = (f"{where} calls a Python function (tf.py_function, tf.numpy_function or "
               f"Dataset.from_generator: op {op}); py_function cannot be serialized, so the "
               f"pipeline cannot be rebuilt from its graph")
    else:
        why = (f"{where} uses {op}, which reads state outside the graph (a variable or other "
               f"resource) that serialization cannot carry")
    return f"{why}. Pass allow_external_state=True to rebuild it in this process only. (TensorFlow: {first_line(failure)})"


# -- calibration: an operator alone on a cached sample of its inputs --------------------------------

def insert_sample(graph_def: GraphDef, below: str, count: int, repeats: int) -> tuple[GraphDef, str]:
    """``below``'s first ``count`` elements, cached in memory and repeated ``repeats`` times
    (``take(count).cache().repeat(repeats)``), spliced in where ``below`` was read.

    Returns the new graph and the RepeatDataset's name (set its count with :func:`set_count`).
    """
    graph_def = _copy(graph_def)
    target = _node(graph_def, _resolve(graph_def, below))
    take = _insert_above(graph_def, target, "TakeDataset", count=_const(graph_def, count))
    graph_def, cache = insert_cache(graph_def, take.name)
    repeat = _insert_above(graph_def, _node(graph_def, cache), "RepeatDataset",
                           count=_const(graph_def, repeats))
    return graph_def, repeat.name


def set_count(graph_def: GraphDef, node_name: str, count: int) -> GraphDef:
    """The ``count`` argument of a Take/Repeat node set to ``count``."""
    graph_def = _copy(graph_def)
    _set_arg(graph_def, _node(graph_def, node_name), "count", count)
    return pruned(graph_def)


def with_output(graph_def: GraphDef, node_name: str) -> GraphDef:
    """The sub-pipeline ending at ``node_name``: the ``_Retval`` reads it, the rest is pruned."""
    graph_def = _copy(graph_def)
    retval = next(n for n in graph_def.node if n.op == "_Retval")
    del retval.input[:]
    retval.input.append(node_name)
    return pruned(graph_def)


def input_of(graph_def: GraphDef, node_name: str) -> str:
    """The dataset a unary transformation reads (its first input)."""
    return node_ref(_node(graph_def, node_name).input[0])
