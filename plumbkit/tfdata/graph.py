"""Dataset -> :class:`~plumbkit.model.Pipeline`: read a tf.data pipeline's serialized graph.

The one place that turns TensorFlow's GraphDef into plumbkit's operator tree. It names each
operator's kind, tunables and user functions, finds the files a source reads and decides
whether a function touches randomness (which forbids caching it or anything above it).
"""

from __future__ import annotations

import dataclasses
import glob
import math
import os
import re
from typing import Any, Callable, Iterable

import tensorflow as tf
from tensorflow.core.framework import function_pb2, graph_pb2, types_pb2
from tensorflow.python.framework import op_def_registry, tensor_util

from ..model.errors import PipelineError
from ..model.pipeline import FILE_SOURCE_KINDS, SHUFFLE_KINDS, Operator, Pipeline, kind_of
from .graph_walk import node_ref, pruned
from .python_ops import PYTHON_OPS, callable_of, own_random_names, user_callables


# Dataset ops that only carry options or threading and are not user transformations.
_PLUMBING_OPS = {
    "OptionsDataset", "ModelDataset", "MaxIntraOpParallelismDataset", "PrivateThreadPoolDataset",
    "ExperimentalMaxIntraOpParallelismDataset", "ExperimentalPrivateThreadPoolDataset",
}

# Random ops whose state lives inside the op's kernel: a rebuilt pipeline simply gets fresh
# state (no variable or resource to carry across serialization).
KERNEL_STATE_RANDOM_OPS = frozenset({
    "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "ParameterizedTruncatedNormal",
    "TruncatedNormal", "RandomShuffle", "Multinomial", "RandomGamma", "RandomPoisson",
    "RandomPoissonV2", "RandomCrop", "SampleDistortedBoundingBox", "SampleDistortedBoundingBoxV2",
})
# Ops that draw fresh random numbers every time they run.
_RANDOM_OPS = KERNEL_STATE_RANDOM_OPS | {
    "StatefulUniform", "StatefulUniformInt", "StatefulUniformFullInt", "StatefulStandardNormal",
    "StatefulStandardNormalV2", "StatefulTruncatedNormal", "StatefulRandomBinomial", "RngSkip",
    "RngReadAndSkip", "NonDeterministicInts", "AnonymousSeedGenerator",
    "AnonymousRandomSeedGenerator", "RandomDataset", "RandomDatasetV2", "ExperimentalRandomDataset",
}
# Ops whose value changes between runs because they read mutable state.
_STATE_READ_OPS = {"ReadVariableOp", "VarHandleOp", "ResourceGather", "LookupTableFindV2x"}
# Ops that change the user's state (a variable, a table, a queue, a file) each time they run: a
# cache above them would run them in the first epoch only.
STATE_WRITING_OPS = frozenset({
    "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "ResourceScatterAdd",
    "ResourceScatterSub", "ResourceScatterMul", "ResourceScatterDiv", "ResourceScatterMin",
    "ResourceScatterMax", "ResourceScatterUpdate", "ResourceScatterNdUpdate", "ResourceScatterNdAdd",
    "ResourceScatterNdSub", "ResourceStridedSliceAssign", "LookupTableInsertV2", "LookupTableRemoveV2",
    "LookupTableImportV2", "QueueEnqueueV2", "QueueEnqueueManyV2", "WriteFile",
})
# Ops that read a variable of the user's, whose value a training loop or a callback may change
# between epochs (a model's weights, a curriculum's knob): a cache above them would replay the
# values of its first epoch. Keras' preprocessing layers read none (their vocabularies and
# statistics are constants or immutable tables).
VARIABLE_READ_OPS = frozenset({"ReadVariableOp", "ResourceGather", "ResourceGatherNd"})
# A table that can change after the pipeline is built (``tf.lookup.experimental.MutableHashTable``
# and its dense form), found where an operator's captured resources come from; a
# ``StaticHashTable`` cannot change.
MUTABLE_TABLE_OPS = frozenset({"MutableHashTableV2", "MutableHashTableOfTensorsV2", "MutableDenseHashTableV2"})
TABLE_READ_OPS = frozenset({"LookupTableFindV2", "LookupTableSizeV2", "LookupTableExportV2"})

