"""The comparison points of the papers, as rewrites of the user's pipeline (method.md, "Baselines").

- ``naive``: truly sequential: every operator in its plain form (no pool, no
  ``num_parallel_calls``), the user's prefetches removed, tf.data's static rewrites
  (``map_parallelization``, ``inject_prefetch``...) and autotuning off.
- ``heuristic``: parallelism = cores on every tunable operator, a small prefetch at the end.
- ``autotune``: AUTOTUNE on every tunable operator and the final prefetch, default options,
  with the CPU budget set to the cores.
- ``autotune_with``: AUTOTUNE plus the same cache and prefetch as a plumbkit plan: the fair rival
  of plumbkit's cache.
- ``autotune_with_disk``: AUTOTUNE plus the same disk tier and prefetch as a plumbkit plan, built
  and filled the same way: the operators at and below the tier keep the plan's form (they run only
  while it fills), so the tier's fingerprint is the plan's and both read the one tier it filled.

tf.data's legacy ``parallel_interleave`` (``LegacyParallelInterleaveDatasetV2``, still in
public pipelines such as tensorflow/tpu's ResNet input) is not parallelizable by a rewrite
(:attr:`plumbkit.model.pipeline.Operator.parallelizable`): every baseline keeps it as the user
wrote it, so on such a pipeline *naive* is sequential everywhere but that reader.

Every baseline keeps the user's own ``cache()``: it is part of what the pipeline yields (a cache
above a seeded shuffle freezes the epoch order). Each is a list of :class:`Change` on the
user's graph plus options, so they compose (``autotune_with`` is AUTOTUNE's changes and the
plan's cache and prefetch, applied in one rebuild).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from ..model.pipeline import AUTOTUNE, Pipeline
from ..model.plan import Change
from ..tfdata.graph import pipeline_of
from ..tfdata.options import autotune_options, sequential_options
from ..tfdata.rebuild import apply_changes

if TYPE_CHECKING:
    import tensorflow as tf


def _without_prefetches(p: Pipeline) -> list[Change]:
    return [Change("remove", op.label, op.name, op.kind, "baseline") for op in p if op.kind == "prefetch"]


def _top(p: Pipeline) -> str:
    """The operator a final prefetch goes above: the root, below the user's own final prefetch."""
    return p.root if p[p.root].kind != "prefetch" else p[p.root].inputs[0]


def naive_changes(p: Pipeline) -> list[Change]:
    changes = _without_prefetches(p)
    changes += [Change("sequential", op.label, op.name, 1, "baseline") for op in p
                if op.parallelizable and op.in_parallel_form]
    return changes


def heuristic_changes(p: Pipeline, cores: int) -> list[Change]:
    changes = _without_prefetches(p)
    changes += [Change("parallelism", op.label, op.name, cores, "baseline") for op in p if op.parallelizable]
    top = _top(p)
    return changes + [Change("prefetch", p[top].label, top, 2, "baseline")]


def autotune_changes(p: Pipeline) -> list[Change]:
    changes = _without_prefetches(p)
    changes += [Change("parallelism", op.label, op.name, AUTOTUNE, "baseline") for op in p if op.parallelizable]
    top = _top(p)
    return changes + [Change("prefetch", p[top].label, top, AUTOTUNE, "baseline")]


def naive(ds: "tf.data.Dataset", cores: int | None = None) -> "tf.data.Dataset":
    return apply_changes(ds, naive_changes(pipeline_of(ds)), sequential_options(intra_op=None))


def heuristic(ds: "tf.data.Dataset", cores: int | None = None) -> "tf.data.Dataset":
    return apply_changes(ds, heuristic_changes(pipeline_of(ds), cores or 1))


def autotune(ds: "tf.data.Dataset", cores: int | None = None) -> "tf.data.Dataset":
    return apply_changes(ds, autotune_changes(pipeline_of(ds)), autotune_options(cores))


def autotune_with(ds: "tf.data.Dataset", plan_changes: Sequence[Change],
                  cores: int | None = None) -> "tf.data.Dataset":
    """AUTOTUNE with the same caches and final prefetch as ``plan_changes`` (a plumbkit plan's)."""
    p = pipeline_of(ds)
    changes = [c for c in autotune_changes(p) if c.what != "prefetch"]
    changes += [c for c in plan_changes if c.what == "cache"]  # the memory caches (a disk tier: autotune_with_disk)
    prefetch = [c for c in plan_changes if c.what == "prefetch"]
    top = _top(p)
    changes += prefetch or [Change("prefetch", p[top].label, top, AUTOTUNE, "baseline")]
    return apply_changes(ds, changes, autotune_options(cores))


def autotune_with_disk(ds: "tf.data.Dataset", plan_changes: Sequence[Change],
                       cores: int | None = None) -> "tf.data.Dataset":
    """AUTOTUNE above the disk tier of ``plan_changes`` (a plumbkit plan's), the plan's own form at
    and below it (the same fill, the same fingerprint: the same tier read back), its final prefetch."""
    p = pipeline_of(ds)
    tiers = [c for c in plan_changes if c.what == "disk_tier"]
    below = {n for c in tiers for n in {c.node} | {o.name for o in p.descendants(c.node)}}
    changes = [c for c in autotune_changes(p) if c.what != "prefetch" and c.node not in below]
    changes += [c for c in plan_changes if c.node in below and c.what in ("parallelism", "sequential", "remove")]
    changes += tiers + [c for c in plan_changes if c.what == "threadpool"]
    prefetch = [c for c in plan_changes if c.what == "prefetch"]
    top = _top(p)
    changes += prefetch or [Change("prefetch", p[top].label, top, AUTOTUNE, "baseline")]
    return apply_changes(ds, changes, autotune_options(cores))


ALL: dict[str, Callable[["tf.data.Dataset", int | None], "tf.data.Dataset"]] = {
    "naive": naive, "heuristic": heuristic, "autotune": autotune,
}
