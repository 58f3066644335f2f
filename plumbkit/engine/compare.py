"""One protocol for every configuration compared (method.md, "Measure alike").

Yours, the baselines and plumbkit's plan are measured the same way, so a ratio between two of
them means what it says:

- **built fresh in every round**: each contender's factory is called again, so its caches start
  empty and at most one contender's cache is alive at a time (the previous one is dropped and
  garbage-collected before the next is built);
- **warmed by the same rule**: its caches are filled (one epoch at the cache, ``fill_batches``),
  then it runs until two consecutive windows agree within ``tolerance`` (steady state), and only
  then is one more window measured;
- **interleaved**: every round runs every contender once, in an order rotated from round to
  round, so a busy neighbour slows all of them alike;
- **reported as median and interquartile range** over the rounds; a contender that failed or
  was interrupted is reported as failed, never as a throughput;
- a **speed-up** is the median of the rounds' paired ratios with a 90% bootstrap interval; when
  the interval holds 1 it is "no measurable change".

The timing loop is a plain ``next()`` loop (:class:`plumbkit.tfdata.run.Runner`), no tracer.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ..host.machine import machine_busy_seconds
from ..model.protocol import BRIEF, FULL, PROTOCOLS, QUICK, Protocol  # noqa: F401 - re-exported: the engine API
from ..tfdata.run import Runner

if TYPE_CHECKING:
    import tensorflow as tf

#: Bootstrap resamples for a speed-up's interval, and the interval's coverage.
BOOTSTRAP_RESAMPLES = 4000
INTERVAL = 0.90
#: Fewer paired rounds than this cannot show a change (two identical pipelines give two ratios
#: above 1 one time in four).
MIN_ROUNDS_FOR_CHANGE = 3


@dataclass(frozen=True)
class Contender:
    """A configuration to measure: ``build`` returns a fresh pipeline (fresh caches) every call."""

    name: str
    build: Callable[[], "tf.data.Dataset"]
    fill_batches: int = 0  # minibatches that fill its caches before steady state is sought


@dataclass
class Result:
    """One contender's measured throughputs (minibatches/s), one per round."""

    name: str
    rounds: list[float] = field(default_factory=list)
    failed: str | None = None  # why it failed or was interrupted: then it has no throughput
    notes: list[str] = field(default_factory=list)
    neighbours: list[float] = field(default_factory=list)  # cores other processes used while measured
    cpu_per_batch: list[float] = field(default_factory=list)  # this process's CPU seconds per minibatch

    @property
    def cpu_per_batch_median(self) -> float | None:
        """Median process CPU seconds per minibatch over the measured windows (a neighbour
        stretches wall time much more than it changes this)."""
        return statistics.median(self.cpu_per_batch) if self.cpu_per_batch else None

    @property
    def neighbour_cores(self) -> float | None:
        """Median cores other processes used during this contender's measured windows."""
        return statistics.median(self.neighbours) if self.neighbours else None

    @property
    def ok(self) -> bool:
        return self.failed is None and bool(self.rounds)

    @property
    def median(self) -> float | None:
        return statistics.median(self.rounds) if self.ok else None

    @property
    def quartiles(self) -> tuple[float, float] | None:
        if not self.ok:
            return None
        q1, q3 = np.percentile(self.rounds, [25, 75])
        return float(q1), float(q3)

    @property
    def spread(self) -> float | None:
        """Interquartile range over the median."""
        q = self.quartiles
        return None if q is None or not self.median else (q[1] - q[0]) / self.median

    def describe(self) -> str:
        if not self.ok:
            return f"failed ({self.failed or 'not measured'})"
        q1, q3 = self.quartiles
        return f"{self.median:,.1f} (IQR {q1:,.1f}–{q3:,.1f}, {len(self.rounds)} rounds)"


@dataclass(frozen=True)
class Speedup:
    """``of`` over ``over``: median of the rounds' paired ratios and its 90% bootstrap interval."""

    of: str
    over: str
    ratio: float
    low: float
    high: float
    ratios: tuple[float, ...]

    @property
    def measurable(self) -> bool:
        return len(self.ratios) >= MIN_ROUNDS_FOR_CHANGE and not (self.low <= 1.0 <= self.high)

    @property
    def faster(self) -> bool:
        return self.measurable and self.low > 1.0

    @property
    def verdict(self) -> str:
        interval = f"90% interval {self.low:.2f}–{self.high:.2f}× over {len(self.ratios)} rounds"
        if len(self.ratios) < MIN_ROUNDS_FOR_CHANGE:
            return f"too few rounds to tell ({self.ratio:.2f}× over {len(self.ratios)})"
        if not self.measurable:
            return f"no measurable change ({self.ratio:.2f}×, {interval})"
        word = "faster" if self.ratio > 1 else "slower"
        return f"{self.ratio:.2f}× {word} ({interval})"


