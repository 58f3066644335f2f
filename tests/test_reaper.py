"""Dropping iterators off the measuring thread: the caller goes on at once, ``settle`` waits for
what was handed over, and no thread outlives an operation."""

import threading
import time

import tensorflow as tf

import plumbkit
from plumbkit.tfdata import reaper


class SlowToDestroy:
    """An object whose destruction blocks, as a tf.data iterator's does while AUTOTUNE's model
    thread sleeps."""

    destroyed: list[str] = []

    def __init__(self, name: str, seconds: float):
        self.name, self.seconds = name, seconds

    def __del__(self):
        time.sleep(self.seconds)
        SlowToDestroy.destroyed.append(threading.current_thread().name)


def reaper_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "plumbkit-reaper"]


def test_release_returns_at_once_and_settle_waits_for_the_destruction():
    SlowToDestroy.destroyed.clear()
    slow = SlowToDestroy("a", 0.4)
    began = time.perf_counter()
    reaper.release(slow, SlowToDestroy("b", 0.2))
    del slow
    handed_over = time.perf_counter() - began
    assert handed_over < 0.1 and reaper_threads() == ["plumbkit-reaper"]
    reaper.settle()
    assert time.perf_counter() - began >= 0.6  # both destroyed, one after the other
    assert SlowToDestroy.destroyed == ["plumbkit-reaper", "plumbkit-reaper"]
    time.sleep(0.05)
    assert reaper_threads() == []  # gone when there is nothing to drop
    reaper.settle()  # nothing pending: returns


def test_an_autotuned_iterator_dropped_by_a_trace_is_gone_when_the_trace_returns():
    """The trace hands its iterator to the reaper; the operation settles before it returns."""
    def make():
        return tf.data.Dataset.range(10**9).map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE).batch(8)
    trace = plumbkit.trace(make, seconds=0.5, calibrate=False)
    assert trace.throughput > 0
    assert not [t.name for t in threading.enumerate() if t.name.startswith("plumbkit")]
