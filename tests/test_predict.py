"""The before-the-fact model on hand-built pipelines with known answers (no TensorFlow)."""

from dataclasses import replace

import pytest

from plumbkit.model.pipeline import Operator, Pipeline
from plumbkit.model.plan import Change
from plumbkit.planning.lp import GIL, Demand
from plumbkit.planning.predict import (
    CONSUMER,
    Evidence,
    Layout,
    EpochRestarts,
    RuntimeCosts,
    best_allocation,
    layout_with,
    predict,
    restart_seconds,
    restarts_read_against_the_model,
)

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)


def chain(*ops: Operator) -> Pipeline:
    """A linear pipeline, root first; each operator reads the next one."""
    linked = [Operator(name=o.name, op=o.op, kind=o.kind, inputs=(ops[i + 1].name,) if i + 1 < len(ops) else (),
                       tunables=o.tunables, label=o.label or o.name) for i, o in enumerate(ops)]
    return Pipeline(operators={o.name: o for o in linked}, root=linked[0].name)


def evidence(p: Pipeline, cost: dict, visits: dict, cores: float = 2, **kw) -> Evidence:
    return Evidence(pipeline=p, cost=cost, visits=visits, cores=cores,
                    sequential=frozenset(o.name for o in p if not o.parallelizable), **kw)


# The tf.data paper's worked example (Figures 3-4): read 5 ms and map 2 ms per element, a batch of
# 10 costs 1 ms: 71 ms a batch sequentially; interleave 2, map 10 and a prefetch: 25 ms.
PAPER = chain(Operator("batch", "BatchDatasetV2", "batch"), Operator("map", "MapDataset", "map"),
              Operator("read", "InterleaveDataset", "interleave"), Operator("files", "TensorSliceDataset", "from_tensor_slices"))
PAPER_COST = {"batch": 0.001, "map": 10 * 0.002, "read": 10 * 0.005, "files": 0.0}
PAPER_V = {"batch": 1, "map": 10, "read": 10, "files": 0.1}


def test_paper_example_sequential_is_71_ms_a_batch():
    ev = evidence(PAPER, PAPER_COST, PAPER_V, cores=12)
    pred = predict(ev, Layout())
    assert 1 / pred.throughput == pytest.approx(0.071, rel=1e-6)
    assert pred.binding == "consumer thread"


def test_paper_example_parallel_and_prefetched_is_25_ms_a_batch():
    ev = evidence(PAPER, PAPER_COST, PAPER_V, cores=12)
    layout = Layout(threads={"read": 2, "map": 10}, prefetched=frozenset({"batch"}))
    pred = predict(ev, layout)
    assert 1 / pred.throughput == pytest.approx(0.025, rel=1e-6)
    assert pred.binding.startswith("read (2 threads)")
    # with two cores the CPU binds instead: 71 ms of work a batch on 2 cores
    assert predict(evidence(PAPER, PAPER_COST, PAPER_V, cores=2), layout).throughput == pytest.approx(2 / 0.071)


def test_a_thread_is_charged_the_time_it_is_busy_and_the_cores_the_cpu():
    """An operator whose kernels also run on other threads (a matmul's intra-op pool) keeps its
    own thread busy for less than its CPU: the thread's limit counts the wall time one call at a
    time took (``thread_cost``), the cores' limit still its CPU. Measured on the bench's skewed
    pipeline (sequential, on the consumer's thread): calibrated 225 µs of CPU and 187 of wall per
    element; predicted from the CPU 465/s where the trace ran 574, from the thread's time 545."""
    p = chain(Operator("batch", "BatchDatasetV2", "batch"), Operator("map", "MapDataset", "map"),
              Operator("src", "RangeDataset", "range"))
    cost, visits = {"batch": 0.0, "map": 0.008, "src": 0.0}, {"batch": 1, "map": 8, "src": 8}
    busy = predict(evidence(p, cost, visits, cores=2, thread_cost={"map": 0.005}), Layout())
    assert busy.binding == "consumer thread"
    assert busy.throughput == pytest.approx(1 / 0.005)
    assert busy.cpu_per_batch == pytest.approx(0.008)  # the cores are charged the CPU
    assert busy.limits["CPU (2 cores)"] == pytest.approx(2 / 0.008)
    # the negative control: without the thread's own time, its limit is the CPU's, 37% lower
    plain = predict(evidence(p, cost, visits, cores=2), Layout())
    assert plain.throughput == pytest.approx(1 / 0.008)
    # on one core the cores bind, whatever the thread's time
    assert predict(evidence(p, cost, visits, cores=1, thread_cost={"map": 0.005}), Layout()).throughput == \
        pytest.approx(1 / 0.008)


