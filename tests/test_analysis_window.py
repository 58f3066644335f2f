"""Operational analysis on hand-built traces: what a measurement window charges (no TensorFlow)."""

import pytest

from plumbkit.analysis.operational import analyze
from plumbkit.model.pipeline import Operator, Pipeline
from plumbkit.model.samples import NodeSample, RawTrace, Snapshot

MS = 1_000_000  # nanoseconds


def node(i, name, inputs, elements, busy_ns, ratio=1.0):
    return NodeSample(id=i, name=name, inputs=tuple(inputs), elements=elements, bytes_produced=4 * elements,
                      bytes_consumed=0, processing_ns=busy_ns, buffered_elements=0, buffered_bytes=0,
                      parameters={}, tunable=(), ratio=ratio)


PIPE = Pipeline(operators={
    "aug": Operator("aug", "MapDataset", "map", inputs=("cache",), label="map(augment)"),
    "cache": Operator("cache", "CacheDatasetV2", "cache", inputs=("decode",), label="cache"),
    "decode": Operator("decode", "MapDataset", "map", inputs=("range",), label="map(decode)"),
    "range": Operator("range", "RangeDataset", "range", label="range"),
}, root="aug")


def _analysis_of(ops, spent):
    """An analysis of ``ops`` over a window of one minibatch in 1 s (CPU per minibatch = CPU
    seconds) in which the process spent ``spent``."""
    from plumbkit.analysis.operational import Analysis

    attributed = sum(o.cpu_seconds for o in ops)
    return Analysis(throughput=1.0, window=(0.0, 1.0), ops=ops, cpu_seconds=spent, attributed_cpu_seconds=attributed,
                    unattributed_share=0.0, cores=2, over_attributed_share=max(0.0, attributed / spent - 1))


