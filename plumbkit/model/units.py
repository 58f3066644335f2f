"""Units shown to people (bytes as KB/MB/GB, decimal like disk vendors and tf.data's docs)."""

from __future__ import annotations

import math


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
