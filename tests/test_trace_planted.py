"""Accuracy of tracing on planted pipelines whose per-operator CPU cost we control.

Ground truth is measured in the same run, interleaved with the traces, and compared by
medians over repeats, because these machines are shared and noisy.

The same figure under TensorFlow's defaults (maps parallelized by tf.data, autotuned pools) is
the bench's (accuracy section, "three maps, defaults"; beside a spinner, the busy_core section),
no longer a test: on CI's Intel machine the truth itself, a map alone under defaults timed by the
process CPU, moved more than 20% between readings seconds apart in 6 of 8 rounds (parse 100-189
µs: the autotuned pools spin between elements), and the test skipped after 46 s or failed and
reran (94 s). Here the options pin the pools (``single_thread_ops_options``), and the truth holds.
"""

import statistics

import pytest
import tensorflow as tf

import plumbkit
from plumbkit.bench.examples import planted_work
from plumbkit.tfdata.options import single_thread_ops_options

from conftest import cpu_meter, heavy, measured_against_the_clock, medium

BATCH = 16


def planted_pipeline():
    # heavy runs on one thread, medium on two: heavy is the bottleneck by ~4x.
    return (tf.data.Dataset.range(10**9)
            .map(heavy, num_parallel_calls=1)
            .map(medium, num_parallel_calls=2)
            .batch(BATCH)
            .with_options(single_thread_ops_options()))


@pytest.fixture(scope="module")
def planted_truth():
    """CPU seconds per element of heavy and medium alone in the planted pipeline's execution mode
    (medium fused with its batch), a fresh reading on each call: the harness is built once for
    the tests that take the truth around their traces."""
    meters = {"map(heavy)": cpu_meter(heavy, single_thread_ops_options(), parallel_calls=1),
              "map(medium)": cpu_meter(medium, single_thread_ops_options(), parallel_calls=2, batched=BATCH)}
    return lambda: {label: meter() for label, meter in meters.items()}


def traced_between_truths(truth, count: int) -> tuple[list, list[dict[str, float]]]:
    """``count`` 3 s traces of the planted pipeline, the truth read before the first and after
    each: ``truths[i]`` just before ``traces[i]``, ``truths[i + 1]`` just after it."""
    traces, truths = [], [truth()]
    for _ in range(count):
        traces.append(plumbkit.trace(planted_pipeline(), seconds=3, converge=False))
        truths.append(truth())
    return traces, truths


@pytest.fixture(scope="module")
def _planted_runs() -> dict:
    return {}


@pytest.fixture
def planted_runs(request, planted_truth, _planted_runs):
    """``runs(count)``: the first ``count`` of three traces of the planted pipeline with the truth
    around each (:func:`traced_between_truths`), measured once for the tests that read them (the
    rates, the calibrated CPU, the allocation bound: ~5 s a trace, ~2.5 s a reading, paid once
    instead of in each). A rerun (``measured_against_the_clock``) measures its ``count`` afresh."""
    rerun = getattr(request.node, "execution_count", 1) > 1

    def runs(count: int) -> tuple[list, list[dict[str, float]]]:
        if rerun:
            return traced_between_truths(planted_truth, count)
        if not _planted_runs:
            _planted_runs["traces"], _planted_runs["truths"] = traced_between_truths(planted_truth, 3)
        return _planted_runs["traces"][:count], _planted_runs["truths"][:count + 1]
    return runs


def rates_match(estimated: dict[str, list[float]], truth: dict[str, list[float]], tolerance: float = 0.25) -> bool:
    """Each operator's estimated minibatches/s per core over its true one (``truth``: CPU
    seconds per element alone), round by round, has a median within ``tolerance`` of 1."""
    return all(abs(statistics.median(rate * BATCH * true for rate, true in zip(estimated[label], truth[label])) - 1)
               <= tolerance for label in estimated)