_INFERENCE_NAME = re.compile(r"^__inference_(?:Dataset_(?P<method>[a-z_]+?)_)?(?P<func>.+?)_\d+$")
#: How a function handed to a ``tf.data.experimental`` transformation is named (its method follows).
_EXPERIMENTAL = "tf_data_experimental_"
_METHOD_PREFIXES = (
    "flat_map", "interleave", "parallel_interleave", "map_and_batch", "map", "filter", "scan",
    "group_by_window", "group_by_reducer", "take_while", "reduce", "padded_batch", "batch",
)


def python_function_name(function_name: str) -> str:
    """``__inference_Dataset_map_decode_jpeg_38`` -> ``decode_jpeg``; lambdas give ``lambda``."""
    match = _INFERENCE_NAME.match(function_name)
    if not match:
        return function_name
    func = match.group("func")
    method = match.group("method")
    rest = func[len(_EXPERIMENTAL):]  # ds.apply(tf.data.experimental.map_and_batch(f, 32))
    if not method and func.startswith(_EXPERIMENTAL) and "_" in rest:
        method, func = rest.split("_", 1)
    if method:
        # The lazy group may have cut a method with underscores (flat_map) short.
        whole = f"{method}_{func}"
        for prefix in _METHOD_PREFIXES:
            if whole.startswith(prefix + "_"):
                func = whole[len(prefix) + 1:]
                break
    if func.startswith("classabc") or "ABCMeta" in func:
        return ""
    if func.startswith("class") and "." in func:  # a callable object mapped directly: its class
        return func.rsplit(".", 1)[-1]  # (``ds.map(layer)``: classkeras.src.layers....TextVectorization)
    return func


def serialized_graph(ds: tf.data.Dataset) -> tuple[graph_pb2.GraphDef, list[str]]:
    """The pipeline's GraphDef, plus problems (what stops plumbkit from rebuilding it).

    Python functions, generators and resources of this process are no problem: the graph keeps
    references to them and plumbkit rebuilds the pipeline here, with the live state (see
    :mod:`plumbkit.tfdata.live_state`). What TensorFlow cannot serialize at all raises
    PipelineError naming the cause and what to do (:mod:`plumbkit.tfdata.unrebuildable`).
    """
    from .unrebuildable import refuse_if_unrebuildable, serialize
    refuse_if_unrebuildable(ds)
    return serialize(ds), []


_STATEFUL_NAMED = re.compile(r"(\w+) is stateful")


def stateful_op_named(serialization_error: str) -> str | None:
    """The op TensorFlow's "X is stateful" serialization error names, if it names one."""
    named = _STATEFUL_NAMED.search(serialization_error)
    return named.group(1) if named else None


def rebuilds_with_fresh_state(op: str | None) -> bool:
    """True for a random op that keeps its state in its kernel (or a seed generator): when it is
    what stopped serialization, the rebuilt pipeline works, with fresh state."""
    return op is not None and (op in KERNEL_STATE_RANDOM_OPS or op.endswith("SeedGenerator"))


def _const_value(node) -> Any:
    proto = node.attr["value"].tensor
    try:
        if proto.dtype == types_pb2.DT_STRING and proto.tensor_content:
            # MakeNdarray cannot read packed strings; TensorFlow's own parser can.
            value = tf.io.parse_tensor(proto.SerializeToString(), tf.string).numpy()
        else:
            value = tensor_util.MakeNdarray(proto)
    except Exception:  # noqa: BLE001 - an exotic constant is simply not a tunable
        return None
    if value.dtype.kind in "SO":
        flat = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in value.flat]
        return flat[0] if value.ndim == 0 else flat
    if value.ndim == 0:
        return value.item()
    return None


def _input_names(node_def) -> list[str]:
    return [i.split(":")[0] for i in node_def.input if not i.startswith("^")]


