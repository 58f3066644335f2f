"""The operator table's columns and cells, shared by the text, HTML and widget views."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..analysis.costs import GIL_QUEUED, PYTHON_TIMED
from ..model.units import human_bytes

if TYPE_CHECKING:
    from ..analysis.operational import OpStats
    from ..engine.trace_result import Trace

COLUMNS = ("operator", "kind", "par", "V", "R/core", "CPU", "util", "elem/s", "B/elem",
           "materialized", "cache", "CPU/elem", "wait/elem", "bound", "GIL")
#: What each column is: measured in the pipeline (the trace), calibrated alone, or derived.
COLUMN_NOTES = {
    "V": "measured in the pipeline", "elem/s": "measured in the pipeline", "B/elem": "measured in the pipeline",
    "util": "derived", "R/core": "derived from CPU/elem and V", "materialized": "derived",
    "CPU": "share of the process CPU: calibrated CPU/elem × elements, or (uncalibrated) traced wall time, scaled",
    "CPU/elem": ("calibrated alone (c); a waiting operator, alone with calls in flight (f); or "
                 "traced wall time, scaled (w); after it, for an operator that ran one call at a "
                 "time, calibrated alone with one call in flight per core (p): what a plan that "
                 "parallelizes it is predicted to spend"),
    "wait/elem": "wall time per element, one call at a time (probed alone; else traced, per call)",
    "bound": "cpu: needs cores; latency: waits, needs calls in flight",
    "GIL": ("runs Python: all such operators share one core; in brackets, a waiting operator's "
            "time per element holding it (its Python calls timed, alone with calls in flight)"),
}


def num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if math.isinf(x):
        return "∞"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def seconds(x: float | None) -> str:
    """A short duration: µs below a millisecond, ms below a second."""
    if x is None:
        return "—"
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs" if x >= 1e-6 or x == 0 else "<1 µs"
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"


def row_cells(o: "OpStats") -> list[str]:
    """The table's cells for one operator (shared by the text, HTML and widget views)."""
    par = "—" if o.parallelism is None else ("AUTO" if o.parallelism < 0 else str(o.parallelism))
    cache = "yes" if o.cacheable else "no"
    source = {"calibrated alone": " (c)", "trace wall time, scaled": " (w)"}.get(o.cpu_from, "")
    if o.cpu_from.endswith("calls in flight"):
        source = " (f)"
    cpu = seconds(o.cpu_per_element) + source if o.cpu_per_element is not None else "—"
    if o.parallel_cpu_per_element is not None:
        cpu += f"; {seconds(o.parallel_cpu_per_element)} ×{o.parallel_calls} (p)"
    gil = ""
    if o.holds_gil:
        gil = f"yes ({seconds(o.python_per_element)})" if o.python_from in (PYTHON_TIMED, GIL_QUEUED) else "yes"
    return [o.label, o.kind, par, num(o.visit_ratio), num(o.rate_per_core), pct(o.cpu_share),
            pct(o.utilization), num(o.elements_per_second), human_bytes(o.bytes_per_element),
            human_bytes(o.materialized_bytes), cache, cpu, seconds(o.latency_per_element),
            o.bound or "—", gil]


def throughput_series(trace: "Trace") -> list[float]:
    """Minibatches/s between successive snapshots (the live curve)."""
    snaps = trace.raw.snapshots
    out = []
    for a, b in zip(snaps, snaps[1:]):
        if b.t > a.t:
            out.append((b.batches - a.batches) / (b.t - a.t))
    return out
