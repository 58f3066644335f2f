"""What the tracer records: runtime node counters over time. Pure data, saveable as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class NodeSample:
    """One runtime iterator node's cumulative counters at one moment."""

    id: int
    name: str  # runtime name, e.g. "ParallelMapV2", "MapAndBatch", "Root"
    inputs: tuple[int, ...]
    elements: int
    bytes_produced: int
    bytes_consumed: int
    processing_ns: int  # self time summed over threads (wall clock while active)
    buffered_elements: int
    buffered_bytes: int
    parameters: dict[str, float]
    tunable: tuple[str, ...]  # parameters AUTOTUNE may change
    ratio: float  # output elements per input element where tf.data knows it (0 = unknown)

    def to_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass(frozen=True)
class Snapshot:
    """Everything sampled at one instant; times are seconds since the trace started."""

    t: float
    cpu: float  # process CPU seconds (all threads) since the trace started
    rss: int  # resident memory, bytes
    nodes: dict[int, NodeSample]
    #: CPU seconds competing processes other than this one spent since the trace started (None:
    #: not readable, or a trace saved before it was recorded); see plumbkit.host.machine
    others: float | None = None

    @property
    def root(self) -> NodeSample | None:
        return next((n for n in self.nodes.values() if n.name == "Root"), None)

    @property
    def batches(self) -> int:
        root = self.root
        return root.elements if root else 0


@dataclass
class RawTrace:
    """The tracer's output: snapshots over time and how the run ended."""

    snapshots: list[Snapshot] = field(default_factory=list)
    ended: str = "running"  # "converged", "time limit", "batch limit", "end of data", "stopped", "interrupted", "error", "no element"
    error: str | None = None
    cores: int = 1
    warmup_seconds: float = 0.0
    epochs_repeated: bool = False  # a finite pipeline, run with repeat() on top (as training does)
    consumer_blocked: bool = False  # the consumer was still waiting for an element when the trace ended


def snapshot_from_dict(d: dict) -> Snapshot:
    nodes = {int(k): NodeSample(**{**v, "inputs": tuple(v["inputs"]), "tunable": tuple(v["tunable"])})
             for k, v in d["nodes"].items()}
    return Snapshot(t=d["t"], cpu=d["cpu"], rss=d["rss"], nodes=nodes, others=d.get("others"))


def snapshot_to_dict(s: Snapshot) -> dict:
    return {"t": s.t, "cpu": s.cpu, "rss": s.rss, "others": s.others,
            "nodes": {str(k): v.to_dict() for k, v in s.nodes.items()}}
