"""The runtime's own costs, measured on this machine before any rewrite (a TensorFlow edge).

A before-the-fact prediction needs what tf.data and the consumer cost besides the user's
operators: the consumer's ceiling on this pipeline's elements (one replayed,
:func:`~plumbkit.tfdata.run.replayed`: the tf.data papers' ideal), the CPU of handing one element to
another thread (a parallel operator's pool, a prefetch) and of reading one element back from a
memory cache. The last two do not depend on the user's pipeline: they are measured once per
process on planted elements, with process CPU time (a busy neighbour stretches wall time, not CPU
time), each the median of a few short runs.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Callable

import tensorflow as tf

from ..host.machine import others_seconds, read_machine
from ..tunables import MID_EPOCH_EDGE
from .options import sequential_options
from .run import Runner, replayed

#: Elements per run of the micro-benchmarks (a few tenths of a second each).
_ELEMENTS = 8_000
_RUNS = 3


def consumer_ceiling(ds: tf.data.Dataset, *, window: float = 0.5, windows: int = 3,
                     prefetched: bool = True) -> float:
    """Minibatches/s the consumer takes when the pipeline costs nothing: this pipeline's own first
    element replayed (:func:`~plumbkit.tfdata.run.replayed`), through a prefetch (or, not
    ``prefetched``, pulled directly), driven by the same plain ``next()`` loop the comparisons time.

    Per window, the larger of two rates: minibatches per wall second (what it reached) and per
    second of process CPU (the consumer thread is busy all the time, the prefetch thread nearly
    idle: a busy neighbour stretches the wall time of such a run by whatever it takes, but hardly
    its CPU time; other threads of the process make it an underestimate). The median of
    ``windows`` windows: the ceiling on an otherwise idle core.
    """
    free = replayed(ds)
    runner = Runner(free.prefetch(2) if prefetched else free)
    try:
        runner.consume(2, limit=30.0)
        rates = []
        for _ in range(windows):
            c0, n0 = time.process_time(), runner.batches
            wall = runner.window(window)
            rates.append(max(wall, (runner.batches - n0) / max(time.process_time() - c0, 1e-9)))
        return statistics.median(rates)
    finally:
        runner.close()


def _cpu_per_element(ds: tf.data.Dataset, elements: int) -> float:
    it = iter(ds)
    next(it)  # start threads, build functions
    c0 = time.process_time()
    for _ in it:
        pass
    return (time.process_time() - c0) / elements


@functools.lru_cache(maxsize=None)
def handoff_cost() -> float:
    """CPU seconds per element a parallel map adds over its plain form (thread pool hand-off,
    wake-ups, ordering), on a trivial function: what every parallel operator and prefetch pays
    per element besides its own work."""
    def plus_one(x):
        return x + 1

    options = sequential_options(intra_op=None)
    base = tf.data.Dataset.range(_ELEMENTS)
    diffs = []
    for _ in range(_RUNS):
        plain = _cpu_per_element(base.map(plus_one).batch(1000).with_options(options), _ELEMENTS)
        parallel = _cpu_per_element(base.map(plus_one, num_parallel_calls=2).batch(1000)
                                    .with_options(options), _ELEMENTS)
        diffs.append(parallel - plain)
    return max(0.0, statistics.median(diffs))


#: The planted work per element of :func:`pool_idle_per_element` (core-seconds): that of the cheap
#: maps a cache feeds in a plan (flips, crops, casts: 80-90 µs an element of CPU all told).
_IDLE_WORK = 80e-6
#: Elements per minibatch of that probe (as the bench's image pipelines batch).
IDLE_PROBE_BATCH = 32
#: Its windows (0.2 s each): the median (single windows read 8.6-16.4 µs on one quiet VM).
_IDLE_WINDOWS = 5


@functools.lru_cache(maxsize=None)
def pool_idle_per_element(cores: int) -> float:
    """Core-seconds that ``cores`` busy cores leave idle per element passed through a parallel
    map's pool, measured: a planted map of ~80 µs an element, ``cores + 1`` calls in flight,
    batched, prefetched, pulled by the plain ``next()`` loop the comparisons time; cores x wall
    less the process CPU and less what other processes spent meanwhile, per element, the median
    of a few windows.

    Why: a pipeline whose CPU binds does not keep every core busy. Its threads hand elements to
    each other, and a thread woken by a hand-off starts after a delay with its core idle. The
    bench's plans that a cache feeds with cheap parallel maps kept 0.76-0.87 of 2 cores busy at
    7k-25k elements/s, uncached plans of expensive maps 0.94-0.99; per element that is a nearly
    constant 11-21 µs of idle core (benchmarks/results/2026-11-26-flip-detection-ab/NOTE.md).
    It moves with the host: on the dev VM, 0.5 s windows of one pool read 5-9 µs for seconds at
    a time (while the CPU per element also read lower) and 15-20 µs otherwise.
    """
    return idle_per_element(idle_probe(cores), cores, IDLE_PROBE_BATCH)


def idle_per_element(ds: tf.data.Dataset, cores: int, batch: int) -> float:
    """Core-seconds ``cores`` cores leave idle per element of ``ds`` (``batch`` elements a
    minibatch), pulled by the plain ``next()`` loop: the median of a few 0.2 s windows after a
    short warm-up (0.0 when no window read anything). The probe above runs it on planted work;
    the parallel calibration on an operator's own pool (:mod:`plumbkit.tfdata.calibrate`)."""
    runner = Runner(ds)
    try:
        runner.consume(4, limit=10.0)
        idle = [idle_window(runner, cores, batch) for _ in range(_IDLE_WINDOWS)]
        idle = [i for i in idle if i is not None]
        return statistics.median(idle) if idle else 0.0
    finally:
        runner.close()


