"""The optimizer on planted pipelines: LP allocation, prediction vs measurement, cache rules,
baselines, stepping. Real TensorFlow, measured in this process."""

import dataclasses
import math
import statistics
from typing import Callable

import numpy as np
import pytest
import tensorflow as tf

import plumbkit
from plumbkit.bench.examples import planted_work
from plumbkit.engine.compare import Protocol
from plumbkit.tfdata.options import sequential_options
from plumbkit.tfdata.run import Runner
from plumbkit.tfdata.runtime_costs import consumer_ceiling
from plumbkit.tfdata.graph import pipeline_of
from plumbkit.tfdata.rebuild import apply_changes
from plumbkit.planning.decisions import decide
from plumbkit.tunables import PREFETCH_LOSS

#: A short protocol for tests: 3 interleaved rounds of 0.3 s windows.
#: The notebooks' protocol (QUICK) on shorter fills: three rounds, more added only while a
#: speed-up is too noisy to tell (one disturbed round of three read 0.98x on CI beside 1.9x)
TEST_PROTOCOL = Protocol(rounds=3, window=0.3, max_windows=4, fill_limit=20, extra_rounds=5)

#: The two-map plan's comparison: five rounds of 0.5 s windows, its CPU per minibatch read
#: against yours at 0.84-0.92 over six plans where three of 0.3 s read 0.71-1.23 over eight
#: (the cores' speed steps for seconds at a time; see the prediction test below)
TWO_MAP_PROTOCOL = dataclasses.replace(TEST_PROTOCOL, rounds=5, window=0.5)

from conftest import (BRIEF, cpu_meter, heavy, interleaved_throughput, measured_against_the_clock,
                      medium, with_neighbour_cores)

#: For tests of what a plan yields and holds, not its speed: two rounds of 0.1 s windows, with
#: TEST_PROTOCOL's time for the cache's fill (the plan's cache is decided and filled as under it).
YIELDS_PROTOCOL = dataclasses.replace(BRIEF, fill_limit=TEST_PROTOCOL.fill_limit)


def planted(extra=None):
    ds = tf.data.Dataset.range(10**9).map(heavy).map(medium)
    if extra:
        ds = extra(ds)
    return ds.batch(16).with_options(sequential_options())


def heavier(x):
    """Planted operator: 288 matmul units, 3.2-3.8x medium's CPU (750-800 µs against 200-230):
    far enough from medium that an allocator splitting the cores equally cannot pass."""
    return planted_work(x, 288)


def allocation_follows(ratio: float, truths: list[float], tolerance: float = 0.25) -> bool:
    """The LP's cores for one map over another within ``tolerance`` (either way) of the two
    maps' true CPU-cost ratio, the median of ``truths`` (measured around the plan: it drifts)."""
    truth = statistics.median(truths)
    return 1 / (1 + tolerance) <= ratio / truth <= 1 + tolerance


def two_maps() -> tf.data.Dataset:
    """Two planted maps written sequentially, ``heavier`` 3.2-3.8x ``medium``'s CPU."""
    return tf.data.Dataset.range(10**9).map(heavier).map(medium).batch(16).with_options(sequential_options())


def heavier_over_medium() -> Callable[[], float]:
    """The truth, read on each call: each map's CPU alone, in the form the plan runs it (two calls
    in flight). Built once (:func:`conftest.cpu_meter`), read before and after the plan."""
    meters = {fn: cpu_meter(fn, sequential_options(), parallel_calls=2) for fn in (heavier, medium)}
    return lambda: meters[heavier]() / meters[medium]()


@pytest.fixture(scope="module")
def _two_map_plans() -> dict:
    return {}


@pytest.fixture
def two_map_plan(request, _two_map_plans) -> tuple:
    """One optimize of :func:`two_maps` read by several tests (~15 s each time), with the truth
    measured just before and just after it (it drifts: 3.2-3.8 over four measurements). A rerun
    (``measured_against_the_clock``) optimizes afresh, so its figures are measured again."""
    if getattr(request.node, "execution_count", 1) > 1 or not _two_map_plans:
        truth = heavier_over_medium()
        truths = [truth()]
        plan = plumbkit.optimize(two_maps, seconds=3, memory_budget=0, compare=False, protocol=TWO_MAP_PROTOCOL)
        truths.append(truth())
        _two_map_plans.update(plan=plan, truths=truths)
    return _two_map_plans["plan"], _two_map_plans["truths"]


