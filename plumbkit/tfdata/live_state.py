"""Rebuild a pipeline in the user's process with its live state: Python functions, generators,
lookup tables, variables, Keras preprocessing layers.

A serialized pipeline keeps *copies* of the resources its functions capture: a variable becomes
``VarHandleOp`` + ``AssignVariableOp(value at serialization)``, a mutable table is exported by
value, a ``tf.random.Generator`` restarts from its state at that moment. A rebuilt pipeline
then no longer sees (or advances) the user's state: a variable the training loop changes, a
table it fills, a generator's stream. And ``py_function`` / ``from_generator`` reach Python
through tokens whose registry holds only weak references: they live as long as the user's
Dataset object does.

So a rebuild here (1) finds, on the user's Dataset objects, the tensors each tf.data function
captures (by function name, which the GraphDef keeps), (2) rewires every captured *resource*
argument of the edited graph to a placeholder bound to the user's live handle, (3) imports the
graph inside a ``tf.function`` with those handles captured, and (4) keeps the user's Dataset
alive with the result. Nothing is copied: the rebuilt pipeline reads and writes the same
resources as the user's.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import tensorflow as tf
from tensorflow.core.framework import graph_pb2, node_def_pb2, types_pb2
from tensorflow.python.framework import op_def_registry

from .graph_walk import pruned

#: Attribute on a rebuilt Dataset holding its :class:`_Live` record.
LIVE_ATTR = "_plumbkit_live"

Captures = dict[str, tuple[tf.Tensor, ...]]


class _Live:
    """What a rebuilt Dataset carries: the live captures (function name -> tensors) and the
    objects that must outlive it. A plain object, so TensorFlow's tracking leaves it alone."""

    __slots__ = ("captures", "keepalive")

    def __init__(self, captures: Captures, keepalive: tuple[Any, ...]):
        self.captures, self.keepalive = captures, keepalive


def live_captures(ds: tf.data.Dataset) -> Captures:
    """Function name -> the tensors it captures, read from ``ds``'s Python objects."""
    return state_of(ds)[0]


def state_of(ds: tf.data.Dataset) -> tuple[Captures, tuple[Any, ...]]:
    """(function name -> the tensors it captures, the objects that keep ``ds``'s Python functions
    and generators alive), read from ``ds``'s Python objects without calling any user code.

    The objects kept are the traced functions (``py_function`` tokens live as long as their
    graphs) — never the Datasets: a Dataset kept alive would keep its filled caches too.
    """
    out: Captures = {}
    keep: list[Any] = []
    for obj in python_objects(ds):
        if isinstance(obj, tf.data.Dataset):
            live = getattr(obj, LIVE_ATTR, None)
            if live is not None:
                out.update({k: v for k, v in live.captures.items() if k not in out})
                keep.extend(live.keepalive)
        else:
            fn = obj.function
            out.setdefault(_name(fn.name), tuple(fn.captured_inputs))
            keep.append(obj)
    return out, tuple(keep)


def python_objects(ds: tf.data.Dataset) -> Iterator[Any]:
    """Every Dataset and every traced function (``StructuredFunctionWrapper``) reachable from
    ``ds``'s Python objects, each once, ``ds`` first: through Datasets' attributes and the
    lists, tuples and dicts they hold (never into a function: its captures are its own).
    Nothing is called, no user code runs."""
    from tensorflow.python.data.ops.structured_function import StructuredFunctionWrapper

    seen: set[int] = set()
    stack: list[Any] = [ds]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, StructuredFunctionWrapper):
            yield obj
        elif isinstance(obj, tf.data.Dataset):
            yield obj
            stack.extend(v for v in vars(obj).values() if _may_hold(v))
        elif isinstance(obj, (list, tuple)):
            stack.extend(v for v in obj if _may_hold(v))
        elif isinstance(obj, dict):
            stack.extend(v for v in obj.values() if _may_hold(v))


def _may_hold(value: Any) -> bool:
    from tensorflow.python.data.ops.structured_function import StructuredFunctionWrapper
    return isinstance(value, (tf.data.Dataset, StructuredFunctionWrapper, list, tuple, dict))


def _name(name: Any) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)


