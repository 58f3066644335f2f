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
- a **speed-up** is the median of the rounds' paired ratios with a distribution-free interval
  (below), printed with the coverage it has.

**The interval.** Sorted, the ``n`` ratios ``x_(1) ≤ … ≤ x_(n)`` give ``[x_(j), x_(n-j+1)]``,
which holds the true median ratio with probability exactly ``P(j ≤ B ≤ n-j)``, ``B ~
Binomial(n, 1/2)``, whatever the ratios' distribution (rounds independent and alike: what
building fresh and interleaving are for). The narrowest such interval with coverage ≥ 90% is
reported; with fewer than 5 rounds none reaches 90% and the rounds' range (``j = 1``) is
reported with its own coverage: 50% for 2 rounds, 75% for 3, 94% for 5, 93% (``j = 2``) for 8.

**The verdict.** *Faster* only when the interval's lower end is above 1, *slower* only when its
upper end is below 1: for a fixed number of rounds, two configurations of equal median
throughput are called "faster" with probability at most ``(1 - coverage) / 2`` (12.5% with 3
rounds, 3.1% with 5). An interval that holds 1 is *no measurable change* when narrow
(``high / low ≤`` :data:`TOO_WIDE`) and *too noisy to tell* when wide; too noisy never ranks.

**Adding rounds.** While a speed-up the comparison must settle is too noisy, one more
interleaved round runs, up to ``Protocol.extra_rounds``, and only while a separation is still
reachable within that cap (while the cap keeps ``j = 1``, one ratio on the wrong side of 1
makes it unreachable: 3 rounds capped at 7 add none). Looking again raises the error above:
:func:`false_faster_rate` bounds it for a protocol, exactly over the ratios' signs (3 rounds
then up to 8: 13.7%; 5 then up to 9: 5.1%). Stated again in ``docs/measuring.md``.

