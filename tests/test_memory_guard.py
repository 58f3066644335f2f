"""No plan caches more than its budget: the cache's fill is guarded in tf.data itself, and the
optimizer falls back to no cache when its estimate was too low. Resident memory is read from
the OS while the pipelines run. ~20 s.
"""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
import tensorflow as tf

import plumbkit
from plumbkit.model.plan import Change
from plumbkit.model.protocol import QUICK
from plumbkit.tfdata.graph import pipeline_of
from plumbkit.tfdata.memory_guard import GUARD_MARKER
from plumbkit.tfdata.rebuild import apply_changes

from conftest import BRIEF

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

#: What the plan holds, not its speed: a brief comparison, with the default's time for the
#: guarded fill (2 x fill_limit), so the guard meets the same pipeline it met under QUICK.
GUARDED = dataclasses.replace(BRIEF, fill_limit=QUICK.fill_limit)

MB = 10**6


def peak_memory_growth(ds: tf.data.Dataset, epochs: int = 1) -> tuple[float, Exception | None]:
    """Largest growth of this process's anonymous memory while iterating ``ds``, and the error."""
    gc.collect()
    base = peak = anonymous_memory()
    try:
        for _ in range(epochs):
            for _ in ds:
                peak = max(peak, anonymous_memory())
    except tf.errors.InvalidArgumentError as err:
        return peak - base, err
    return peak - base, None