@measured_against_the_clock
def test_rates_match_isolated_ground_truth_and_bottleneck_is_named(planted_runs):
    """The truth in the pipeline's own execution mode: the same options and parallel calls (run
    sequentially instead, the same function costs measurably less CPU per element), measured
    before each trace, so seconds from the estimate: one rerun where the machine's speed moved
    between them. The wrong answer, each map's CPU attributed to the other (heavy costs 2.0-3.3x
    medium per element here, medium fused with the batch), fails the same check."""
    estimated: dict[str, list[float]] = {"map(heavy)": [], "map(medium)": []}
    truth: dict[str, list[float]] = {"map(heavy)": [], "map(medium)": []}
    traces, truths = planted_runs(3)
    for trace, before in zip(traces, truths):
        for label, true in before.items():
            truth[label].append(true)
        assert trace.bottleneck is not None and trace.bottleneck.label == "map(heavy)", str(trace)
        for label in estimated:
            op = trace.op(label)
            assert op.visit_ratio == pytest.approx(BATCH)
            estimated[label].append(op.rate_per_core)
    swapped = {"map(heavy)": truth["map(medium)"], "map(medium)": truth["map(heavy)"]}
    assert not rates_match(estimated, swapped), (estimated, truth)  # negative control
    if not rates_match(estimated, truth):
        # A truth that moved by more than the tolerance between its own readings, seconds apart,
        # cannot judge an estimate: on CI's Intel VM TensorFlow's speed flips ~1.6x for seconds
        # (medium read 214, 149, 203 us in one failing run, its rerun alike). Said by -ra.
        moved = {label: max(v) / min(v) for label, v in truth.items()}
        if max(moved.values()) > 1.3:
            said = ", ".join(f"{label} {ratio:.2f}x" for label, ratio in moved.items())
            pytest.skip(f"the truth itself moved between its readings ({said}): estimates {estimated} "
                        f"not judged against it")
    assert rates_match(estimated, truth), (estimated, truth)


@measured_against_the_clock
def test_calibrated_cpu_adds_up_to_process_cpu(planted_runs):
    """Each operator's CPU is measured alone, so the sum is a measurement too: close to the
    process CPU, and what nobody accounts for (or the excess) is reported as such. The operators
    are calibrated after the trace, seconds from the process CPU they are compared with: one
    rerun where the machine's speed moved between them. The rates test's first trace."""
    (trace,), _ = planted_runs(1)
    a = trace.analysis
    assert trace.calibrated
    assert sum(o.cpu_seconds for o in trace.ops) == pytest.approx(a.attributed_cpu_seconds, rel=1e-6)
    assert 0.6 * a.cpu_seconds <= a.attributed_cpu_seconds <= 1.3 * a.cpu_seconds, str(trace)
    assert a.unattributed_share == pytest.approx(max(0.0, 1 - a.attributed_cpu_seconds / a.cpu_seconds))
    assert a.over_attributed_share == pytest.approx(max(0.0, a.attributed_cpu_seconds / a.cpu_seconds - 1))
    assert 0.0 <= a.unattributed_share < 0.5
    # the two planted maps do nearly all the work
    assert trace.op("map(heavy)").cpu_share + trace.op("map(medium)").cpu_share > 0.7


def parse(x):
    """Planted operator: 16 matmul units."""
    return planted_work(x, 16)


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


@measured_against_the_clock
def test_epochs_shorter_than_the_sampling_period_still_count():
    """Below a fast repeat each epoch's runtime nodes can live and die between two snapshots;
    the operator's CPU share must still account for them. Its rate is checked against the truth
    measured before and after the trace, seconds from the estimate: one rerun where the
    machine's speed moved between them.

    The truth is heavy as this pipeline runs it: fused with its batch (MapAndBatch, tf.data's
    default rewrite under these options). Read against heavy unfused and sequential, which costs
    more per element, the estimate read 1.15-1.23x its truth (four traces; the limit 1.25: CI
    needed this test's rerun in most runs); against the fused truth 0.89-0.94x."""
    alone = cpu_meter(heavy, single_thread_ops_options(), batched=8)  # built once
    before = 1.0 / (alone() * 8)
    ds = (tf.data.Dataset.range(48).map(heavy).batch(8).repeat()  # ~20 ms epochs, polled every 250 ms
          .with_options(single_thread_ops_options()))
    trace = plumbkit.trace(ds, seconds=3, converge=False)
    heavy_op = trace.op("map(heavy)")
    assert heavy_op.cpu_share > 0.6, str(trace)
    assert trace.analysis.unattributed_share < 0.4, str(trace)
    after = 1.0 / (alone() * 8)  # the truth drifts: 245-320 an hour apart
    truth = (before + after) / 2
    assert abs(heavy_op.rate_per_core / truth - 1) <= 0.25, (before, after, str(trace))


def bound_agrees(bound: float, closed_form: float, tolerance: float = 0.25) -> bool:
    """An allocation bound within ``tolerance`` (either way) of the closed form on the planted
    costs measured alone."""
    return 1 / (1 + tolerance) <= bound / closed_form <= 1 + tolerance


