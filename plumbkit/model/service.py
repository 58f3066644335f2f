"""tf.data service vocabulary shared by the planner, the rewrite, the exporter and the renderers.

:class:`Distribute` says how a pipeline is served: where it is cut (everything up to and
including ``cut`` runs on the workers, the rest on the client), the sharding policy, the job
name, compression and the client-side prefetch. :class:`ServiceStall` is what plumbkit raises
when a run through the service stops receiving elements (a lost worker), instead of hanging.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import PipelineError
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

    def to_dict(self) -> dict[str, Any]:
        return dict(cut=self.cut, cut_label=self.cut_label, sharding=self.sharding,
                    job_name=self.job_name, compression=self.compression, prefetch=self.prefetch)


@dataclass(frozen=True)
class LostWorker:
    """A worker process plumbkit started that is no longer running."""

    index: int
    pid: int
    address: str
    exit: str  # e.g. "killed by SIGKILL", "exited with status 1"

    def __str__(self) -> str:
        return f"worker {self.index} (pid {self.pid}, {self.address}) {self.exit}"


class ServiceError(PipelineError):
    """The tf.data service could not be started or reached (the message says which part and why)."""


class ServiceStall(ServiceError):
    """A run through the tf.data service stopped receiving elements; plumbkit stopped waiting.

    Measured on TF 2.21 (DYNAMIC sharding, two workers, one killed mid-epoch): the client got
    every element the lost worker had not yet produced from the other worker, then waited at the
    end of the epoch for the lost worker's task instead of finishing. ``lost`` names the workers
    plumbkit started that died (empty when it did not start them and so cannot tell),
    ``elements`` how many arrived before the stall.
    """

    def __init__(self, message: str, *, elements: int, lost: tuple[LostWorker, ...] = (),
                 expected: int | None = None, waited: float = 0.0):
        super().__init__(message)
        self.elements, self.lost, self.expected, self.waited = elements, lost, expected, waited