def _captured_spans(node: node_def_pb2.NodeDef) -> list[tuple[str, int, int]]:
    """(function attr, start, end) of the captured-argument inputs each of ``node``'s functions gets.

    tf.data passes a function's captures as a list input: ``other_arguments`` for the single
    function of map, filter, interleave..., ``<attr>_other_args`` / ``<attr>_other_arguments``
    for ops with several (GeneratorDataset's init/next/finalize, group_by_window's key/reduce).
    """
    op_def = op_def_registry.get(node.op)
    if op_def is None:
        return []
    funcs = [a.name for a in op_def.attr if a.type == "func" and node.attr[a.name].func.name]
    spans, start = {}, 0
    for arg in op_def.input_arg:
        if arg.type_list_attr:
            width = len(node.attr[arg.type_list_attr].list.type)
        elif arg.number_attr:
            width = node.attr[arg.number_attr].i
        else:
            width = 1
        spans[arg.name] = (start, start + width)
        start += width
    out = []
    for f in funcs:
        stem = f[:-len("_func")] if f.endswith("_func") else f
        match = [a for a in spans if a.startswith(f + "_other") or a.startswith(stem + "_func_other")]
        if not match and len(funcs) == 1 and "other_arguments" in spans:
            match = ["other_arguments"]
        if len(match) == 1:
            out.append((f, *spans[match[0]]))
    return out


def bind_live_resources(graph_def: graph_pb2.GraphDef, captures: Captures
                        ) -> tuple[graph_pb2.GraphDef, dict[str, tf.Tensor]]:
    """Point every captured resource argument at a placeholder for the user's live handle.

    Returns the edited graph (the serialized copies of those resources pruned) and
    placeholder name -> live handle. Functions whose captures are not known (a pipeline built
    some other way) keep their serialized copies.
    """
    graph_def = graph_pb2.GraphDef.FromString(graph_def.SerializeToString())
    bindings: dict[str, tf.Tensor] = {}
    by_handle: dict[int, str] = {}
    for node in list(graph_def.node):
        for attr, start, end in _captured_spans(node):
            live = captures.get(node.attr[attr].func.name)
            data = [i for i in node.input if not i.startswith("^")]
            if live is None or len(live) != end - start or end > len(data):
                continue
            for k, tensor in enumerate(live):
                if tensor.dtype != tf.resource:
                    continue
                name = by_handle.get(id(tensor))
                if name is None:
                    name = f"plumbkit_live_resource/{len(bindings)}"
                    placeholder = graph_def.node.add(name=name, op="Placeholder")
                    placeholder.attr["dtype"].type = types_pb2.DT_RESOURCE
                    bindings[name], by_handle[id(tensor)] = tensor, name
                node.input[_data_index(node, start + k)] = name
    return (pruned(graph_def) if bindings else graph_def), bindings


def _data_index(node: node_def_pb2.NodeDef, k: int) -> int:
    """Position in ``node.input`` of its ``k``-th data (non-control) input."""
    seen = -1
    for i, spec in enumerate(node.input):
        if not spec.startswith("^"):
            seen += 1
            if seen == k:
                return i
    raise IndexError(k)


def variant_with_live_resources(graph_def: graph_pb2.GraphDef, bindings: dict[str, tf.Tensor]
                                ) -> tuple[tf.Tensor, Any]:
    """The pipeline's variant, built by importing ``graph_def`` in a ``tf.function`` that
    captures the live handles ``bindings`` feeds its placeholders with; and that function,
    to be kept alive with the dataset (its library holds the pipeline's functions)."""
    retval = next(n for n in graph_def.node if n.op == "_Retval")
    output = retval.input[0]
    body = graph_pb2.GraphDef()
    body.CopyFrom(graph_def)
    del body.node[:]
    body.node.extend(n for n in graph_def.node if n.op != "_Retval")
    names = sorted(bindings)

    @tf.function(autograph=False)
    def build():
        feeds = {f"{name}:0": tf.identity(bindings[name]) for name in names}
        out, = tf.graph_util.import_graph_def(body, input_map=feeds, return_elements=[_tensor(output)],
                                             name="")
        return out

    return build(), build


def _tensor(spec: str) -> str:
    return spec if ":" in spec else f"{spec}:0"


def remember(new: tf.data.Dataset, keep: Iterable[Any], captures: Captures,
             extra: Iterable[Any] = ()) -> tf.data.Dataset:
    """Keep ``keep`` (the user's traced functions: their Python functions and generators) alive
    with ``new``, and record the live captures so rebuilding ``new`` again binds the same state."""
    object.__setattr__(new, LIVE_ATTR, _Live(dict(captures), (*keep, *extra)))
    return new