def idle_probe(cores: int) -> tf.data.Dataset:
    """The pipeline :func:`pool_idle_per_element` measures: ~80 µs of planted work an element,
    ``cores + 1`` calls in flight, minibatches of 32, prefetched."""
    def work(x):
        m = tf.reshape(tf.cast(tf.range(1024) + tf.cast(x % 7, tf.int32), tf.float32), [32, 32]) * 1e-3
        for _ in range(reps):
            m = tf.tanh(tf.matmul(m, m))
        return tf.reduce_sum(m)

    reps = 1
    per_rep = _cpu_per_element(tf.data.Dataset.range(400).map(work).with_options(sequential_options()), 400)
    reps = max(1, min(200, round(_IDLE_WORK / max(per_rep, 1e-7))))  # read when ``work`` is traced below
    return (tf.data.Dataset.range(10**9).map(work, num_parallel_calls=cores + 1).batch(IDLE_PROBE_BATCH).prefetch(2)
            .with_options(sequential_options()))


def idle_window(runner: Runner, cores: int, batch: int, seconds: float = 0.2) -> float | None:
    """Core-seconds left idle per element over one window of ``runner`` (``batch`` elements a
    minibatch): cores x wall less this process's CPU and less the neighbours' (taken, not idle)."""
    m0, c0, w0, n0 = read_machine(), time.process_time(), time.perf_counter(), runner.batches
    runner.window(seconds)
    wall, cpu, elements = time.perf_counter() - w0, time.process_time() - c0, (runner.batches - n0) * batch
    others = others_seconds(m0, read_machine()) or 0.0
    return max(0.0, cores * wall - cpu - others) / elements if elements else None


