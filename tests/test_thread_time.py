"""A sequential pipeline's thread is busy for less than its CPU where kernels also run on other
threads (a large elementwise kernel, which Eigen splits over the intra-op pool): the prediction
of the pipeline as traced counts the thread's time (the wall time of each operator calibrated
one call at a time) for the thread's limit, and matches the throughput the trace measured. The negative control is the same prediction with the
thread charged the operators' CPU, as before (the bench's skewed pipeline: 465/s predicted where
the trace ran 574; with the thread's time, 520-545). One trace, about 10 s.

The kernel is planted so that it is split: a chain of 48x48 matmuls ran on other threads on one
machine but mostly on the calling thread on CI's Intel one (thread 3.10 ms, CPU 3.58 ms per
minibatch; the trace ran between the two, and the negative control came closer). A sine, cosine
and exponential over 300,000 floats: thread 9.4-11.2 ms, CPU 13.9-14.2; predicted 89-106/s with
the thread's time where the trace ran 99-103, 71-72 with the CPU (three traces there)."""

import dataclasses

import pytest
import tensorflow as tf

from plumbkit.bench.examples import planted_work
from plumbkit.engine.tracing import trace
from plumbkit.host.machine import available_cores
from plumbkit.planning.predict import evidence_from_trace, layout_as_traced, predict
from plumbkit.tfdata.options import sequential_options

from conftest import measured_against_the_clock

#: How close the prediction of the pipeline as traced must come to the trace's own throughput
#: (the thread's time is read in a short calibration, seconds after the trace: -13% to +7% in
#: three traces; -11% to +13% in five more on CI's Intel class, and -16% twice in one run of the
#: measuring phase, where 15% failed it and its rerun; the CPU: -20% to -36%, and always further
#: off than the thread's time, which the second assert checks). This host's cores step in speed
#: by up to 1.75x for seconds (benchmarks/results/2026-11-29-core-speed-steps).
WITHIN = 0.2


def split_over_the_pool(x: tf.Tensor) -> tf.Tensor:
    """~10 ms of elementwise work per element on one large tensor, which Eigen splits over the
    intra-op threads: the pipeline's thread waits for them."""
    v = tf.fill([300_000], tf.cast(x % 7, tf.float32) * 1e-3 + 1.0)
    return tf.cast(x, tf.float32) + tf.reduce_sum(tf.exp(tf.sin(v) * tf.cos(v)))


@measured_against_the_clock
def test_the_pipeline_as_traced_is_predicted_from_the_time_its_thread_is_busy():
    """The throughput is measured during the trace, the thread's time in the calibration seconds
    after it: one rerun where the machine's speed moved between them (the review run of session 44
    read 83/s traced against 100 predicted, 20% off, once in five runs)."""
    if available_cores() < 2:
        pytest.skip("one core: no kernel runs beside the pipeline's thread")
    ds = (tf.data.Dataset.range(10**9).map(lambda x: planted_work(x, 1)).map(split_over_the_pool)
          .batch(8).with_options(sequential_options()))
    t = trace(ds, seconds=4, calibrate=True)
    ev = evidence_from_trace(t)
    assert ev.thread_cost, "no operator was calibrated one call at a time"
    assert all(ev.thread_cost[n] <= ev.cost[n] for n in ev.thread_cost)
    busy = predict(ev, layout_as_traced(ev))
    cpu_only = predict(dataclasses.replace(ev, thread_cost={}), layout_as_traced(ev))
    traced = t.analysis.throughput
    report = (f"traced {traced:,.0f}/s; predicted {busy.throughput:,.0f} ({busy.binding}) with the thread's time, "
              f"{cpu_only.throughput:,.0f} ({cpu_only.binding}) with its CPU; thread {sum(ev.thread_cost.values()) * 1e3:.2f} "
              f"ms, CPU {sum(ev.cost.values()) * 1e3:.2f} ms per minibatch")
    if busy.binding != "consumer thread":
        pytest.skip(f"the thread does not bind here: {report}")
    assert abs(busy.throughput / traced - 1) <= WITHIN, report
    assert abs(cpu_only.throughput / traced - 1) > abs(busy.throughput / traced - 1), report
