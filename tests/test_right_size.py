"""Right-sizing to the model's demand (issue 27, "plan to the demand"): where the model bounds
training, the plan keeps the fewest pipeline threads, and no cache the demand does not need, that
are predicted to feed the model with headroom; where the pipeline binds, nothing is trimmed.

The planning cases are pure evidence (a map of 20 ms of CPU a minibatch, 2 cores): what is
predicted there is arithmetic a reader can check. The end-to-end case runs a real pipeline fed to a
planted step that sleeps (an accelerator's step: no host CPU) and checks what ships, measured.
"""

from __future__ import annotations

import time

import pytest
import tensorflow as tf

import plumbkit
import plumbkit.engine.compare
from plumbkit.model.demand import ModelDemand
from plumbkit.model.pipeline import Operator, Pipeline
from plumbkit.model.plan import Change
from plumbkit.planning.predict import Evidence, RuntimeCosts, layout_with
from plumbkit.planning.right_size import HEADROOM, pipeline_limit, right_size

MAP_COST = 0.020  # CPU seconds a minibatch of the planted map


def _evidence(*, decode: float = 0.0) -> Evidence:
    """source -> [decode ->] map -> batch, the map sequential as written; 2 cores."""
    ops = {"batch": Operator("batch", "BatchDatasetV2", "batch", inputs=("map",), label="batch"),
           "map": Operator("map", "MapDataset", "map", inputs=("decode",) if decode else (), label="map(heavy)"),
           "decode": Operator("decode", "MapDataset", "map", inputs=(), label="map(decode)")}
    if not decode:
        ops.pop("decode")
    cost = {"map": MAP_COST, "batch": 0.0, **({"decode": decode} if decode else {})}
    return Evidence(pipeline=Pipeline(operators=ops, root="batch"), cost=cost, visits={n: 8 for n in cost} | {"batch": 1},
                    sequential=frozenset(), cores=2, runtime=RuntimeCosts(cache_read=1e-6))


FASTEST = [Change("parallelism", "map(heavy)", "map", 4, "the LP's threads")]


def _model(steps_per_s: float, cpu: float = 0.0, alone: float | None = None) -> ModelDemand:
    """A model's demand; ``alone``: your pipeline's own throughput as traced (measured)."""
    return ModelDemand(ideal_steps_per_s=steps_per_s, steps_per_s=steps_per_s, input_bound=0.0, cpu_per_step=cpu,
                       pipeline_alone=alone)


def test_a_model_far_slower_than_the_pipeline_keeps_it_as_written():
    """20 steps/s: the map as written (one thread, 1 / 0.02 = 50/s) feeds 24/s with 20% headroom,
    so the plan's 4 threads are dropped: the map stays sequential, as written."""
    ev = _evidence()
    sized = right_size(ev, FASTEST, _model(20))
    assert sized is not None and sized.threads == 0 and sized.fastest_threads == 4 and sized.freed_threads == 4
    assert not [c for c in sized.changes if c.what == "parallelism"]
    assert sized.prediction.throughput == pytest.approx(20) and "gives back 4 of the fastest plan's 4" in sized.note
    assert sized.pipeline_cores == pytest.approx(0.4)  # 0.02 s of CPU a minibatch at 20 a second
    assert "keeps ~0.4 of the 2.0 free cores busy, 1.6 left" in sized.note


def test_a_faster_model_gets_the_threads_its_demand_needs_and_no_more():
    """60 steps/s: 72/s needed with headroom, 50/s per thread of the map: two threads (100/s)."""
    sized = right_size(_evidence(), FASTEST, _model(60))
    assert sized is not None and sized.threads == 2
    assert [c.value for c in sized.changes if c.what == "parallelism"] == [2]
    ev = _evidence()
    assert pipeline_limit(ev, layout_with(ev, sized.changes)) == pytest.approx(100)  # 2 / 0.02
    one_thread = layout_with(ev, [Change("parallelism", "map(heavy)", "map", 1, "")])
    assert pipeline_limit(ev, one_thread) < 60 * (1 + HEADROOM)  # negative control: one thread would not do


def test_where_the_pipeline_binds_nothing_is_trimmed():
    """90 steps/s: the fastest plan gives 2 / 0.02 = 100/s, short of 108 with headroom."""
    assert right_size(_evidence(), FASTEST, _model(90)) is None
    assert right_size(_evidence(), FASTEST, _model(200)) is None


def test_the_models_cpu_is_charged_beside_the_pipelines():
    """A step taking 30 ms of CPU shares the 2 cores: training at 2 / (0.02 + 0.03) = 40 steps/s
    at best. A model of 30 steps/s keeps its rate (right-sized: the pipeline alone needs 36/s, one
    thread gives 50); one of 45 would train at 40, more than 5% below its rate: the cores bind,
    the fastest plan stays."""
    assert right_size(_evidence(), FASTEST, _model(30, cpu=0.03)) is not None
    assert right_size(_evidence(), FASTEST, _model(30)) is not None
    assert right_size(_evidence(), FASTEST, _model(45, cpu=0.03)) is None
    assert right_size(_evidence(), FASTEST, _model(45)) is not None  # negative control: without the step's CPU


