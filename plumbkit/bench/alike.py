"""What the bench's issue sections share: contenders measured alike under one protocol, read as
medians and speed-ups with their intervals, prediction errors, and the bytes this process wrote.

The sections (:mod:`.disk_tier`, :mod:`.model_loop`, :mod:`.busy_core`) each measure their own
contenders with :func:`plumbkit.engine.compare.compare`, exactly as the end-to-end rows do, so a
ratio in one table means what it means in the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from ..engine.compare import Contender, Protocol, compare
from ..model.errors import first_line

Log = Callable[[str], None]


def as_dict(speedup) -> dict | None:
    """A :class:`Speedup` as the report stores it (the end-to-end rows' form)."""
    if speedup is None:
        return None
    s = speedup
    return {"ratio": s.ratio, "low": s.low, "high": s.high, "coverage": s.coverage, "measurable": s.measurable,
            "noisy": s.noisy, "verdict": s.verdict, "ratios": list(s.ratios)}


def measured_alike(name: str, contenders: Sequence[Contender], protocol: Protocol, *,
                   ratios: Sequence[tuple[str, str]], log: Log,
                   before_each: Callable[[str], None] | None = None) -> dict:
    """``contenders`` under ``protocol`` (built fresh, caches filled, interleaved): medians,
    spreads, failures, the cores other processes took, and the speed-ups ``ratios`` names
    (``(of, over)``), extra rounds run while one of them is too noisy."""
    log(f"[{name}] measuring {len(contenders)} configurations alike ({protocol.rounds} rounds)")
    comparison = compare(contenders, protocol, before_each=before_each, settle=list(ratios),
                         on_progress=lambda m, f: log(f"[{name}]   {m}"))
    res = comparison.results
    return {"measured": {k: r.median for k, r in res.items()},
            "spread": {k: r.spread for k, r in res.items()},
            "failed": {k: r.failed for k, r in res.items() if r.failed},
            "rounds": {k: len(r.rounds) for k, r in res.items()},
            "notes": {k: r.notes for k, r in res.items() if r.notes},
            "neighbour_cores": comparison.neighbour_cores,
            "speedups": {f"{of} / {over}": as_dict(comparison.speedup(of, over)) for of, over in ratios}}


def attempt(rows: dict, key: str, log: Log, run: Callable[[], dict]) -> None:
    """One row; a row that fails is reported failed, in one line, and the others still run."""
    try:
        rows[key] = run()
    except Exception as err:  # noqa: BLE001 - the report says which row failed and why
        log(f"[{key}] failed: {first_line(err)}")
        rows[key] = {"pipeline": key, "failed": f"{type(err).__name__}: {first_line(err)}"}


def failed(row: dict) -> bool:
    """A row that did not run (a measured row's ``failed`` is its contenders' failures, a dict)."""
    return isinstance(row.get("failed"), str)


def error(predicted: float | None, measured: float | None) -> float | None:
    """Signed relative error of a prediction, (predicted - measured) / measured."""
    if predicted is None or not measured:
        return None
    return (predicted - measured) / measured


def written_bytes() -> int | None:
    """Bytes this process has caused to be written to storage (``/proc/self/io``'s write_bytes,
    counted when a page is dirtied; None where the kernel does not say)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def ratio_cell(s: dict | None) -> str:
    """A speed-up as a table cell: ratio and its interval with the coverage it has."""
    if not s:
        return "—"
    return f"{s['ratio']:.2f}× ({s['low']:.2f}–{s['high']:.2f}, {s['coverage']:.0%})"


def signed_pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.0f}%"


def num(x: float | None, digits: int = 1) -> str:
    """A figure as the report prints it (thousands separated; a dash for none)."""
    return "—" if x is None else f"{x:,.{digits}f}"
