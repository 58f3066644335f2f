"""The one protocol every configuration is measured under: statistics (pure) and a real run."""

import math
import time

import numpy as np
import pytest
import tensorflow as tf

from plumbkit.engine.compare import (
    BRIEF,
    QUICK,
    Comparison,
    Contender,
    Protocol,
    Result,
    Speedup,
    compare,
    false_faster_rate,
    median_interval,
    worth_another_round,
)


def comparison(a, b, protocol=None):
    return Comparison(results={"a": Result("a", list(a)), "b": Result("b", list(b))}, protocol=protocol or Protocol())


def test_speedup_verdicts_no_measurable_change_faster_slower_too_few():
    noisy = comparison([100, 104, 97, 101, 99], [101, 98, 103, 99, 100]).speedup("a", "b")
    assert not noisy.measurable and not noisy.noisy and "no measurable change" in noisy.verdict
    clear = comparison([200, 210, 190, 205, 199], [100, 98, 103, 99, 100]).speedup("a", "b")
    assert clear.faster and clear.ratio == pytest.approx(2.0, rel=0.06) and "faster" in clear.verdict
    slower = comparison([50, 52, 49, 51, 50], [100, 98, 103, 99, 100]).speedup("a", "b")
    assert slower.measurable and not slower.faster and "slower" in slower.verdict
    two = comparison([200, 210], [100, 98]).speedup("a", "b")  # two rounds cannot show a change
    assert not two.measurable and "too few rounds" in two.verdict


def test_the_machine_moving_between_the_trace_and_the_comparison_is_said_with_both_readings():
    """The same pipeline, measured twice: a different CPU per minibatch is the machine, not the
    model (one pipeline alone on the dev VM stepped 25% for minutes), and the user should read a
    prediction's miss against it. Within the threshold, nothing is said."""
    def measured(*cpu):
        return Comparison(results={"yours": Result("yours", [100.0] * len(cpu), cpu_per_batch=list(cpu))},
                          protocol=Protocol())
    moved = measured(0.0060, 0.0061, 0.0059).drift("yours", 0.0080)
    assert moved is not None and "8.00 ms" in moved and "6.00 ms" in moved and "-25%" in moved
    assert "prediction was made from the first" in moved
    # negative controls: a small move, no reading, no such contender
    assert measured(0.0075, 0.0076, 0.0074).drift("yours", 0.0080) is None
    assert measured(0.0062).drift("yours", None) is None
    assert measured(0.0062).drift("plumbkit", 0.0080) is None


def _exact_coverage(n: int, rank: int) -> float:
    """Counted over the 2**n equally likely patterns of ratios below/above the true median: the
    interval [x_(rank), x_(n-rank+1)] holds it when rank..n-rank of them lie below."""
    return sum(math.comb(n, k) for k in range(rank, n - rank + 1)) / 2 ** n


@pytest.mark.parametrize("n, rank, printed", [(3, 1, "75%"), (5, 1, "94%"), (7, 1, "98%"), (9, 2, "96%")])
def test_the_coverage_printed_is_the_exact_binomial_coverage(n, rank, printed):
    """Below 5 rounds no interval reaches 90%: the range is printed with its own coverage; from
    5 on, the narrowest interval that reaches 90% (at 9 rounds one ratio is dropped each side)."""
    ratios = [1.0 + 0.01 * i for i in range(n)]
    s = Speedup.of_ratios("a", "b", ratios)
    assert s.rank == rank and s.coverage == pytest.approx(_exact_coverage(n, rank), abs=1e-12)
    assert (s.low, s.high) == (pytest.approx(ratios[rank - 1]), pytest.approx(ratios[n - rank]))
    assert f"covers the median ratio with {printed}" in s.verdict and f"{_exact_coverage(n, rank):.0%}" == printed
    if n >= 5:  # the narrowest that reaches the target: one rank further falls short
        assert s.coverage >= 0.9 > _exact_coverage(n, rank + 1)
    assert ("rounds' range" in s.verdict) == (rank == 1)


