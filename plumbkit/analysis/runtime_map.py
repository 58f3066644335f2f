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

    def assign_subtree(rid: int, owner: str, role: str) -> None:
        stack = [rid]
        while stack:
            i = stack.pop()
            if i not in nodes:
                continue
            result.owner.setdefault(i, owner)
            result.role.setdefault(i, role)
            stack.extend(nodes[i].inputs)

    epochs = [epochs_repeated]  # plumbkit's own repeat, still to be found above the user's root

    def match(user: str | None, rid: int, above: str) -> None:
        if rid not in nodes:
            return
        node = nodes[rid]
        if user is None:
            assign_subtree(rid, above, "unmatched")
            return
        op = pipeline[user]
        rfam, ufam = family(node.name), family(op.op)
        if epochs[0] and user == pipeline.root and node.inputs:
            below = nodes.get(node.inputs[0])
            if rfam == "repeat":
                epochs[0] = False
                result.owner[rid], result.role[rid] = user, "epochs"
                match(user, node.inputs[0], above)
                return
            if rfam == "prefetch" and below is not None and family(below.name) == "repeat":
                result.owner[rid], result.role[rid] = user, "injected"  # above plumbkit's repeat
                result.injected[rid] = user
                match(user, node.inputs[0], user)
                return
        if _same(rfam, ufam):
            result.owner[rid], result.role[rid] = user, "op"
            result.runtime_name[user] = node.name
            if ufam == "cache" and op.inputs:
                match_below_cache(user, node)
                return
            static = list(op.inputs)
            for child, child_rid in zip(static, node.inputs):
                match(child, child_rid, user)
            for extra in node.inputs[len(static):]:
                assign_subtree(extra, user, "inner")
            return
        if rfam in _FUSIONS and _FUSIONS[rfam][0] == ufam and op.inputs:
            inner = pipeline[op.inputs[0]]
            if family(inner.op) == _FUSIONS[rfam][1]:
                result.owner[rid], result.role[rid] = inner.name, "fused"
                result.fused[user] = result.fused[inner.name] = node.name
                result.runtime_name[user] = result.runtime_name[inner.name] = node.name
                next_user = inner.inputs[0] if inner.inputs else None
                if node.inputs:
                    match(next_user, node.inputs[0], inner.name)
                return
        if rfam == "prefetch" and node.inputs:
            result.owner[rid], result.role[rid] = user, "injected"
            result.injected[rid] = user
            match(user, node.inputs[0], user)
            return
        if len(op.inputs) == 1 and ufam in ("prefetch", "take", "skip", "repeat", "cache", "shard",
                                            "options", "assertcardinality", "map"):
            # Removed by tf.data's static optimizations (noop elimination, map fusion...).
            result.eliminated.add(user)
            match(op.inputs[0], rid, above)
            return
        assign_subtree(rid, user, "unmatched")

    def match_below_cache(user: str, node: NodeSample) -> None:
        """A cache's runtime is a chain of its own nodes (MemoryCache -> MemoryCacheImpl) over its
        input while it fills, and a reader with no input once it is filled: nothing below runs."""
        while node.inputs and node.inputs[0] in nodes and family(nodes[node.inputs[0]].name) == "cache":
            node = nodes[node.inputs[0]]
            result.owner.setdefault(node.id, user)
            result.role.setdefault(node.id, "inner")
        if node.inputs:
            match(pipeline[user].inputs[0], node.inputs[0], user)
            return
        for below in pipeline.descendants(user):
            result.below_filled_cache[below.name] = pipeline[user].label

    if root.inputs:
        match(pipeline.root, root.inputs[0], pipeline.root)
    return result
