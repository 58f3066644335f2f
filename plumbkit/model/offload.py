"""Offload vocabulary shared by the planner, the graph rewrite, the exporter and the renderers.

:class:`Distribute` says how a pipeline is served by tf.data service: where it is cut
(everything up to and including ``cut`` runs on the workers, the rest on the client), the
sharding policy, the job name, compression and the client-side prefetch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .pipeline import AUTOTUNE

#: The sharding policies plumbkit chooses between (``tf.data.experimental.service.ShardingPolicy``).
SHARDING_POLICIES = ("OFF", "DYNAMIC")


@dataclass(frozen=True)
class Distribute:
    """``distribute()`` placed after operator ``cut``: that operator and everything below it run
    on the tf.data service workers; the operators above it run on the client."""

    cut: str  # graph node name of the highest operator that runs on the workers
    cut_label: str  # its readable label, e.g. "map(decode)"
    sharding: str = "OFF"  # "OFF": every worker yields the whole dataset; "DYNAMIC": each split once
    job_name: str | None = None  # shared by every consumer that passes the same name
    compression: str | None = None  # None or "AUTO" (snappy)
    prefetch: int | None = AUTOTUNE  # client-side prefetch at the end (None: none added)

    def __post_init__(self) -> None:
        if self.sharding not in SHARDING_POLICIES:
            raise ValueError(f"sharding must be one of {SHARDING_POLICIES}, not {self.sharding!r}")
        if self.compression not in (None, "AUTO"):
            raise ValueError(f"compression must be None or 'AUTO', not {self.compression!r}")


__all__ = ["Distribute", "SHARDING_POLICIES"]
