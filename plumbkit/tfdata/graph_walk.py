"""Following a serialized pipeline's inputs: what a node reads, what the ``_Retval`` still reaches.

The one place these walks over a GraphDef live: :mod:`plumbkit.tfdata.graph_edits`,
:mod:`plumbkit.tfdata.live_state`, :mod:`plumbkit.tfdata.memory_guard` and
:mod:`plumbkit.tfdata.offload_graph` all prune or follow inputs the same way.
"""

from __future__ import annotations

from typing import Iterable

from tensorflow.core.framework import graph_pb2, node_def_pb2

GraphDef = graph_pb2.GraphDef


def node_ref(spec: str) -> str:
    """Node name of an input spec ("Node:1", "^Node")."""
    return spec.lstrip("^").split(":")[0]


def reachable(graph_def: GraphDef, refs: Iterable[str]) -> set[str]:
    """Names of the nodes of ``graph_def`` that the input specs ``refs`` read, directly or not
    (themselves included; a name with no node in the graph is passed over)."""
    by_name = {n.name: n for n in graph_def.node}
    out, stack = set(), [node_ref(r) for r in refs]
    while stack:
        name = stack.pop()
        if name in out or name not in by_name:
            continue
        out.add(name)
        stack.extend(node_ref(i) for i in by_name[name].input)
    return out


def pruned(graph_def: GraphDef) -> GraphDef:
    """Drop nodes the ``_Retval`` no longer reaches (constants of replaced arguments, copies of
    rebound resources). Edits ``graph_def`` in place and returns it."""
    keep = reachable(graph_def, [n.name for n in graph_def.node if n.op == "_Retval"])
    kept = [node_def_pb2.NodeDef.FromString(n.SerializeToString()) for n in graph_def.node if n.name in keep]
    del graph_def.node[:]
    graph_def.node.extend(kept)
    return graph_def


__all__ = ["node_ref", "pruned", "reachable"]