def test_below_a_cache_costs_nothing_and_the_read_and_consumer_remain():
    rt = RuntimeCosts(consumer=500.0, handoff=0.0, cache_read=1e-5)
    ev = evidence(PAPER, PAPER_COST, PAPER_V, cores=2, runtime=rt)
    cached = layout_with(ev, [Change("cache", "map", "map", "", ""), Change("prefetch", "batch", "batch", 4, "")])
    pred = predict(ev, cached)
    assert pred.free == {"map", "read", "files"}
    # the prefetch thread runs the batch (1 ms) and reads 10 elements from the cache
    assert pred.limits["prefetch thread above batch"] == pytest.approx(1 / (0.001 + 10 * 1e-5))
    assert pred.throughput == pytest.approx(500.0)  # the consumer's ceiling binds
    assert pred.binding == "consumer thread"


def test_the_users_own_cache_frees_what_is_below_it():
    p = chain(Operator("batch", "BatchDatasetV2", "batch"), Operator("cache", "CacheDatasetV2", "cache"),
              Operator("map", "MapDataset", "map"), Operator("src", "RangeDataset", "range"))
    ev = evidence(p, {"batch": 0.002, "cache": 0.5, "map": 1.0, "src": 0.0}, {"batch": 1, "cache": 8, "map": 8, "src": 8},
                  runtime=RuntimeCosts(cache_read=1e-4))
    pred = predict(ev, Layout())
    assert {"map", "src"} <= pred.free and "cache" not in pred.free
    assert pred.throughput == pytest.approx(1 / (0.002 + 8 * 1e-4))


def test_the_allocation_charges_the_consumer_as_a_sequential_operator():
    p = chain(Operator("map", "MapDataset", "map"), Operator("src", "RangeDataset", "range"))
    ev = evidence(p, {"map": 1 / 50.0, "src": 0.0}, {"map": 1, "src": 1}, runtime=RuntimeCosts(consumer=100.0))
    lp = best_allocation(ev, Layout())
    # theta_consumer = X/100, theta_map = X/50, sum <= 2 cores
    assert lp.throughput == pytest.approx(2 / (1 / 100 + 1 / 50), rel=1e-4)
    assert lp.theta[CONSUMER] <= 1 + 1e-6


def test_handoffs_are_charged_once():
    """A trace's costs already hold the hand-offs of the operators that ran in parallel when it was
    traced (its self times are scaled to the process CPU): only new thread boundaries are charged.
    Calibrated costs are the operators' own: every boundary is charged."""
    p = chain(Operator("batch", "BatchDatasetV2", "batch"), Operator("a", "MapDataset", "map"),
              Operator("b", "MapDataset", "map"), Operator("src", "RangeDataset", "range"))
    cost, visits = {"batch": 0.0, "a": 0.01, "b": 0.01, "src": 0.0}, {"batch": 1, "a": 10, "b": 10, "src": 10}
    rt = RuntimeCosts(handoff=1e-4)
    traced = Evidence(pipeline=p, cost=cost, visits=visits, cores=4, sequential=frozenset({"src"}), runtime=rt,
                      threads_seen={"a": 2})
    both = Layout(threads={"a": 2, "b": 2})
    assert predict(traced, both).cpu_per_batch == pytest.approx(0.02 + 10 * 1e-4)  # only b is new
    calibrated = Evidence(pipeline=p, cost=cost, visits=visits, cores=4, sequential=frozenset({"src"}), runtime=rt,
                          threads_seen={"a": 2}, cost_source="calibrated")
    assert predict(calibrated, both).cpu_per_batch == pytest.approx(0.02 + 20 * 1e-4)
    assert predict(traced, Layout()).cpu_per_batch == pytest.approx(0.02 - 10 * 1e-4)  # a's pool is gone


def test_an_operator_run_one_call_at_a_time_is_priced_in_a_plan_at_its_cost_with_calls_in_flight():
    """Calibrated with calls in flight (its CPU per element falls with concurrency), that figure
    prices the operator where a layout runs it with more than one thread, and only there."""
    rt = RuntimeCosts(handoff=1e-4)
    ev = evidence(PAPER, PAPER_COST, PAPER_V, cores=2, parallel_cost={"map": 10 * 0.0016}, runtime=rt,
                  cost_source="calibrated")
    one = predict(ev, Layout(threads={"map": 1}))
    two = predict(ev, Layout(threads={"map": 2}))
    assert one.cpu_per_batch == pytest.approx(0.071 + 10 * 1e-4)  # one thread: its pool's hand-offs on top
    # measured in its parallel form, its hand-offs are in the figure: not charged twice
    assert two.cpu_per_batch == pytest.approx(0.071 - 10 * 0.0004)
    assert two.limits["map (2 threads)"] == pytest.approx(2 / 0.016)
    assert predict(ev, Layout()).cpu_per_batch == pytest.approx(0.071)  # its plain form


