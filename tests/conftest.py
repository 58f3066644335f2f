"""Shared test set-up: quiet TensorFlow, and ground truth measured in the same process."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import statistics  # noqa: E402
import time  # noqa: E402

import tensorflow as tf  # noqa: E402

from plumbkit.bench.examples import planted_work  # noqa: E402
from plumbkit.tfdata.options import sequential_options  # noqa: E402

tf.get_logger().setLevel("ERROR")
tf.autograph.set_verbosity(0)


def cpu_seconds_per_element(fn, options=None, *, n: int = 400, rounds: int = 5) -> float:
    """CPU seconds ``fn`` costs per element, alone over a cheap source (``range``) in the
    execution mode ``options`` set (None: TensorFlow's defaults), timed by the process CPU
    clock, the output driven by ``reduce`` (no Python per element), minus the same source
    without ``fn``; runs interleaved, medians. Independent of plumbkit's own code: the truth
    the estimates are checked against.
    """
    def runner(with_fn: bool):
        ds = tf.data.Dataset.range(n)
        if with_fn:
            ds = ds.map(fn)
        if options is not None:
            ds = ds.with_options(options)
        run = tf.function(lambda: ds.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))
        run()  # traced once, warm
        return run

    runs = {True: runner(True), False: runner(False)}
    times: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for key in ((True, False) if r % 2 == 0 else (False, True)):
            c0 = time.process_time()
            runs[key]()
            times[key].append(time.process_time() - c0)
    return max(1e-9, (statistics.median(times[True]) - statistics.median(times[False])) / n)


def isolated_seconds_per_element(fn, *, n: int = 400, dtype=tf.int64) -> float:
    """Seconds ``fn`` costs per element alone, run as written and sequentially with intra-op
    pinned to one thread (the pinned tests' execution mode), in process CPU time (on a busy
    machine wall time would count waiting for a core)."""
    return cpu_seconds_per_element(fn, sequential_options(), n=n)


def heavy(x):
    """Planted operator: 96 matmul units (~0.3-0.4 ms)."""
    return planted_work(x, 96)


def medium(x):
    """Planted operator: 48 matmul units (half of heavy)."""
    return planted_work(x, 48)
