"""The result of ``plumbkit.offload``: what was measured, what the model predicts, what to do.

:class:`OffloadPlan` holds the decision (offload, do not offload, cannot offload), the cut as a
:class:`~plumbkit.model.offload.Distribute`, the predicted curve against worker count, every
measured run (:class:`Run`), and what applies it: the served Dataset and the user's cell with
``distribute()`` written in.
"""

from __future__ import annotations

import statistics

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..model.offload import Distribute
from ..planning.offload import CutCosts, Decision, Point, Setting, decide, predict, predict_local, workers_needed
from ..service.cluster import reachable
from ..service.errors import ServiceError
from ..tfdata.offload_graph import offloaded_from_request
from ..tunables import DEDICATED, MEETS
from .trace_result import Trace

if TYPE_CHECKING:
    import tensorflow as tf


@dataclass(frozen=True)
class Run:
    """One measured run: minibatches/s, and the CPU per minibatch of the client, the workers
    and the dispatcher."""

    workers: int
    throughput: float
    client_cpu: float  # client core-seconds per minibatch
    worker_cpu: float  # all workers' core-seconds per minibatch (0: not ours, not measured)
    dispatcher_cpu: float = 0.0  # the dispatcher's core-seconds per minibatch (0: not ours)
    least_client_cpu: float = 0.0  # client CPU per minibatch in the least disturbed slice
    worker_and_dispatcher_cpu: float = 0.0  # per minibatch (whole window: their CPU comes in 10 ms ticks)

    @classmethod
    def of(cls, workers: int, result: dict[str, Any]) -> "Run":
        """The run a measuring request's ``result`` describes (with ``workers`` serving it)."""
        n = max(result["elements"], 1)
        wall = max(result["wall"], 1e-12)
        slices = [s for s in result.get("slices", ()) if s["elements"] > 0] or [result]
        return cls(workers, result["elements"] / wall, result["cpu"] / n, result["worker_cpu"] / n,
                   result.get("dispatcher_cpu", 0.0) / n,
                   min(s["cpu"] / s["elements"] for s in slices),
                   # other processes' CPU comes in 10 ms ticks: whole windows only
                   (result["worker_cpu"] + result.get("dispatcher_cpu", 0.0)) / n)


