"""Three facts per operator: CPU per element, latency per element, and whether it holds the GIL.

Pure: combines what calibration measured alone (:class:`~plumbkit.model.costs.Calibration`)
with what the live trace measured in the pipeline (elements, visit ratios, wall time), and says
where each figure comes from. The resource model the planner and the bottleneck use:

- a CPU-bound operator needs ``V_i c_i`` core-seconds per minibatch; all of them share the
  cores (``sum theta_i <= cores``), one thread uses at most one core;
- a latency-bound operator (one call takes several times its CPU: a sleep, a remote fetch,
  slow storage) is limited by its concurrency, ``X <= k_i / (V_i l_i)``, and charges the
  cores only its CPU; its calls run on tf.data's thread pool, so ``k_i`` above the pool's size
  needs the pool raised;
- every operator running Python (``py_function``, ``numpy_function``, ``from_generator``)
  holds the GIL while it computes: together, and with the Python consumer loop, they get at
  most one core, whatever their parallelism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model.costs import FUSED, Calibration
from ..tunables import LATENCY_RATIO

CALIBRATED = "calibrated alone"
FROM_TRACE = "trace wall time, scaled"
PROBED = "probe alone, one call at a time"
TRACED = "trace self time per element"
PYTHON_TIMED = "its Python calls timed, alone with calls in flight"
GIL_QUEUED = "its calls queued for the GIL, alone with many in flight: wall time per element"


@dataclass(frozen=True)
class Cost:
    """An operator's costs per element it produces, and where each comes from."""

    cpu: float | None  # c_i, CPU seconds per element
    cpu_from: str  # CALIBRATED or FROM_TRACE
    latency: float | None  # l_i, wall seconds per element, one call at a time
    latency_from: str  # PROBED or TRACED ("" when unknown)
    bound: str | None  # "cpu" or "latency" (None: costs nothing measurable)
    holds_gil: bool
    python: float | None = None  # seconds per element holding the GIL (a Python operator)
    python_from: str = ""  # PYTHON_TIMED (its Python calls) or as ``cpu_from`` (all its CPU)
    #: CPU seconds per element in its parallel form, ``parallel_calls`` calls in flight
    #: (calibrated for an operator that ran one call at a time; None: not measured)
    parallel_cpu: float | None = None
    parallel_calls: int = 0
    #: calibrated inside the pair tf.data fused it into (MapAndBatch): as the pipeline runs it,
    #: so its CPU is not scaled to the process CPU (see ``analysis.operational.in_pipeline_scale``)
    fused: bool = False
    #: seconds one thread is busy per element, one call at a time (calibrated alone in the one-call
    #: form it ran in; None: not so calibrated): a thread's limit, where ``cpu`` is the cores'
    thread: float | None = None


def operator_cost(name: str, label: str, *, holds_gil: bool, calibration: Calibration | None,
                  traced_cpu: float | None, traced_wall: float | None) -> Cost:
    """The three facts for one operator.

    ``traced_cpu`` is the trace's fallback (self time scaled to the process CPU, per element);
    ``traced_wall`` its self time per element (per call, summed over threads).
    """
    cost = calibration.for_operator(name, label) if calibration is not None else None
    if cost is None or cost.cpu_per_element is None:
        cpu, cpu_from = traced_cpu, FROM_TRACE
    else:
        cpu, cpu_from = cost.cpu_per_element, CALIBRATED
        if cost.in_flight_calls:
            cpu_from = f"{CALIBRATED}, {cost.in_flight_calls} calls in flight"
    latency, latency_from = (traced_wall, TRACED) if traced_wall is not None else (None, "")
    probe_cpu = None
    if cost is not None and cost.latency_per_element is not None:
        latency, latency_from = cost.latency_per_element, PROBED
        probe_cpu = cost.probe_cpu_per_element
    bound = classify(cpu, latency if latency_from == PROBED else None, probe_cpu,
                     overlaps=cost is not None and cost.overlaps)
    python, python_from = gil_time(holds_gil, bound, cpu, cpu_from, cost)
    parallel = cost.parallel_cpu_per_element if cost is not None and cpu_from == CALIBRATED else None
    return Cost(cpu=cpu, cpu_from=cpu_from, latency=latency, latency_from=latency_from, bound=bound,
                holds_gil=holds_gil, python=python, python_from=python_from, parallel_cpu=parallel,
                parallel_calls=cost.parallel_calls if parallel is not None else 0,
                fused=cpu_from == CALIBRATED and cost is not None and cost.how == FUSED,
                thread=cost.wall_per_element if cpu_from == CALIBRATED and cost.one_call else None)