def test_a_cache_the_demand_does_not_need_is_dropped_and_said():
    """A 40 ms decode below the map, cached by the fastest plan. At 10 steps/s the pipeline
    recomputing both as written (60 ms a minibatch on one thread: 16.7/s predicted, 16 measured
    when traced) still feeds the 12/s needed, so the cache's memory is given back. Only on that
    measurement: where the trace measured yours below the need (8/s), the prediction alone does
    not drop it. At 40 steps/s (48 needed) the sequential decode alone caps it at 25/s: the cache
    stays, and with nothing else to give back, nothing is trimmed."""
    ev = _evidence(decode=0.040)
    fastest = [Change("cache", "map(heavy)", "map", None, "fits"), *FASTEST]
    sized = right_size(ev, fastest, _model(10, alone=16))
    assert sized is not None and sized.dropped_cache == "map(heavy)"
    assert not [c for c in sized.changes if c.what == "cache"] and "the cache after map(heavy)" in sized.note
    assert right_size(ev, fastest, _model(10, alone=8)) is None  # measured short: the cache stays
    assert right_size(ev, fastest, _model(10)) is None  # not measured: likewise
    assert right_size(ev, fastest, _model(40, alone=16)) is None


def _sleep_step(seconds: float):
    def sleep(_):
        time.sleep(seconds)
        return 0.0

    @tf.function
    def step(batch):
        return tf.py_function(sleep, [tf.reduce_sum(batch)], tf.float32)
    return step


def test_optimize_right_sizes_to_a_slow_model_and_keeps_its_step_rate():
    """An AUTOTUNE map of ~1 ms of CPU a minibatch fed to a 40 ms step: the fastest plan would run
    it on every core; right-sized, it runs on one thread, and training with it measured alike is
    not measurably more than 5% slower than with yours (what ships it)."""
    from plumbkit.bench.examples import planted_work

    def pipeline():
        return tf.data.Dataset.range(10**9).map(lambda x: planted_work(x, 4),
                                               num_parallel_calls=tf.data.AUTOTUNE).batch(8)
    plan = plumbkit.optimize(pipeline, step=_sleep_step(0.040), seconds=1.0, compare=False,
                             protocol=plumbkit.engine.compare.BRIEF)
    sized = plan.right_sizing
    assert sized is not None, plan.notes
    assert sized.threads == 1, sized.note  # AUTOTUNE's threads (2 here, at least) set to one
    assert [(c.where, c.value) for c in sized.changes if c.what == "parallelism"] == [("map(lambda)", 1)]
    # the right-sizer's own prediction keeps up with the demand it planned for (the plan's shown
    # steps/s is predicted again from the model's rate measured alike later: 19.8 against a 20.9
    # demand in a fresh-clone run, two measurements 5% apart; how close it measures is the bench's)
    assert sized.prediction.throughput >= 0.95 * sized.demand, sized.note
    assert plan.applied, plan.notes  # training not measurably more than 5% slower than with yours
    # how close to the model's rate it measures is a speed goal: the bench's (model_in_the_loop)
    assert any(n.startswith("model-bound:") for n in plan.notes)


def _gate(ratios: list[float]):
    """What ``ships_for_training`` decides for a right-sized plan whose training steps/s per round
    were ``ratios`` of yours (rounds of 20 steps/s for yours)."""
    from types import SimpleNamespace

    from plumbkit.engine.compare import BRIEF, Comparison, Result
    from plumbkit.engine.right_sizing import ships_for_training
    steps = Comparison(results={"yours": Result("yours", rounds=[20.0] * len(ratios)),
                                "plumbkit": Result("plumbkit", rounds=[20.0 * r for r in ratios])}, protocol=BRIEF)
    sizing = SimpleNamespace(threads=1)
    plan = SimpleNamespace(right_sizing=sizing, proposed_changes=FASTEST, applied=False, changes=[], dataset=None,
                           notes=[])
    ships_for_training(plan, steps, yours="yours", planned="plumbkit", rebuild=lambda changes: list(changes))
    return plan


def test_a_loss_inside_the_allowance_ships_and_one_beyond_it_does_not():
    """The issue's terms: the step rate within 5% of the model's, for the threads given back. A
    measurable 1% loss ships, saying its figure; a measurable 8% loss, or a median 6% below, does not,
    and yours comes back (the note gives the interval)."""
    kept = _gate([0.99, 0.985, 0.99, 0.995, 0.99])
    assert kept.applied and kept.changes == FASTEST and "0.99× yours" in kept.notes[-1]
    beyond = _gate([0.92, 0.93, 0.91, 0.92, 0.92])
    assert not beyond.applied and beyond.changes == [] and "not kept" in beyond.notes[-1]
    assert "0.92× yours (0.91–0.93" in beyond.notes[-1]
    median_below = _gate([0.94, 1.02, 0.93, 0.94, 1.0])
    assert not median_below.applied and "0.94× yours" in median_below.notes[-1]
