"""A plan's disk tier placed in a rebuilt pipeline: the operator's output read back from disk.

The sub-pipeline ending at the operator (under the user's options and the plan's thread pool) is
handed to :func:`plumbkit.tfdata.disk_tier.on_disk`, which fills a fingerprinted tier once (or
finds it complete) and returns its reader; the reader's graph takes the operator's place in the
user's graph (:func:`plumbkit.tfdata.offload_graph.spliced`, as an offload's client does). What is
above keeps the user's own nodes, Python functions included. The exported cell writes the same
thing in the user's words: ``plumbkit.on_disk(<dataset below>, cache_dir="<path>")``.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from . import graph_edits, offload_graph
from .disk_tier import on_disk
from .graph_edits import GraphDef

#: Prefix of the nodes a tier's reader brings into the graph (one tier per operator).
PREFIX = "plumbkit_disk_tier"


def tier_at(graph_def: GraphDef, node: str, directory: str, *, captures: Any = None, keepalive: Any = None,
            options: tf.data.Options | None = None,
            should_stop: Callable[[], bool] | None = None) -> tuple[GraphDef, str]:
    """``graph_def`` with the output of ``node`` read back from a disk tier in ``directory``
    (filled first when none has the sub-pipeline's fingerprint), and the node that now yields
    ``node``'s elements. ``options`` (e.g. the plan's thread pool) apply to the fill;
    ``should_stop()`` stops it (nothing of it is left)."""
    node = graph_edits._resolve(graph_def, node)  # noqa: SLF001
    spec = offload_graph._flat_spec(graph_def, node)  # noqa: SLF001
    below = graph_edits.dataset_from_graph_def(offload_graph.sub_pipeline_graph(graph_def, node), spec,
                                               captures=captures, keepalive=keepalive)
    if options is not None:
        below = below.with_options(options)
    reader = on_disk(below, directory, should_stop=should_stop)
    prefix = f"{PREFIX}_{len({n.name.split('/')[0] for n in graph_def.node if n.name.startswith(PREFIX)})}/"
    top = graph_edits.root_name(graph_edits._parse(reader._as_serialized_graph(  # noqa: SLF001
        external_state_policy=tf.data.experimental.ExternalStatePolicy.IGNORE)))
    return offload_graph.spliced(graph_def, node, reader, prefix=prefix), prefix + top