def _arg_names(op_type: str, node_def) -> list[str]:
    """Name of each (non-control) input of a node, expanding list arguments."""
    op_def = op_def_registry.get(op_type)
    if op_def is None:
        return []
    names = []
    for arg in op_def.input_arg:
        if arg.number_attr:
            count = node_def.attr[arg.number_attr].i
        elif arg.type_list_attr:
            count = len(node_def.attr[arg.type_list_attr].list.type)
        else:
            count = 1
        names.extend([arg.name] * count)
    return names


class _FunctionLibrary:
    """Answers questions about user functions: their callees, datasets and randomness."""

    def __init__(self, library: function_pb2.FunctionDefLibrary):
        self.functions = {f.signature.name: f for f in library.function}
        self._random: dict[str, bool] = {}
        self.python: dict[str, list[str]] = {}  # Python function -> random-looking names it uses

    def python_random(self, node) -> bool:
        """Does the Python function behind a py_function / numpy_function / generator op
        visibly draw random numbers? (TensorFlow cannot see inside it; its code can be read.)"""
        fn = callable_of(node.attr["token"].s.decode())
        random = False
        for user in user_callables(fn) if fn is not None else []:
            names = own_random_names(user)
            self.python[user.__name__] = names
            random = random or bool(names)
        return random

    def callees(self, fdef) -> Iterable[str]:
        for node in fdef.node_def:
            if node.op in self.functions:
                yield node.op
            for attr in node.attr.values():
                if attr.HasField("func") and attr.func.name in self.functions:
                    yield attr.func.name
                for f in attr.list.func:
                    if f.name in self.functions:
                        yield f.name

    def is_random(self, name: str) -> bool:
        """Does ``name`` (transitively) produce values that change from run to run?"""
        if name in self._random:
            return self._random[name]
        self._random[name] = False  # break recursion cycles
        fdef = self.functions.get(name)
        result = fdef is not None and (
            self._has_random_node(fdef) or any(self.is_random(c) for c in self.callees(fdef))
        )
        self._random[name] = result
        return result

    def writes_state(self, name: str) -> bool:
        """Does ``name`` (transitively) change a variable, table, queue or file when it runs?"""
        return self._runs_op(name, STATE_WRITING_OPS, set())

    def reads_variables(self, name: str) -> bool:
        """Does ``name`` (transitively) read a variable when it runs?"""
        return self._runs_op(name, VARIABLE_READ_OPS, set())

    def reads_tables(self, name: str) -> bool:
        """Does ``name`` (transitively) look a key up in a table when it runs?"""
        return self._runs_op(name, TABLE_READ_OPS, set())

    def calls_python(self, name: str) -> bool:
        """Does ``name`` (transitively, generators included) run a Python function?"""
        return self._runs_op(name, PYTHON_OPS, set())

    def _runs_op(self, name: str, ops, seen: set[str]) -> bool:
        """Does ``name`` or a function it calls hold a node of one of ``ops``?"""
        if name in seen or name not in self.functions:
            return False
        seen.add(name)
        fdef = self.functions[name]
        return (any(n.op in ops for n in fdef.node_def)
                or any(self._runs_op(c, ops, seen) for c in self.callees(fdef)))

    def _has_random_node(self, fdef) -> bool:
        nodes = {n.name: n for n in fdef.node_def}
        resource_args = {a.name for a in fdef.signature.input_arg if a.type == types_pb2.DT_RESOURCE}
        for node in fdef.node_def:
            if node.op in _RANDOM_OPS or node.op.startswith("Random") and node.op.endswith("Dataset"):
                return True
            if node.op in PYTHON_OPS and self.python_random(node):
                return True
            if node.op in ("ShuffleDataset", "ShuffleDatasetV2", "ShuffleDatasetV3"):
                return True
            if node.op.startswith("Stateless") and ("Random" in node.op or "Sample" in node.op):
                if self._seed_is_random(node, nodes, resource_args):
                    return True
        return False

    def _seed_is_random(self, node, nodes, resource_args) -> bool:
        """A stateless random op is random when its seed comes from state or another random op."""
        stack, seen = list(node.input), set()
        while stack:
            ref = node_ref(stack.pop())
            if ref in seen:
                continue
            seen.add(ref)
            if ref in resource_args:
                return True
            producer = nodes.get(ref)
            if producer is None:
                continue
            if producer.op in _RANDOM_OPS or producer.op in _STATE_READ_OPS:
                return True
            if producer.op in self.functions and self.is_random(producer.op):
                return True
            stack.extend(producer.input)
        return False

    def dataset_ops(self, name: str, seen: set[str] | None = None) -> list[str]:
        """Dataset op types created inside ``name`` (e.g. TFRecordDataset in an interleave)."""
        seen = seen if seen is not None else set()
        if name in seen or name not in self.functions:
            return []
        seen.add(name)
        fdef = self.functions[name]
        ops = [n.op for n in fdef.node_def if "Dataset" in n.op and n.op not in _PLUMBING_OPS]
        for callee in self.callees(fdef):
            ops.extend(self.dataset_ops(callee, seen))
        return ops

    def string_constants(self, name: str) -> list[str]:
        fdef = self.functions.get(name)
        if fdef is None:
            return []
        out = []
        for node in fdef.node_def:
            if node.op == "Const":
                value = _const_value(node)
                out.extend(value if isinstance(value, list) else [value])
        return [v for v in out if isinstance(v, str)]