def test_one_call_at_a_time_is_a_plain_form_or_a_map_and_batch_with_one_call():
    from plumbkit.planning.predict import ran_one_call_at_a_time
    assert ran_one_call_at_a_time("MapDataset", "MapDataset", None)
    assert ran_one_call_at_a_time("MapAndBatch", "MapDataset", 1)  # tf.data fused a sequential map
    assert not ran_one_call_at_a_time("MapAndBatch", "MapDataset", 3)
    assert not ran_one_call_at_a_time("ParallelMapV2", "MapDataset", 2)
    assert not ran_one_call_at_a_time("ParallelMapV2", "ParallelMapDatasetV2", 1)  # its pool overlaps it


def test_a_cached_pipeline_pulled_directly_can_beat_one_behind_a_prefetch():
    """A prefetch wakes its thread on every element the consumer takes: behind a cache of small
    minibatches the consumer pulls faster by itself, and the model sees it from the two measured
    ceilings. An injected prefetch (tf.data's, under autotuning) is there either way."""
    p = chain(Operator("repeat", "RepeatDataset", "repeat"), Operator("batch", "BatchDatasetV2", "batch"),
              Operator("map", "MapDataset", "map"), Operator("src", "RangeDataset", "range"))
    cost, visits = {"repeat": 1e-7, "batch": 1e-4, "map": 1e-2, "src": 0.0}, {"repeat": 1, "batch": 1, "map": 8, "src": 8}
    rt = RuntimeCosts(consumer=18_000.0, consumer_plain=34_000.0, cache_read=2e-6)
    ev = evidence(p, cost, visits, runtime=rt)
    cache = Change("cache", "batch", "batch", "", "")
    plain = predict(ev, layout_with(ev, [cache]))
    prefetched = predict(ev, layout_with(ev, [cache, Change("prefetch", "repeat", "repeat", 2, "")]))
    assert plain.binding == prefetched.binding == "consumer thread"
    # its ceiling's cache read is the one charged, and its repeat the ceiling's (the trace's 0.1 µs not again)
    assert 1 / plain.throughput == pytest.approx(1 / 34_000)
    assert prefetched.throughput == pytest.approx(18_000.0)
    injected = evidence(p, cost, visits, runtime=rt, injected_prefetch=True)
    assert predict(injected, layout_with(injected, [cache])).throughput == pytest.approx(18_000.0)
    assert best_allocation(ev, Layout(cached=frozenset({"batch"}))).throughput <= 34_000.0 * (1 + 1e-6)


def test_a_repeat_above_a_cache_is_the_one_the_consumers_ceiling_holds():
    """The consumer's ceiling is measured on ``take(1).cache().repeat()``: one repeat passing one
    element per minibatch is in it. Behind a cache of small minibatches the trace gave the repeat
    4 µs a minibatch (the tracer's bookkeeping) beside a 49 µs pull, and charging it again
    predicted the plan 8-10% below the ceiling it measured at (CI: 0.89 predicted, 1.12 measured)."""
    p = chain(Operator("repeat", "RepeatDataset", "repeat"), Operator("batch", "BatchDatasetV2", "batch"),
              Operator("map", "MapDataset", "map"), Operator("src", "RangeDataset", "range"))
    cost, visits = {"repeat": 4e-6, "batch": 1e-4, "map": 1e-2, "src": 0.0}, {"repeat": 1, "batch": 1, "map": 8, "src": 8}
    rt = RuntimeCosts(consumer=14_000.0, consumer_plain=20_000.0, cache_read=0.4e-6)
    cached = [Change("cache", "batch", "batch", "", "")]
    ev = evidence(p, cost, visits, runtime=rt)
    assert predict(ev, layout_with(ev, cached)).throughput == pytest.approx(20_000.0)
    allocation = best_allocation(ev, Layout(cached=frozenset({"batch"})))
    assert CONSUMER in allocation.theta and "repeat" not in allocation.theta
    # the negative controls: with no ceiling measured the trace's figure is all there is, and a
    # repeat below the batch (eight elements a minibatch) is not the ceiling's one
    unmeasured = evidence(p, cost, visits, runtime=RuntimeCosts(cache_read=0.4e-6))
    assert 1 / predict(unmeasured, layout_with(unmeasured, cached)).throughput == pytest.approx(4e-6 + 0.4e-6)
    counted = evidence(p, cost, {**visits, "repeat": 1.0003}, runtime=rt)  # one a minibatch, counted under a prefetch
    assert predict(counted, layout_with(counted, cached)).throughput == pytest.approx(20_000.0)
    below = evidence(p, cost, {**visits, "repeat": 8}, runtime=rt)
    assert 1 / predict(below, layout_with(below, cached)).throughput == pytest.approx(1 / 20_000 + 4e-6)


