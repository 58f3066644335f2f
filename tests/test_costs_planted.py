"""Per-operator CPU is CPU under the configuration users run: TensorFlow's defaults (maps
parallelized by tf.data, no intra-op pinning). Beside a neighbour that keeps one core busy, the
same figure is the bench's (``busy_core`` section): here its truth moved more than 20% within 6
of 8 rounds in both CI runs on the Intel machine, so the test skipped after a minute, checking
nothing (session 45 moved it).

The truth comes from a harness independent of plumbkit (``conftest.cpu_meter``, built once:
each function alone over ``range``, the same options, process CPU time, driven by ``reduce``;
heavy fused with its batch, as tf.data runs it),
measured before and after every trace, each sized to about 0.12 s of CPU (at 400 elements the
light map's truth moved 94-161 µs between consecutive measurements: part of why this test
failed one run in three); the estimate from the public ``plumbkit.trace()``.
Five rounds with a steady truth (up to eight taken): 40-50 s.
"""

import statistics

import pytest
import tensorflow as tf

import plumbkit
from plumbkit.bench.examples import planted_work

from conftest import cpu_meter, measured_against_the_clock

BATCH = 16
#: Traces per test, each checked against the truth taken around it; medians over them. Five: under
#: default options one round in four or five read an operator 25-40% off (both heavy and parse,
#: never the same one twice in a row: the machine, not a fixed bias), and a median of three failed
#: one run in four or five; beside the neighbour a median of three failed CI twice in a row (parse
#: read 0.88, 1.63, 1.08 of its truth while the truth itself moved 17% between rounds).
ROUNDS = 5


def parse(x):
    """Planted operator: 16 matmul units (~110-200 µs of CPU)."""
    return planted_work(x, 16)


def heavy(x):
    """Planted operator: 96 matmul units (~450-600 µs of CPU), the bottleneck."""
    return planted_work(x, 96)


def default_pipeline():
    return tf.data.Dataset.range(10**9).map(parse).map(heavy).batch(BATCH)


@pytest.fixture(scope="module")
def truth_now():
    """Each map's true CPU seconds per element under defaults, a fresh reading on each call (the
    harness built once for both tests): heavy in the form tf.data runs it, fused with the batch
    above it (MapAndBatch)."""
    meters = {"map(parse)": cpu_meter(parse), "map(heavy)": cpu_meter(heavy, batched=BATCH)}
    return lambda: {label: meter() for label, meter in meters.items()}


#: Rounds at most, when the truth moved within some of them (see ``_measure``).
MAX_ROUNDS = 8
#: Rounds with a steady truth needed for a verdict (fewer: the test is skipped, saying why).
MIN_STEADY = 3


def _measure(truth_now, tolerance: float, rounds: int = ROUNDS) -> tuple[dict[str, list[float]], dict[str, list[float]], list[str]]:
    """Per round: each operator's estimated minibatches/s per core, its true CPU seconds per
    element (taken before and after every trace and averaged: the machine's speed drifts), and
    the bottleneck named.

    Only rounds whose truth held still count: its readings before and after the trace within
    ``tolerance`` of each other. Beside a spinner the light map's true CPU per element read 69 µs
    before a trace and 178 after (104/149 in another round; quiet, 110 both): tf.data's and
    TensorFlow's thread pools spin between elements, and how much of that spinning a core shared
    with a busy neighbour allows changes from second to second. Against a truth that moved more
    than the tolerance, no estimate can be checked; up to MAX_ROUNDS are taken for ``rounds``
    steady ones, and with fewer than MIN_STEADY the test is skipped with the readings."""
    estimated: dict[str, list[float]] = {"map(parse)": [], "map(heavy)": []}
    truth: dict[str, list[float]] = {"map(parse)": [], "map(heavy)": []}
    named = []
    moved = []
    before = truth_now()
    for _ in range(MAX_ROUNDS):
        if len(named) >= rounds:
            break
        # timed from the first minibatch: a start-up slowed by a busy machine (3.9 s beside the
        # neighbour at load 12) is not part of what is measured, and cannot end a round empty
        trace = plumbkit.trace(default_pipeline, seconds=1, warmup_batches=1, converge=False)
        after = truth_now()
        assert trace.calibrated, str(trace)
        steady = all(max(before[k], after[k]) <= (1 + tolerance) * min(before[k], after[k]) for k in estimated)
        if not steady:
            moved.append({k: (before[k], after[k]) for k in estimated})
            before = after
            continue
        named.append(trace.bottleneck.label if trace.bottleneck else "none")
        for label in estimated:
            op = trace.op(label)
            assert op.visit_ratio == pytest.approx(BATCH)
            estimated[label].append(op.rate_per_core)
            truth[label].append((before[label] + after[label]) / 2)
        before = after
    if len(named) < MIN_STEADY:
        pytest.skip(f"the truth moved more than {tolerance:.0%} within {len(moved)} of {len(moved) + len(named)} "
                    f"rounds (true CPU s/element before, after: {moved}): nothing to check an estimate against")
    return estimated, truth, named


def per_operator_ratios(estimated: dict[str, list[float]], truth: dict[str, list[float]]) -> dict[str, float]:
    """Each operator's estimated rate over its true one, the median over rounds (above 1: the
    estimate reads it cheaper than it is)."""
    return {label: statistics.median(rate * BATCH * true for rate, true in zip(estimated[label], truth[label]))
            for label in estimated}


def rates_hold(estimated: dict[str, list[float]], truth: dict[str, list[float]], named: list[str],
               tolerance: float) -> bool:
    """Medians over rounds within ``tolerance`` of 1: each operator's estimated rate over its true
    one, and the heavy/parse cost ratio estimated over the true one; heavy named in most rounds."""
    per_op = per_operator_ratios(estimated, truth).values()
    pair = statistics.median((p / h) / (th / tp) for p, h, tp, th in zip(estimated["map(parse)"], estimated["map(heavy)"],
                                                                     truth["map(parse)"], truth["map(heavy)"]))
    return (all(abs(r - 1) <= tolerance for r in (*per_op, pair))
            and named.count("map(heavy)") > len(named) / 2)


def _check(estimated, truth, named, tolerance: float) -> None:
    """The estimate holds, and two wrong answers fail the same check (negative controls): both
    maps given the same cost (an equal split), and each map's CPU attributed to the other."""
    report = f"estimated rates per round: {estimated}; true CPU s/element: {truth}; named: {named}"
    assert rates_hold(estimated, truth, named, tolerance), report
    equal = {label: [2 / (BATCH * (tp + th)) for tp, th in zip(truth["map(parse)"], truth["map(heavy)"])]
             for label in estimated}
    assert not rates_hold(equal, truth, named, tolerance), report
    swapped = {"map(parse)": estimated["map(heavy)"], "map(heavy)": estimated["map(parse)"]}
    assert not rates_hold(swapped, truth, named, tolerance), report


@measured_against_the_clock
def test_default_options_rates_match_the_truth_and_the_bottleneck_is_named(truth_now):
    """The truth is measured around each trace, seconds from the estimate: one rerun where the
    machine's speed moved between them (the medians over five rounds absorb one disturbed round)."""
    _check(*_measure(truth_now, 0.20), tolerance=0.20)


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