@measured_against_the_clock
def test_lp_allocation_follows_the_planted_costs_and_the_plan_is_faster(two_map_plan):
    """The truth is each map's CPU alone, in the form the plan runs it (two calls in flight),
    measured before and after the plan (3.2-3.8 over four measurements); an equal split of the
    cores, the wrong answer, fails the same check.

    Measured against the clock: the LP's costs are read during the trace, the truth seconds
    before and after it, and a core's speed steps for seconds at a time on this host. One CI run
    in three (session 58) read the LP at 4.56x where the truth read 3.23 and 3.72 (1.31 of their
    median, 1.25 allowed); the two runs beside it passed. A rerun optimizes afresh."""
    plan, truths = two_map_plan
    # the LP on the user's pipeline gives cores in proportion to cost
    theta = decide(plan.trace, memory_budget=0).theta_by_label
    ratio = theta["map(heavier)"] / theta["map(medium)"]
    assert not allocation_follows(1.0, truths), truths  # negative control: the cores split equally
    assert theta["map(heavier)"] + theta["map(medium)"] == pytest.approx(2.0, rel=0.1)
    assert plan.cache.label is None and "0 B budget" in plan.cache.why
    # the allocation shown is over the user's operators; the LP's pseudo-operators are listed apart
    assert set(plan.theta_by_label) <= {o.label for o in plan.trace.ops}
    assert plan.charged and all(k.startswith("(") for k in plan.charged)
    # outside widgets the plan renders as text and as a static HTML table, every figure labelled
    text = str(plan)
    assert "map(heavier)" in text and "predicted before any rewrite" in text
    assert "plumbkit-plan" in plan._repr_html_() and "map(heavier)" in plan._repr_html_()
    # On CI's Intel machine (cheap matmuls: a map's own ~45 us per element weighs more there) the
    # LP gave heavier 2.95-3.23x medium's cores where their truth read 4.0-4.9x (two runs of
    # three): the calibration reads heavier cheaper relative to medium. A known defect (issue 25,
    # open), an expected failure only in that direction and only so far; an equal split still fails.
    share = ratio / statistics.median(truths)
    if not allocation_follows(ratio, truths) and 0.55 <= share < 1 / 1.25:
        pytest.xfail(f"known defect (issue 25, open): the LP's cores for map(heavier) over map(medium) read "
                     f"{ratio:.2f}x where their CPU truth is {truths}: {share:.2f} of it")
    assert allocation_follows(ratio, truths), (ratio, truths)
    # faster needs the two cores: beside a busy neighbour the plan's threads share them
    neighbour = plan.comparison["plumbkit"].neighbour_cores or 0
    if neighbour >= 0.2:
        pytest.skip(f"speed-up not checked: measured beside {neighbour:.1f} busy neighbour cores "
                    f"({plan.speedup}); the allocation and every other check passed")
    # rounds that disagree (one disturbed round of 70 against 170 for the rest, up to the cap of
    # added rounds, in one CI run) leave it "too noisy to tell": then the user's pipeline comes
    # back untouched, and the speed-up is the bench's to show (planted, measured side by side)
    if plan.speedup.noisy:
        forms = [[(o.kind, o.parallelism) for o in pipeline_of(ds)] for ds in (plan.dataset, two_maps())]
        assert not plan.applied and not plan.changes and forms[0] == forms[1], (forms, str(plan))
        pytest.skip(f"speed-up not checked: {plan.speedup.verdict}; yours was handed back, as it must be")
    # measured alike (interleaved rounds): the plan is measurably faster and is handed back
    assert plan.applied and plan.speedup.faster and plan.changes == plan.proposed_changes, str(plan)
    # the speed-up the plan reports: the median of the rounds' paired ratios. On CI's Intel machine
    # it read 2.05x in one run (the medians of the rounds, 90.0 against 61.4: 1.47x, as yours'
    # rounds spread while the machine moved 25%) and 1.39x in the next (ratios 2.23, 1.30, 1.39;
    # medians 87.7 against 57.6), where the LP's known defect above gives map(heavier) too few
    # cores. At least 1.3x: two maps given the two cores, against yours running them on one.
    assert plan.speedup.ratio > 1.3, str(plan)


