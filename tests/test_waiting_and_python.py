"""Operators that wait and operators that run Python: named so, and planned for what helps.

A ``py_function`` that sleeps (a remote fetch) is latency-bound: more calls in flight help far
beyond the cores, once tf.data's thread pool is raised to match. A pure-Python tokenizer holds
the GIL: more threads do not help. A sleeping generator source (the tf.data guide's
``ArtificialDataset``) can only get more calls in flight by reading several copies side by side,
which changes the order: offered, not applied. Throughputs measured interleaved, medians.
About 15 s per test.
"""

import time

import numpy as np
import pytest
import tensorflow as tf

import plumbkit
from plumbkit.analysis.costs import GIL_QUEUED, PYTHON_TIMED
from plumbkit.export.source import note_options
from plumbkit.model.plan import Change
from plumbkit.planning.decisions import decide, solve
from plumbkit.planning.lp import GIL
from plumbkit.tfdata.python_ops import python_call_cpu
from plumbkit.tfdata.rebuild import apply_changes
from plumbkit.tfdata.run import untraced_throughput

from conftest import interleaved_throughput, measured_against_the_clock

FETCH_SECONDS = 0.008


def sleeping_fetch(seconds: float):
    """A remote fetch: ``seconds`` of waiting per element, almost no CPU (Python, holds the GIL
    briefly)."""
    def slow(v):
        time.sleep(seconds)
        return v

    def fetch(x):
        out = tf.py_function(slow, [x], tf.int64)
        out.set_shape([])
        return out
    return fetch


def slow_fetches(seconds: float):
    """A pipeline of fetches one call at a time, batched by 8."""
    return lambda: tf.data.Dataset.range(10**9).map(sleeping_fetch(seconds)).batch(8)


sequential_fetches = slow_fetches(FETCH_SECONDS)
#: Sleeps short enough that 64 calls in flight ask more of the GIL than any machine here gives:
#: 8 ms sleeps queued on the first dev VM (3.8k elements/s at 64 calls, against 7.7k asked) but
#: not on a faster one (7.7k at 64, the GIL's ceiling there ~9-10k); 2 ms ask ~29k.
queueing_fetches = slow_fetches(0.002)


@measured_against_the_clock
def test_a_sleeping_py_function_is_latency_bound_and_gets_calls_in_flight_beyond_the_cores():
    trace = plumbkit.trace(sequential_fetches, seconds=2, converge=False)
    op = trace.op("map(fetch)")
    assert op.bound == "latency" and op.holds_gil, str(trace)
    assert op.latency_per_element == pytest.approx(FETCH_SECONDS, rel=0.3), str(trace)
    assert trace.bottleneck.label == "map(fetch)" and "latency-bound" in str(trace)
    plan = decide(trace, memory_budget=0, cache=False, prefetch=False)
    calls = next(c for c in plan.changes if c.what == "parallelism" and c.where == "map(fetch)")
    pool = next(c for c in plan.changes if c.what == "threadpool")
    assert calls.value > trace.cores and pool.value >= calls.value, plan.changes
    faster = apply_changes(sequential_fetches(), plan.changes, allow_external_state=True)
    assert faster.options().threading.private_threadpool_size == pool.value
    assert faster.options().deterministic is not False  # order kept
    measured = interleaved_throughput({"sequential": sequential_fetches, "plan": lambda: faster}, rounds=2)
    report = f"{measured}, predicted {plan.prediction.throughput:.1f}; {plan.changes}"
    assert measured["plan"] >= 10 * measured["sequential"], report
    assert plan.prediction.throughput == pytest.approx(measured["plan"], rel=0.25), report


def rate_holds(estimate: float, measured: float) -> bool:
    """An estimated rate within 25% of the one measured."""
    return abs(estimate - measured) <= 0.25 * measured