# A fetch that waits 8 ms per element for 0.2 ms of CPU (a remote read), under a cheap batch of 8.
FETCH = chain(Operator("batch", "BatchDatasetV2", "batch"), Operator("fetch", "MapDataset", "map"),
              Operator("src", "RangeDataset", "range"))
FETCH_V = {"batch": 1, "fetch": 8, "src": 8}
FETCH_COST = {"batch": 1e-4, "fetch": 8 * 2e-4, "src": 0.0}
FETCH_DEMANDS = (Demand("fetch", cpu=8 * 2e-4, latency=8 * 8e-3, max_threads=64.0),
                 Demand("batch", cpu=1e-4, max_threads=1.0))


def test_where_the_cpu_model_and_the_waiting_model_disagree_the_lower_limit_is_the_prediction():
    """The CPU model sees 1.7 ms of CPU a minibatch (a fetch with 4 threads on 2 cores: 1,250/s);
    waiting 64 ms a minibatch with 4 calls in flight allows 62.5/s (Little's law). The prediction is
    the smaller, and the binding shown is the limit that set it."""
    ev = evidence(FETCH, FETCH_COST, FETCH_V, demands=FETCH_DEMANDS)
    pred = predict(ev, Layout(threads={"fetch": 4}))
    assert pred.throughput == pytest.approx(4 / (8 * 8e-3), rel=1e-3)
    assert pred.binding == "fetch (4 calls in flight)"
    assert pred.limits[pred.binding] == pred.throughput == min(pred.limits.values())
    cpu_model = pred.limits["fetch (4 threads)"]  # four threads on two cores: 2 / 1.6 ms
    assert cpu_model == pytest.approx(2 / 0.0016) and cpu_model > pred.throughput
    # more calls in flight lift the waiting limit: 32 calls, 500/s
    assert predict(ev, Layout(threads={"fetch": 32})).throughput == pytest.approx(500.0, rel=1e-3)


def test_nothing_waits_no_waiting_limit():
    ev = evidence(FETCH, FETCH_COST, FETCH_V, demands=(Demand("fetch", cpu=8 * 2e-4, max_threads=64.0),))
    pred = predict(ev, Layout(threads={"fetch": 4}))
    assert not any("in flight" in name for name in pred.limits)


def test_python_shares_one_core_in_the_prediction():
    """Two threads of a map holding the GIL for its whole 1 ms a minibatch: the CPU model allows
    2,000/s on 2 cores; one core for all Python allows 1,000/s, and that binds."""
    p = chain(Operator("batch", "BatchDatasetV2", "batch"), Operator("py", "MapDataset", "map"),
              Operator("src", "RangeDataset", "range"))
    ev = evidence(p, {"batch": 0.0, "py": 1e-3, "src": 0.0}, {"batch": 1, "py": 1, "src": 1},
                  demands=(Demand("py", cpu=1e-3, gil=True, max_threads=64.0),))
    pred = predict(ev, Layout(threads={"py": 2}))
    assert pred.binding == GIL and pred.throughput == pytest.approx(1000.0, rel=1e-3)


def test_the_cpu_limit_counts_the_cores_its_pools_leave_idle_per_element():
    """A CPU-bound plan does not keep every core busy: each element through a parallel pool leaves
    ``pool_idle`` core-seconds idle (measured, ``runtime_costs.pool_idle_per_element``). The CPU
    limit is the cores over CPU plus that idle time, counted once per element of the busiest
    pool (not once per pool), and a pipeline with no pool pays none."""
    idle = 20e-6
    ev = evidence(PAPER, PAPER_COST, PAPER_V, cores=2, runtime=RuntimeCosts(pool_idle=idle))
    pooled = predict(ev, Layout(threads={"read": 2, "map": 10}, prefetched=frozenset({"batch"})))
    assert pooled.idle_per_batch == pytest.approx(10 * idle)  # map and read both see 10 per minibatch
    assert pooled.cpu_per_batch == pytest.approx(0.071)  # the CPU itself is unchanged
    assert pooled.throughput == pytest.approx(2 / (0.071 + 10 * idle)) and pooled.binding == "CPU (2 cores)"
    without = predict(evidence(PAPER, PAPER_COST, PAPER_V, cores=2),
                      Layout(threads={"read": 2, "map": 10}, prefetched=frozenset({"batch"})))
    assert without.throughput == pytest.approx(2 / 0.071) and without.idle_per_batch == 0.0
    sequential = predict(ev, Layout())
    assert sequential.idle_per_batch == 0.0 and 1 / sequential.throughput == pytest.approx(0.071)