@measured_against_the_clock
def test_the_plans_cpu_per_minibatch_predicted_before_the_fact_follows_yours_measured_beside_it(two_map_plan):
    """The plan's CPU per minibatch, predicted from the trace, over yours as the trace read it,
    against the same ratio measured: the plan and yours in interleaved rounds. Both maps are
    calibrated also with calls in flight and priced so in the plan that parallelizes them.

    Why a ratio to yours and not the plan's own figure (the check before, one CI attempt in two
    failing): this host's cores step in speed for seconds at a time (a fixed matmul loop pinned
    to each core read 2.8 and 4.8-5.0 µs per call by turns, the two cores apart), and the trace
    reads your pipeline with tf.data's runtime model on (``observable``; 3-18% more CPU per
    minibatch than as you wrote it, interleaved). Both move the plan's figure and yours alike,
    and cancel in the ratio; what is left is the model's. The throughput's prediction error is
    the bench's to report, over its pipelines and both halves (``plumbkit bench``).
    Read from the LP test's plan (the same settings: one optimize instead of two)."""
    plan, _ = two_map_plan
    heavier_op = plan.trace.op("map(heavier)")
    calls = next(int(c.value) for c in plan.proposed_changes if c.what == "parallelism" and c.node == heavier_op.name)
    # measured with the calls the plan gives it, at least one per core; shown, labelled
    assert heavier_op.parallel_calls == max(calls, plan.trace.analysis.cores) and "(p)" in str(plan.trace)
    traced_yours = plan.trace.analysis.cpu_per_batch
    measured_plan, measured_yours = (plan.comparison[name].cpu_per_batch_median for name in ("plumbkit", "yours"))
    predicted, measured = plan.prediction.cpu_per_batch / traced_yours, measured_plan / measured_yours
    why = (f"plan over yours, CPU per minibatch: predicted {predicted:.2f} ({plan.prediction.cpu_per_batch * 1e3:.2f} "
           f"over {traced_yours * 1e3:.2f} ms traced), measured {measured:.2f} ({measured_plan * 1e3:.2f} over "
           f"{measured_yours * 1e3:.2f} ms)\n{plan}\n{plan.trace}")
    assert predicted == pytest.approx(measured, rel=0.25), why
    # the wrong answer fails it: the plan priced with each map at its cost per call, not per
    # element (the parallel form's three calls charged three times)
    assert not (3 * predicted == pytest.approx(measured, rel=0.25)), why