@measured_against_the_clock
def test_a_waiting_python_function_whose_calls_queue_for_the_gil_is_bounded_by_its_rate_with_the_most_calls():
    """With 64 calls in flight, 2 ms sleeps queue for the GIL (the Python of each call and
    TensorFlow's side of it): the rate measured so bounds every plan. 60 ms sleeps do not queue:
    the GIL is the Python the calls were timed to hold. The wrong answer, a model blind to the GIL
    (64 calls in flight, each waiting its latency), fails the same check. (The Python CPU timed in
    the calls is no negative control: on some machines the queue adds under 10% to it, and CI
    failed there.) The rate is measured after the trace, seconds from the estimate: one rerun
    where the machine's speed moved."""
    trace = plumbkit.trace(queueing_fetches, seconds=1.5, converge=False)
    queued = trace.op("map(fetch)")
    assert queued.python_from == GIL_QUEUED and queued.python_per_element, queued
    widest = apply_changes(queueing_fetches(), [
        Change("parallelism", "map(fetch)", queued.name, 64, ""),
        Change("threadpool", "batch(8)", trace.op("batch(8)").name, 66, "")], allow_external_state=True)
    elements_per_second = 8 * untraced_throughput(widest, 1.5, 0.3)
    assert rate_holds(1 / queued.python_per_element, elements_per_second), (elements_per_second, queued)
    gil_blind = 64 / queued.latency_per_element  # 64 calls in flight, each waiting its latency
    assert not rate_holds(gil_blind, elements_per_second), (gil_blind, elements_per_second)  # negative control
    sparse = plumbkit.trace(slow_fetches(0.06), seconds=1.5, converge=False).op("map(fetch)")
    assert sparse.bound == "latency" and sparse.python_from == PYTHON_TIMED, sparse
    assert sparse.python_per_element < queued.python_per_element


def busy_then_wait(x):
    """1 ms of Python arithmetic (holding the GIL), then 4 ms asleep (not holding it)."""
    def work(v):
        end = time.thread_time() + 1e-3
        while time.thread_time() < end:
            pass
        time.sleep(0.004)
        return v
    out = tf.py_function(work, [x], tf.int64)
    out.set_shape([])
    return out


def test_the_time_a_python_function_holds_the_gil_is_timed_in_its_calls_and_the_registry_is_restored():
    from tensorflow.python.ops import script_ops
    registry = type(script_ops._py_funcs)
    original = registry.__call__
    ds = tf.data.Dataset.range(40).map(busy_then_wait, num_parallel_calls=4)
    with python_call_cpu() as spent:
        n = sum(1 for _ in ds)
    per_element = spent[0] / n
    assert 0.8e-3 <= per_element <= 1.6e-3, per_element  # the Python, not the sleep (5 ms a call)
    assert registry.__call__ is original
    with pytest.raises(tf.errors.UnknownError, match="ZeroDivisionError"), python_call_cpu():
        list(tf.data.Dataset.range(2).map(lambda x: tf.py_function(lambda v: 1 / 0, [x], tf.float32)))
    assert registry.__call__ is original
    assert list(tf.data.Dataset.range(3).map(busy_then_wait).as_numpy_iterator()) == [0, 1, 2]


WORDS = "the quick brown fox jumps over the lazy dog data pipeline input batch tensor".split()
LINES = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(60)) for i in range(256)]


def tokenize(line):
    """A pure-Python tokenizer: a rolling hash per word, all in the interpreter."""
    def words_to_ids(text):
        ids = []
        for word in text.numpy().decode().split():
            h = 0
            for ch in word:
                h = (h * 31 + ord(ch)) % 30011
            ids.append(h)
        return np.array((ids + [0] * 64)[:64], dtype=np.int64)
    out = tf.py_function(words_to_ids, [line], tf.int64)
    out.set_shape([64])
    return out


def tokenized(threads=None):
    return tf.data.Dataset.from_tensor_slices(LINES).repeat().map(tokenize, num_parallel_calls=threads).batch(16)


