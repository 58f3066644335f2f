"""What calibration measured about each operator: CPU and wall time per element, run alone.

A live trace reads tf.data's self time per operator, which is *wall* time: under tf.data's
parallel maps and a busy neighbour it includes waiting for a core. Calibration runs each
operator alone, in the pipeline's own execution mode, on a small cached sample of its real
inputs, and times it with the process CPU clock (:mod:`plumbkit.tfdata.calibrate`). These are
its pure records, saved with a trace.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

#: How an operator's figures were obtained (shown beside every number).
ALONE = "calibrated alone on a cached sample of its inputs"
SOURCE = "calibrated alone (a source: its own first elements)"
FUSED = "calibrated with the batch tf.data fused it into (MapAndBatch), on a cached sample of its inputs"


@dataclass(frozen=True)
class OperatorCost:
    """One operator's calibrated cost, per element it *produces*.

    ``cpu_per_element`` is process CPU seconds with the operator in its own execution mode
    (same options, same parallelism), minus the same sub-pipeline without it.
    ``latency_per_element`` is wall seconds per element with one call at a time (a separate,
    sequential probe), with ``probe_cpu_per_element`` the CPU of that same probe: an operator
    whose latency is several times its CPU spends its time waiting (sleep, I/O, a service); for
    such an operator ``cpu_per_element`` is then measured again with ``in_flight_calls`` calls in
    flight, as a plan runs it (its CPU per element falls with concurrency).
    """

    name: str  # graph node name at calibration time
    label: str  # the operator's label (stable across rebuilds, used to reuse a calibration)
    cpu_per_element: float | None
    wall_per_element: float | None = None  # own mode, with its concurrency
    latency_per_element: float | None = None  # one call at a time (None: not probed)
    probe_cpu_per_element: float | None = None
    #: Share of its CPU spent inside its Python calls (a Python operator; both timed in the same
    #: probe run): the part that holds the GIL, small when TensorFlow's side of a call dominates
    python_share: float | None = None
    #: >0: a waiting operator's CPU and Python per element were measured with this many calls in
    #: flight (its CPU per element falls with concurrency), not one at a time
    in_flight_calls: int = 0
    #: A waiting Python operator whose calls, many in flight, queued for the GIL with cores to
    #: spare: wall seconds per element so, the GIL's time per element as its calls see it (its
    #: Python and TensorFlow's side of each call, hand-offs included; None: they did not queue)
    gil_per_element: float | None = None
    #: Its wall time per element one call at a time over that with ``in_flight_calls`` in flight
    #: (None: not measured). Above the cores plus one, more calls in flight did what more cores
    #: could not: it waits, whatever the CPU clock and the run-queue accounting read
    in_flight_speedup: float | None = None
    #: ``in_flight_speedup`` was above the cores plus one: it waits (see there)
    overlaps: bool = False
    #: An operator that ran one call at a time but has a parallel form: its CPU per element
    #: measured again with ``parallel_calls`` calls in flight (a plan that parallelizes it runs
    #: it so, and CPU per element falls with concurrency)
    parallel_cpu_per_element: float | None = None
    parallel_calls: int = 0
    #: builds of the parallel form measured (the figure is their median) and their figures'
    #: (max - min) / median: the parallel form moves from one build to the next
    parallel_builds: int = 0
    parallel_spread: float = 0.0
    #: core-seconds per element its parallel form's own pool left idle (the cores x wall its run
    #: took, less the CPU), batched and pulled as the pipeline's consumer pulls; None: not read
    parallel_idle_per_element: float | None = None
    #: Calibrated alone in the one-call form it ran in: ``wall_per_element`` is then the time one
    #: thread is busy with an element (below its CPU where its kernels run on other threads too)
    one_call: bool = False
    elements: int = 0  # elements produced per timed run
    runs: int = 0
    spread: float = 0.0  # (max - min) / median of the timed runs' CPU
    how: str = ""  # ALONE, SOURCE, or why it was not calibrated
    seconds: float = 0.0  # wall time this operator's calibration took

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Calibration:
    """Per-operator costs measured alone, plus the Python consumer's own cost per minibatch."""

    costs: dict[str, OperatorCost] = field(default_factory=dict)  # by operator name
    consumer_cpu_per_batch: float | None = None  # one ``next()`` of the consumer loop (holds the GIL)
    seconds: float = 0.0  # wall time the whole calibration took
    notes: tuple[str, ...] = ()

    def for_operator(self, name: str, label: str) -> OperatorCost | None:
        """The cost of operator ``name``; by ``label`` when the pipeline was rebuilt since."""
        cost = self.costs.get(name)
        if cost is not None and cost.label == label:
            return cost
        return next((c for c in self.costs.values() if c.label == label), None)

    def to_dict(self) -> dict[str, Any]:
        return {"costs": {k: v.to_dict() for k, v in self.costs.items()},
                "consumer_cpu_per_batch": self.consumer_cpu_per_batch, "seconds": self.seconds, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Calibration":
        return cls(costs={k: OperatorCost(**v) for k, v in d.get("costs", {}).items()},
                   consumer_cpu_per_batch=d.get("consumer_cpu_per_batch"),
                   seconds=d.get("seconds", 0.0),
                   notes=tuple(d.get("notes", ())))