def test_a_cache_of_small_minibatches_gets_a_prefetch_only_where_the_consumer_gains_from_it():
    """Behind a cache of small minibatches the consumer's loop binds, and a prefetch can cost it a
    wake-up of the prefetch thread per minibatch: on one machine 33-35k/s pulled directly against
    16-19k/s through a prefetch, on a slower one 6.9k/s against 6.6k/s. plumbkit measures both
    ceilings on the machine it runs on: where pulling directly is clearly faster the plan adds no
    prefetch and says why; where it is not, the prefetch stays; either way the prediction holds.

    The prediction is checked at one moment, not a moment apart: the consumer loop's speed on CI's
    VM swings 0.4-1.6x between consecutive 0.3 s windows (session 48, here: three plans read 38%,
    45% and 62% off their measurement a few seconds after their ceiling was measured, with yours'
    CPU per minibatch steady; three more read 10-16%). What the model claims is the plan's
    throughput relative to the consumer's ceiling it was made from; the ceiling and the plan are
    measured in interleaved rounds, and the median of their paired ratios is checked (the same
    three plans: 4%, 14% and 6% off). The before-the-fact error is the bench's cached rows'.

    The model once read 16-18% low here on every run (CI: 0.89 of the ceiling predicted, 1.12
    measured): the repeat above the cache was charged its traced 4 µs a minibatch over the
    ceiling's own repeat, and the ceiling's repeat restarted on every pull. Now 2-3% off."""
    def make():
        return tf.data.Dataset.range(1000).map(medium).batch(8).repeat().with_options(sequential_options())

    plan = plumbkit.optimize(make, seconds=2, compare=False, protocol=TEST_PROTOCOL)
    gain = plan.runtime.consumer_plain / plan.runtime.consumer  # measured: direct over through a prefetch
    # the map below the cache may get threads that fill it (the first epoch): not what this is about
    whats = [c.what for c in plan.proposed_changes if not (c.what == "parallelism" and c.where in plan.free)]
    said = any(n.startswith("no prefetch at the top") for n in plan.notes)
    # the decision's own ratio also charges the consumer's thread a cache read per minibatch without
    # the prefetch (1-2 us beside ~20 us a pull): up to ~8% below the ceilings' ratio, so the band
    # where either is right reaches 15% above the threshold (CI read 1.198 and 1.197 there, and the
    # plan kept its prefetch, predicted less than 10% slower)
    if gain > PREFETCH_LOSS * 1.15:
        assert whats == ["cache"] and said, (gain, plan.proposed_changes, plan.notes)
    elif gain < PREFETCH_LOSS * 0.95:
        assert whats == ["cache", "prefetch"] and not said, (gain, plan.proposed_changes, plan.notes)
    else:  # at the threshold either is right, but the note says what was done
        assert said == ("prefetch" not in whats), (gain, plan.proposed_changes, plan.notes)
    assert plan.prediction.binding == "consumer thread"
    neighbour = plan.comparison["plumbkit"].neighbour_cores or 0
    if neighbour >= 0.2:  # the consumer's ceiling needs its core: beside busy neighbours, say so
        pytest.skip(f"throughput not checked: measured beside {neighbour:.1f} busy neighbour cores; "
                    f"the prefetch decision and the binding limit were checked")
    prefetched = "prefetch" in whats
    ceiling = plan.runtime.consumer if prefetched else plan.runtime.consumer_plain
    predicted = plan.prediction.throughput / ceiling
    ratios = []
    for _ in range(7):
        now = consumer_ceiling(make(), window=0.2, prefetched=prefetched)
        runner = Runner(plan.dataset)  # timed as the comparison and the ceiling are: a plain next() loop
        runner.consume(50, limit=30.0)
        ratios.append(statistics.median(runner.window(0.2) for _ in range(3)) / now)
        runner.close()
    measured = statistics.median(ratios)
    assert measured == pytest.approx(predicted, rel=0.25), (predicted, ratios, str(plan))
    # negative control: the same model on the layout without the plan's cache (the map then binds,
    # ~1/40 of the ceiling) fails the same check. The pipeline's own CPU limit would be the subtler
    # wrong answer, but it reads 1.1-1.7x the ceiling here, too close to tell apart on every run.
    uncached = plan.predictions["yours"] / ceiling
    assert uncached != pytest.approx(measured, rel=0.25), (uncached, ratios)


