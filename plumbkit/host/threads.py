"""This process's threads as the kernel accounts them, and what the ones already running cost.

Calibration times an operator by this process's CPU clock and the kernel's run-queue accounting
(``/proc/self/task/*/schedstat``). Threads the user left running in the same process (a training
loop in a thread, a live widget, an iterator still prefetching) spend CPU and wait for cores
while an operator is timed, and both were counted as the operator's: beside a thread using 0.4 of
a core, a 3 ms sleeping ``py_function`` read 3.2 ms of CPU and 0.7 ms of latency (alone 0.34 and
3.4), so it was taken as computing and got no calls in flight. :func:`measure_background` reads
what the threads do while nothing is pulled; a run subtracts it, per thread, over its length.
Linux only; elsewhere there is nothing to read and nothing is subtracted.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

#: Per thread id: (ns on a core, ns ready to run but waiting for one).
Schedstat = dict[str, tuple[int, int]]


def schedstat() -> Schedstat:
    """Per thread of this process: (ns on a core, ns ready but waiting for one), from Linux's
    ``/proc/self/task/*/schedstat`` (empty where it is not available)."""
    out: Schedstat = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                on_cpu, waiting = f.read().split()[:2]
            out[task] = (int(on_cpu), int(waiting))
        except (OSError, ValueError):
            continue
    return out


@dataclass(frozen=True)
class Background:
    """What this process's threads did per wall second while nothing was pulled: per thread id,
    (seconds on a core, seconds ready but waiting for a core)."""

    rates: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def cpu_rate(self) -> float:
        """Cores the background threads kept busy."""
        return sum(cpu for cpu, _ in self.rates.values())

    def cpu_spent(self, before: Schedstat, after: Schedstat, seconds: float) -> float:
        """CPU seconds the background threads spent between two readings ``seconds`` apart: each
        at its rate, never more than it did (beside a run's work it may get fewer cycles)."""
        spent = 0.0
        for task, (rate, _) in self.rates.items():
            if task in before and task in after:
                spent += min(max(0.0, (after[task][0] - before[task][0]) / 1e9), rate * seconds)
        return spent


#: Nothing running in the background (or nothing measured): nothing subtracted.
NO_BACKGROUND = Background()

#: Below this many cores, a thread's activity is an idle pool thread waking, not background work.
BACKGROUND_FLOOR = 0.05


def measure_background(seconds: float = 0.05, *, quiet_share: float, windows: int = 2) -> Background:
    """What this process's threads keep doing while the caller does nothing: per thread, its
    lowest rate over ``windows`` windows of ``seconds`` (a pool thread that wakes once is not
    background work), threads under BACKGROUND_FLOOR of a core left out; nothing at all when the
    process as a whole stays under ``quiet_share`` of a core (it is quiet: TensorFlow's pool
    threads wake now and then, and the next run's work lands on those same threads)."""
    readings = []
    for _ in range(windows):
        before, t0 = schedstat(), time.perf_counter()
        time.sleep(seconds)
        after, wall = schedstat(), time.perf_counter() - t0
        readings.append({task: ((cpu - before[task][0]) / 1e9 / wall,
                                max(0.0, (waited - before[task][1]) / 1e9 / wall))
                         for task, (cpu, waited) in after.items() if task in before})
    rates = {task: min(r[task] for r in readings) for task in readings[-1]
             if all(task in r for r in readings)}
    busy = {task: rate for task, rate in rates.items() if rate[0] >= BACKGROUND_FLOOR}
    if sum(cpu for cpu, _ in busy.values()) < quiet_share:
        return NO_BACKGROUND
    return Background(busy)


def runnable_seconds(before: Schedstat, after: Schedstat, *, worker_share: float,
                     background: Background = NO_BACKGROUND, wall: float = 0.0) -> float:
    """Seconds the threads that did a run's work spent ready to run but waiting for a core.

    Idle threads of other iterators, which wake now and then, are left out (under
    ``worker_share`` of the run's CPU), and so is what ``background`` threads did over the run's
    ``wall`` seconds: a busy thread of the user's waits for a core too, and that wait is not the run's.
    """
    deltas = {}
    for task, (cpu, waited) in after.items():
        cpu0, waited0 = before.get(task, (0, 0))
        rate_cpu, rate_waited = background.rates.get(task, (0.0, 0.0))
        deltas[task] = (max(0.0, (cpu - cpu0) / 1e9 - rate_cpu * wall),
                        max(0.0, (waited - waited0) / 1e9 - rate_waited * wall))
    total = sum(c for c, _ in deltas.values())
    if total <= 0:
        return 0.0
    return sum(w for c, w in deltas.values() if c >= worker_share * total)


__all__ = ["Background", "NO_BACKGROUND", "Schedstat", "measure_background", "runnable_seconds", "schedstat"]
