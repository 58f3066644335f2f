"""plumbkit's own model of a tf.data pipeline: a tree of operators, pure Python.

Built from a Dataset's serialized graph by :mod:`plumbkit.tfdata.graph` (the TensorFlow edge);
everything downstream (tracing joins, analysis, optimizer, code generation) reads only
these small immutable records, so it can be tested on hand-built pipelines and saved.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

#: tf.data's AUTOTUNE value (``tf.data.AUTOTUNE``), the one definition in plumbkit.
AUTOTUNE = -1

#: Canonical operator kinds, from TensorFlow op types (``ParallelMapDatasetV2`` -> ``map``).
KIND_BY_FAMILY: dict[str, str] = {
    "range": "range",
    "tensorslice": "from_tensor_slices",
    "tensor": "from_tensors",
    "sparsetensorslice": "from_tensor_slices",
    "tfrecord": "tfrecord",
    "textline": "text_line",
    "fixedlengthrecord": "fixed_length_record",
    "matchingfiles": "list_files",
    "generator": "from_generator",
    "random": "random",
    "map": "map",
    "filter": "filter",
    "flatmap": "flat_map",
    "interleave": "interleave",
    "batch": "batch",
    "paddedbatch": "padded_batch",
    "mapandbatch": "map_and_batch",
    "shuffle": "shuffle",
    "shuffleandrepeat": "shuffle_and_repeat",
    "repeat": "repeat",
    "take": "take",
    "skip": "skip",
    "cache": "cache",
    "prefetch": "prefetch",
    "zip": "zip",
    "concatenate": "concatenate",
    "unbatch": "unbatch",
    "rebatch": "rebatch",
    "shard": "shard",
    "scan": "scan",
    "window": "window",
    "groupbywindow": "group_by_window",
    "directedinterleave": "sample_from_datasets",
    "choosefromdatasets": "choose_from_datasets",
    "assertcardinality": "assert_cardinality",
    "ignoreerrors": "ignore_errors",
    "unique": "unique",
    "enumerate": "enumerate",
    "legacytakewhile": "take_while",
    "takewhile": "take_while",
    # known by name only: what users see, and the call an exported cell is written at
    "densetosparsebatch": "sparse_batch",
    "groupbyreducer": "group_by_reducer",
    "parseexample": "parse_example_dataset",
    "csv": "csv",
    "sql": "sql",
    "load": "load",
    "snapshot": "snapshot",
}

#: Kinds that read files (their element counts relate to bytes on disk).
FILE_SOURCE_KINDS = frozenset({"tfrecord", "text_line", "fixed_length_record"})
#: Kinds that hand out data already in memory (a cache of one holds a second copy and gains nothing).
MEMORY_SOURCE_KINDS = frozenset({"range", "from_tensor_slices", "from_tensors"})
#: Kinds that hold a buffer of elements and hand them out in a drawn order.
SHUFFLE_KINDS = frozenset({"shuffle", "shuffle_and_repeat"})
#: Kinds whose work can be spread over several threads (tf.data has a parallel form).
PARALLELIZABLE_KINDS = frozenset({"map", "interleave", "batch", "map_and_batch"})

def family(op_type: str) -> str:
    """Reduce a TF op type or a model node name to a family (``ParallelMapDatasetV2`` -> ``map``)."""
    name = op_type
    for prefix in ("Experimental", "Legacy", "Parallel", "Anonymous"):
        if name.startswith(prefix) and name != prefix:
            name = name[len(prefix):]
    name = re.sub(r"(Dataset)?(V\d+)?$", "", name)
    name = re.sub(r"Dataset$", "", name)
    name = name.lower()
    aliases = {
        "foreverrepeat": "repeat", "finiterepeat": "repeat", "finitetake": "take",
        "finiteskip": "skip", "emptytake": "take", "memorycache": "cache", "memorycacheimpl": "cache",
        "filecache": "cache", "cachev2": "cache", "memorywriter": "cache", "memoryreader": "cache",
        "filterbylastcomponent": "filter", "shufflewithseed": "shuffle",
        "reshuffle": "shuffle", "fixedseedshuffle": "shuffle", "tensorsliceop": "tensorslice",
        "paddedbatchv2": "paddedbatch", "tfrecordreader": "tfrecord",
    }
    return aliases.get(name, name)


def kind_of(op_type: str) -> str:
    return KIND_BY_FAMILY.get(family(op_type), "opaque")


#: Per-kind name of the tunable that sets parallelism.
PARALLELISM_TUNABLE = "parallelism"


@dataclass(frozen=True)
class Operator:
    """One user-visible ``tf.data`` transformation, identified by its graph node name."""

    name: str  # graph node name, e.g. "ParallelMapDatasetV2/_7"
    op: str  # TensorFlow op type, e.g. "ParallelMapDatasetV2"
    kind: str  # canonical kind, e.g. "map" ("opaque" when plumbkit does not know it)
    inputs: tuple[str, ...] = ()  # dataset inputs (operator names), in order
    tunables: dict[str, Any] = field(default_factory=dict)  # e.g. {"parallelism": 4, "batch_size": 32}
    functions: tuple[str, ...] = ()  # user-defined functions (function library names)
    label: str = ""  # readable, e.g. "map(decode_jpeg)"
    random: bool = False  # this operator itself draws random numbers (function or op)
    #: its function changes the user's state (assigns a variable, fills a table): a cache above
    #: it would run it in the first epoch only
    writes_state: bool = False
    #: its function reads state that can change between epochs (a variable: a model's weights, a
    #: curriculum's knob; a mutable table): a cache above it would replay its first epoch's values
    reads_state: bool = False
    files: tuple[str, ...] = ()  # files this operator reads (statically known)
    deterministic: str | None = None  # the op's `deterministic` attribute where it has one
    inner_kinds: tuple[str, ...] = ()  # kinds of datasets its function builds (interleave's readers)
    holds_gil: bool = False  # runs Python (py_function, numpy_function, from_generator): one thread at a time
    static_bytes: int | None = None  # one element's bytes from the graph's types and shapes (None: not fixed)

    @property
    def in_memory_source(self) -> bool:
        """A source whose elements are in memory already (``range``, ``from_tensor_slices``,
        ``from_tensors``): a cache of it would copy them and read them back, for nothing."""
        return self.kind in MEMORY_SOURCE_KINDS and not self.inputs

    @property
    def gains_from_a_cache(self) -> bool:
        """A cache after it, in memory or on disk, could hold something not already held: it is
        neither a prefetch (its buffer holds its input's elements) nor an in-memory source (a tier
        of one would copy what memory holds and read it back slower)."""
        return self.kind != "prefetch" and not self.in_memory_source

    @property
    def reads_files(self) -> bool:
        """Reads records from files itself, or through the readers its function builds."""
        return self.kind in FILE_SOURCE_KINDS or any(k in FILE_SOURCE_KINDS for k in self.inner_kinds)

    @property
    def parallelism(self) -> int | None:
        """Current parallelism (-1 = AUTOTUNE); 1 for a sequential but parallelizable op."""
        if PARALLELISM_TUNABLE in self.tunables:
            return int(self.tunables[PARALLELISM_TUNABLE])
        return 1 if self.parallelizable else None

    @property
    def in_parallel_form(self) -> bool:
        """Written (or rewritten by tf.data) in a parallel form: a ``Parallel*`` op or one with a
        parallelism tunable; else its plain, sequential form."""
        return self.op.startswith("Parallel") or PARALLELISM_TUNABLE in self.tunables

    @property
    def parallelizable(self) -> bool:
        """A rewrite can set its parallelism. Not tf.data's legacy ``parallel_interleave``
        (``LegacyParallelInterleaveDatasetV2``): it runs one reader thread per element of its
        cycle, has no ``num_parallel_calls``, and the rewrite has no form to convert it to."""
        return self.kind in PARALLELIZABLE_KINDS and not self.op.startswith("Legacy")

    @property
    def max_parallelism(self) -> int | None:
        """The most parallelism TensorFlow accepts here: an interleave's ``cycle_length`` (it
        refuses ``num_parallel_calls`` above it); None when unbounded or set by AUTOTUNE."""
        if self.kind == "interleave":
            cycle = self.tunables.get("cycle_length")
            if isinstance(cycle, (int, float)) and cycle > 0:
                return int(cycle)
        return None

    def can_take_more_parallelism(self, current: int | None) -> bool:
        """Parallelizable, and below its cap (an interleave at its cycle length is not)."""
        cap = self.max_parallelism
        return self.parallelizable and (cap is None or (current or 1) < cap)

    @property
    def is_source(self) -> bool:
        return not self.inputs

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Operator":
        d = dict(d)
        for key in ("inputs", "functions", "files", "inner_kinds"):
            d[key] = tuple(d.get(key, ()))
        return cls(**d)


@dataclass(frozen=True)
class Pipeline:
    """A tree of operators; ``root`` yields the minibatches.

    ``operators`` is ordered root first (pre-order), so iterating it reads top-down.
    """

    operators: dict[str, Operator]
    root: str
    element_spec: str = ""  # readable repr of the Dataset's element_spec
    options: dict[str, Any] = field(default_factory=dict)  # tf.data options the user set
    problems: tuple[str, ...] = ()  # what could not be modelled (e.g. unserializable state)
    remarks: tuple[str, ...] = ()  # what plumbkit assumed (e.g. a Python function is deterministic)

    def __iter__(self) -> Iterator[Operator]:
        return iter(self.operators.values())

    def __len__(self) -> int:
        return len(self.operators)

    def __getitem__(self, name: str) -> Operator:
        return self.operators[name]

    def children(self, name: str) -> list[Operator]:
        return [self.operators[i] for i in self.operators[name].inputs if i in self.operators]

    def parent(self, name: str) -> Operator | None:
        for op in self.operators.values():
            if name in op.inputs:
                return op
        return None

    def descendants(self, name: str) -> list[Operator]:
        """All operators below ``name`` (not including it), pre-order."""
        out: list[Operator] = []
        stack = list(reversed(self.children(name)))
        while stack:
            op = stack.pop()
            out.append(op)
            stack.extend(reversed(self.children(op.name)))
        return out

    def by_label(self, label: str) -> Operator:
        """Find an operator by its readable label (or name); raises KeyError naming the choices."""
        for op in self.operators.values():
            if label in (op.label, op.name):
                return op
        raise KeyError(f"no operator {label!r}; operators are: {[o.label for o in self]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "operators": [op.to_dict() for op in self.operators.values()],
            "root": self.root,
            "element_spec": self.element_spec,
            "options": self.options,
            "problems": list(self.problems),
            "remarks": list(self.remarks),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Pipeline":
        ops = [Operator.from_dict(o) for o in d["operators"]]
        return cls(
            operators={o.name: o for o in ops},
            root=d["root"],
            element_spec=d.get("element_spec", ""),
            options=d.get("options", {}),
            problems=tuple(d.get("problems", ())),
            remarks=tuple(d.get("remarks", ())),
        )