def test_a_batch_you_wrote_sequential_stays_so_unless_its_thread_would_bind(two_map_plan):
    """A parallel batch costs more than the hand-off the model charges it (measured on two bench
    plans: speech 1,144-1,233 minibatches/s with it, 1,379-1,414 without), so the hedge's two
    threads are not given to a cheap batch; a batch that copies megabytes per element keeps them,
    because run sequentially its thread would bind (measured on the one below: 67-68
    minibatches/s sequential, 100-104 with three threads). The cheap batch is the LP test's."""
    cheap = decide(two_map_plan[0].trace, memory_budget=0)
    assert not any(c.what == "parallelism" and c.where == "batch(16)" for c in cheap.changes), cheap.changes
    assert {c.where for c in cheap.changes if c.what == "parallelism"} == {"map(heavier)", "map(medium)"}
    # Said where the batch was a candidate; a batch whose trace read no cost of its own is not one
    # (the plan keeps the form of what costs nothing) and keeps its form without a note: so in one
    # CI run.
    batch16 = two_map_plan[0].trace.op("batch(16)")
    if batch16.rate_per_core is not None and math.isfinite(batch16.rate_per_core):
        assert any(n.startswith("batch(16) keeps the form you wrote") for n in cheap.notes), cheap.notes

    copies = tf.data.Dataset.from_tensors(tf.zeros([256, 1024])).repeat().batch(32).with_options(sequential_options())
    costly = decide(plumbkit.trace(copies, seconds=2, converge=False), memory_budget=0)
    batch = [c for c in costly.changes if c.what == "parallelism" and c.where == "batch(32)"]
    assert batch and batch[0].value >= 2, costly.changes
    assert not any("keeps the form you wrote" in n for n in costly.notes)
    assert costly.prediction.limits["batch(32) (%d threads)" % batch[0].value] < 2 * costly.prediction.throughput


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_cache_goes_below_random_and_infinite_operators_and_fits_the_budget():
    def decode(x):
        return tf.cast(tf.fill([16, 16, 3], x % 200), tf.uint8)

    def flip(img):
        return tf.image.random_flip_left_right(img)

    ds = tf.data.Dataset.range(4000).map(decode).map(flip).batch(8).repeat()
    # where the cache goes and what it holds come from the graph (random, infinite) and the
    # elements seen (sizes): a short trace, not calibrated, decides as a 3 s calibrated one (~5 s)
    trace = plumbkit.trace(ds, seconds=1.5, converge=False, calibrate=False)
    d = decide(trace, memory_budget=10**9)
    assert d.cache.label == "map(decode)", d.cache
    true_bytes = 4000 * 16 * 16 * 3
    assert d.cache.bytes == pytest.approx(true_bytes, rel=0.05)
    # a budget below the decoded size caches nothing: the source would fit (8 bytes a row), but
    # its rows are in memory already, and a copy read back gains nothing
    small = decide(trace, memory_budget=true_bytes // 2)
    assert small.cache.label is None and "nothing fits" in small.cache.why and "map(decode)" in small.cache.why, small.cache
    none = decide(trace, memory_budget=1000)
    assert none.cache.label is None and "budget" in none.cache.why


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_optimized_pipeline_yields_the_same_elements_and_its_cache_holds_what_was_predicted():
    def decode(x):
        return tf.cast(tf.fill([8, 8, 3], x % 97), tf.uint8) + tf.cast(tf.range(3) % 2, tf.uint8)

    def expensive(x):
        m = tf.cast(x, tf.float32)
        for _ in range(20):
            m = tf.sqrt(m * m + 1.0)
        return m

    def make():
        return (tf.data.Dataset.range(3000).map(decode).map(lambda img: (img, expensive(tf.reduce_sum(tf.cast(img, tf.int32)))))
                .batch(10))

    # what the plan yields and holds, not its speed: a brief comparison; 1 s traces (every element
    # the same size, 3,000 of them: the cache's size does not depend on how long it was traced)
    plan = plumbkit.optimize(make, seconds=1, memory_budget=50 * 2**20, compare=False, protocol=YIELDS_PROTOCOL,
                             rounds=2)
    # a second round traces the rewritten pipeline and lets its LP move threads; the plan still
    # shows one predicted figure, the final layout's, beside the limit that binds it
    assert plan.final_trace is not None
    text = str(plan)
    assert f"{plan.predicted_throughput:,.1f} minibatches/s, bound by {plan.prediction.binding}" in text
    assert plan.prediction.limits[plan.prediction.binding] == plan.predicted_throughput
    assert "refined" not in text and "LP bound" not in text
    original = list(make().as_numpy_iterator())
    rewritten = list(apply_changes(make(), plan.proposed_changes).as_numpy_iterator())
    assert len(original) == len(rewritten)
    for a, b in zip(original, rewritten):
        for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            np.testing.assert_array_equal(u, v)
    assert plan.cache.label is not None and plan.cache.bytes <= plan.cache.budget
    cached = next(o for o in plan.trace.ops if o.label == plan.cache.label)
    real = sum(sum(np.asarray(t).nbytes for t in tf.nest.flatten(e))
               for e in _sub_pipeline_elements(make(), cached.name))
    assert plan.cache.bytes == pytest.approx(real, rel=0.05)


def _sub_pipeline_elements(ds, node):
    from plumbkit.tfdata.graph import dataset_at, serialized_graph
    graph_def, _ = serialized_graph(ds)
    return list(dataset_at(graph_def, node).as_numpy_iterator())


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_baselines_are_what_they_say():
    ds = tf.data.Dataset.range(10**6).map(medium).prefetch(3).map(lambda x: x + 1).batch(8)
    naive = pipeline_of(plumbkit.baselines.naive(ds))
    assert all(o.kind != "prefetch" for o in naive)
    assert all(o.parallelism in (None, 1) for o in naive)
    assert not any(o.op.startswith("Parallel") for o in naive)  # plain forms: no pool at all
    trace = plumbkit.trace(plumbkit.baselines.naive(ds), seconds=1.5, converge=False, calibrate=False)  # forms, not costs
    assert not any(o.injected for o in trace.ops)  # tf.data's own rewrites are off
    assert all(o.parallelism in (None, 1) for o in trace.ops if o.kind == "map")
    heur = pipeline_of(plumbkit.baselines.heuristic(ds, 2))
    assert {o.parallelism for o in heur if o.parallelizable} == {2}
    auto = pipeline_of(plumbkit.baselines.autotune(ds, 2))
    assert {o.parallelism for o in auto if o.parallelizable} == {-1}
    assert pipeline_of(plumbkit.baselines.autotune(ds, 2))[pipeline_of(plumbkit.baselines.autotune(ds, 2)).root].kind == "prefetch"


def test_step_gives_the_bottleneck_one_more_thread():
    """The gain is measured again with the two pipelines interleaved (medians of three rounds):
    the step's own figures, measured a few seconds apart, differ by the machine's drift too.
    The choice is made on calibrated costs, so 0.5 s traces do, as in the walks. The maps are
    :func:`two_maps` (heavier 3.2-3.8x medium's CPU): with heavy and medium (~1.8x on the Intel VM,
    a map's own cost weighing more there) the step once chose medium in CI, where this machine's
    speed for TensorFlow work flips ~1.6x for seconds between one operator's calibration and the
    next. 0.5 s windows, three rounds interleaved, for a gain checked at 1.2x (up to 2x on two
    cores: heavier's two threads beside medium's)."""
    s = plumbkit.step(two_maps(), seconds=0.5)
    assert s.operator == "map(heavier)" and s.parallelism == 2
    assert pipeline_of(s.dataset).by_label("map(heavier)").parallelism == 2
    measured, neighbour = with_neighbour_cores(lambda: interleaved_throughput({"before": two_maps,
                                                                               "after": lambda: s.dataset},
                                                                              seconds=0.5))
    if neighbour is not None and neighbour >= 0.2:  # the second thread needs a second core
        pytest.skip(f"gain not checked: measured beside {neighbour:.1f} busy neighbour cores ({measured})")
    assert measured["after"] > 1.2 * measured["before"], measured


def test_walks_step_the_bottleneck_or_a_random_operator_and_record_each_step():
    """What a walk does, step by step. How many steps each kind needs to reach 90% of the peak
    (the paper: 2-3x fewer for the bottleneck walk) is a figure of whole walks measured one after
    another: it lives in the bench (``plumbkit bench``, section stepping), not here."""
    def light(x):
        return x + 1

    def make():
        return (tf.data.Dataset.range(10**9).map(heavy).map(medium).map(light)
                .batch(16).with_options(sequential_options()))

    # 0.5 s traces (timed from the first minibatch): the bottleneck is chosen on calibrated costs,
    # measured apart from the trace, and nothing here checks a throughput beyond its being measured
    steps = 2
    bottleneck = plumbkit.walk(make, steps=steps, policy="bottleneck", seconds=0.5)
    random_walk = plumbkit.walk(make, steps=steps, policy="random", seed=0, seconds=0.5)
    assert bottleneck.operators[0] == "map(heavy)"  # the costliest map binds first
    assert "+1 thread for map(heavy)" in str(bottleneck).splitlines()[2]
    for w in (bottleneck, random_walk):
        assert len(w.throughputs) == steps + 1 and all(x > 0 for x in w.throughputs), w.throughputs
        assert len(w.allocation_bounds) == steps + 1 and all(math.isfinite(x) for x in w.allocation_bounds)
        assert set(w.operators) <= {"map(heavy)", "map(medium)", "map(light)", "batch(16)"}, w.operators


def test_users_cache_and_prefetch_are_kept_and_nothing_is_claimed():
    """A keras-io style pipeline that already caches and prefetches (~10 s): plumbkit keeps the
    cache, has nothing to change, claims no speed-up and hands the pipeline back unchanged."""
    def make():
        ds = tf.data.Dataset.range(2000).map(medium, num_parallel_calls=tf.data.AUTOTUNE)
        return ds.batch(16).cache().prefetch(10)

    plan = plumbkit.optimize(make, seconds=2, compare=False, protocol=YIELDS_PROTOCOL)  # nothing to measure faster
    assert not any(c.what == "remove" for c in plan.proposed_changes)
    assert "cache" in {o.kind for o in pipeline_of(plan.dataset)}
    assert not plan.applied and plan.changes == [] and plan.speedup is None
    assert "your pipeline is returned unchanged" in plan.verdict
    assert "your own cache at cache" in plan.cache.why
    assert plan.baselines["plumbkit"] == plan.baselines["yours"] > 0
    yours = [b for b in make().take(5).as_numpy_iterator()]
    back = [b for b in plan.dataset.take(5).as_numpy_iterator()]
    assert all(np.array_equal(a, b) for a, b in zip(yours, back))


@pytest.mark.concurrent  # what it decides and shows, not a speed
def test_a_plan_predicted_no_faster_than_yours_hands_your_pipeline_back_with_the_reason():
    """~10 s. A map you gave 8 calls on this machine's cores, no cache allowed: the plan's only
    change (fewer calls) is predicted no faster, so it does not ship; the note says what was
    weighed, nothing claims there was nothing to change, and the prediction is yours'."""
    def make():
        return tf.data.Dataset.range(4000).map(medium, num_parallel_calls=8).batch(16).prefetch(tf.data.AUTOTUNE)

    plan = plumbkit.optimize(make, seconds=1.5, memory_budget=0, compare=False, protocol=YIELDS_PROTOCOL)
    assert plan.proposed_changes == [] and not plan.applied
    stays = [n for n in plan.notes if n.startswith("your pipeline stays as you wrote it: the plan (map(medium): parallelism")]
    assert len(stays) == 1 and "for yours" in stays[0], plan.notes
    assert not any("nothing to change" in n for n in plan.notes), plan.notes
    assert plan.prediction.throughput == plan.predictions["yours"] and plan.cache.label is None
    yours = list(make().take(5).as_numpy_iterator())
    assert all(np.array_equal(a, b) for a, b in zip(yours, plan.dataset.take(5).as_numpy_iterator()))


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_cache_above_a_seeded_shuffle_is_kept_and_epoch_order_unchanged():
    """~10 s. The user's cache freezes a seeded shuffle's order: every epoch replays the first.
    plumbkit keeps it (and may cache above it: what is above a cache is deterministic again)."""
    def make():
        ds = tf.data.Dataset.range(640).shuffle(640, seed=7).cache()
        return ds.map(lambda x: (x, medium(x))).batch(8)

    def epochs(ds, n=3):
        it = iter(ds.repeat(n))
        return [np.concatenate([next(it)[0] for _ in range(80)]).tolist() for _ in range(n)]

    yours = epochs(make())
    assert yours[0] == yours[1] == yours[2] and sorted(yours[0]) != yours[0]
    # what it yields, not its speed; 1 s traces an epoch of ~0.14 s of CPU (640 medium maps) many times
    plan = plumbkit.optimize(make, seconds=1, compare=False, protocol=YIELDS_PROTOCOL)
    assert plan.proposed_changes and not any(c.what == "remove" for c in plan.proposed_changes)
    assert plan.cache.label == "batch(8)", plan.cache  # above the user's cache: frozen, so cacheable
    candidate = apply_changes(make(), plan.proposed_changes)
    assert [o.kind for o in pipeline_of(candidate)].count("cache") == 2
    assert epochs(candidate) == yours
    assert epochs(plan.dataset) == yours
