"""The plan's vocabulary: one :class:`Change` per edit, and where the cache goes.

Pure records shared by the planner (which decides them), the rebuilder (which applies them to
a Dataset) and the exporter (which writes them into the user's source).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The kinds of change a plan may hold, in the order they are applied to a graph.
CHANGE_KINDS = ("remove", "sequential", "parallelism", "cache", "prefetch")


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
                "prefetch": f"prefetch {self.value} after it",
                "remove": f"remove the user's {self.value}",
                "sequential": "run it in its plain, sequential form"}.get(self.what, f"{self.what} {self.value}")
        return f"{self.where}: {verb} — {self.why}"


@dataclass(frozen=True)
class CacheDecision:
    label: str | None  # where the cache goes (None: nowhere)
    node: str | None
    bytes: float | None  # predicted size of the cache
    budget: float
    why: str
