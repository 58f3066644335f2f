"""Running a pipeline for a measurement: epochs repeated, the consumer's ceiling, a plain loop.

Every loop here pulls through :mod:`plumbkit.tfdata.consumer`, so a ``stop`` event or Ctrl-C
ends it at once even when the pipeline is blocked inside TensorFlow.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

import tensorflow as tf

from .consumer import pull_for

#: A consumer-side measurement of a pipeline that yields nothing for this long gives up.
NOTHING_PRODUCED_SECONDS = 30.0


def measurable(ds: tf.data.Dataset) -> tf.data.Dataset:
    """Finite pipelines are measured over repeated epochs, as training consumes them."""
    cardinality = int(ds.cardinality().numpy())
    return ds if cardinality == tf.data.INFINITE_CARDINALITY else ds.repeat()


#: Copies of the replayed element per pass of :func:`replayed` (handles to one buffer, not copies
#: of its bytes: a 100 MB element replayed so held 300 MB, as replayed from one element).
REPLAYED_RUN = 256


def replayed(ds: tf.data.Dataset) -> tf.data.Dataset:
    """``ds``'s first element replayed forever at no cost: ``take(1).cache().repeat()`` (the tf.data
    papers' ideal pipeline) with its restarts amortized, ``.repeat(REPLAYED_RUN).cache().repeat()``.

    Why: a repeat over one element restarts its input on every pull, which the user's pipeline
    does not do. Pulled directly behind a cache of 8-scalar minibatches, the plain form read 20.5k/s
    where the amortized one and the cached pipeline itself read 21.5k/s and 21.4k/s (twelve
    interleaved rounds); through a prefetch the restart is the prefetch thread's and all three agree.
    """
    return ds.take(1).cache().repeat(REPLAYED_RUN).cache().repeat()


def ideal_throughput(ds: tf.data.Dataset, *, seconds: float = 0.7, repeats: int = 3,
                     stop: threading.Event | None = None) -> float:
    """What the consumer could take if the pipeline cost nothing: :func:`replayed` (the tf.data
    papers' ideal bound; prefetched, as plumbkit's plans end), driven by the same
    pull loop as the tracer. The best of a few short runs: it is a ceiling, and on a
    shared machine noise only ever lowers it. ``stop`` ends it early (what was counted stays)."""
    best = 0.0
    for _ in range(repeats):
        if stop is not None and stop.is_set():
            break
        n, elapsed = pull_for(replayed(ds).prefetch(2), first=1, seconds=seconds,
                              stop=stop, deadline=NOTHING_PRODUCED_SECONDS + seconds)
        if elapsed <= 0:
            break  # no first element in time (or stopped): trying again would wait as long
        best = max(best, n / elapsed)
    return best


def untraced_throughput(ds: tf.data.Dataset, seconds: float, warmup: float,
                        stop: threading.Event | None = None) -> float:
    """Minibatches/s of the plain pull loop over ``ds`` after ``warmup`` seconds (no tracer)."""
    n, elapsed = pull_for(ds, seconds=seconds, warmup=warmup, stop=stop)
    return n / elapsed if elapsed > 0 else 0.0


def _stepped(it: Iterator[Any], step: Callable[[Any], Any]) -> Iterator[Any]:
    """``it`` with ``step`` run on each minibatch before it is handed on."""
    for batch in it:
        step(batch)
        yield batch


class Runner:
    """A plain ``next()`` loop over one fresh iterator of ``ds`` (epochs repeated): what the
    comparison protocol times. No tracer, no sampling: the pipeline runs as the user's training
    loop would run it; with ``step``, the user's training step runs on every minibatch (steps/s)."""

    def __init__(self, ds: tf.data.Dataset, step: Callable[[Any], Any] | None = None):
        self._ds = measurable(ds)
        self._it = iter(self._ds)
        self.batches = 0
        if step is not None:  # the user's training step in the loop: each minibatch feeds one step
            self._it = _stepped(self._it, step)

    def consume(self, batches: int, *, limit: float) -> tuple[int, float]:
        """Take up to ``batches`` minibatches within ``limit`` seconds; (taken, seconds)."""
        t0 = time.perf_counter()
        taken = 0
        while taken < batches and time.perf_counter() - t0 < limit:
            next(self._it)
            taken += 1
        self.batches += taken
        return taken, time.perf_counter() - t0

    def window(self, seconds: float) -> float:
        """Minibatches/s over one window of about ``seconds``."""
        n, t0 = 0, time.perf_counter()
        while True:
            next(self._it)
            n += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                break
        self.batches += n
        return n / elapsed

    def close(self) -> None:
        """Drop the iterator and the dataset (and with them any cache they filled)."""
        self._it = None
        self._ds = None


def count_elements(ds: tf.data.Dataset, *, limit: float) -> int | None:
    """Elements ``ds`` yields in one pass, or None if it takes longer than ``limit`` seconds."""
    n, t0 = 0, time.perf_counter()
    for _ in ds:
        n += 1
        if n % 256 == 0 and time.perf_counter() - t0 > limit:
            return None
    return n
