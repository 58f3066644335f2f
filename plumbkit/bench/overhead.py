"""Tracing overhead: the same pipeline traced and untraced, interleaved in one process.

Untraced = a plain ``next()`` loop over the pipeline for the same time; traced = the same loop
inside :func:`plumbkit.trace` (sampling tf.data's model 4x a second). The median ratio of
rounds run in alternating order is the figure: machines here are noisy, pairs are not.
"""

from __future__ import annotations

import statistics
from typing import Callable

import tensorflow as tf

from ..engine import trace
from ..tfdata.run import untraced_throughput


def untraced(ds: tf.data.Dataset, seconds: float) -> float:
    """Same warm-up as the trace's steady-state window (the first quarter, at most 1 s)."""
    warmup = min(1.0, 0.25 * seconds)
    return untraced_throughput(ds, seconds - warmup, warmup)


def traced(ds: tf.data.Dataset, seconds: float) -> float:
    """Throughput inside plumbkit.trace, over the same steady-state window as :func:`untraced`."""
    return trace(ds, seconds=seconds, converge=False, min_seconds=seconds, calibrate=False).throughput


def overhead(make: Callable[[], tf.data.Dataset], *, seconds: float, rounds: int) -> dict:
    """Median traced/untraced throughput ratio over ``rounds`` alternating pairs (fresh pipelines)."""
    ratios, plain, with_trace = [], [], []
    for r in range(rounds):
        order = (untraced, traced) if r % 2 == 0 else (traced, untraced)
        result = {}
        for fn in order:
            result[fn.__name__] = fn(make(), seconds)
        plain.append(result["untraced"])
        with_trace.append(result["traced"])
        ratios.append(result["traced"] / result["untraced"])
    ratio = statistics.median(ratios)
    return {"untraced": statistics.median(plain), "traced": statistics.median(with_trace),
            "ratio": ratio, "overhead": 1 - ratio, "ratios": ratios}
