"""Plan -> new Dataset: apply :class:`~plumbkit.model.Change` records to a pipeline's graph with
the edits of :mod:`plumbkit.tfdata.graph_edits`, keeping the element_spec and the user's options."""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from ..model.plan import CHANGE_KINDS, Change
from . import disk_splice, graph_edits, live_state, memory_guard


def apply_changes(ds: tf.data.Dataset, changes: Sequence[Change],
                  options: tf.data.Options | None = None, *,
                  allow_external_state: bool = True, cache_limit: float | None = None,
                  should_stop: Callable[[], bool] | None = None) -> tf.data.Dataset:
    """A new Dataset with ``changes`` applied (and ``options`` merged on top, if given).

    Removals go first (they renumber nothing needed later), then parallelism, then inserted
    caches and prefetches (which add nodes above others). Pipelines holding Python functions,
    generators or resources are rebuilt with the user's live state (see
    :mod:`plumbkit.tfdata.live_state`); ``allow_external_state=False`` refuses them instead.
    ``cache_limit`` (bytes) guards every memory cache inserted: its fill fails with a message
    naming it once more than that has entered it (see :mod:`plumbkit.tfdata.memory_guard`).
    A disk tier (``disk_tier``: the directory) is filled here when it is not complete yet
    (:mod:`plumbkit.tfdata.disk_splice`), with the plan's thread pool; ``should_stop()`` stops
    that fill, leaving nothing of it.
    """
    graph_def = graph_edits.graph_def_of(ds, allow_external_state=allow_external_state)
    cached: dict[str, str] = {}  # operator -> the cache inserted above it
    pool = tf.data.Options()
    captures, keep = live_state.state_of(ds)
    fill_pool = _pool_of(changes)
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
            if cache_limit is not None and not change.value:
                graph_def = memory_guard.insert_guard(graph_def, cached[change.node], cache_limit, change.where)
        elif change.what == "disk_tier":
            graph_def, cached[change.node] = disk_splice.tier_at(graph_def, change.node, str(change.value),
                                                                 captures=captures, keepalive=keep,
                                                                 options=fill_pool, should_stop=should_stop)
        elif change.what == "prefetch":
            # A prefetch belongs above a cache placed at the same operator, not under it.
            after = cached.get(change.node, change.node)
            graph_def, _ = graph_edits.set_prefetch(graph_def, after, int(change.value))
        elif change.what == "threadpool":
            pool.threading.private_threadpool_size = int(change.value)
        else:
            raise ValueError(f"unknown change {change.what!r}")
    new = graph_edits.dataset_from_graph_def(graph_def, ds.element_spec, captures=captures, keepalive=keep)
    if pool.threading.private_threadpool_size:
        options = pool if options is None else options.merge(pool)
    return new.with_options(options) if options is not None else new


def _pool_of(changes: Sequence[Change]) -> tf.data.Options | None:
    """The plan's thread pool as options (None: it keeps tf.data's)."""
    sizes = [int(c.value) for c in changes if c.what == "threadpool"]
    if not sizes:
        return None
    options = tf.data.Options()
    options.threading.private_threadpool_size = max(sizes)
    return options