def test_a_pool_whose_own_idle_was_read_is_charged_its_own_not_the_probes():
    """Where the parallel calibration read the busiest pool's own idle time (its function, its
    calls in flight), that replaces the probe's planted-work figure; a pool that is not the
    busiest is not what the idle is charged on, so its own reading changes nothing."""
    probe, own = 20e-6, 8e-6
    layout = Layout(threads={"read": 2, "map": 10}, prefetched=frozenset({"batch"}))
    mine = predict(evidence(PAPER, PAPER_COST, PAPER_V, cores=2,
                            runtime=RuntimeCosts(pool_idle=probe, own_pool_idle={"map": own})), layout)
    assert mine.idle_per_batch == pytest.approx(10 * own)
    assert mine.throughput == pytest.approx(2 / (0.071 + 10 * own))
    elsewhere = predict(evidence(PAPER, PAPER_COST, PAPER_V, cores=2,
                                 runtime=RuntimeCosts(pool_idle=probe, own_pool_idle={"batch": own})), layout)
    assert elsewhere.idle_per_batch == pytest.approx(10 * probe)  # batch has no pool in this layout
    assert RuntimeCosts(pool_idle=probe, own_pool_idle={"a": own, "b": 3 * own}).idle_per_element(["a", "b"]) == 3 * own


def _short_epoch(buffer: int | None) -> tuple[Evidence, EpochRestarts]:
    """48 minibatches of 8 an epoch, two 4 ms maps (a shuffle of ``buffer`` between them), on 2
    cores: a steady 250/s; the epoch measured 0.3 s, the start-up beyond its mid-epoch rate 2 ms."""
    shuffle = [Operator("shuffle", "ShuffleDatasetV3", "shuffle", tunables={"buffer_size": buffer})] if buffer else []
    p = chain(Operator("batch", "BatchDatasetV2", "batch"), Operator("up", "ParallelMapDatasetV2", "map"), *shuffle,
              Operator("low", "ParallelMapDatasetV2", "map"), Operator("src", "RangeDataset", "range"))
    restarts = EpochRestarts(minibatches=48, startup=0.002, below="batch", epoch=0.3)
    cost = {"batch": 0.0, "up": 0.004, "shuffle": 0.0, "low": 0.004, "src": 0.0}
    visits = {"batch": 1, "up": 8, "shuffle": 8, "low": 8, "src": 8}
    ev = evidence(p, cost, visits, threads_seen={"up": 2, "low": 2}, runtime=RuntimeCosts(restarts=restarts))
    return restarts_read_against_the_model(ev), restarts


def test_a_restart_is_read_against_the_model_only_where_a_shuffle_buffer_spans_the_mid_epoch():
    """Where a shuffle buffer holds a fifth of its epoch or more, the mid-epoch rate the start-up
    was measured against is one side of it alone: the restart is the measured epoch less the
    model's steady one. Elsewhere the measured start-up stands, and the model's own error on the
    epoch is not charged to every restart (speech, session 53: 2.5 ms measured, 22.9 read)."""
    whole_epoch, restarts = _short_epoch(384)
    steady = predict(replace(whole_epoch, restart_as_traced=0.0), Layout(threads={"up": 2, "low": 2})).throughput
    assert steady == pytest.approx(250)
    assert whole_epoch.restart_as_traced == pytest.approx(0.3 - 48 / steady)  # 0.108 s, not 0.002
    assert restart_seconds(whole_epoch, Layout(), ()) == pytest.approx(0.108)
    for ev, _ in (_short_epoch(8), _short_epoch(None)):  # a short buffer, no shuffle: as measured
        assert ev.restart_as_traced is None
        assert restart_seconds(ev, Layout(), ()) == pytest.approx(restarts.startup)
    fifth, _ = _short_epoch(77)  # 77 of 384: the buffer still fills at the window's start
    assert fifth.restart_as_traced is not None
