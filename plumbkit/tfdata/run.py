"""Running a pipeline for a measurement: epochs repeated, the consumer's ceiling, a plain loop."""

from __future__ import annotations

import time

import tensorflow as tf


def measurable(ds: tf.data.Dataset) -> tf.data.Dataset:
    """Finite pipelines are measured over repeated epochs, as training consumes them."""
    cardinality = int(ds.cardinality().numpy())
    return ds if cardinality == tf.data.INFINITE_CARDINALITY else ds.repeat()


def ideal_throughput(ds: tf.data.Dataset, *, seconds: float = 0.7, repeats: int = 3) -> float:
    """What the consumer could take if the pipeline cost nothing: ``take(1).cache().repeat()``
    (the tf.data papers' ideal bound; prefetched, as plumbkit's plans end), driven by the same
    ``next()`` loop as the tracer. The best of a few short runs: it is a ceiling, and on a
    shared machine noise only ever lowers it."""
    best = 0.0
    for _ in range(repeats):
        it = iter(ds.take(1).cache().repeat().prefetch(2))
        next(it)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            next(it)
            n += 1
        best = max(best, n / (time.perf_counter() - t0))
    return best


def untraced_throughput(ds: tf.data.Dataset, seconds: float, warmup: float) -> float:
    """Minibatches/s of a plain ``next()`` loop over ``ds`` after ``warmup`` seconds (no tracer)."""
    it = iter(ds)
    t_start = time.perf_counter()
    while time.perf_counter() - t_start < warmup:
        next(it)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        next(it)
        n += 1
    return n / (time.perf_counter() - t0)
