"""Shared test set-up: quiet TensorFlow, and ground truth measured in the same process."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import time  # noqa: E402

import tensorflow as tf  # noqa: E402

from plumbkit.bench.examples import planted_work  # noqa: E402
from plumbkit.tfdata.options import sequential_options  # noqa: E402

tf.get_logger().setLevel("ERROR")
tf.autograph.set_verbosity(0)


def isolated_seconds_per_element(fn, *, n: int = 600, dtype=tf.int64) -> float:
    """Seconds ``fn`` costs per element, measured alone and sequentially (one thread: wall = CPU).

    Drives the map with batched output (Python's per-element cost would swamp cheap maps)
    and subtracts the same pipeline without the map.
    """
    def run(with_fn: bool) -> float:
        ds = tf.data.Dataset.range(n)
        if with_fn:
            ds = ds.map(fn)
        ds = ds.batch(100).with_options(sequential_options())
        for _ in ds:  # warm-up: function tracing, thread start
            break
        t0 = time.perf_counter()
        for _ in ds:
            pass
        return time.perf_counter() - t0
    return max(1e-9, (min(run(True) for _ in range(3)) - min(run(False) for _ in range(3))) / n)


def heavy(x):
    """Planted operator: 96 matmul units (~0.3-0.4 ms)."""
    return planted_work(x, 96)


def medium(x):
    """Planted operator: 48 matmul units (half of heavy)."""
    return planted_work(x, 48)