def _existing_files(strings: Iterable[str]) -> list[str]:
    files: list[str] = []
    for s in strings:
        if not s or len(s) > 4096:
            continue
        if any(ch in s for ch in "*?[") and os.path.isabs(s):
            files.extend(sorted(glob.glob(s)))
        elif os.path.isfile(s):
            files.append(s)
    return list(dict.fromkeys(files))


def _tunables(op_type: str, node_def, consts: dict[str, Any]) -> dict[str, Any]:
    tunables: dict[str, Any] = {}
    for arg, ref in zip(_arg_names(op_type, node_def), _input_names(node_def)):
        if arg in ("input_dataset", "other_arguments", "components", "input_datasets"):
            continue
        value = consts.get(ref)
        if value is None or isinstance(value, list):
            continue
        key = {"num_parallel_calls": "parallelism", "filenames": "filename"}.get(arg, arg)
        tunables[key] = value
    for attr in ("reshuffle_each_iteration", "parallel_copy", "drop_remainder", "is_files"):
        if attr in node_def.attr:
            tunables[attr] = bool(node_def.attr[attr].b)
    return tunables


def _label(kind: str, op_type: str, functions: list[str], inner_ops: list[str],
           tunables: dict[str, Any]) -> str:
    if kind in ("load", "snapshot"):
        return kind  # their functions are TensorFlow's own (the reader, the sharding)
    names = list(dict.fromkeys(n for n in (python_function_name(f) for f in functions) if n))
    readers = [o for o in inner_ops if kind_of(o) in FILE_SOURCE_KINDS]
    if names == ["read_one_file"] and readers:  # TF's own wrapper: TFRecordDataset([files])
        return re.sub(r"V\d+$", "", readers[0])
    if kind == "from_tensor_slices" and tunables.get("is_files"):
        return "list_files"
    if kind == "flat_map" and names == ["flat_map_fn"] and "GeneratorDataset" in inner_ops:
        return "from_generator"  # Dataset.from_generator's own flat_map over generator ids
    if names:
        return f"{kind}({', '.join(names)})"
    inner = readers or [o for o in inner_ops if kind_of(o) not in (kind, "from_tensor_slices", "flat_map")]
    if inner:
        shown = sorted({re.sub(r"V\d+$", "", o) for o in inner})
        return f"{kind}({', '.join(shown)})"
    for key in ("batch_size", "count", "buffer_size", "batch_sizes"):
        if key in tunables and kind not in FILE_SOURCE_KINDS and kind != "csv":  # a reader's buffer, not its size
            value = tunables[key]
            shown = "AUTOTUNE" if value == -1 and key == "buffer_size" else value
            return f"{kind}({shown})"
    return kind if kind != "opaque" else f"opaque({op_type})"


