"""The plan's vocabulary: one :class:`Change` per edit, and where the cache goes.

Pure records shared by the planner (which decides them), the rebuilder (which applies them to
a Dataset) and the exporter (which writes them into the user's source).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The kinds of change a plan may hold, in the order they are applied to a graph
#: ("threadpool": the size of tf.data's private thread pool, an option of the whole pipeline).
#: "disk_tier": the operator's output materialized once in a directory (``value``) and read back
#: every epoch, through ``plumbkit.on_disk`` (fingerprinted, filled under a guard).
CHANGE_KINDS = ("remove", "sequential", "parallelism", "cache", "disk_tier", "prefetch", "threadpool")


@dataclass(frozen=True)
class Change:
    """One edit of the pipeline: ``what`` in {"parallelism", "sequential", "cache", "prefetch", "remove"}."""

    what: str
    where: str  # operator label, e.g. "map(decode)"
    node: str  # graph node name the rewrite edits
    value: Any
    why: str

    def __str__(self) -> str:
        verb = {"parallelism": f"set parallelism to {self.value}",
                "cache": "cache in memory after it" if not self.value else f"cache to {self.value} after it",
                "disk_tier": f"cache on disk in {self.value} after it (plumbkit.on_disk)",
                "prefetch": f"prefetch {self.value} after it",
                "remove": f"remove the user's {self.value}",
                "sequential": "run it in its plain, sequential form",
                "threadpool": f"raise tf.data's thread pool to {self.value} threads "
                              f"(options.threading.private_threadpool_size)",
                "interleave_sources": f"read {self.value} copies of it side by side "
                                      f"(interleave, deterministic=False)"}.get(self.what, f"{self.what} {self.value}")
        return f"{self.where}: {verb} — {self.why}"


@dataclass(frozen=True)
class CacheDecision:
    label: str | None  # where the cache goes (None: nowhere)
    node: str | None
    bytes: float | None  # predicted size of the cache
    budget: float
    why: str
    tier: str = "memory"  # "memory", or "disk": a file cache in ``directory`` (issue 26)
    directory: str | None = None  # the disk tier's directory


@dataclass(frozen=True)
class Option:
    """A change the plan offers but does not apply: the user decides (it changes semantics,
    e.g. the order of elements). ``predicted_throughput`` is the model's, labelled so."""

    title: str
    changes: tuple[Change, ...]
    predicted_throughput: float  # minibatches/s with the option on (a prediction)
    plan_throughput: float  # the plan's own prediction, without it
    note: str  # what it changes besides speed

    @property
    def gain(self) -> float:
        return self.predicted_throughput / self.plan_throughput if self.plan_throughput > 0 else float("inf")

    def __str__(self) -> str:
        return (f"option — {self.title}: predicted {self.predicted_throughput:,.1f} minibatches/s "
                f"({self.gain:.1f}× the plan's {self.plan_throughput:,.1f}); {self.note}")