def bootstrap_interval(values: Sequence[float], *, coverage: float = INTERVAL,
                       resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of ``values``."""
    x = np.asarray(values, dtype=float)
    if len(x) == 1:
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    medians = np.median(x[rng.integers(0, len(x), size=(resamples, len(x)))], axis=1)
    tail = 100 * (1 - coverage) / 2
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


@dataclass
class Comparison:
    """Every contender's result under one :class:`Protocol`."""

    results: dict[str, Result]
    protocol: Protocol
    orders: list[list[str]] = field(default_factory=list)  # the order of each round
    complete: bool = True  # False when interrupted or stopped before the last round

    def __getitem__(self, name: str) -> Result:
        return self.results[name]

    def median(self, name: str) -> float | None:
        r = self.results.get(name)
        return r.median if r else None

    def speedup(self, of: str, over: str) -> Speedup | None:
        """``of`` over ``over`` from the rounds both completed (None: fewer than one pair)."""
        a, b = self.results.get(of), self.results.get(over)
        if a is None or b is None or not a.ok or not b.ok:
            return None
        ratios = [x / y for x, y in zip(a.rounds, b.rounds) if y > 0]
        if not ratios:
            return None
        low, high = bootstrap_interval(ratios)
        return Speedup(of=of, over=over, ratio=statistics.median(ratios), low=low, high=high,
                       ratios=tuple(ratios))


@dataclass(frozen=True)
class Run:
    """One measured window: throughput, and what the machine did meanwhile."""

    throughput: float  # minibatches/s
    notes: tuple[str, ...]
    neighbours: float | None  # cores other processes used
    cpu_per_batch: float  # this process's CPU seconds per minibatch


def run_once(contender: Contender, protocol: Protocol) -> Run:
    """Build ``contender`` fresh, fill its caches, reach steady state, measure one window."""
    notes: list[str] = []
    runner = Runner(contender.build())
    try:
        if contender.fill_batches:
            taken, seconds = runner.consume(contender.fill_batches, limit=protocol.fill_limit)
            if taken < contender.fill_batches:
                notes.append(f"caches not filled within {protocol.fill_limit:.0f} s "
                             f"({taken} of {contender.fill_batches} minibatches): measured partly cold")
        previous = runner.window(protocol.window)
        for _ in range(protocol.max_windows - 1):
            current = runner.window(protocol.window)
            if abs(current - previous) <= protocol.tolerance * max(current, previous):
                break
            previous = current
        else:
            notes.append(f"no two consecutive windows within {100 * protocol.tolerance:.0f}% in "
                         f"{protocol.max_windows}: measured after the last")
        busy0, cpu0, t0, n0 = machine_busy_seconds(), time.process_time(), time.perf_counter(), runner.batches
        value = runner.window(protocol.window)
        busy1, cpu1, t1 = machine_busy_seconds(), time.process_time(), time.perf_counter()
        others = None
        if busy0 is not None and busy1 is not None:
            others = max(0.0, (busy1 - busy0) - (cpu1 - cpu0)) / (t1 - t0)
        return Run(value, tuple(notes), others, (cpu1 - cpu0) / max(1, runner.batches - n0))
    finally:
        # Dropping the iterator and the dataset frees a filled cache (measured: RSS falls back
        # before the next build); a young-generation collection catches short cycles. A full
        # collection (0.5-1 s with TensorFlow's heap) freed nothing more.
        runner.close()
        del runner
        gc.collect(1)


def compare(contenders: Sequence[Contender], protocol: Protocol = FULL, *,
            before_each: Callable[[str], None] | None = None,
            on_progress: Callable[[str, float], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> Comparison:
    """Measure every contender under ``protocol``, interleaved (see the module docstring).

    ``before_each(name)`` runs before each build (e.g. to evict the data from the page cache).
    A contender that raises is failed from then on; Ctrl-C (or ``should_stop()``) ends the
    comparison: the contender running is failed as interrupted, the comparison is incomplete.
    """
    names = [c.name for c in contenders]
    if len(set(names)) != len(names):
        raise ValueError(f"contender names must be unique, got {names}")
    results = {c.name: Result(c.name) for c in contenders}
    comparison = Comparison(results=results, protocol=protocol)
    total = max(1, protocol.rounds * len(contenders))
    done = 0
    for r in range(protocol.rounds):
        k = r % len(contenders)
        order = list(contenders[k:]) + list(contenders[:k])
        comparison.orders.append([c.name for c in order])
        for c in order:
            result = results[c.name]
            if result.failed is not None:
                continue
            if should_stop is not None and should_stop():
                comparison.complete = False
                return comparison
            if on_progress is not None:
                on_progress(f"round {r + 1} of {protocol.rounds}: {c.name}", done / total)
            try:
                if before_each is not None:
                    before_each(c.name)
                run = run_once(c, protocol)
            except KeyboardInterrupt:
                result.failed = "interrupted"
                comparison.complete = False
                return comparison
            except Exception as err:  # noqa: BLE001 - reported as this contender's failure
                result.failed = f"{type(err).__name__}: {_first_line(str(err))}"
                continue
            finally:
                done += 1
            result.rounds.append(run.throughput)
            result.cpu_per_batch.append(run.cpu_per_batch)
            if run.neighbours is not None:
                result.neighbours.append(run.neighbours)
            result.notes.extend(n for n in run.notes if n not in result.notes)
    return comparison


def _first_line(message: str) -> str:
    lines = [line for line in message.strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""