def _reads_state(node, nodes, library: "_FunctionLibrary", functions: list[str]) -> bool:
    """Does ``node``'s function read state that can change between epochs: a variable, or a
    mutable table it captures (a captured resource is one of the node's own inputs)?"""
    if any(library.reads_variables(f) for f in functions):
        return True
    captured = set()
    for name in _input_names(node):
        while name in nodes and nodes[name].op == "Identity":  # the table restored, then passed on
            name = _input_names(nodes[name])[0]
        captured.add(nodes[name].op if name in nodes else "")
    return bool(captured & MUTABLE_TABLE_OPS) and any(library.reads_tables(f) for f in functions)


def pipeline_from_graph_def(graph_def: graph_pb2.GraphDef, *, element_spec: str = "",
                            problems: Iterable[str] = ()) -> Pipeline:
    """Build the operator tree from a serialized pipeline graph (pure GraphDef reading)."""
    nodes = {n.name: n for n in graph_def.node}
    library = _FunctionLibrary(graph_def.library)
    consts = {n.name: _const_value(n) for n in graph_def.node if n.op == "Const"}
    retval = next((n for n in graph_def.node if n.op == "_Retval"), None)
    if retval is None:
        raise PipelineError("the serialized graph has no output node; is this a tf.data pipeline?")

    def is_dataset(name: str) -> bool:
        node = nodes.get(name)
        return node is not None and "Dataset" in node.op

    def skip_plumbing(name: str) -> str:
        while nodes[name].op in _PLUMBING_OPS:
            name = _input_names(nodes[name])[0]
        return name

    options: dict[str, Any] = {}
    top = _input_names(retval)[0]
    if nodes[top].op == "OptionsDataset":
        options["serialized_options"] = nodes[top].attr["serialized_options"].s.hex()
    root = skip_plumbing(top)

    operators: dict[str, Operator] = {}
    stack = [root]
    while stack:
        name = stack.pop()
        if name in operators:
            continue
        node = nodes[name]
        inputs = tuple(skip_plumbing(i) for i in _input_names(node) if is_dataset(i))
        functions = [a.func.name for a in node.attr.values() if a.HasField("func") and a.func.name]
        inner_ops = [op for f in functions for op in library.dataset_ops(f)]
        tunables = _tunables(node.op, node, consts)
        kind = kind_of(node.op)
        random = any(library.is_random(f) for f in functions) or node.op in _RANDOM_OPS
        if kind in SHUFFLE_KINDS:
            random = tunables.get("reshuffle_each_iteration", True) or not tunables.get("seed")
        strings = [v for ref in _input_names(node) for v in _as_list(consts.get(ref))]
        for f in functions:
            strings.extend(library.string_constants(f))
        files = _existing_files(s for s in strings if isinstance(s, str))
        deterministic = None
        if "deterministic" in node.attr:
            deterministic = node.attr["deterministic"].s.decode() or "default"
        operators[name] = Operator(
            name=name, op=node.op, kind=kind, inputs=inputs, tunables=tunables,
            functions=tuple(functions), label=_label(kind, node.op, functions, inner_ops, tunables),
            random=bool(random), files=tuple(files), deterministic=deterministic,
            writes_state=any(library.writes_state(f) for f in functions),
            reads_state=_reads_state(node, nodes, library, functions),
            inner_kinds=tuple(dict.fromkeys(kind_of(o) for o in inner_ops)),
            holds_gil=node.op in PYTHON_OPS or any(library.calls_python(f) for f in functions),
            static_bytes=_static_bytes(node),
        )
        stack.extend(reversed(inputs))
    ordered = _preorder(operators, root)
    _disambiguate_labels(ordered)
    return Pipeline(operators=ordered, root=root, element_spec=element_spec,
                    options=options, problems=tuple(problems), remarks=_python_remarks(library.python))


