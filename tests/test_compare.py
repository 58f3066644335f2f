"""The one protocol every configuration is measured under: statistics (pure) and a real run."""

import pytest
import tensorflow as tf

from plumbkit.engine.compare import (
    Comparison,
    Contender,
    Protocol,
    Result,
    bootstrap_interval,
    compare,
)


def comparison(a, b):
    return Comparison(results={"a": Result("a", list(a)), "b": Result("b", list(b))}, protocol=Protocol())


def test_speedup_interval_holding_one_is_no_measurable_change():
    noisy = comparison([100, 104, 97, 101, 99], [101, 98, 103, 99, 100]).speedup("a", "b")
    assert not noisy.measurable and "no measurable change" in noisy.verdict
    clear = comparison([200, 210, 190, 205, 199], [100, 98, 103, 99, 100]).speedup("a", "b")
    assert clear.faster and clear.ratio == pytest.approx(2.0, rel=0.06) and "faster" in clear.verdict
    slower = comparison([50, 52, 49, 51, 50], [100, 98, 103, 99, 100]).speedup("a", "b")
    assert slower.measurable and not slower.faster and "slower" in slower.verdict
    two = comparison([200, 210], [100, 98]).speedup("a", "b")  # two rounds cannot show a change
    assert not two.measurable and "too few rounds" in two.verdict


def test_bootstrap_interval_brackets_the_median():
    low, high = bootstrap_interval([1.0, 1.1, 1.2, 1.3, 1.4])
    assert low <= 1.2 <= high and low >= 1.0 and high <= 1.4


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