@measured_against_the_clock
def test_allocation_bound_is_the_closed_form_on_the_planted_costs_and_uses_the_cores(planted_runs):
    """Checked against an independent truth, not the code's own formula: both planted maps are
    parallelizable, so the most one core allows is one over their CPU per minibatch, each map
    measured alone in the pipeline's execution mode by the conftest harness (range and batch
    cost little beside them); two cores allow twice that (bound over closed form, five runs at
    load 6-12: 0.97-1.23). A bound that charges the bottleneck alone (the wrong answer:
    1.31-1.45x the closed form, as heavy costs 2.0-3.3x medium here) fails the same check. The truth is measured before and
    after the trace, seconds from the estimate: one rerun where the machine's speed moved. The
    rates test's first trace, with the truth read just before and just after it."""
    (trace,), (before, after) = planted_runs(1)
    heavy_cpu, medium_cpu = ((before[label] + after[label]) / 2 for label in ("map(heavy)", "map(medium)"))
    closed_form = 1 / (BATCH * (heavy_cpu + medium_cpu))  # minibatches/s on one core
    one, two = trace.allocation_bound(cores=1), trace.allocation_bound(cores=2)
    assert bound_agrees(one, closed_form), (one, closed_form, str(trace))
    assert not bound_agrees(1 / (BATCH * heavy_cpu), closed_form), closed_form  # negative control
    assert two == pytest.approx(2 * one, rel=0.01)  # both maps parallelizable
    assert trace.throughput <= two * 1.1


def _trace_full(ds, seconds=20):
    """One pass over the data (finite pipelines are otherwise traced over repeated epochs). Not
    calibrated: what these tests check (visit ratios, sizes, cardinalities, files) is counted
    from the elements seen; calibration measures only each operator's CPU (~0.3-0.5 s each)."""
    return plumbkit.trace(ds, seconds=seconds, converge=False, repeat_epochs=False, calibrate=False)


def test_visit_ratio_exact_for_batch_filter_flat_map_unbatch():
    # a full pass: its time grows with the elements (40,000 took ~5 s, 20,000 ~2.8), its ratios do not
    ds = (tf.data.Dataset.range(20_000)
          .filter(lambda x: x % 4 != 0)              # keeps 3/4
          .flat_map(lambda x: tf.data.Dataset.from_tensors(x).repeat(2))  # 2 per input
          .batch(8)
          .unbatch()
          .batch(10, drop_remainder=True))
    trace = _trace_full(ds)
    V = {o.kind + ("#" + o.label if o.kind == "batch" else ""): o.visit_ratio for o in trace.ops}
    by_label = {o.label: o for o in trace.ops}
    assert by_label["batch(10)"].visit_ratio == 1
    assert by_label["unbatch"].visit_ratio == pytest.approx(10, rel=1e-3)
    assert by_label["batch(8)"].visit_ratio == pytest.approx(10 / 8, rel=0.01)
    assert V["flat_map"] == pytest.approx(10, rel=0.01)
    filt = next(o for o in trace.ops if o.kind == "filter")
    assert filt.visit_ratio == pytest.approx(5, rel=0.01)
    assert by_label["range"].visit_ratio == pytest.approx(5 * 4 / 3, rel=0.01)


def test_materialized_size_matches_true_size():
    n = 3000

    def decode(x):
        return tf.cast(tf.fill([24, 24, 3], x % 251), tf.uint8)

    ds = (tf.data.Dataset.range(n).map(decode)
          .filter(lambda img: tf.reduce_sum(tf.cast(img[0, 0], tf.int32)) % 2 == 0)
          .batch(16))
    true_filtered = sum(1 for x in range(n) if (3 * (x % 251)) % 2 == 0)
    trace = _trace_full(ds)
    decode_op = trace.op("map(decode)")
    assert decode_op.cacheable
    assert decode_op.materialized_bytes == pytest.approx(n * 24 * 24 * 3, rel=0.05)
    filt = next(o for o in trace.ops if o.kind == "filter")
    assert filt.materialized_bytes == pytest.approx(true_filtered * 24 * 24 * 3, rel=0.05)


