"""Pulling elements from a pipeline in a way that can always be stopped.

Python cannot interrupt a thread blocked inside TensorFlow's C++ ``GetNext`` (a filter that
rejects everything, a stalled source): a KeyboardInterrupt waits for it, and a thread left
behind keeps a core busy and measures against whatever runs next. TensorFlow's eager runtime
can run any op under a ``CancellationManager``; cancelling it ends a blocked ``GetNext`` at
once with ``CancelledError`` (checked on TF 2.21: under 2 ms, and the pipeline's own threads
stop spinning too). :class:`Puller` runs ``IteratorGetNext`` that way, at the same cost as
``next(iterator)`` (the element is rebuilt the same way), so every loop that drives a pipeline
for a measurement can be stopped from another thread.

:func:`pull_for` is the loop the consumer-side measurements use (the consumer's ideal bound,
the untraced run of the overhead bench): the pulls run in a worker thread while the calling
thread waits, so a Ctrl-C in the calling thread, a ``stop`` event or a deadline ends them.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import tensorflow as tf
from tensorflow.python.data.util import structure
from tensorflow.python.eager import cancellation, context, execute

#: TensorFlow's eager entry point for running an op under a CancellationManager (TF 2.x); if a
#: future TensorFlow drops it, pulls fall back to ``next()`` and only the deadline ends them.
CANCELLABLE = hasattr(execute, "execute_with_cancellation")

#: How often a waiting thread looks at its stop event and deadline (seconds).
WAIT_STEP = 0.05
#: Longest wait for a cancelled pull to return (it takes milliseconds; this only guards a hang).
JOIN_SECONDS = 10.0


class Stopped(Exception):
    """The pull was cancelled (the measurement was stopped from another thread)."""


class Puller:
    """An iterator over ``ds`` whose blocked ``GetNext`` another thread can cancel."""

    def __init__(self, ds: tf.data.Dataset):
        self.iterator = iter(ds)
        self._manager = cancellation.CancellationManager()
        self._types = self.iterator._flat_output_types  # noqa: SLF001 - what next() passes to the op
        self._shapes = self.iterator._flat_output_shapes  # noqa: SLF001
        self._spec = self.iterator._element_spec  # noqa: SLF001

    def pull(self):
        """The next element, like ``next(iterator)``; StopIteration at the end, Stopped if cancelled."""
        if not CANCELLABLE:
            if self._manager.is_cancelled:
                raise Stopped()
            return next(self.iterator)
        try:
            with context.execution_mode(context.SYNC):
                tensors = execute.execute_with_cancellation(
                    "IteratorGetNext", num_outputs=len(self._types),
                    inputs=[self.iterator._iterator_resource],  # noqa: SLF001
                    attrs=("output_types", self._types, "output_shapes", self._shapes),
                    ctx=context.context(), cancellation_manager=self._manager)
        except tf.errors.OutOfRangeError:
            raise StopIteration from None
        except tf.errors.CancelledError:
            if self._manager.is_cancelled:
                raise Stopped() from None
            raise
        try:
            return self._spec._from_compatible_tensor_list(tensors)  # noqa: SLF001 - as next() does
        except AttributeError:
            return structure.from_compatible_tensor_list(self._spec, tensors)

    def cancel(self) -> None:
        """End a pull in progress (from any thread); every later pull raises Stopped."""
        self._manager.start_cancel()

    @property
    def cancelled(self) -> bool:
        return self._manager.is_cancelled


def pull_for(ds: tf.data.Dataset, *, seconds: float, warmup: float = 0.0, first: int = 0,
             stop: threading.Event | None = None, deadline: float | None = None,
             on_batch: Callable[[object], None] | None = None) -> tuple[int, float]:
    """Pull ``first`` elements, then for ``warmup`` seconds, then count pulls for ``seconds``.

    Returns ``(elements counted, seconds measured)``. The pulls run in a worker thread; the
    calling thread waits, so Ctrl-C there (KeyboardInterrupt, re-raised) or ``stop`` (returns
    what was counted) ends them at once. ``deadline`` (seconds from the start) ends a pipeline
    that produces nothing in time (the counts so far are returned). The worker thread and the
    iterator are gone when this returns.
    """
    puller = Puller(ds)
    state = {"n": 0, "t0": None, "t1": None, "error": None}
    finished = threading.Event()

    def work() -> None:
        try:
            for _ in range(first):
                puller.pull()
            start = time.perf_counter()
            while time.perf_counter() - start < warmup:
                puller.pull()
            state["t0"] = time.perf_counter()
            while time.perf_counter() - state["t0"] < seconds:
                element = puller.pull()
                state["n"] += 1
                if on_batch is not None:
                    on_batch(element)
        except (Stopped, StopIteration):
            pass
        except BaseException as err:  # noqa: BLE001 - re-raised in the calling thread
            state["error"] = err
        finally:
            state["t1"] = time.perf_counter()
            finished.set()

    worker = threading.Thread(target=work, daemon=True, name="plumbkit-pull")
    began = time.perf_counter()
    worker.start()
    try:
        while not finished.wait(WAIT_STEP):
            if (stop is not None and stop.is_set()) or (
                    deadline is not None and time.perf_counter() - began > deadline):
                break
    finally:  # also on KeyboardInterrupt: never leave the worker pulling
        puller.cancel()
        worker.join(JOIN_SECONDS)
        del puller
    if state["error"] is not None:
        raise state["error"]
    t0 = state["t0"]
    elapsed = (state["t1"] - t0) if t0 is not None and state["t1"] is not None else 0.0
    return state["n"], elapsed