@dataclass
class OffloadPlan:
    """Whether to offload, where to cut, how many workers; predicted and measured throughput.

    ``predicted`` is the model's curve for the chosen cut (index = workers, 0 = local);
    ``measured`` maps a worker count to what was measured with it (0 = the local pipeline).
    """

    decision: str  # "offload", "do not offload", "cannot offload"
    reason: str
    target: float
    target_source: str  # "consumer ceiling (measured)" or "yours"
    distribute: Distribute | None
    workers: int | None  # recommended worker count
    predicted: list[Point]
    measured: dict[int, float]  # workers -> median measured minibatches/s
    runs: dict[int, list[Run]]  # workers -> every measured run, in the order measured
    cuts: list[CutCosts]
    setting: Setting
    invalid: dict[str, str]
    address: str | None
    workers_available: int
    trace: Trace
    notes: list[str] = field(default_factory=list)
    max_workers: int = 32
    cpu_shares: list[float] = field(default_factory=list)  # the client's core, probed before and after
    worker_core_shares: list[float] = field(default_factory=list)  # the workers' cores, likewise (ours only)
    _graph: bytes = b""
    _spec: bytes = b""
    _dataset: Any = None

    # -- numbers ----------------------------------------------------------------------------
    @property
    def cut(self) -> CutCosts | None:
        if self.distribute is None:
            return None
        return next((c for c in self.cuts if c.node == self.distribute.cut), None)

    @property
    def ideal(self) -> float:
        return self.setting.consumer_ceiling

    @property
    def local(self) -> float:
        """The local pipeline, measured (median of its runs)."""
        return self.measured.get(0, self.setting.local)

    def predicted_at(self, workers: int) -> float:
        """Predicted minibatches/s with ``workers`` workers at the chosen cut (0: local)."""
        cut = self.cut or (self.cuts[0] if self.cuts else None)
        if cut is None or workers == 0:
            return predict_local(self.setting).throughput
        return predict(self.setting, cut, workers).throughput

    def workers_for(self, target: float) -> int | None:
        """Smallest worker count predicted to meet ``target`` minibatches/s at the chosen cut
        (0 if the local pipeline does; None if no count up to ``max_workers`` does). For the
        best cut for another target, see :meth:`size`."""
        if self.setting.local * MEETS >= target:
            return 0
        cut = self.cut or (self.cuts[0] if self.cuts else None)
        return None if cut is None else workers_needed(self.setting, cut, target, self.max_workers)

    def size(self, target: float, max_workers: int | None = None) -> Decision:
        """The decision for another ``target`` on the costs measured here: cut and worker count."""
        return decide(self.setting, self.cuts, target=target, max_workers=max_workers or self.max_workers,
                      invalid=self.invalid)

    @property
    def predicted_speedup(self) -> float | None:
        """Predicted served over predicted local, with the workers running now (a ratio of the
        model's numbers, so a busy machine slows both alike)."""
        if self.distribute is None or not self.workers_available:
            return None
        return self.predicted_at(self.workers_available) / max(self.predicted_at(0), 1e-12)

    @property
    def measured_speedup(self) -> float | None:
        """Served over local, both measured here side by side (medians)."""
        n = self.workers_available
        if self.distribute is None or n not in self.measured or 0 not in self.measured:
            return None
        return self.measured[n] / max(self.measured[0], 1e-12)

    @property
    def predicted_cpu_speedup(self) -> float | None:
        """The speed-up cores of their own would give, *predicted* (not measured) from the CPU
        each side measured it spent per minibatch in the served runs (client on its cores,
        workers and dispatcher on theirs) against the local runs: the busier side of the served
        pipeline, per core, against the local pipeline, per core. Each side in its least
        disturbed slices, median over the runs (as the local prediction: the least of all runs'
        slices ran 19-29% below the rest, and taken on each side apart it read 1.96x where the
        model said 1.45x). CPU per minibatch moves far less than throughput when neighbours
        take cores away, so this checks the model's costs on a busy machine too (the dispatcher
        shares the workers' cores here)."""
        n = self.workers_available
        served, local = self.runs.get(n), self.runs.get(0)
        if self.distribute is None or not served or not local or not all(r.worker_cpu for r in served):
            return None
        s = self.setting
        client = statistics.median(r.least_client_cpu for r in served) / s.client_cores
        workers = statistics.median(r.worker_and_dispatcher_cpu for r in served) / (n * s.cores_per_worker)
        local_cpu = statistics.median(r.least_client_cpu for r in local) / s.client_cores
        return local_cpu / max(client, workers, 1e-12)

    @property
    def dedicated(self) -> bool:
        """Did the client and the workers have their cores to themselves? (A spinning probe
        before and after measuring got at least 80% of each.) When not, measured throughput is
        a share of what the predictions, made for cores of their own, say."""
        shares = self.cpu_shares + self.worker_core_shares
        return bool(self.cpu_shares) and all(s >= DEDICATED for s in shares)

    # -- applying it ------------------------------------------------------------------------
    @property
    def dataset(self) -> "tf.data.Dataset | None":
        """The pipeline served through ``address`` as planned (None without an offload)."""
        if self.distribute is None or self.address is None:
            return None
        if self._dataset is None:
            self._dataset = self.dataset_for(self.address)
        return self._dataset

    def dataset_for(self, address: str) -> "tf.data.Dataset":
        """The planned pipeline served by the dispatcher at ``address`` (registers it there)."""
        if self.distribute is None:
            raise ServiceError(f"nothing to offload: {self.reason}")
        if not reachable(address):
            raise ServiceError(f"no tf.data service dispatcher answers at {address}")
        return offloaded_from_request({"graph": self._graph, "spec": self._spec}, self.distribute, address)

    def rewrite_source(self, source: str, *, dispatcher: str = "dispatcher") -> str:
        """The user's cell with ``distribute()`` written in at the cut (the dispatcher's address a
        parameter named ``dispatcher``), or unchanged when there is nothing to offload."""
        from ..export.offload import rewrite_source
        if self.distribute is None:
            return source
        return rewrite_source(source, self.distribute, root_label=self.trace.pipeline[self.trace.pipeline.root].label,
                              address=self.address or "grpc://127.0.0.1:5050", parameter=dispatcher)

    # -- presentation -----------------------------------------------------------------------
    def __str__(self) -> str:
        from ..render.offload import offload_text
        return offload_text(self)

    def _repr_html_(self) -> str:
        from ..render.offload import offload_html
        return offload_html(self)


__all__ = ["OffloadPlan", "Run"]
