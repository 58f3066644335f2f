"""Plan -> new Dataset: apply :class:`~plumbkit.model.Change` records to a pipeline's graph with
the edits of :mod:`plumbkit.tfdata.graph_edits`, keeping the element_spec and the user's options."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from ..model.plan import CHANGE_KINDS, Change
from . import graph_edits


def apply_changes(ds: tf.data.Dataset, changes: Sequence[Change],
                  options: tf.data.Options | None = None, *,
                  allow_external_state: bool = False) -> tf.data.Dataset:
    """A new Dataset with ``changes`` applied (and ``options`` merged on top, if given).

    Removals go first (they renumber nothing needed later), then parallelism, then inserted
    caches and prefetches (which add nodes above others). ``allow_external_state`` rebuilds
    pipelines that hold Python functions or resources of this process (see
    :func:`~plumbkit.tfdata.graph_edits.graph_def_of`).
    """
    graph_def = graph_edits.graph_def_of(ds, allow_external_state=allow_external_state)
    cached: dict[str, str] = {}  # operator -> the cache inserted above it
    order = {kind: i for i, kind in enumerate(CHANGE_KINDS)}
    for change in sorted(changes, key=lambda c: order.get(c.what, len(order))):
        if change.what == "remove":
            graph_def = graph_edits.remove_node(graph_def, change.node)
        elif change.what == "sequential":
            graph_def = graph_edits.set_sequential(graph_def, change.node)
        elif change.what == "parallelism":
            graph_def = graph_edits.set_parallelism(graph_def, change.node, int(change.value))
        elif change.what == "cache":
            graph_def, cached[change.node] = graph_edits.insert_cache(graph_def, change.node,
                                                                      filename=change.value or "")
        elif change.what == "prefetch":
            # A prefetch belongs above a cache placed at the same operator, not under it.
            after = cached.get(change.node, change.node)
            graph_def, _ = graph_edits.set_prefetch(graph_def, after, int(change.value))
        else:
            raise ValueError(f"unknown change {change.what!r}")
    new = graph_edits.dataset_from_graph_def(graph_def, ds.element_spec)
    return new.with_options(options) if options is not None else new
