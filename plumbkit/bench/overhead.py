"""Tracing overhead: the same pipeline untraced, traced, and traced with the live widget shown,
interleaved in one process.

Untraced = the plain pull loop over the pipeline for the same time; traced = the same loop
inside :func:`plumbkit.trace` (sampling tf.data's model 4x a second); widget = the same trace
driven by the ``%%plumb`` live widget (:class:`plumbkit.widgets.LiveTraceWidget`), which builds
one analysis and solves one LP per redraw and renders the table, chart and status (outside a
kernel its comm sends nothing: the kernel-side cost is measured, not the websocket's). The
median ratio of rounds run in rotating order is the figure: machines here are noisy, pairs are
not. Beside the throughput ratios, the CPU time of the thread that samples (and, with the
widget, analyses and draws) is reported per second of trace: a figure a busy neighbour hardly
moves, and on a pipeline that keeps every core busy the widget's extra CPU share divided by
the cores is what it costs in throughput.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import tensorflow as tf

from ..engine import trace
from ..host.machine import available_cores
from ..tfdata.run import untraced_throughput


def untraced(ds: tf.data.Dataset, seconds: float) -> tuple[float, None]:
    """Same warm-up as the trace's steady-state window (the first quarter, at most 1 s)."""
    warmup = min(1.0, 0.25 * seconds)
    return untraced_throughput(ds, seconds - warmup, warmup), None


def traced(ds: tf.data.Dataset, seconds: float) -> tuple[float, float]:
    """Throughput inside plumbkit.trace, over the same steady-state window as :func:`untraced`,
    and the sampling thread's CPU per second of trace."""
    cpu = time.thread_time()
    t = trace(ds, seconds=seconds, converge=False, min_seconds=seconds, calibrate=False)
    return t.throughput, (time.thread_time() - cpu) / max(t.elapsed, 1e-9)


def widget(ds: tf.data.Dataset, seconds: float) -> tuple[float, float]:
    """The same trace with the live widget drawing it (as ``%%plumb`` shows it)."""
    from ..widgets.live import LiveTraceWidget
    view = LiveTraceWidget(ds, seconds=seconds, start=False, converge=False, min_seconds=seconds)
    try:
        cpu = time.thread_time()
        t = view.run_here()
        return t.throughput, (time.thread_time() - cpu) / max(t.elapsed, 1e-9)
    finally:
        view.close()


def overhead(make: Callable[[], tf.data.Dataset], *, seconds: float, rounds: int,
             with_widget: bool = False) -> dict:
    """Median traced/untraced (and widget/untraced) throughput ratios over ``rounds`` rounds in
    rotating order, each on a fresh pipeline."""
    runs = [untraced, traced] + ([widget] if with_widget else [])
    values: dict[str, list[float]] = {fn.__name__: [] for fn in runs}
    cpu: dict[str, list[float]] = {fn.__name__: [] for fn in runs}
    for r in range(rounds):
        for fn in runs[r % len(runs):] + runs[:r % len(runs)]:
            throughput, thread_cpu = fn(make(), seconds)
            values[fn.__name__].append(throughput)
            cpu[fn.__name__].append(thread_cpu)
    ratios = [t / u for t, u in zip(values["traced"], values["untraced"])]
    ratio = statistics.median(ratios)
    result = {"untraced": statistics.median(values["untraced"]), "traced": statistics.median(values["traced"]),
              "ratio": ratio, "overhead": 1 - ratio, "ratios": ratios,
              "traced_thread_cpu": statistics.median(cpu["traced"])}
    if with_widget:
        widget_ratios = [t / u for t, u in zip(values["widget"], values["untraced"])]
        extra = statistics.median(cpu["widget"]) - result["traced_thread_cpu"]
        result.update(widget=statistics.median(values["widget"]),
                      widget_ratio=statistics.median(widget_ratios),
                      widget_overhead=1 - statistics.median(widget_ratios),
                      widget_ratios=widget_ratios,
                      widget_thread_cpu=statistics.median(cpu["widget"]),
                      widget_extra_cpu=extra,  # cores the widget's analysis, LP and drawing take
                      widget_points_if_saturated=100 * extra / available_cores())
    return result