def anonymous_memory() -> int:
    """Bytes of this process's resident anonymous memory (RssAnon): what it allocated and holds,
    not the pages of TensorFlow's libraries it has read so far (RssFile)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("RssAnon:"))
    return int(line.split()[1]) * 1024


class PeakMemory:
    """The peak anonymous memory of this process while the ``with`` block runs, sampled every
    20 ms by a thread (optimize fills caches inside TensorFlow, out of the caller's sight), and
    the peak within each of optimize's phases (its progress messages), to say where it grew."""

    def __enter__(self) -> "PeakMemory":
        self._stop = threading.Event()
        self.base = anonymous_memory()
        self.phase = "start"
        self.phases: dict[str, int] = {}
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def on_progress(self, message: str, fraction: float) -> None:
        self.phase = message

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            now, phase = anonymous_memory(), self.phase
            self.phases[phase] = max(self.phases.get(phase, now), now)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def peak_beyond_yours(self) -> int:
        """The peak over every phase but those that run yours alone (its trace, the runtime's
        costs measured on it, its measured rounds): stock tf.data's injected, autotuned prefetch on
        top of yours buffers as many elements as a paused consumer lets it (a probe pausing 5 ms
        every 50 elements read 188 MB of these megabyte elements; CI's busy cores, 481 MB while the
        runtime's costs ran yours). Your pipeline does that anyway; the budget bounds plumbkit's."""
        yours_alone = ("tracing your pipeline", "measuring the consumer's ceiling")
        ran = [peak for phase, peak in self.phases.items()
               if not phase.startswith(yours_alone) and not phase.endswith(": yours")]
        return max([self.base, *ran])

    def where(self) -> str:
        return "; ".join(f"{phase[:48]}: {(peak - self.base) / MB:.0f} MB" for phase, peak in self.phases.items())


#: The child's allocator hands freed tensors back to the OS at once, so its resident memory is
#: what is live: oneDNN's allocator (on by default on x86) pools what a pipeline frees, and glibc
#: keeps freed blocks below its adaptive mmap threshold; either makes the growth depend on how a
#: pool was left (CI read 335, 437 and 571 MB where the guard had stopped the fill at 150 MB and
#: a quiet machine reads 175-190). Without the guard the same child reads 556 MB (checked).
LIVE_MEMORY_ONLY = {"TF_ENABLE_ONEDNN_OPTS": "0", "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}


def megabyte_rows(n: int) -> tf.data.Dataset:
    return tf.data.Dataset.range(n).map(lambda i: tf.fill([2**20], tf.cast(i % 251, tf.uint8)))


def test_a_guarded_cache_stops_its_fill_at_the_limit_with_a_clear_message():
    ds = megabyte_rows(400)  # 420 MB if cached whole
    op = pipeline_of(ds).root
    guarded = apply_changes(ds, [Change("cache", "map(lambda)", op, "", "test")], cache_limit=60 * MB)
    growth, error = peak_memory_growth(guarded)
    assert error is not None and GUARD_MARKER in error.message
    assert "the cache after map(lambda) passed its limit of 60.0 MB" in error.message
    assert growth < 60 * MB + 100 * MB  # the limit plus a few elements and TF's buffers, not 420 MB


def test_a_guarded_cache_under_its_limit_caches_and_keeps_the_elements():
    ds = tf.data.Dataset.range(50).map(lambda i: tf.fill([3], i * 2))
    op = pipeline_of(ds).root
    guarded = apply_changes(ds, [Change("cache", "map(lambda)", op, "", "test")], cache_limit=10 * MB)
    expected = [e.tolist() for e in ds.as_numpy_iterator()]
    assert [e.tolist() for e in guarded.as_numpy_iterator()] == expected
    assert [e.tolist() for e in guarded.as_numpy_iterator()] == expected  # read back from the cache


def test_a_guarded_cache_of_sparse_minibatches_keeps_them():
    """``sparse_batch``'s graph declares the dense shape its SparseTensor stands for ([?, 4]),
    its encoded element has another ([3]), and the guard's scan checks what it returns: every
    plan caching a sparse_batch failed with "Got wrong shape for scan_func return value"
    (found trying user shapes, session 61)."""
    ds = tf.data.Dataset.range(30).map(lambda i: tf.range(i % 4)).sparse_batch(3, row_shape=[4])
    op = pipeline_of(ds).root
    guarded = apply_changes(ds, [Change("cache", "sparse_batch(3)", op, "", "test")], cache_limit=10 * MB)
    expected = [tf.sparse.to_dense(e).numpy().tolist() for e in ds]
    for _ in range(2):  # filled, then read back from the cache
        assert [tf.sparse.to_dense(e).numpy().tolist() for e in guarded] == expected


def test_a_guard_above_a_scan_of_your_own_guards_the_cache_and_keeps_your_scan():
    """The guard is a scan grafted below the cache; a pipeline with its own scan below the cache
    (a running sum) kept the guard's node wrong (the user's scan), and the fill failed with
    "Data type mismatch" (found trying user shapes, session 58)."""
    ds = (tf.data.Dataset.range(40).scan(tf.constant(0, tf.int64), lambda s, x: (s + x, s + x))
          .map(lambda x: tf.cast(x, tf.float32) / 3.0))
    op = pipeline_of(ds).root
    guarded = apply_changes(ds, [Change("cache", "map(lambda)", op, "", "test")], cache_limit=10 * MB)
    expected = [float(e) for e in ds.as_numpy_iterator()]
    assert expected[:4] == pytest.approx([0.0, 1 / 3, 1.0, 2.0])  # the running sum, divided
    assert [float(e) for e in guarded.as_numpy_iterator()] == expected
    assert [float(e) for e in guarded.as_numpy_iterator()] == expected  # read back from the cache
    # and the guard still stops a fill over its limit
    tiny = apply_changes(ds, [Change("cache", "map(lambda)", op, "", "test")], cache_limit=64)
    with pytest.raises(tf.errors.InvalidArgumentError, match=GUARD_MARKER):
        list(tiny.as_numpy_iterator())


K, N = 8000, 8500  # the last 500 elements are a megabyte each; a short trace sees only the first ones


def slow_then_big() -> tf.data.Dataset:
    def work(i):
        m = tf.fill([32, 32], tf.sin(tf.cast(i, tf.float32)))
        for _ in range(16):
            m = tf.sin(tf.matmul(m, m))
        return i + tf.cast(tf.reduce_sum(m) * 0, tf.int64)

    def payload(i):
        return tf.fill([tf.where(i < K, 1, 2**20)], tf.cast(i % 251, tf.uint8))
    return tf.data.Dataset.range(N).map(work).map(payload)


def sizes_and_growth(ds: tf.data.Dataset) -> tuple[list[int], float, Exception | None]:
    """Every element's length (counted inside TensorFlow: a Python loop would take longer),
    the peak growth of anonymous memory meanwhile, and the error that ended it, if any."""
    gc.collect()
    base = peak = anonymous_memory()
    out: list[int] = []
    try:
        for batch in ds.map(tf.size).batch(500).as_numpy_iterator():
            out += batch.tolist()
            peak = max(peak, anonymous_memory())
    except tf.errors.InvalidArgumentError as err:
        return out, peak - base, err
    return out, peak - base, None


def optimize_and_read_back(budget: float) -> dict:
    """Optimize ``slow_then_big`` under ``budget`` and read the plan back; run in a fresh process.

    Why a child of its own, started with :data:`LIVE_MEMORY_ONLY`: the growth then counts what is
    live in it, not what another test's pipelines left in a pool (a pytest worker read 889 MB
    before this test in CI).
    """
    gc.collect()
    with PeakMemory() as memory:  # the trace, the guarded fill and the measured runs
        plan = plumbkit.optimize(slow_then_big, seconds=1.5, compare=False, memory_budget=budget, protocol=GUARDED,
                                 on_progress=memory.on_progress)
    got, growth, error = sizes_and_growth(plan.dataset)
    return dict(optimizing=memory.peak_beyond_yours() - memory.base, where=memory.where(), node=plan.cache.node, label=plan.cache.label, bytes=plan.cache.bytes, cache=str(plan.cache),
                notes=list(plan.notes), cache_changes=len([c for c in plan.changes if c.what == "cache"]),
                got=got, reading=growth, error=error.message if error is not None else None)


def test_a_plan_whose_cache_is_larger_than_estimated_stays_within_its_budget(monkeypatch):
    budget = 150 * MB  # the true size is 525 MB; the estimate from the trace a few KB
    for name, value in LIVE_MEMORY_ONLY.items():  # read by the child when it starts
        monkeypatch.setenv(name, value)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as fresh:
        run = fresh.submit(optimize_and_read_back, budget).result(timeout=600)
    assert run["optimizing"] < budget + 150 * MB, (f"grew {run['optimizing'] / MB:.0f} MB beyond yours; cache {run['cache']}; "
                                                   f"notes {run['notes'][:2]}; by phase: {run['where']}")
    got, growth, error = run["got"], run["reading"], run["error"]
    if run["node"] is None:  # the optimizer filled the cache, the guard stopped it: no cache
        note = next(n for n in run["notes"] if n.startswith(GUARD_MARKER))
        assert "passed its limit of 150.0 MB" in note and "the plan caches nothing" in note
        assert not run["cache_changes"]
        assert error is None and got == [1] * K + [2**20] * (N - K)  # the same elements
        assert growth < 150 * MB  # nothing cached: one element at a time
    elif run["label"] == "map(work)":  # the trace did see big elements: cached below them
        assert run["bytes"] < budget and error is None and got == [1] * K + [2**20] * (N - K)
        assert growth < budget + 150 * MB
    else:  # a noisy trace made the epoch look too long to fill while optimizing: the guard holds
        assert run["label"] == "map(payload)"
        assert any("the cache's fill is guarded" in n for n in run["notes"]), run["notes"]
        assert error is not None and GUARD_MARKER in error
        assert got == [1] * K + [2**20] * (len(got) - K)  # the same elements up to the stop
        assert growth < budget + 150 * MB


@pytest.mark.parametrize("budget", [None])
def test_the_default_budget_leaves_room(budget):
    from plumbkit.planning.budget import DEFAULT_BUDGET_SHARE, usable_budget
    from plumbkit.host.machine import available_memory
    assert usable_budget(budget).bytes == pytest.approx(DEFAULT_BUDGET_SHARE * available_memory()[0], rel=0.1)
    assert np.isfinite(usable_budget(budget).bytes)
