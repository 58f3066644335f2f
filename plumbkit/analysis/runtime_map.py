"""Join the runtime iterator tree to the user's operators.

tf.data rewrites a pipeline before it runs (a plain ``map`` becomes a parallel, autotuned map;
``map`` + ``batch`` fuse into ``MapAndBatch``; a final ``prefetch`` is injected; no-ops vanish),
so runtime nodes do not match the user's operators one to one. This module walks both trees
together and says, for every runtime node, which user operator(s) it stands for. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.pipeline import Pipeline, family
from ..model.samples import NodeSample

_FUSIONS = {
    # runtime family -> (user family of the operator, user family of its input)
    "mapandbatch": ("batch", "map"),
    "shuffleandrepeat": ("repeat", "shuffle"),
}
_EQUIVALENT = {
    "paddedbatch": {"paddedbatch", "batch"},
    "rebatch": {"rebatch", "batch"},
}


@dataclass
class RuntimeMap:
    """Which runtime node ids stand for which user operator, and what runtime added."""

    owner: dict[int, str] = field(default_factory=dict)  # runtime id -> user operator it works for
    role: dict[int, str] = field(default_factory=dict)  # "op", "fused", "inner", "injected", "root", "epochs", "unmatched"
    fused: dict[str, str] = field(default_factory=dict)  # user op -> runtime name it was fused into
    injected: dict[int, str] = field(default_factory=dict)  # runtime id -> user op it sits above
    eliminated: set[str] = field(default_factory=set)  # user ops with no runtime node
    runtime_name: dict[str, str] = field(default_factory=dict)  # user op -> runtime node name
    below_filled_cache: dict[str, str] = field(default_factory=dict)  # user op -> the cache it sits under

    def ids_for(self, op: str, roles: tuple[str, ...] = ("op", "fused", "inner")) -> list[int]:
        return [i for i, o in self.owner.items() if o == op and self.role[i] in roles]


def _same(runtime_family: str, user_family: str) -> bool:
    return runtime_family == user_family or user_family in _EQUIVALENT.get(runtime_family, ())


def map_runtime(pipeline: Pipeline, nodes: dict[int, NodeSample], into: RuntimeMap | None = None,
                *, epochs_repeated: bool = False) -> RuntimeMap:
    """Assign every runtime node in ``nodes`` (one snapshot) to the user's operators.

    Calling it again with a later snapshot and the same ``into`` adds the nodes that appeared
    since (interleave's per-file readers come and go). ``epochs_repeated``: the pipeline ran
    with a ``repeat()`` plumbkit put on top of the user's root (role "epochs").
    """
    result = into if into is not None else RuntimeMap()
    root = next((n for n in nodes.values() if n.name == "Root"), None)
    if root is None:
        return result
    result.owner[root.id], result.role[root.id] = pipeline.root, "root"
    if root.inputs:
        _Matcher(pipeline, nodes, result, epochs_repeated).match(pipeline.root, root.inputs[0], pipeline.root)
    return result


class _Matcher:
    """Walks the runtime tree and the user's graph side by side, recording who owns each node."""

    def __init__(self, pipeline: Pipeline, nodes: dict[int, NodeSample], result: RuntimeMap,
                 epochs_repeated: bool) -> None:
        self.pipeline, self.nodes, self.result = pipeline, nodes, result
        self.epochs = epochs_repeated  # plumbkit's own repeat, still to be found above the user's root

    def own(self, rid: int, owner: str, role: str) -> None:
        self.result.owner[rid], self.result.role[rid] = owner, role

    def assign_subtree(self, rid: int, owner: str, role: str) -> None:
        stack = [rid]
        while stack:
            i = stack.pop()
            if i not in self.nodes:
                continue
            self.result.owner.setdefault(i, owner)
            self.result.role.setdefault(i, role)
            stack.extend(self.nodes[i].inputs)

    def match(self, user: str | None, rid: int, above: str) -> None:
        if rid not in self.nodes:
            return
        node = self.nodes[rid]
        if user is None:
            self.assign_subtree(rid, above, "unmatched")
            return
        op = self.pipeline[user]
        rfam, ufam = family(node.name), family(op.op)
        if self.epochs and user == self.pipeline.root and node.inputs and self._epochs(user, node, rfam, above):
            return
        if _same(rfam, ufam):
            self._same_operator(user, node)
        elif rfam in _FUSIONS and _FUSIONS[rfam][0] == ufam and op.inputs and \
                family(self.pipeline[op.inputs[0]].op) == _FUSIONS[rfam][1]:
            self._fused(user, node)
        elif rfam == "prefetch" and node.inputs:
            self._injected(user, node)
        elif len(op.inputs) == 1 and ufam in ("prefetch", "take", "skip", "repeat", "cache", "shard",
                                              "options", "assertcardinality", "map"):
            # Removed by tf.data's static optimizations (noop elimination, map fusion...).
            self.result.eliminated.add(user)
            self.match(op.inputs[0], rid, above)
        else:
            self.assign_subtree(rid, user, "unmatched")

    def _epochs(self, user: str, node: NodeSample, rfam: str, above: str) -> bool:
        """plumbkit's repeat above the user's root (and the prefetch tf.data injects above it)."""
        below = self.nodes.get(node.inputs[0])
        if rfam == "repeat":
            self.epochs = False
            self.own(node.id, user, "epochs")
            self.match(user, node.inputs[0], above)
            return True
        if rfam == "prefetch" and below is not None and family(below.name) == "repeat":
            self._injected(user, node)  # above plumbkit's repeat
            return True
        return False

    def _injected(self, user: str, node: NodeSample) -> None:
        self.own(node.id, user, "injected")
        self.result.injected[node.id] = user
        self.match(user, node.inputs[0], user)

    def _same_operator(self, user: str, node: NodeSample) -> None:
        op = self.pipeline[user]
        self.own(node.id, user, "op")
        self.result.runtime_name[user] = node.name
        if family(op.op) == "cache" and op.inputs:
            self.match_below_cache(user, node)
            return
        static = list(op.inputs)
        for child, child_rid in zip(static, node.inputs):
            self.match(child, child_rid, user)
        for extra in node.inputs[len(static):]:
            self.assign_subtree(extra, user, "inner")

    def _fused(self, user: str, node: NodeSample) -> None:
        """One runtime node for the user's operator and the one below it (e.g. MapAndBatch)."""
        inner = self.pipeline[self.pipeline[user].inputs[0]]
        self.own(node.id, inner.name, "fused")
        self.result.fused[user] = self.result.fused[inner.name] = node.name
        self.result.runtime_name[user] = self.result.runtime_name[inner.name] = node.name
        if node.inputs:
            self.match(inner.inputs[0] if inner.inputs else None, node.inputs[0], inner.name)

    def match_below_cache(self, user: str, node: NodeSample) -> None:
        """A cache's runtime is a chain of its own nodes (MemoryCache -> MemoryCacheImpl) over its
        input while it fills, and a reader with no input once it is filled: nothing below runs."""
        while node.inputs and node.inputs[0] in self.nodes and family(self.nodes[node.inputs[0]].name) == "cache":
            node = self.nodes[node.inputs[0]]
            self.result.owner.setdefault(node.id, user)
            self.result.role.setdefault(node.id, "inner")
        if node.inputs:
            self.match(self.pipeline[user].inputs[0], node.inputs[0], user)
            return
        for below in self.pipeline.descendants(user):
            self.result.below_filled_cache[below.name] = self.pipeline[user].label
