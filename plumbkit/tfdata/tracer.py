"""Run a pipeline for a bounded time and sample tf.data's own per-node counters.

Stock TensorFlow keeps, for every iterator node, elements produced, bytes, self processing time
and buffer fill in its autotuning model; ``tf.data.experimental.get_model_proto`` reads it while
the pipeline runs. The tracer drives the pipeline from a consumer thread and samples that model
plus the process CPU clock a few times a second. It measures, it does not interpret: joining
runtime nodes to the user's operators and deriving rates is :mod:`plumbkit.analysis`'s job.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import psutil
import tensorflow as tf

from ..host.machine import MachineReading, available_cores, others_seconds, read_machine
from ..model.samples import NodeSample, RawTrace, Snapshot
from .consumer import JOIN_SECONDS, Puller, Stopped
from .options import observed_options
from ..model.errors import first_line

#: How often the live view gets a new snapshot (seconds); twice a second at least.
DEFAULT_POLL_INTERVAL = 0.25
#: Sample faster at the start, so short runs and short-lived nodes are still seen.
FAST_POLL_INTERVAL, FAST_POLL_SECONDS = 0.05, 0.5
#: At the end of a trace the pull in progress may finish for this long before it is cancelled
#: (a healthy pipeline's takes milliseconds; cancelling a running function makes TensorFlow log).
STOP_GRACE = 0.25
#: The paper's stopping rule: stop once successive throughput estimates differ by less than this.
CONVERGENCE_TOLERANCE = 0.01


def _sample(iterator, t0: float, cpu0: float, process: psutil.Process, machine0: MachineReading | None) -> Snapshot:
    proto = tf.data.experimental.get_model_proto(iterator)
    nodes = {}
    for key, node in proto.nodes.items():
        params = {p.name: float(p.value) for p in node.parameters}
        nodes[int(key)] = NodeSample(
            id=int(key), name=node.name, inputs=tuple(int(i) for i in node.inputs),
            elements=int(node.num_elements), bytes_produced=int(node.bytes_produced),
            bytes_consumed=int(node.bytes_consumed), processing_ns=int(node.processing_time),
            buffered_elements=int(node.buffered_elements), buffered_bytes=int(node.buffered_bytes),
            parameters=params, tunable=tuple(p.name for p in node.parameters if p.tunable),
            ratio=float(node.ratio),
        )
    cpu = time.process_time() - cpu0
    others = None if machine0 is None else others_seconds(machine0, read_machine())
    return Snapshot(t=time.perf_counter() - t0, cpu=cpu, rss=process.memory_info().rss, nodes=nodes, others=others)


def observable(ds: tf.data.Dataset, autotune_disabled: bool | None = None) -> tf.data.Dataset:
    """The same pipeline, with tf.data's runtime model switched on so it can be sampled.

    The model exists only while autotuning is enabled. When the user disabled autotuning, it is
    enabled here for observation only: the optimizations that autotuning would add on top of
    the user's settings (an injected final prefetch, autotuned buffer sizes) stay off, and
    AUTOTUNE-valued parallelism starts where it would have been without autotuning.
    """
    if autotune_disabled is None:
        autotune_disabled = ds.options().autotune.enabled is False
    if autotune_disabled:
        return ds.with_options(observed_options(available_cores()))
    return ds


class Tracer:
    """Drive a pipeline in a background thread and sample its runtime model.

    ``run()`` blocks until the trace ends (converged, time or batch limit, end of data, stop,
    interrupt) and always returns what was measured so far. ``on_snapshot`` is called from the
    sampling thread for live views. The consumer pulls through a :class:`Puller`, so the end of
    the trace (time, ``stop()``, Ctrl-C) ends even a ``GetNext`` blocked in TensorFlow within
    :data:`STOP_GRACE`: when ``run()`` returns, the consumer thread has ended and the iterator
    is released.
    """

    def __init__(self, ds: tf.data.Dataset, *, seconds: float = 10.0, max_batches: int | None = None,
                 min_seconds: float = 2.0, poll_interval: float = DEFAULT_POLL_INTERVAL,
                 converge: bool = True, on_snapshot: Callable[[Snapshot], None] | None = None,
                 cores: int | None = None, warmup_batches: int = 0, warmup_limit: float = 300.0,
                 autotune_disabled: bool | None = None):
        self.ds = observable(ds, autotune_disabled)
        self.warmup_batches = warmup_batches  # e.g. one epoch, to fill a cache before measuring
        self.warmup_limit = warmup_limit
        self.seconds = float(seconds)
        self.max_batches = max_batches
        self.min_seconds = min(float(min_seconds), self.seconds)
        self.poll_interval = poll_interval
        self.converge = converge
        self.on_snapshot = on_snapshot
        self.raw = RawTrace(cores=cores or available_cores())
        self._stop = threading.Event()
        self._done = threading.Event()
        self._wake = threading.Event()  # the poll loop's alarm: the consumer ended, or stop()
        self._closed = threading.Event()  # run() returned: a late consumer must not edit the trace
        self._batches = 0
        self._machine0: MachineReading | None = None  # the machine when the trace started
        self._warm_at: float | None = None if warmup_batches > 0 else 0.0

    def stop(self) -> None:
        """End the trace now, keeping what was measured; safe from any thread (Stop, Cancel)."""
        self._stop.set()
        self._wake.set()

    def _consume(self, puller: Puller) -> None:
        ended, error = None, None
        try:
            while not self._stop.is_set():
                puller.pull()
                self._batches += 1
                if self._batches == self.warmup_batches:
                    self._warm_at = time.perf_counter()
                if self.max_batches is not None and self._batches >= self.max_batches:
                    ended = "batch limit"
                    break
        except StopIteration:
            ended = "end of data"
        except Stopped:
            pass  # stop() or the end of the trace cancelled the pull in progress
        except BaseException as err:  # noqa: BLE001 - reported with the trace, never lost
            ended, error = "error", f"{type(err).__name__}: {first_line(err)}"
        finally:
            if not self._closed.is_set():  # past the deadline the trace is already reported
                if ended is not None:
                    self.raw.ended, self.raw.error = ended, error
                elif self.raw.ended == "running" and self._stop.is_set():
                    self.raw.ended = "stopped"
            self._done.set()
            self._wake.set()

    def run(self) -> RawTrace:
        process = psutil.Process()
        t0, cpu0, self._machine0 = time.perf_counter(), time.process_time(), read_machine()
        puller = Puller(self.ds)
        iterator = puller.iterator
        consumer = threading.Thread(target=self._consume, args=(puller,), daemon=True,
                                    name="plumbkit-consumer")
        consumer.start()
        try:
            self._poll(iterator, t0, cpu0, process)
        except KeyboardInterrupt:
            self.raw.ended = "interrupted"
        finally:
            self._stop.set()
            blocked = not self._done.wait(STOP_GRACE)
            if blocked:
                puller.cancel()  # a GetNext blocked in TensorFlow ends here, not in 30 s
            consumer.join(timeout=JOIN_SECONDS)
            if blocked:
                self._report_blocked(time.perf_counter() - t0)
            self._closed.set()
            self._take(iterator, t0, cpu0, process)
            del iterator, puller
        return self.raw

    def _report_blocked(self, elapsed: float) -> None:
        """The consumer was still inside ``next()`` when the trace ended (its pull was cancelled):
        with nothing produced, the trace says so (a Stop or Ctrl-C keeps its own ending)."""
        self.raw.consumer_blocked = True
        if self._batches == 0 and self.raw.ended in ("running", "time limit", "converged"):
            self.raw.ended = "no element"
            self.raw.error = f"no element produced in {elapsed:.1f} s"

    def _take(self, iterator, t0, cpu0, process) -> Snapshot | None:
        try:
            snap = _sample(iterator, t0, cpu0, process, self._machine0)
        except (tf.errors.OpError, RuntimeError):
            return None  # the iterator is gone (end of data): keep what was sampled
        self.raw.snapshots.append(snap)
        if self.on_snapshot is not None:
            self.on_snapshot(snap)
        return snap

    def _poll(self, iterator, t0, cpu0, process) -> None:
        next_poll = time.perf_counter()
        while True:
            fast = next_poll - t0 < FAST_POLL_SECONDS
            next_poll += min(self.poll_interval, FAST_POLL_INTERVAL) if fast else self.poll_interval
            if self._wake.wait(max(0.0, next_poll - time.perf_counter())) and self._done.is_set():
                return
            if self._stop.is_set():
                self.raw.ended = "stopped"
                return
            snap = self._take(iterator, t0, cpu0, process)
            if snap is None:
                continue
            if self._warm_at is None:
                if snap.t >= self.warmup_limit:
                    self.raw.ended = "time limit"
                    return
                continue
            if self.raw.warmup_seconds == 0.0 and self._warm_at:
                self.raw.warmup_seconds = self._warm_at - t0
            if snap.t >= self.seconds + self.raw.warmup_seconds:
                self.raw.ended = "time limit"
                return
            if self.converge and snap.t >= self.min_seconds + self.raw.warmup_seconds and self._converged():
                self.raw.ended = "converged"
                return

    def _converged(self) -> bool:
        """The paper's rule: successive throughput estimates agree within 1%.

        Estimates are taken over the second half of the run so far (past warm-up), one second
        apart, and must agree three times in a row to ignore a lucky coincidence.
        """
        snaps = [s for s in self.raw.snapshots if s.t >= self.raw.warmup_seconds]
        if not snaps or snaps[-1].t - snaps[0].t < 4.0:
            return False
        ends = [max(i for i, s in enumerate(snaps) if s.t <= snaps[-1].t - k + 1e-9) for k in range(4)]
        estimates = [_window_rate(snaps[: e + 1]) for e in ends]
        if any(e is None or e <= 0 for e in estimates):
            return False
        return all(abs(a - b) / b < CONVERGENCE_TOLERANCE for a, b in zip(estimates, estimates[1:]))


def _window_rate(snaps: list[Snapshot]) -> float | None:
    """Root elements per second over the second half of ``snaps``."""
    if len(snaps) < 2:
        return None
    first, last = snaps[len(snaps) // 2], snaps[-1]
    if last.t <= first.t:
        return None
    return (last.batches - first.batches) / (last.t - first.t)