@measured_against_the_clock
def test_a_python_tokenizer_holds_the_gil_and_more_threads_are_predicted_not_to_help():
    """The model's figure comes from a trace taken before the measurement, seconds apart: one
    rerun where the machine's speed moved between them (one and four threads are measured
    interleaved). The wrong answer, a model blind to the GIL (threads scale with the cores),
    fails the same check."""
    trace = plumbkit.trace(tokenized, seconds=2, converge=False)
    op = trace.op("map(tokenize)")
    assert op.holds_gil and op.bound == "cpu" and trace.bottleneck.label == "map(tokenize)", str(trace)
    one = solve(trace, cores=trace.cores, max_threads={op.name: 1})
    four = solve(trace, cores=trace.cores, max_threads={op.name: 4})
    assert four.binding == GIL
    assert four.throughput == pytest.approx(one.throughput, rel=0.05)  # the model: no help
    measured = interleaved_throughput({"one": tokenized, "four": lambda: tokenized(4)}, rounds=2)
    report = f"{measured}, predicted {four.throughput:.1f} with 1 or 4 threads"
    assert rate_holds(four.throughput, measured["four"]), report
    assert measured["four"] < 1.3 * measured["one"], report  # and indeed they do not
    gil_blind = min(4, trace.cores) * measured["one"]
    assert not rate_holds(gil_blind, measured["four"]), report  # negative control


class ArtificialDataset(tf.data.Dataset):
    """The tf.data performance guide's slow source: opening costs 30 ms, each element 15 ms."""

    def _generator(num_samples):
        time.sleep(0.03)
        for sample_idx in range(num_samples):
            time.sleep(0.015)
            yield (sample_idx,)

    def __new__(cls, num_samples=3):
        return tf.data.Dataset.from_generator(cls._generator, args=(num_samples,),
                                              output_signature=tf.TensorSpec(shape=(1,), dtype=tf.int64))


def test_a_sleeping_generator_is_latency_bound_and_interleaving_copies_is_offered_not_applied():
    trace = plumbkit.trace(lambda: ArtificialDataset().repeat().batch(4), seconds=2, converge=False)
    source = trace.op("from_generator")
    assert source.bound == "latency" and source.holds_gil and trace.bottleneck.label == "from_generator", str(trace)
    assert source.latency_per_element == pytest.approx(0.015 + 0.03 / 3, rel=0.3), str(trace)
    html = trace._repr_html_()  # the table says how each operator is bound and who holds the GIL
    assert "<th>bound</th>" in html and "<th>GIL</th>" in html and "<td>latency</td>" in html
    assert "nobody" in str(trace) and "calibrated alone" in str(trace)
    plan = decide(trace, memory_budget=0, cache=False, prefetch=False)
    assert plan.prediction.throughput == pytest.approx(trace.throughput, rel=0.25), (plan.prediction, str(trace))
    assert not any(c.what == "interleave_sources" for c in plan.changes)  # never applied silently
    (option,) = plan.options
    assert option.changes[0].what == "interleave_sources" and option.changes[0].where == "from_generator"
    assert "order" in option.note, str(option)
    assert "order" in str(option) and "predicted" in str(option)
    # the user turns it on: the exported cell says how, where the source is built, and runs as before
    cell = ("import tensorflow as tf\n"
            "def gen(n):\n"
            "    yield from range(n)\n"
            "ds = tf.data.Dataset.from_generator(gen, args=(3,), output_signature=tf.TensorSpec((), tf.int64))\n"
            "ds = ds.repeat(2).batch(4)\n")
    noted = note_options(cell, plan.options)
    k = option.changes[0].value
    above = noted.split("ds = tf.data.Dataset.from_generator")[0]
    said = " ".join(above.replace("#", " ").split())
    assert "# plumbkit option: read" in above and "changes the order of elements" in said, noted
    assert f"#     ds = tf.data.Dataset.range({k}).interleave(" in above and "deterministic=False" in above, noted
    ran, before = {}, {}
    exec(noted, ran)
    exec(cell, before)
    assert [list(b) for b in ran["ds"].as_numpy_iterator()] == [list(b) for b in before["ds"].as_numpy_iterator()]
    assert note_options(cell, []) == cell
    # The copies need CPU for their Python, and the model counts only the cores other processes
    # left free during the trace: beside neighbours on nearly both cores (0.1 free) it rightly
    # predicts 1.2-1.9x, bound by that CPU (seen at load 7-10); -ra lists the skip.
    others = trace.analysis.neighbour_cores or 0.0
    if option.gain <= 2 and trace.cores - others < 0.5:
        pytest.skip(f"busy machine: other processes kept {others:.1f} of {trace.cores:g} cores busy: {option}")
    assert option.gain > 2, str(option)
