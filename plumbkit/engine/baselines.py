"""The comparison points of the paper, as rewrites of the user's pipeline.

- ``naive``: parallelism 1 everywhere, no prefetch, and tf.data's own static rewrites and
  autotuning off, so it really runs sequentially.
- ``heuristic``: parallelism = cores on every tunable operator, a small prefetch at the end.
- ``autotune``: AUTOTUNE on every tunable operator and the final prefetch, default options,
  with the CPU budget set to the cores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..model.pipeline import AUTOTUNE
from ..model.plan import Change
from ..tfdata.graph import pipeline_of
from ..tfdata.options import autotune_options, sequential_options
from ..tfdata.rebuild import apply_changes

if TYPE_CHECKING:
    import tensorflow as tf


def _retune(ds: "tf.data.Dataset", parallelism: int, prefetch: int | None,
            options: "tf.data.Options | None") -> "tf.data.Dataset":
    p = pipeline_of(ds)
    changes = [Change("remove", op.label, op.name, op.kind, "baseline") for op in p
               if op.kind == "prefetch"]
    changes += [Change("parallelism", op.label, op.name, parallelism, "baseline") for op in p
                if op.parallelizable]
    if prefetch is not None:
        root = p.root if p[p.root].kind != "prefetch" else p[p.root].inputs[0]
        changes.append(Change("prefetch", p[root].label, root, prefetch, "baseline"))
    return apply_changes(ds, changes, options)


def naive(ds: "tf.data.Dataset", cores: int | None = None) -> "tf.data.Dataset":
    return _retune(ds, 1, None, sequential_options(intra_op=None))


def heuristic(ds: "tf.data.Dataset", cores: int | None = None) -> "tf.data.Dataset":
    cores = cores or 1
    return _retune(ds, cores, 2, None)


def autotune(ds: "tf.data.Dataset", cores: int | None = None) -> "tf.data.Dataset":
    return _retune(ds, AUTOTUNE, AUTOTUNE, autotune_options(cores))


ALL: dict[str, Callable[["tf.data.Dataset", int | None], "tf.data.Dataset"]] = {
    "naive": naive, "heuristic": heuristic, "autotune": autotune,
}
