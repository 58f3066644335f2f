"""Cores and memory this process may use: affinity and cgroup limits, not the host's totals.

In a container or a CI job ``os.cpu_count()`` reports the host's cores; the scheduler only
runs this process on its affinity set and the cgroup's CPU quota caps it further. Plans are
made for what is really there.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

_CGROUP = Path("/sys/fs/cgroup")


def _cgroup_cpu_quota() -> float | None:
    """Cores allowed by the cgroup CPU quota (v2 ``cpu.max`` or v1 ``cfs_quota/period``)."""
    try:
        quota, period = (_CGROUP / "cpu.max").read_text().split()
        if quota != "max":
            return int(quota) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota = int((_CGROUP / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((_CGROUP / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def _cgroup_memory_room() -> float | None:
    """Bytes the cgroup still lets this process group allocate (limit minus usage)."""
    for limit_file, usage_file in (("memory.max", "memory.current"),
                                   ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")):
        try:
            limit = (_CGROUP / limit_file).read_text().strip()
            usage = int((_CGROUP / usage_file).read_text())
        except (OSError, ValueError):
            continue
        if limit == "max" or int(limit) >= 2**60:
            return None
        return max(0.0, int(limit) - usage)
    return None


def available_cores() -> int:
    """Whole cores this process can run on: affinity set, capped by the cgroup quota (at least 1)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, math.floor(quota)))
    return max(1, cores)


def available_memory() -> tuple[float, str]:
    """(bytes this process can still allocate, where that figure comes from)."""
    import psutil
    free = float(psutil.virtual_memory().available)
    room = _cgroup_memory_room()
    if room is not None and room < free:
        return room, "cgroup memory limit"
    return free, "free memory reported by the OS"


def machine_busy_seconds() -> float | None:
    """CPU seconds every process on this machine has spent so far (``/proc/stat``; None where it
    cannot be read). Minus this process's own CPU time over a window, it is what the neighbours
    took: a measurement on a shared machine says how much of it was left."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    busy = sum(ticks[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")