def _old_bootstrap(x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """The interval this module printed as "90%" before: percentile bootstrap of the median."""
    medians = np.median(x[rng.integers(0, len(x), size=(1000, len(x)))], axis=1)
    low, high = np.percentile(medians, [5, 95])
    return float(low), float(high)


@pytest.mark.parametrize("n", [3, 5, 9])
def test_planted_median_is_covered_as_often_as_printed(n):
    """2000 planted samples of n lognormal ratios whose true median is 1.0: the share of
    intervals holding 1.0 is within 3 points of the coverage printed (binomial standard error
    <= 1 point). The old bootstrap interval, printed as "90%", held it 75% of the time with 3
    rounds: it fails the same check (negative control)."""
    rng = np.random.default_rng(n)
    samples = rng.lognormal(mean=0.0, sigma=0.15, size=(2000, n))
    intervals = [median_interval(x) for x in samples]
    held = np.mean([i.low <= 1.0 <= i.high for i in intervals])
    assert abs(held - intervals[0].coverage) <= 0.03, (n, held, intervals[0].coverage)
    if n == 3:
        old = [_old_bootstrap(x, rng) for x in samples]
        old_held = np.mean([low <= 1.0 <= high for low, high in old])
        assert abs(old_held - 0.90) > 0.03, old_held  # what it printed is not what it covered


def _rounds_run(protocol: Protocol, ratios: list[float]) -> Comparison:
    """Feed planted rounds (``b`` at 100/s, ``a`` at 100 x ratio) while the comparison asks for
    them: the protocol's rounds, then extra ones while ``needs_another_round`` says so."""
    c = comparison([], [], protocol)
    for r, ratio in enumerate(ratios):
        if r >= protocol.rounds and not c.needs_another_round([("a", "b")]):
            break
        c["a"].rounds.append(100.0 * ratio)
        c["b"].rounds.append(100.0)
    return c


def test_noisy_rounds_get_more_rounds_then_too_noisy_to_tell():
    noisy = [1.5, 0.7, 1.4, 0.75, 1.6, 0.8, 1.5, 0.7, 1.4]
    c = _rounds_run(QUICK, noisy)
    s = c.speedup("a", "b")
    # 3 rounds straddle 1 and are 2.1x apart: a 4th runs; its ratio below 1 is the second on
    # the wrong side, which 8 rounds (dropping one each side) cannot outvote: it stops there.
    assert len(s.ratios) == 4 and s.noisy and not s.measurable and not s.faster
    assert s.verdict.startswith("too noisy to tell") and "faster" not in s.verdict and "slower" not in s.verdict
    assert worth_another_round([1.5, 0.7, 1.4], cap=8) and not worth_another_round([1.5, 0.7, 1.4, 0.75], cap=8)
    # A cap of 7 keeps the range as the interval: no extra round can separate it, none runs.
    assert not worth_another_round([1.5, 0.7, 1.4], cap=7)
    assert len(_rounds_run(BRIEF, noisy).speedup("a", "b").ratios) == 3


def test_a_noisy_start_that_keeps_winning_is_settled_faster_by_the_cap():
    """One slow round among three: more rounds, all faster, until 8 rounds drop the outlier."""
    c = _rounds_run(QUICK, [1.5, 0.8, 1.6, 1.4, 1.7, 1.3, 1.45, 1.55, 1.5, 1.5])
    s = c.speedup("a", "b")
    assert len(s.ratios) == QUICK.rounds + QUICK.extra_rounds == 8
    assert s.faster and s.low == pytest.approx(1.3) and "covers the median ratio with 93%" in s.verdict


def test_a_narrow_interval_holding_one_adds_no_rounds():
    c = _rounds_run(QUICK, [1.05, 0.97, 1.02, 1.6, 0.6])
    s = c.speedup("a", "b")
    assert len(s.ratios) == 3 and not s.noisy and "no measurable change" in s.verdict


def test_too_noisy_never_ranks():
    """Whatever the planted ratios, a too-noisy verdict names no direction."""
    rng = np.random.default_rng(1)
    seen = 0
    for n in (3, 5, 8):
        for x in rng.lognormal(0.1, 0.4, size=(300, n)):
            s = Speedup.of_ratios("a", "b", list(x))
            if s.noisy:
                seen += 1
                assert not s.measurable and not s.faster
                assert s.verdict.startswith("too noisy to tell (") and not {"faster", "slower"} & set(s.verdict.split())
    assert seen > 100  # the check ran on many noisy samples


@pytest.mark.parametrize("protocol, rate", [(BRIEF, 1 / 8), (Protocol(rounds=5), 1 / 32),
                                            (QUICK, 1 / 8 + 3 / 8 / 32)])
def test_false_faster_rate_is_what_an_equal_pair_gets(protocol, rate):
    """Planted equal pairs (true median ratio 1, noisy enough to add rounds): the share called
    faster by the round loop stays under the stated bound, which is (1 - coverage) / 2 without
    extra rounds."""
    assert false_faster_rate(protocol) == pytest.approx(rate)
    rng = np.random.default_rng(2)
    cap = protocol.rounds + protocol.extra_rounds
    called = np.mean([_rounds_run(protocol, list(x)).speedup("a", "b").faster
                      for x in rng.lognormal(0.0, 0.5, size=(2000, cap))])
    assert called <= rate + 0.02 and called >= rate - 0.04, called


def test_failed_contender_has_no_throughput():
    c = comparison([100, 101], [90, 91])
    c.results["a"].failed = "InvalidArgumentError: boom"
    assert c.median("a") is None and c.speedup("a", "b") is None
    assert c.results["a"].describe().startswith("failed")


def test_protocol_builds_fresh_every_round_interleaves_and_reports_a_failure():
    """~4 s: two real pipelines and one that raises; each built once per round, order rotated."""
    builds = {"fast": 0, "slow": 0}

    def fast():
        builds["fast"] += 1
        return tf.data.Dataset.range(10**9).batch(64)

    def slow():
        builds["slow"] += 1
        return tf.data.Dataset.range(10**9).map(lambda x: tf.reduce_sum(tf.fill([64, 64], tf.cast(x, tf.float32)))).batch(64)

    def check(x):
        with tf.control_dependencies([tf.debugging.assert_less(x, tf.constant(50, tf.int64), message="boom")]):
            return tf.identity(x)

    def broken():  # fails at element 50, after a few minibatches
        return tf.data.Dataset.range(10**9).map(check).batch(4)

    protocol = Protocol(rounds=2, window=0.2, max_windows=3, fill_limit=5)
    result = compare([Contender("fast", fast), Contender("slow", slow, fill_batches=3), Contender("broken", broken)],
                     protocol)
    assert builds == {"fast": 2, "slow": 2}
    assert result.orders == [["fast", "slow", "broken"], ["slow", "broken", "fast"]]
    assert result["broken"].failed and "boom" in result["broken"].failed and result.median("broken") is None
    assert len(result["fast"].rounds) == 2 and result.median("fast") > result.median("slow") > 0
    assert result.speedup("fast", "slow").ratio > 1


def test_should_stop_ends_the_comparison_incomplete():
    """~1 s: a Cancel between runs ends the protocol; what ran is kept, the comparison is incomplete."""
    asked = []

    def stop():
        asked.append(1)
        return len(asked) > 1

    result = compare([Contender("a", lambda: tf.data.Dataset.range(10**9).batch(8)),
                      Contender("b", lambda: tf.data.Dataset.range(10**9).batch(8))],
                     Protocol(rounds=3, window=0.1, max_windows=2), should_stop=stop)
    assert not result.complete and len(result["a"].rounds) == 1 and result["b"].rounds == []


def _sleeping(milliseconds: float) -> tf.data.Dataset:
    """A pipeline whose every minibatch waits ``milliseconds``: its rate barely moves with a
    busy neighbour."""
    def wait(x):
        time.sleep(milliseconds / 1000)
        return x
    return tf.data.Dataset.range(10**9).batch(8).map(lambda x: tf.py_function(wait, [x], tf.int64))


def test_compare_adds_interleaved_rounds_while_a_real_pair_disagrees():
    """~4 s: ``a`` alternates between a minibatch that waits for nothing and one that waits
    40 ms from build to build, ``b`` waits 5 ms: the ratios swing >= 5x either side of 1 (a busy
    machine adds a few ms to each wait, not 35). Three rounds, one extra (rotated like the
    others), then "too noisy to tell"."""
    builds = []

    def alternating():
        builds.append(1)
        return tf.data.Dataset.range(10**9).batch(8) if len(builds) % 2 else _sleeping(40)

    progress = []
    protocol = Protocol(rounds=3, window=0.1, max_windows=2, fill_limit=5, extra_rounds=5)
    result = compare([Contender("b", lambda: _sleeping(5)), Contender("a", alternating)], protocol,
                     on_progress=lambda msg, f: progress.append((msg, f)))
    s = result.speedup("a", "b")
    assert [r > 1 for r in s.ratios] == [True, False, True, False], s.ratios
    assert result.orders == [["b", "a"], ["a", "b"], ["b", "a"], ["a", "b"]]
    assert any(m.startswith("extra round 4") for m, _ in progress) and all(0 <= f <= 1 for _, f in progress)
    assert s.verdict.startswith("too noisy to tell")


def test_an_operation_cancelled_without_a_keyboard_interrupt_ends_its_comparison_at_the_next_contender():
    """A Ctrl-C that lands in a garbage-collector callback is dropped by Python, but the handler
    already cancelled the running operation (``scheduler._ctrl_c_cancels``): the comparison ends
    at the next contender, not after every round (a CI run went on for 30 s)."""
    from plumbkit.engine.compare import BRIEF, Contender
    from plumbkit.engine.scheduler import INTERRUPTED, Cancelled, current, operation

    built = []

    def contender(name):
        def build():
            built.append(name)
            if name == "yours":
                current().cancel(INTERRUPTED)  # what the dropped Ctrl-C leaves behind
            return tf.data.Dataset.range(10**6).batch(10)
        return Contender(name, build)

    @operation("comparison under test")
    def run():
        return compare([contender("yours"), contender("plan")], BRIEF)

    with pytest.raises(Cancelled):
        run()
    assert built == ["yours"]