def snapshots():
    """1,000 elements/s for 3 s. The cache fills at t = 1.25 s: until then ``decode`` runs
    (1 ms an element), then its runtime node is gone and ``aug`` (0.5 ms) reads the cache."""
    out = []
    for k in range(13):
        t = 0.25 * k
        n = int(1000 * t)
        filling = min(n, 1250)
        nodes = {1: node(1, "Root", [2], n, 0), 2: node(2, "Map", [3], n, n * MS // 2)}
        if t <= 1.25:
            nodes[3] = node(3, "MemoryCache", [4], n, 0)
            nodes[4] = node(4, "Map", [5], filling, filling * MS)
            nodes[5] = node(5, "Range", [], filling, 0)
        else:
            nodes[3] = node(3, "MemoryCache", [], n, 0)
        out.append(Snapshot(t=t, cpu=0.0005 * n + 0.001 * filling, rss=0, nodes=nodes))
    return out


def test_an_operator_below_a_filled_cache_is_charged_only_what_it_ran_in_the_window():
    a = analyze(PIPE, RawTrace(snapshots=snapshots(), cores=2))
    ops = {o.name: o for o in a.ops}
    start, end = a.window
    assert start == pytest.approx(0.75) and end == pytest.approx(3.0)
    # In the window decode ran 0.75-1.25 s: 500 elements, 0.5 s; augment 2,250 elements, 1.125 s.
    # Restoring decode's "missing" elements (as for epochs the sampler never saw) charged it for
    # all 2,250 minibatches: 2.25 s of CPU, twice what augment spent.
    assert ops["decode"].elements == 500
    assert ops["decode"].cpu_seconds == pytest.approx(0.5, rel=0.01)
    assert ops["aug"].cpu_seconds == pytest.approx(1.125, rel=0.01)
    assert a.attributed_cpu_seconds <= a.cpu_seconds * 1.01


def test_an_operator_the_sampler_never_saw_running_has_its_declared_element_size():
    """A trace shorter than an epoch's nodes live (CI: 120 minibatches in 0.03 s, one snapshot,
    taken after the first epoch's nodes were gone) measured no bytes for the map: its elements'
    size is then the one its graph declares, and a measured size always wins over it."""
    pipe = Pipeline(operators={
        "widen": Operator("widen", "MapDataset", "map", inputs=("range",), label="map(widen)",
                          static_bytes=1 << 20),
        "range": Operator("range", "RangeDataset", "range", label="range", static_bytes=8),
    }, root="widen")
    unseen = {1: node(1, "Root", [2], 120, 0), 2: node(2, "Map", [3], 0, 0), 3: node(3, "Range", [], 0, 0)}
    ops = {o.name: o for o in analyze(pipe, RawTrace(snapshots=[Snapshot(t=0.03, cpu=0.01, rss=0, nodes=unseen)],
                                                     cores=2)).ops}
    assert ops["widen"].elements == 0 and ops["widen"].bytes_per_element == 1 << 20
    assert ops["range"].bytes_per_element == 8
    seen = {1: node(1, "Root", [2], 120, 0), 2: node(2, "Map", [3], 120, MS), 3: node(3, "Range", [], 120, 0)}
    ops = {o.name: o for o in analyze(pipe, RawTrace(snapshots=[Snapshot(t=0.03, cpu=0.01, rss=0, nodes=seen)],
                                                     cores=2)).ops}
    assert ops["widen"].bytes_per_element == 4  # what the runtime measured (node(): 4 bytes an element)


def test_a_map_calibrated_fused_with_its_batch_is_charged_as_measured_and_the_rest_share_what_is_left():
    """A map calibrated inside the MapAndBatch tf.data fused it into was measured as the pipeline
    runs it (a normalizing map: 0.78 ms per minibatch so, 0.76 inside its pipeline); scaled down
    with the operators cut out alone, a plan that gave it two calls was predicted 17% low. It is
    charged as measured, and the others share what the process spent beyond it: the charges
    still add up to the process CPU."""
    from dataclasses import replace

    from plumbkit.analysis.operational import _empty_stats, cpu_per_minibatch, in_pipeline_scale

    def stats(name, cpu, fused=False):
        return replace(_empty_stats(PIPE, name), cpu_seconds=cpu, rate_per_core=1 / cpu, calibrated_fused=fused)

    fused, cut_out = stats("aug", 0.8, fused=True), stats("decode", 1.6)
    a = _analysis_of([fused, cut_out], spent=2.0)
    assert in_pipeline_scale(a, fused) == 1.0
    assert cpu_per_minibatch(a, fused) == pytest.approx(0.8)
    assert cpu_per_minibatch(a, cut_out) == pytest.approx(1.2)  # (2.0 - 0.8) / 1.6 of its calibrated 1.6
    assert cpu_per_minibatch(a, fused) + cpu_per_minibatch(a, cut_out) == pytest.approx(a.cpu_seconds)
    # negative control: both cut out alone share the scale (2.0 / 2.4), the map's charge shrinks with it
    plain = _analysis_of([stats("aug", 0.8), cut_out], spent=2.0)
    assert cpu_per_minibatch(plain, plain.ops[0]) == pytest.approx(0.8 / 1.2)
    assert cpu_per_minibatch(plain, cut_out) == pytest.approx(1.6 / 1.2)
    # never above 1: CPU nobody accounts for is not spread onto operators
    assert cpu_per_minibatch(_analysis_of([fused, cut_out], spent=3.0), cut_out) == pytest.approx(1.6)


def test_a_thread_is_charged_an_operators_one_call_wall_time_only_where_it_ran_one_call_at_a_time():
    """The evidence charges a thread an operator's wall time one call at a time (``thread_cost``)
    where that was calibrated, below its CPU, and the operator ran so; an operator tf.data ran in a
    parallel form has no such figure (its threads' limit is its pool's), and a wall time above the
    CPU (an operator that waits) never raises what the thread is charged."""
    from dataclasses import replace
    from types import SimpleNamespace

    from plumbkit.analysis.operational import Analysis, _empty_stats
    from plumbkit.planning.predict import evidence_from_trace

    def stats(name, cpu, thread, runtime, parallelism=1):
        return replace(_empty_stats(PIPE, name), cpu_seconds=cpu, rate_per_core=1 / cpu, visit_ratio=1.0,
                       thread_per_element=thread, runtime=runtime, parallelism=parallelism, cpu_per_element=cpu)

    ops = [stats("aug", 0.002, 0.0015, "Map"), stats("decode", 0.004, 0.003, "ParallelMapV2", 2),
           stats("range", 0.001, 0.003, "Range")]
    spent = sum(o.cpu_seconds for o in ops)
    a = Analysis(throughput=1.0, window=(0.0, 1.0), ops=ops, cpu_seconds=spent, attributed_cpu_seconds=spent,
                 unattributed_share=0.0, cores=2, over_attributed_share=0.0)
    ev = evidence_from_trace(SimpleNamespace(analysis=a, pipeline=PIPE))
    assert ev.thread_cost == {"aug": pytest.approx(0.0015), "range": pytest.approx(0.001)}
    assert ev.cost["aug"] == pytest.approx(0.002)  # the cores still pay its CPU


def test_a_one_call_maps_surplus_over_its_parallel_form_is_taken_out_of_it_alone_and_both_forms_cost_the_same():
    """Where a map's parallel form was measured beside its one-call form, what the one-call
    figure spent beyond it is that map's spin on an idle core: it comes out of that map alone,
    the scale spreads only the rest of the surplus, and both forms are charged the parallel
    form's figure so scaled (inside the random flip's plan its one call and two cost the same).
    Spread uniformly and then cut again by the parallel ratio, the surplus came out of it twice,
    and every such plan was priced 8-27% low (flip-in-pipeline NOTE)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from plumbkit.analysis.operational import _empty_stats, idle_core_share, in_pipeline_scale
    from plumbkit.planning.predict import Layout, evidence_from_trace, predict

    def stats(name, cpu, parallel=None, fused=False):
        return replace(_empty_stats(PIPE, name), cpu_seconds=cpu, rate_per_core=1 / cpu, visit_ratio=1.0,
                       runtime="Map", parallelism=1, cpu_per_element=cpu, parallel_cpu_per_element=parallel,
                       parallel_calls=2 if parallel else 0, calibrated_fused=fused)

    # alone they add up to twice what the process spent; aug's two calls cost 0.6 of its one
    a = _analysis_of([stats("aug", 0.004, parallel=0.0024), stats("decode", 0.004), stats("range", 0.002)], spent=0.005)
    assert idle_core_share(a.ops[0]) == pytest.approx(0.4)
    scale = 0.005 / (0.010 - 0.004 * 0.4)  # the surplus left once aug's own 1.6 ms is taken out of it
    assert in_pipeline_scale(a) == pytest.approx(scale)
    ev = evidence_from_trace(SimpleNamespace(analysis=a, pipeline=PIPE))
    assert ev.cost["aug"] == pytest.approx(0.0024 * scale)  # one call at a time: the parallel figure, scaled
    assert ev.parallel_cost["aug"] == pytest.approx(0.0024 * scale)  # two calls in flight: the same
    assert ev.cost["decode"] == pytest.approx(0.004 * scale)
    assert sum(ev.cost.values()) == pytest.approx(a.cpu_seconds)  # the charges still add up to the process CPU
    # negative controls: scaled twice (the uniform 0.5, then the ratio), and not scaled at all
    assert ev.parallel_cost["aug"] != pytest.approx(0.0024 * 0.5)
    assert ev.parallel_cost["aug"] != pytest.approx(0.0024)
    one, two = (predict(ev, Layout(threads={"aug": k})) for k in (1, 2))
    assert two.cpu_per_batch == pytest.approx(one.cpu_per_batch)
    # a fused map's parallel gain is real in its pipeline: its ratio still carries it
    fused = _analysis_of([stats("aug", 0.004, parallel=0.0024, fused=True), stats("decode", 0.004)], spent=0.006)
    assert idle_core_share(fused.ops[0]) == 0.0
    ev = evidence_from_trace(SimpleNamespace(analysis=fused, pipeline=PIPE))
    assert ev.cost["aug"] == pytest.approx(0.004) and ev.parallel_cost["aug"] == pytest.approx(0.0024)
    # where the scale falls back to the uniform share (a fused map read more than the process
    # spent), no spin was taken out: the one-call form keeps the uniform scale, the parallel form
    # its ratio on top of it
    fallback = _analysis_of([stats("aug", 0.006, fused=True), stats("decode", 0.004, parallel=0.0024)], spent=0.005)
    ev = evidence_from_trace(SimpleNamespace(analysis=fallback, pipeline=PIPE))
    assert ev.cost["decode"] == pytest.approx(0.004 * 0.5)
    assert ev.parallel_cost["decode"] == pytest.approx(0.0024 * 0.5)