def _write_records(directory, files, records_per_file, rng):
    paths = []
    for f in range(files):
        path = str(directory / f"part-{f:03d}.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for _ in range(records_per_file):
                w.write(b"x" * int(rng.integers(900, 1100)))
        paths.append(path)
    return paths


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_source_size_exact_on_full_pass_and_close_from_a_sample(tmp_path):
    import os
    import numpy as np
    rng = np.random.default_rng(0)
    paths = _write_records(tmp_path, 60, 40, rng)
    true_bytes = sum(os.path.getsize(p) for p in paths)
    # a planted cost makes the pass last ~2 s, so the reader is sampled while it runs
    ds = (tf.data.Dataset.from_tensor_slices(paths)
          .interleave(tf.data.TFRecordDataset, cycle_length=2)
          .map(lambda r: planted_work(tf.strings.length(r), 48), num_parallel_calls=2)
          .batch(20))
    full = _trace_full(ds)
    assert full.ended == "end of data"
    assert full.analysis.source_bytes == true_bytes and full.analysis.source_exact
    assert 40 <= full.analysis.files_opened <= 60
    reader = next(o for o in full.ops if o.kind == "interleave")
    assert reader.cardinality == pytest.approx(60 * 40, rel=0.01)
    sampled = plumbkit.trace(ds, seconds=2, converge=False, sample_fraction=0.1, calibrate=False)
    assert not sampled.analysis.source_exact
    assert sampled.analysis.source_bytes == pytest.approx(true_bytes, rel=0.03)


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_random_functions_are_detected_and_block_caching_above():
    def flip(x):
        return tf.image.random_flip_left_right(x)

    def fixed_seed(x):
        return tf.image.stateless_random_brightness(x, 0.2, seed=[1, 2])

    def random_seed(x):
        seed = tf.random.uniform([2], maxval=1000, dtype=tf.int32)
        return tf.image.stateless_random_brightness(x, 0.2, seed=seed)

    def scale(x):
        return x * 2.0

    # 2,000 elements: the source's tensor is a constant of the graph each trace serializes (with
    # 20,000, each half-second trace took ~0.7 s longer)
    base = tf.data.Dataset.from_tensor_slices(tf.zeros([2000, 8, 8, 3]))
    for fn, random in ((flip, True), (fixed_seed, False), (random_seed, True), (scale, False)):
        # randomness and cacheability come from the graph and the elements seen: no calibration,
        # and half a second past the first minibatch sees hundreds of minibatches
        trace = plumbkit.trace(base.map(fn).map(scale).batch(8), seconds=0.5, converge=False, calibrate=False)
        op = trace.op(f"map({fn.__name__})")
        assert op.random is random, fn.__name__
        top = trace.op("batch(8)")
        assert top.cacheable is (not random), (fn.__name__, top.cache_note)
        if random:
            assert fn.__name__ in top.cache_note
    shuffled = plumbkit.trace(base.shuffle(16).map(scale).batch(8), seconds=0.5, converge=False, calibrate=False)
    assert not shuffled.op("batch(8)").cacheable
    assert shuffled.op("from_tensor_slices").cacheable


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_infinite_pipeline_is_traced_with_explanation():
    ds = tf.data.Dataset.range(100).map(lambda x: x * 2).repeat().batch(10)
    # the notes and cacheability come from the graph and the elements seen: no calibration
    trace = plumbkit.trace(ds, seconds=1.5, converge=False, calibrate=False)
    assert trace.ended == "time limit" and trace.throughput > 0
    assert any("infinite" in n for n in trace.notes)
    assert not trace.op("batch(10)").cacheable and "infinite" in trace.op("batch(10)").cache_note
    assert trace.op("range").cacheable


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_py_function_pipeline_is_traced_with_explanation():
    def add_one(v):
        return v + 1

    def bump(x):
        return tf.py_function(add_one, [x], tf.int64)

    ds = tf.data.Dataset.range(2000).map(bump).batch(10)
    trace = plumbkit.trace(ds, seconds=1.5, converge=False)
    assert trace.throughput > 0 and trace.bottleneck is not None
    assert any("['add_one']" in n and "deterministic" in n for n in trace.notes)
    assert not trace.pipeline.problems and trace.op("batch(10)").cacheable  # rebuildable, cacheable
    assert "map(bump)" in str(trace)


@pytest.mark.usefixtures("ctrl_c_raises")  # SIGINT raises, however pytest was started
def test_keyboard_interrupt_keeps_the_trace_so_far():
    """Ctrl-C half a second after the trace first reports (pressed at a fixed time after the
    call, a busy machine still built the pipeline then: 0.2 s traced)."""
    import _thread
    import threading
    first: list[float] = []
    timer = threading.Timer(0.5, _thread.interrupt_main)

    def measuring(update):
        if not first:
            first.append(update.elapsed)
            timer.start()
    trace = plumbkit.trace(tf.data.Dataset.range(10**9).map(heavy).batch(4), seconds=30, on_update=measuring,
                           update_interval=0.1)
    timer.cancel()
    assert trace.ended == "interrupted" and first
    assert first[0] + 0.2 < trace.elapsed < first[0] + 5 and trace.throughput > 0, (first, trace.elapsed)


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_trace_round_trips_through_json(tmp_path):
    trace = plumbkit.trace(tf.data.Dataset.range(5000).map(medium).batch(10), seconds=1.5, converge=False)
    path = tmp_path / "t.json"
    trace.save(path)
    again = plumbkit.Trace.load(path)
    assert again.throughput == pytest.approx(trace.throughput)
    assert [o.label for o in again.ops] == [o.label for o in trace.ops]
    assert again.bottleneck.label == trace.bottleneck.label
    assert "<table>" in trace._repr_html_() and "bottleneck" in str(trace)