@functools.lru_cache(maxsize=None)
def cache_read_cost() -> float:
    """CPU seconds per element read back from a filled memory cache (a tensor handed out by
    reference, so nearly independent of its size)."""
    options = sequential_options(intra_op=None)
    cached = tf.data.Dataset.range(1000).map(lambda i: (tf.fill([4], i), i)).cache()
    for _ in cached.batch(1000):  # fill it
        pass
    runs = []
    for _ in range(_RUNS):
        runs.append(_cpu_per_element(cached.repeat(_ELEMENTS // 1000).batch(1000).with_options(options),
                                     _ELEMENTS))
    return max(0.0, statistics.median(runs))



def epoch_restart(ds: tf.data.Dataset, minibatches: int | None = None, *, epochs: int = 4,
                  limit: float = 10.0, epoch_limit: float | None = None,
                  fresh: Callable[[], tf.data.Dataset] | None = None) -> tuple[int, float, float] | None:
    """``(minibatches an epoch, seconds each restart of ``ds``'s epoch costs beyond the epoch's
    mid-epoch time, the median epoch's seconds)``: over ``epochs`` epochs (after one that fills
    any cache), the median epoch's duration less its minibatches times its mid-epoch interval
    (the middle three fifths, away from the restart at either end), and that duration itself.
    The restart builds every thread below the repeat again, refills shuffle buffers and waits for
    the first elements through the pipeline's depth, and the cores idle meanwhile.
    ``minibatches`` None: ``ds`` is finite, one pass counts its epoch, then it runs with
    ``repeat()`` on top; else ``ds`` repeats inside every ``minibatches``. None: ``limit``
    seconds passed first (or an epoch after the first took over ``epoch_limit``), or an epoch
    under 5 minibatches (too short to time). ``fresh``: makes the copy of ``ds`` that is timed
    (a Dataset object already iterated to its end runs its later epochs slower than a new one)."""
    if minibatches is None:  # one pass counts the epoch (and fills any cache)
        minibatches = _one_pass(ds, epoch_limit or limit)
        if minibatches is None:
            return None
        ds = (fresh() if fresh else ds).repeat()  # restarts as measurable() runs them
    stamps = _epoch_stamps(ds, minibatches, epochs + 1, limit, epoch_limit or limit)
    if not stamps or len({len(e) for e in stamps}) != 1 or len(stamps[0]) < 5:
        return None
    n = len(stamps[0])
    excess, durations = [], []
    for e in range(1, epochs):  # the first epoch fills caches and builds functions
        a, b = int(n * MID_EPOCH_EDGE), int(n * (1 - MID_EPOCH_EDGE))
        interval = (stamps[e][b] - stamps[e][a]) / (b - a)
        durations.append(stamps[e + 1][0] - stamps[e][0])
        excess.append(durations[-1] - n * interval)
    return n, max(0.0, statistics.median(excess)), statistics.median(durations)


def _one_pass(ds: tf.data.Dataset, limit: float) -> int | None:
    """Elements in one pass of ``ds`` (None: over ``limit`` seconds)."""
    n, t0 = 0, time.perf_counter()
    for _ in ds:
        n += 1
        if time.perf_counter() - t0 > limit:
            return None
    return n


def _epoch_stamps(ds: tf.data.Dataset, minibatches: int, epochs: int,
                  limit: float, epoch_limit: float) -> list[list[float]] | None:
    """Each epoch's minibatch times (None: over ``limit`` seconds, or an epoch after the first,
    which may fill a cache, over ``epoch_limit``)."""
    t0 = time.perf_counter()
    out: list[list[float]] = []
    it = iter(ds)
    for e in range(epochs):
        stamps: list[float] = []
        began = time.perf_counter()
        for _ in it:
            stamps.append(time.perf_counter())
            if stamps[-1] - t0 > limit or (e and stamps[-1] - began > epoch_limit):
                return None
            if minibatches and len(stamps) == minibatches:
                break
        out.append(stamps)
    return out


def is_infinite(ds: tf.data.Dataset) -> bool:
    """TensorFlow knows ``ds`` never ends (a ``repeat()`` without a count on top)."""
    return int(ds.cardinality().numpy()) == tf.data.INFINITE_CARDINALITY
