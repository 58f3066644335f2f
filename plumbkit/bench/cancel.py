"""How long Cancel and Ctrl-C take to end an optimization (goal: at most 2 s).

An optimization of the given pipeline is started and stopped at several points of its
protocol (during its first trace, between measurements, during a baseline), by a Cancel from
another thread (what the widget's button does) and by Ctrl-C in the thread that runs it (what
a kernel interrupt and the CLI's Ctrl-C do). The time from the request to ``optimize``
returning its partial plan is the figure.
"""

from __future__ import annotations

import _thread
import statistics
import threading
import time
from typing import Callable

import tensorflow as tf

from ..engine import optimize
from ..engine.scheduler import SCHEDULER, Handle


def _stop_after(delay: float, how: str, asked: dict, handle: Handle, done: threading.Event) -> threading.Thread:
    def run() -> None:
        if done.wait(delay) or SCHEDULER.active is None:
            return  # finished (or not started): nothing to stop
        asked["at"] = time.monotonic()
        if how == "cancel":
            handle.cancel()
        else:
            _thread.interrupt_main()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def cancel_latency(make: Callable[[], tf.data.Dataset], *, seconds: float,
                   delays: tuple[float, ...] = (0.5, 1.5, 3.0, 6.0)) -> dict:
    """Seconds from Cancel (or Ctrl-C) to the partial plan, stopping after each of ``delays``."""
    rows = []
    for how in ("cancel", "ctrl-c"):
        for delay in delays:
            handle, asked, done = Handle(), {}, threading.Event()
            stopper = _stop_after(delay, how, asked, handle, done)
            try:
                with handle.bound():
                    plan = optimize(make, seconds=seconds)
                returned = time.monotonic()
            except KeyboardInterrupt:  # Ctrl-C landed outside the measurement: still a stop
                returned = time.monotonic()
                plan = None
            done.set()
            stopper.join()
            try:
                time.sleep(0.1)  # a Ctrl-C sent just as it finished lands here, not in the next run
            except KeyboardInterrupt:
                pass
            if "at" not in asked:  # it finished before the request: nothing to time
                continue
            rows.append({"how": how, "after": delay, "seconds": returned - asked["at"],
                         "phase": plan.notes[0] if plan is not None and plan.partial else "(finished)"})
    latencies = [r["seconds"] for r in rows]
    return {"rows": rows, "median": statistics.median(latencies) if latencies else None,
            "max": max(latencies) if latencies else None}
