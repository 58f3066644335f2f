"""Epoch restarts: a short finite epoch repeated rebuilds what is below the repeat every epoch
(a shuffle buffer refilled, threads built, the first elements through the depth), and the
prediction is the epoch-averaged rate; a long or infinite epoch leaves the prediction alone."""

import statistics

import pytest
import tensorflow as tf

import plumbkit
from conftest import measured_against_the_clock, with_neighbour_cores
from plumbkit.bench.examples import planted_work
from plumbkit.engine.restarts import measure_restarts, restart_scope, whole
from plumbkit.planning.predict import (Layout, RuntimeCosts, evidence_from_trace, layout_as_traced, predict,
                                       prediction_error)
from plumbkit.tfdata.options import sequential_options
from plumbkit.tfdata.run import Runner

ELEMENTS, BATCH = 384, 8
#: Cores other processes may keep busy while the prediction's accuracy is checked.
QUIET = 0.25


def short_epoch() -> tf.data.Dataset:
    """48 minibatches an epoch, a shuffle buffer of the whole epoch between two planted maps on
    threads of their own: each restart runs the lower map alone until the buffer is full, then
    the upper drains it alone, where mid-epoch the model runs them side by side; an epoch takes
    about twice its steady time. The two maps weigh alike, each well above a map's own cost per
    element: with 3 and 5 matmul units (the matmuls cheap on CI's Intel machine, ~45 us of a
    map's own cost) the consumer bound the steady rate, an epoch took 1.1-1.3 times it, and the
    negative control failed 3 runs in 4 there; with 40 and 40, the steady rate alone read 548-614/s
    where the loop measured 296-335."""
    ds = tf.data.Dataset.range(ELEMENTS).map(lambda x: planted_work(x, 40)).prefetch(1)
    return ds.shuffle(ELEMENTS).map(lambda x: planted_work(x, 40)).batch(BATCH).with_options(sequential_options())


def long_epoch() -> tf.data.Dataset:
    """An epoch of 125,000 minibatches: minutes long, its restarts weigh nothing."""
    return tf.data.Dataset.range(10**6).map(lambda x: x * 2).batch(BATCH)


@pytest.fixture(scope="module")
def short_trace():
    return plumbkit.trace(short_epoch, seconds=1.5, min_seconds=1.0)


@measured_against_the_clock
def test_a_short_epoch_repeated_is_predicted_at_its_epoch_averaged_rate(short_trace):
    """The restarts are measured, then the truth is timed seconds later (different moments: this
    machine's speed for this pipeline moved 1,245-1,356/s between four such checks; on CI's Intel
    machine 295-390/s between runs): three rounds of both, interleaved, medians."""
    def measured() -> float:
        runner = Runner(short_epoch())
        runner.consume(2 * ELEMENTS // BATCH, limit=10.0)
        return sorted(runner.window(0.8) for _ in range(3))[1]  # several epochs a window

    as_traced = evidence_from_trace(short_trace)
    steady = predict(as_traced, layout_as_traced(as_traced))
    predictions, rates, busy_cores = [], [], []
    for _ in range(3):
        restarts = measure_restarts(short_epoch, short_trace)
        assert restarts is not None and restarts.minibatches == ELEMENTS // BATCH
        assert restarts.below == short_trace.pipeline.root and restarts.startup > 0
        with_restarts = evidence_from_trace(short_trace, runtime=RuntimeCosts(restarts=restarts))
        averaged = predict(with_restarts, layout_as_traced(with_restarts))
        assert averaged.binding.startswith("epoch restarts") and steady.binding in averaged.binding
        assert averaged.throughput < steady.throughput and steady.binding in averaged.limits
        predictions.append(averaged)
        rate, busy = with_neighbour_cores(measured)
        rates.append(rate)
        busy_cores.append(busy or 0.0)
    averaged = sorted(predictions, key=lambda p: p.throughput)[1]
    rate, others = statistics.median(rates), max(busy_cores)
    figures = (f"measured {rate:.0f}/s (rounds {[round(r) for r in rates]}); predicted {averaged.throughput:.0f} "
               f"({averaged.binding}; rounds {[round(p.throughput) for p in predictions]}); "
               f"steady only {steady.throughput:.0f} ({steady.binding})")
    traced = short_trace.analysis.neighbour_cores
    if max(traced or 0.0, others or 0.0) > QUIET:
        pytest.skip(f"other processes kept {traced or 0:.1f} cores busy during the trace and {others or 0:.1f} "
                    f"while measured: neither the accuracy nor its negative control checked ({figures})")
    # Until session 41 the restart's start-up (measured beyond the mid-epoch rate) was added to the
    # steady epoch: here the mid-epoch rate is the upper map draining the buffer alone, so the
    # lower map's work counted twice and the averaged rate read 15-36% off (an xfail). A restart
    # is now charged what the measured epoch took beyond the model's own steady epoch.
    assert prediction_error(averaged.throughput, rate) <= 0.2, figures
    assert prediction_error(steady.throughput, rate) > 0.3, figures  # negative control: restarts matter here


def test_a_restart_below_a_cache_costs_nothing(short_trace):
    """A layout whose cache holds the whole epoch restarts only a cache read: no stretch."""
    restarts = measure_restarts(short_epoch, short_trace) or pytest.fail("no restart measured")
    ev = evidence_from_trace(short_trace, runtime=RuntimeCosts(restarts=restarts))
    root = short_trace.pipeline.root
    cached = predict(ev, Layout(cached=frozenset({root})))
    assert not cached.binding.startswith("epoch restarts"), cached.binding
    assert cached.throughput == predict(evidence_from_trace(short_trace), Layout(cached=frozenset({root}))).throughput


def test_a_long_or_infinite_epoch_leaves_the_prediction_alone():
    trace = plumbkit.trace(long_epoch, seconds=0.5, min_seconds=0.3, calibrate=False)
    assert restart_scope(trace) == (10**6 / BATCH, trace.pipeline.root)
    assert measure_restarts(long_epoch, trace) is None  # minutes long: not measured, nothing stretched
    ev = evidence_from_trace(trace, runtime=RuntimeCosts(restarts=measure_restarts(long_epoch, trace)))
    assert predict(ev, layout_as_traced(ev)) == predict(evidence_from_trace(trace), layout_as_traced(ev))
    endless = plumbkit.trace(lambda: tf.data.Dataset.random(seed=0).map(lambda x: x * 2).batch(BATCH), seconds=0.5,
                             min_seconds=0.3, calibrate=False)
    assert restart_scope(endless) is None  # infinite, nothing repeated: never restarts


def test_a_traced_visit_ratio_reads_as_the_elements_a_minibatch_holds():
    """Counts sampled while elements are in flight: a batch's 1.06 is 1 and 0.0313 is 1/32 (an
    epoch must end on a minibatch for its restarts to be timed); far from whole, as measured."""
    assert whole(1.06) == 1.0 and whole(0.0313) == 1 / 32 and whole(31.2) == 31.0 and whole(2.5) == 2.5
