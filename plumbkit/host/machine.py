"""Cores and memory this process may use: affinity and cgroup limits, not the host's totals.

In a container or a CI job ``os.cpu_count()`` reports the host's cores; the scheduler only
runs this process on its affinity set and the cgroup's CPU quota caps it further. Plans are
made for what is really there.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
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
    took: a measurement on a shared machine says how much of it was left (every process: see
    :func:`competing_busy_seconds` for those that take cores from this one)."""
    ticks = _stat_ticks()
    if ticks is None:
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    busy = sum(ticks[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def _stat_ticks() -> list[int] | None:
    """The machine's CPU ticks so far (``/proc/stat``'s first line: user nice system idle iowait
    irq softirq steal ...); None where it cannot be read."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] != "cpu":
        return None
    return [int(x) for x in fields[1:]]


def _autogroups() -> bool:
    """Whether the scheduler shares cores out per session first (``sched_autogroup_enabled``)."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False


def niced_neighbours_compete() -> bool:
    """Whether processes at low priority (nice > 0) take cores from this one.

    Not where this process runs at nice 0 and the scheduler weighs threads alone: CFS weighs a
    nice-19 thread at 15 against 1024 (about 1.5% of a shared core). But with autogroups (a
    desktop or container default) the scheduler first shares the cores between sessions, each
    at its group's weight (nice 0 unless set), and a thread's nice counts only inside its own
    session: measured on the dev VM (autogroups on), two spinning threads of this process got
    1.82 of 2 cores beside the other agents' nice-19 work, and 0.92 with one more nice-19
    spinner started in a session of its own. And a niced process competes with niced ones."""
    return _autogroups() or os.getpriority(os.PRIO_PROCESS, 0) > 0


#: An autogroup nice at or below this outweighs a nice-0 session ~9x or more (CFS weights:
#: nice -10 is 9548 against 1024): a bench run with ``echo -20 > /proc/self/autogroup`` got
#: 1.89-1.91 of 2 cores beside six helpers' sessions (benchmarks/results/2026-11-26-busy-cores).
OUTWEIGHING_AUTOGROUP_NICE = -10


def session_outweighs_others() -> bool:
    """Whether this process's session is weighted so far above the others' (autogroups on, its
    autogroup nice at or below :data:`OUTWEIGHING_AUTOGROUP_NICE`) that their processes only run
    on cycles it leaves idle: then they take no core from it, however busy ``/proc/stat`` says
    the machine is (they fill what the pipeline leaves idle)."""
    if not _autogroups():
        return False
    try:
        nice = int(Path("/proc/self/autogroup").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return False
    return nice <= OUTWEIGHING_AUTOGROUP_NICE


def competing_busy_seconds() -> float | None:
    """CPU seconds spent so far by every process that competes with this one for a core (this
    one included; None where ``/proc/stat`` cannot be read).

    ``/proc/stat``'s ``nice`` column (user time of niced processes) counts only where those
    processes take cores from this one (:func:`niced_neighbours_compete`); their system time sits
    in ``system`` and counts either way (a small overcount). Hypervisor ``steal`` counts: those
    cycles are not this machine's to plan with.
    """
    if session_outweighs_others():
        return time.process_time()  # nothing else competes: only this process's own CPU
    ticks = _stat_ticks()
    if ticks is None:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (ticks + [0] * 8)[:8]
    competing = user + system + irq + softirq + steal + (nice if niced_neighbours_compete() else 0)
    return competing / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class MachineReading:
    """One instant: wall clock, this process's CPU, and what the competing processes spent."""

    wall: float  # time.perf_counter()
    own: float  # time.process_time()
    competing: float | None  # competing_busy_seconds()
    #: this process's CPU as /proc/self/stat counts it: in the same ticks, updated by the same
    #: scheduler events as /proc/stat's, so their difference is the others' (None: unreadable)
    own_ticks: float | None = None


def read_machine() -> MachineReading:
    """The machine now; two readings give the neighbours' cores between them (:func:`neighbour_cores`)."""
    own = time.process_time()
    if session_outweighs_others():
        return MachineReading(time.perf_counter(), own, own, own)
    return MachineReading(time.perf_counter(), own, competing_busy_seconds(), _own_ticks())


def _own_ticks() -> float | None:
    """This process's user + system CPU seconds from ``/proc/self/stat`` (None: unreadable)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)


def neighbour_cores(start: MachineReading, end: MachineReading) -> float | None:
    """Cores other competing processes kept busy between two readings (the machine's competing
    CPU less this process's own, over the wall time; None where the machine cannot be read)."""
    others = others_seconds(start, end)
    if others is None or end.wall <= start.wall:
        return None
    return others / (end.wall - start.wall)


def others_seconds(start: MachineReading, end: MachineReading) -> float | None:
    """CPU seconds other competing processes spent between two readings (the machine's competing
    CPU less this process's own; None where the machine cannot be read)."""
    if start.competing is None or end.competing is None:
        return None
    if start.own_ticks is not None and end.own_ticks is not None:  # both in /proc's ticks: no lag between them
        own = end.own_ticks - start.own_ticks
    else:
        own = end.own - start.own
    return max(0.0, (end.competing - start.competing) - own)