def _python_remarks(python: dict[str, list[str]]) -> tuple[str, ...]:
    """What plumbkit assumed about the pipeline's Python functions, in plain words."""
    if not python:
        return ()
    plain = sorted(name for name, names in python.items() if not names)
    remarks = []
    if plain:
        remarks.append(f"Python functions {plain} run in this process (py_function / numpy_function / "
                       f"from_generator): rebuilt here with their live state; their code uses no random "
                       f"numbers that plumbkit can see, so they are taken as deterministic (cacheable)")
    for name, names in sorted(python.items()):
        if names:
            remarks.append(f"Python function {name} uses {', '.join(names)}: taken as random, so "
                           f"nothing at or above it is cached")
    return tuple(remarks)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _preorder(operators: dict[str, Operator], root: str) -> dict[str, Operator]:
    ordered: dict[str, Operator] = {}
    stack = [root]
    while stack:
        name = stack.pop()
        if name in ordered:
            continue
        ordered[name] = operators[name]
        stack.extend(reversed(operators[name].inputs))
    return ordered


def _disambiguate_labels(operators: dict[str, Operator]) -> None:
    """Make labels unique (``map(f)``, ``map(f)#2``) so a label names one operator."""
    counts: dict[str, int] = {}
    for name, op in list(operators.items())[::-1]:  # sources first: #1 is the earliest
        counts[op.label] = counts.get(op.label, 0) + 1
        if counts[op.label] > 1:
            operators[name] = _replace(op, label=f"{op.label}#{counts[op.label]}")


def _replace(op: Operator, **changes: Any) -> Operator:
    return dataclasses.replace(op, **changes)


def resolve_pipeline(pipeline: "tf.data.Dataset | Callable[[], tf.data.Dataset]") -> tf.data.Dataset:
    """Accept a Dataset or a zero-argument callable returning one; anything else is a clear error,
    and so is tf.data's debug mode (:func:`refuse_debug_mode`)."""
    refuse_debug_mode()
    ds = pipeline
    if callable(ds) and not isinstance(ds, tf.data.Dataset):
        ds = ds()
    if not isinstance(ds, tf.data.Dataset):
        raise PipelineError(
            f"expected a tf.data.Dataset or a zero-argument function returning one, got "
            f"{type(ds).__name__}{_what_to_pass_instead(ds)}"
        )
    return ds


def refuse_debug_mode() -> None:
    """tf.data's debug mode (``tf.data.experimental.enable_debug_mode()``, a notebook's leftover
    from debugging) runs every function in Python, one call at a time, and ignores parallelism
    and prefetch: nothing plumbkit measures or changes would hold there. A trace under it hung
    (TF 2.21: the tracer's pull never returned, 120 s for a 1.5 s trace), so it is refused at once."""
    from tensorflow.python.data.ops import debug_mode  # TF's own switch; there is no public getter
    if getattr(debug_mode, "DEBUG_MODE", False):
        raise PipelineError("tf.data's debug mode is on (tf.data.experimental.enable_debug_mode()): every "
                            "function runs in Python one call at a time and parallelism and prefetch are "
                            "ignored, so there is nothing to measure or tune; restart the kernel without it")


def _what_to_pass_instead(value) -> str:
    """For the things people pass by mistake: what to pass instead."""
    name = type(value).__name__
    if hasattr(value, "element_spec") and hasattr(value, "get_next"):
        return " (an iterator: pass the Dataset itself, before iter())"
    if "Distributed" in name:
        return " (a distributed dataset: pass the tf.data.Dataset before strategy.experimental_distribute_dataset)"
    return ""


def pipeline_of(ds: tf.data.Dataset) -> Pipeline:
    """plumbkit's model of ``ds``: operators, tunables, functions, files, randomness."""
    graph_def, problems = serialized_graph(ds)
    pipeline = pipeline_from_graph_def(graph_def, element_spec=repr(ds.element_spec), problems=problems)
    # The pool tf.data runs parallel calls on (0: its default, one thread per core).
    threadpool = ds.options().threading.private_threadpool_size or 0
    return dataclasses.replace(pipeline, options={**pipeline.options, "threadpool": int(threadpool)})