The timing loop is a plain ``next()`` loop (:class:`plumbkit.tfdata.run.Runner`), no tracer.
"""

from __future__ import annotations

import gc
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np
from scipy.stats import binom

from ..host.machine import neighbour_cores, read_machine
from ..model.errors import first_line
from ..model.protocol import BRIEF, FULL, PROTOCOLS, QUICK, Protocol  # noqa: F401 - re-exported: the engine API
from ..tfdata.run import Runner
from ..tunables import DRIFT_SHARE, LOAD_CHANGE_CORES
from .scheduler import checkpoint

if TYPE_CHECKING:
    import tensorflow as tf

#: The coverage a speed-up's interval aims at (reached from 5 rounds on; below, the printed
#: coverage is the lower one it has).
TARGET_COVERAGE = 0.90
#: Fewer paired rounds than this cannot show a change (two identical pipelines give two ratios
#: above 1 one time in four).
MIN_ROUNDS_FOR_CHANGE = 3
#: An interval holding 1 whose ends are further apart than this factor says the rounds disagree
#: too much to tell: the comparison adds rounds, and if it stays so the verdict is "too noisy to
#: tell". Narrower, holding 1 means no change beyond roughly ±15%.
TOO_WIDE = 1.3


@dataclass(frozen=True)
class Contender:
    """A configuration to measure: ``build`` returns a fresh pipeline (fresh caches) every call."""

    name: str
    build: Callable[[], "tf.data.Dataset"]
    fill_batches: int = 0  # minibatches that fill its caches before steady state is sought
    #: the user's training step, run on every minibatch (then the throughput is steps/s)
    step: Callable[[Any], Any] | None = None


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
class MedianInterval:
    """``[x_(rank), x_(n-rank+1)]`` of ``n`` sorted values: holds their distribution's median
    with probability exactly ``coverage`` (see the module docstring)."""

    low: float
    high: float
    coverage: float
    rank: int
    n: int


@lru_cache(maxsize=None)
def order_statistic_coverage(n: int, rank: int) -> float:
    """Exact probability that ``[x_(rank), x_(n-rank+1)]`` of ``n`` independent draws holds
    their median: ``P(rank ≤ B ≤ n - rank)``, ``B ~ Binomial(n, 1/2)``."""
    if n < 1 or not 1 <= rank <= (n + 1) // 2:
        raise ValueError(f"rank {rank} is not a symmetric order statistic of {n} values")
    return float(binom.cdf(n - rank, n, 0.5) - binom.cdf(rank - 1, n, 0.5))


@lru_cache(maxsize=None)
def interval_rank(n: int, target: float = TARGET_COVERAGE) -> int:
    """The largest ``rank`` (narrowest interval) whose coverage reaches ``target``; 1 (the
    range) when no rank does."""
    rank = 1
    while rank + 1 <= (n + 1) // 2 and order_statistic_coverage(n, rank + 1) >= target:
        rank += 1
    return rank


def median_interval(values: Sequence[float], target: float = TARGET_COVERAGE) -> MedianInterval:
    """Distribution-free interval of the median of ``values`` (not a bootstrap: with 3 or 5
    values a bootstrap's percentiles are the range, printed with a coverage it lacks)."""
    x = np.sort(np.asarray(values, dtype=float))
    if len(x) == 0:
        raise ValueError("no values")
    rank = interval_rank(len(x), target)
    return MedianInterval(low=float(x[rank - 1]), high=float(x[len(x) - rank]),
                          coverage=order_statistic_coverage(len(x), rank), rank=rank, n=len(x))


@dataclass(frozen=True)
class Speedup:
    """``of`` over ``over``: median of the rounds' paired ratios and its order-statistic
    interval, which holds the true median ratio with probability ``coverage``."""

    of: str
    over: str
    ratio: float
    low: float
    high: float
    ratios: tuple[float, ...]
    coverage: float
    rank: int = 1  # the interval is [x_(rank), x_(n-rank+1)]; 1: the rounds' range

    @classmethod
    def of_ratios(cls, of: str, over: str, ratios: Sequence[float]) -> "Speedup":
        interval = median_interval(ratios)
        return cls(of=of, over=over, ratio=statistics.median(ratios), low=interval.low, high=interval.high,
                   ratios=tuple(ratios), coverage=interval.coverage, rank=interval.rank)

    @property
    def enough_rounds(self) -> bool:
        return len(self.ratios) >= MIN_ROUNDS_FOR_CHANGE

    @property
    def separated(self) -> bool:
        """The interval lies wholly above or wholly below 1."""
        return self.low > 1.0 or self.high < 1.0

    @property
    def noisy(self) -> bool:
        """The interval holds 1 and is wider than :data:`TOO_WIDE`: too noisy to tell."""
        return self.enough_rounds and not self.separated and self.high > TOO_WIDE * self.low

    @property
    def measurable(self) -> bool:
        return self.enough_rounds and self.separated

    @property
    def faster(self) -> bool:
        return self.measurable and self.low > 1.0

    @property
    def interval(self) -> str:
        """The interval as printed, with the coverage it has."""
        n = len(self.ratios)
        covers = f"covers the median ratio with {self.coverage:.0%}"
        if self.rank == 1:
            return f"rounds' range {self.low:.2f}–{self.high:.2f}×, {covers}, {n} rounds"
        return (f"interval {self.low:.2f}–{self.high:.2f}× (the {n} rounds' ratios less the {self.rank - 1} "
                f"lowest and {self.rank - 1} highest), {covers}")

    @property
    def verdict(self) -> str:
        if not self.enough_rounds:
            return f"too few rounds to tell ({self.ratio:.2f}× over {len(self.ratios)})"
        if self.noisy:
            return f"too noisy to tell ({self.interval})"
        if not self.measurable:
            return f"no measurable change ({self.ratio:.2f}×; {self.interval})"
        word = "faster" if self.low > 1 else "slower"
        return f"{self.ratio:.2f}× {word} ({self.interval})"


def worth_another_round(ratios: Sequence[float], cap: int) -> bool:
    """Whether one more round may settle a speed-up from these ``ratios``: it is too noisy, the
    cap on rounds is not reached, and an interval separated from 1 is still reachable by ``cap``
    rounds (at most ``rank - 1`` ratios may lie on the wrong side of 1)."""
    if len(ratios) >= cap or len(ratios) < MIN_ROUNDS_FOR_CHANGE:
        return False
    if not Speedup.of_ratios("", "", ratios).noisy:
        return False
    wrong_side = min(sum(r <= 1.0 for r in ratios), sum(r >= 1.0 for r in ratios))
    return wrong_side <= interval_rank(cap) - 1


def false_faster_rate(protocol: Protocol) -> float:
    """The most often two configurations of equal median throughput are called "faster" under
    ``protocol``'s rounds and extra rounds (exact, over the signs of the ratios; it counts every
    continuation as taken, so it bounds the rate from above)."""
    first, cap = protocol.rounds, protocol.rounds + protocol.extra_rounds
    if first < MIN_ROUNDS_FOR_CHANGE:
        return 0.0  # "too few rounds to tell", and no rounds are added to it
    # below[k]: probability of k ratios below 1 so far, among paths not yet decided.
    below = {k: float(binom.pmf(k, first, 0.5)) for k in range(first + 1)}
    rate = 0.0
    for n in range(first, cap + 1):
        if n > first:
            grown: dict[int, float] = {}
            for k, p in below.items():
                grown[k] = grown.get(k, 0.0) + p / 2
                grown[k + 1] = grown.get(k + 1, 0.0) + p / 2
            below = grown
        rank = interval_rank(n)
        rate += sum(p for k, p in below.items() if k <= rank - 1)  # x_(rank) > 1: "faster"
        below = {k: p for k, p in below.items() if rank - 1 < k < n - rank + 1}  # neither side
    return rate


@dataclass
class Comparison:
    """Every contender's result under one :class:`Protocol`."""

    results: dict[str, Result]
    protocol: Protocol
    orders: list[list[str]] = field(default_factory=list)  # the order of each round
    complete: bool = True  # False when interrupted or stopped before the last round
    first_epoch: bool = False  # every contender measured in its first epoch (no cache filled first)

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
        return Speedup.of_ratios(of, over, ratios)

    @property
    def neighbour_cores(self) -> float | None:
        """Median cores other processes kept busy over every measured window (None: unknown)."""
        every = [x for r in self.results.values() for x in r.neighbours]
        return statistics.median(every) if every else None

    def load_change(self, traced: float | None, *, threshold: float = LOAD_CHANGE_CORES) -> str | None:
        """A warning when other processes kept a different number of cores busy while measured
        than during the trace (``traced``) the plan was made from; None when it held."""
        now = self.neighbour_cores
        if traced is None or now is None or abs(now - traced) <= threshold:
            return None
        return (f"the machine's load changed between the trace and the comparison: other processes kept "
                f"{traced:.1f} cores busy during the trace and {now:.1f} while measured; the prediction "
                f"counts the cores free during the trace")

    def drift(self, name: str, traced: float | None, *, threshold: float = DRIFT_SHARE) -> str | None:
        """A warning when ``name`` spent a different process CPU per minibatch while measured
        than the trace read (``traced``, the figure the prediction was made from): the same
        pipeline, so the machine moved, not the model. None when it held."""
        r = self.results.get(name)
        now = r.cpu_per_batch_median if r is not None else None
        if not traced or not now or abs(now / traced - 1) <= threshold:
            return None
        return (f"the machine moved between the trace and the comparison: your pipeline spent "
                f"{traced * 1e3:.2f} ms of CPU per minibatch during the trace and {now * 1e3:.2f} ms while "
                f"measured ({100 * (now / traced - 1):+.0f}%); the prediction was made from the first")

    def needs_another_round(self, pairs: Iterable[tuple[str, str]]) -> bool:
        """Whether a speed-up among ``pairs`` is too noisy and another round may settle it
        (within ``protocol.rounds + protocol.extra_rounds``)."""
        cap = self.protocol.rounds + self.protocol.extra_rounds
        return any(s is not None and worth_another_round(s.ratios, cap)
                   for s in (self.speedup(of, over) for of, over in pairs))


@dataclass(frozen=True)
class Run:
    """One measured window: throughput, and what the machine did meanwhile."""

    throughput: float  # minibatches/s
    notes: tuple[str, ...]
    neighbours: float | None  # cores other processes used
    cpu_per_batch: float  # this process's CPU seconds per minibatch


def run_once(contender: Contender, protocol: Protocol, *, first_epoch: bool = False) -> Run:
    """Build ``contender`` fresh, fill its caches, reach steady state, measure one window.

    ``first_epoch``: its caches are not filled first; it is measured in its first epoch, from the
    fresh build on, the same way as every other contender (a plan whose cache cannot fill in
    the protocol's time is compared like with like: cold with cold)."""
    notes: list[str] = []
    runner = Runner(contender.build(), step=contender.step)
    try:
        if contender.fill_batches and not first_epoch:
            taken, seconds = runner.consume(contender.fill_batches, limit=protocol.fill_limit)
            if taken < contender.fill_batches:
                notes.append(f"caches not filled within {protocol.fill_limit:.0f} s "
                             f"({taken} of {contender.fill_batches} minibatches): measured partly cold")
        # the neighbours over every window of the run, not the measured one alone: /proc/stat's
        # ticks lag the process's own CPU clock by tens of ms, so a 0.1 s window read 0-0.14 of
        # the 1.3 cores two spinning neighbours took (tests/test_free_cores.py)
        machine0 = read_machine()
        previous = runner.window(protocol.window)
        for _ in range(protocol.max_windows - 1):
            current = runner.window(protocol.window)
            if abs(current - previous) <= protocol.tolerance * max(current, previous):
                break
            previous = current
        else:
            notes.append(f"no two consecutive windows within {100 * protocol.tolerance:.0f}% in "
                         f"{protocol.max_windows}: measured after the last")
        start, n0 = read_machine(), runner.batches
        value = runner.window(protocol.window)
        end = read_machine()
        if first_epoch and contender.fill_batches and runner.batches > contender.fill_batches:
            notes.append(f"its caches filled within the measurement ({contender.fill_batches} minibatches): "
                         f"measured partly warm")
        return Run(value, tuple(notes), neighbour_cores(machine0, end), (end.own - start.own) / max(1, runner.batches - n0))
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
            should_stop: Callable[[], bool] | None = None,
            settle: Sequence[tuple[str, str]] | None = None, first_epoch: bool = False) -> Comparison:
    """Measure every contender under ``protocol``, interleaved (see the module docstring).

    ``before_each(name)`` runs before each build (e.g. to evict the data from the page cache).
    A contender that raises is failed from then on; Ctrl-C (or ``should_stop()``) ends the
    comparison: the contender running is failed as interrupted, the comparison is incomplete.
    ``settle`` names the speed-ups ``(of, over)`` that extra rounds are run for while too noisy
    (default: every contender over the first, yours by convention), up to ``protocol.extra_rounds``.
    ``first_epoch``: no contender's caches are filled first: each is measured in its first epoch.
    """
    names = [c.name for c in contenders]
    if len(set(names)) != len(names):
        raise ValueError(f"contender names must be unique, got {names}")
    pairs = list(settle) if settle is not None else [(name, names[0]) for name in names[1:]]
    results = {c.name: Result(c.name) for c in contenders}
    comparison = Comparison(results=results, protocol=protocol, first_epoch=first_epoch)
    done, r = 0, 0
    while r < protocol.rounds or (r < protocol.rounds + protocol.extra_rounds
                                  and comparison.needs_another_round(pairs)):
        total = max(1, max(r + 1, protocol.rounds) * len(contenders))
        label = (f"round {r + 1} of {protocol.rounds}" if r < protocol.rounds else
                 f"extra round {r + 1} (the rounds disagree; at most {protocol.rounds + protocol.extra_rounds})")
        k = r % len(contenders)
        order = list(contenders[k:]) + list(contenders[:k])
        comparison.orders.append([c.name for c in order])
        r += 1
        for c in order:
            result = results[c.name]
            if result.failed is not None:
                continue
            if should_stop is not None and should_stop():
                comparison.complete = False
                return comparison
            # A Ctrl-C that Python dropped (it landed in a garbage-collector callback) still
            # cancelled the running operation: it ends here, not after every round (CI: 30 s).
            checkpoint()
            if on_progress is not None:
                on_progress(f"{label}: {c.name}", done / total)
            try:
                if before_each is not None:
                    before_each(c.name)
                run = run_once(c, protocol, first_epoch=first_epoch)
            except KeyboardInterrupt:
                result.failed = "interrupted"
                comparison.complete = False
                return comparison
            except Exception as err:  # noqa: BLE001 - reported as this contender's failure
                result.failed = f"{type(err).__name__}: {first_line(str(err))}"
                continue
            finally:
                done += 1
            result.rounds.append(run.throughput)
            result.cpu_per_batch.append(run.cpu_per_batch)
            if run.neighbours is not None:
                result.neighbours.append(run.neighbours)
            result.notes.extend(n for n in run.notes if n not in result.notes)
    return comparison


