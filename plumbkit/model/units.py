"""Units shown to people (bytes as KB/MB/GB, decimal like disk vendors and tf.data's docs)."""

from __future__ import annotations

import math
import re

#: Units a person may type for a size (decimal and binary).
BYTE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
              "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def human_bytes(n: float | None) -> str:
    if n is None:
        return "—"
    if math.isinf(n):
        return "∞"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"


def parse_bytes(text: str | None, what: str = "size") -> float | None:
    """``"2GB"``, ``"500MB"``, ``"1e9"`` -> bytes (None stays None); ValueError in one line."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in BYTE_UNITS:
        raise ValueError(f"cannot read {what} {text!r}: use e.g. 500MB or 2GB")
    return float(m.group(1)) * BYTE_UNITS[m.group(2).upper()]