def variant_at(graph_def: graph_pb2.GraphDef, node: str) -> tuple[tf.Tensor, Any]:
    """A dataset variant for the sub-pipeline ending at ``node`` (the graph's output redirected),
    and what must be kept alive with it (the builder binding its held in-memory data, or None)."""
    from tensorflow.python.ops import gen_experimental_dataset_ops

    from .held_constants import HELD_ATTR, held_bindings
    from .live_state import variant_with_live_resources

    graph_def = graph_pb2.GraphDef.FromString(graph_def.SerializeToString())
    retval = next(n for n in graph_def.node if n.op == "_Retval")
    del retval.input[:]
    retval.input.append(node)
    if any(HELD_ATTR in n.attr for n in graph_def.node):  # bound, where the new output still reaches it
        if held := held_bindings(graph_def := pruned(graph_def)):
            return variant_with_live_resources(graph_def, held)
    return gen_experimental_dataset_ops.dataset_from_graph(graph_def.SerializeToString()), None


def _static_bytes(node) -> int | None:
    """Bytes of one element from the node's declared types and shapes, when every component is a
    fixed-size tensor of fully known shape (None for strings, variants, ragged or unknown dims)."""
    types_attr = "output_types" if "output_types" in node.attr else "Toutput_types"
    if types_attr not in node.attr or "output_shapes" not in node.attr:
        return None
    total = 0
    for t, s in zip(node.attr[types_attr].list.type, node.attr["output_shapes"].list.shape, strict=False):
        dtype = tf.dtypes.as_dtype(t)
        if dtype in (tf.string, tf.variant, tf.resource) or s.unknown_rank or any(d.size < 0 for d in s.dim):
            return None
        total += dtype.size * math.prod(d.size for d in s.dim)
    return total if node.attr[types_attr].list.type else None


def _flat_shape(shape, dtype) -> tf.TensorShape:
    """A component's shape as a function over the sub-pipeline may declare it. A variant (a
    SparseTensor or RaggedTensor encoded) is declared unknown: the graph records the dense shape
    the element stands for (``sparse_batch(32, row_shape=[7])``: [?, 7]) while the variant itself
    has another ([3]), and ``scan`` checks what its function returns against what it declares."""
    return tf.TensorShape(None) if tf.dtypes.as_dtype(dtype) == tf.variant else tf.TensorShape(shape)


def dataset_at(graph_def: graph_pb2.GraphDef, node: str) -> tf.data.Dataset:
    """The sub-pipeline ending at ``node`` as a Dataset of flat tensors (types and shapes from the graph)."""
    from tensorflow.python.data.ops import dataset_ops

    node_def = next(n for n in graph_def.node if n.name == node)
    types_attr = "output_types" if "output_types" in node_def.attr else "Toutput_types"
    types = node_def.attr[types_attr].list.type
    shapes = node_def.attr["output_shapes"].list.shape
    spec = tuple(tf.TensorSpec(_flat_shape(s, t), tf.dtypes.as_dtype(t)) for t, s in zip(types, shapes))
    variant, builder = variant_at(graph_def, node)
    ds = dataset_ops._VariantDataset(variant, spec)  # noqa: SLF001
    if builder is None:
        return ds
    from .live_state import remember
    return remember(ds, (), {}, extra=(builder,))


def static_cardinalities(ds: tf.data.Dataset, pipeline: Pipeline) -> dict[str, int]:
    """TensorFlow's own cardinality for every operator: n >= 0, -1 infinite, -2 unknown.

    Each operator's sub-pipeline is rebuilt from the graph (output redirected to it) and asked.
    """
    from tensorflow.python.ops import gen_dataset_ops

    graph_def, _ = serialized_graph(ds)
    out: dict[str, int] = {}
    for name in pipeline.operators:
        try:
            out[name] = int(gen_dataset_ops.dataset_cardinality(variant_at(graph_def, name)[0]).numpy())
        except Exception:  # noqa: BLE001 - an operator TF cannot rebuild alone has unknown size
            out[name] = -2
    return out


__all__ = [
    "dataset_at", "pipeline_of", "pipeline_from_graph_def", "python_function_name",
    "resolve_pipeline", "serialized_graph", "static_cardinalities",
]
