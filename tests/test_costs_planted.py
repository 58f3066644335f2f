"""Per-operator CPU is CPU under the configuration users run: TensorFlow's defaults (maps
parallelized by tf.data, no intra-op pinning), on a quiet machine and beside a neighbour that
keeps one core busy.

The truth comes from a harness independent of plumbkit (``conftest.cpu_seconds_per_element``:
each function alone over ``range``, the same options, process CPU time, driven by ``reduce``;
heavy fused with its batch, as tf.data runs it),
measured before and after every trace, each sized to about 0.12 s of CPU (at 400 elements the
light map's truth moved 94-161 µs between consecutive measurements: part of why this test
failed one run in three); the estimate from the public ``plumbkit.trace()``.
About 25 s per test (40 s under default options).
"""

import statistics
import subprocess
import sys

import pytest
import tensorflow as tf

import plumbkit
from plumbkit.bench.examples import planted_work

from conftest import cpu_seconds_per_element, measured_against_the_clock

BATCH = 16
#: Traces per test, each checked against the truth taken around it; medians over them. Five under
#: default options: there one round in four or five read an operator 25-40% off (both heavy and
#: parse, never the same one twice in a row: the machine, not a fixed bias), and a median of three
#: failed one run in four or five.
ROUNDS, DEFAULT_ROUNDS = 3, 5


def parse(x):
    """Planted operator: 16 matmul units (~110-200 µs of CPU)."""
    return planted_work(x, 16)


def heavy(x):
    """Planted operator: 96 matmul units (~450-600 µs of CPU), the bottleneck."""
    return planted_work(x, 96)


def default_pipeline():
    return tf.data.Dataset.range(10**9).map(parse).map(heavy).batch(BATCH)


def _truth() -> dict[str, float]:
    # heavy in the form tf.data runs it: fused with the batch above it (MapAndBatch)
    return {"map(parse)": cpu_seconds_per_element(parse), "map(heavy)": cpu_seconds_per_element(heavy, batched=BATCH)}


def _measure(rounds: int = ROUNDS) -> tuple[dict[str, list[float]], list[float], list[str]]:
    """Per round: each operator's estimated rate over the true one, the heavy/parse ratio
    estimated over the true one, and the bottleneck named. Truth is taken before and after
    every trace and averaged (the machine's speed drifts)."""
    ratios: dict[str, list[float]] = {"map(parse)": [], "map(heavy)": []}
    pair, named = [], []
    before = _truth()
    for _ in range(rounds):
        trace = plumbkit.trace(default_pipeline, seconds=2, converge=False)
        after = _truth()
        truth = {k: (before[k] + after[k]) / 2 for k in before}
        before = after
        assert trace.calibrated, str(trace)
        named.append(trace.bottleneck.label if trace.bottleneck else "none")
        for label, seconds in truth.items():
            op = trace.op(label)
            assert op.visit_ratio == pytest.approx(BATCH)
            ratios[label].append(op.rate_per_core * BATCH * seconds)  # estimated / true rate
        estimated = trace.op("map(parse)").rate_per_core / trace.op("map(heavy)").rate_per_core
        pair.append(estimated / (truth["map(heavy)"] / truth["map(parse)"]))
    return ratios, pair, named


def _check(ratios, pair, named, tolerance: float) -> None:
    report = f"rate estimate / truth per round: {ratios}; heavy/parse ratio estimate / truth: {pair}; named: {named}"
    for label, values in ratios.items():
        assert statistics.median(values) == pytest.approx(1.0, abs=tolerance), report
    assert statistics.median(pair) == pytest.approx(1.0, abs=tolerance), report
    assert named.count("map(heavy)") > len(named) / 2, report


@measured_against_the_clock
def test_default_options_rates_match_the_truth_and_the_bottleneck_is_named():
    _check(*_measure(DEFAULT_ROUNDS), tolerance=0.20)


#: A busy loop that ends with the process that started it (never left behind by a killed test).
BURNER = ("import os\nparent = os.getppid()\n"
          "while os.getppid() == parent:\n    for _ in range(100_000):\n        pass\n")


@pytest.fixture
def neighbour():
    """Another process keeping one core busy (a training step, a notebook next door)."""
    burner = subprocess.Popen([sys.executable, "-c", BURNER])
    try:
        yield burner
    finally:
        burner.kill()
        burner.wait()


@measured_against_the_clock
def test_rates_hold_while_a_neighbour_burns_one_core(neighbour):
    _check(*_measure(), tolerance=0.30)


def test_live_updates_say_wall_time_until_the_calibrated_trace_arrives():
    """While the pipeline runs, the CPU shares are traced wall time, labelled so; calibration is
    its own phase after the live trace (about 3 s)."""
    from plumbkit.engine.tracing import CALIBRATING_NOTE, LIVE_NOTE
    updates = []
    final = plumbkit.trace(lambda: tf.data.Dataset.range(10**9).map(parse).batch(BATCH), seconds=1,
                           converge=False, on_update=updates.append)
    assert updates and all(not u.calibrated for u in updates)
    assert LIVE_NOTE in updates[0].notes and CALIBRATING_NOTE in updates[-1].notes
    assert "wall" in str(updates[0]) and "(w)" in str(updates[0])
    assert final.calibrated and LIVE_NOTE not in final.notes and CALIBRATING_NOTE not in final.notes
    assert final.op("map(parse)").cpu_from == "calibrated alone" and "(c)" in str(final)