def gil_time(holds_gil: bool, bound: str | None, cpu: float | None, cpu_from: str,
             cost) -> tuple[float | None, str]:
    """Seconds per element a Python operator holds the GIL.

    A waiting one: the share of its CPU its Python calls took in the probe with calls in flight
    (most of its CPU is hand-offs and TensorFlow's side of the call; measured, an 8 ms sleeping
    ``py_function``: 28% of 0.43 ms), or, when its calls queued for the GIL with many in flight,
    its wall seconds per element there (the same function: 0.26 ms per element, at most 3.8k
    elements/s with 1.5 of 2 cores busy; TensorFlow's side of a call holds the GIL too, which
    the thread clock inside the call does not see). A computing one: all its CPU, the safe side (TensorFlow's
    C++ side of a call also holds the GIL, converting tensors: measured, a pure-Python tokenizer's
    calls took 82% of its CPU by the thread clock, yet four threads ran it no faster than one).
    """
    if not holds_gil:
        return None, ""
    share = cost.python_share if cost is not None else None
    if bound == "latency" and share is not None and cpu is not None:
        queued = cost.gil_per_element
        if queued is not None and queued > cpu * share:
            return queued, GIL_QUEUED
        return cpu * share, PYTHON_TIMED
    return cpu, cpu_from


def classify(cpu: float | None, probed_latency: float | None, probe_cpu: float | None, *,
             overlaps: bool = False) -> str | None:
    """``"latency"`` when one call at a time waits most of its wall time, else ``"cpu"``.

    Only a probe (the operator alone, one call at a time) can say so: in the pipeline, wall time
    also counts waiting for a core, which depends on the neighbours. An operator that ``overlaps``
    (calls in flight sped it up past what the cores could) waits, whatever its clocks read.
    """
    if overlaps:
        return "latency"
    if probed_latency is not None:
        reference = probe_cpu if probe_cpu is not None else cpu
        if reference is not None and probed_latency >= LATENCY_RATIO * max(reference, 1e-9):
            return "latency"
    if cpu is None or cpu <= 0:
        return None
    return "cpu"


def capacity(*, visit_ratio: float | None, cpu: float | None, latency: float | None, bound: str | None,
             holds_gil: bool, parallelism: int | None, sequential: bool, cores: int,
             threadpool: int, python: float | None = None) -> float:
    """Minibatches/s this operator sustains in its current configuration (inf: unlimited).

    CPU-bound: ``min(threads, cores) / (V c)``; latency-bound: ``concurrency / (V l)``, where
    the concurrency of a parallel operator is capped by tf.data's thread pool; a GIL holder
    never holds the GIL more than one core's worth: ``1 / (V p)``, ``p`` its Python seconds
    per element (all its CPU when not timed apart).
    """
    if not visit_ratio or not cpu and not latency:
        return math.inf
    threads = 1 if sequential else max(1, parallelism or 1)
    gil = python if python is not None else cpu
    gil_limit = 1.0 / (visit_ratio * gil) if holds_gil and gil else math.inf
    if bound == "latency" and latency:
        concurrency = threads if sequential else min(threads, max(1, threadpool))
        return min(concurrency / (visit_ratio * latency), gil_limit)
    if not cpu:
        return math.inf
    return min(min(threads, cores) / (visit_ratio * cpu), gil_limit)


__all__ = ["CALIBRATED", "Cost", "FROM_TRACE", "GIL_QUEUED", "PROBED", "PYTHON_TIMED", "TRACED",
           "capacity", "classify", "operator_cost"]
