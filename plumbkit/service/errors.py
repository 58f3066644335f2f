"""What goes wrong with tf.data service processes, as errors a user can catch.

:class:`ServiceError`: the service could not be started or reached. :class:`ServiceStall`:
a run through the service stopped receiving elements (a lost worker), raised instead of
hanging; it names the :class:`LostWorker` s plumbkit started that died.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.errors import PipelineError


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


__all__ = ["LostWorker", "ServiceError", "ServiceStall"]
