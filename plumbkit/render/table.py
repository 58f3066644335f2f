"""The operator table's columns and cells, shared by the text, HTML and widget views."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..model.units import human_bytes

if TYPE_CHECKING:
    from ..analysis.operational import OpStats
    from ..engine.trace_result import Trace

COLUMNS = ("operator", "kind", "par", "V", "R/core", "CPU", "util", "elem/s", "B/elem",
           "materialized", "cache")


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


def row_cells(o: "OpStats") -> list[str]:
    """The table's cells for one operator (shared by the text, HTML and widget views)."""
    par = "—" if o.parallelism is None else ("AUTO" if o.parallelism < 0 else str(o.parallelism))
    cache = "yes" if o.cacheable else "no"
    return [o.label, o.kind, par, num(o.visit_ratio), num(o.rate_per_core), pct(o.cpu_share),
            pct(o.utilization), num(o.elements_per_second), human_bytes(o.bytes_per_element),
            human_bytes(o.materialized_bytes), cache]


def throughput_series(trace: "Trace") -> list[float]:
    """Minibatches/s between successive snapshots (the live curve)."""
    snaps = trace.raw.snapshots
    out = []
    for a, b in zip(snaps, snaps[1:]):
        if b.t > a.t:
            out.append((b.batches - a.batches) / (b.t - a.t))
    return out
