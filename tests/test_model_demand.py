"""The model in the loop (issue 27): the step's demand, the input-bound share, the model untouched.

A planted step whose time is set (a ``tf.function`` whose ``py_function`` sleeps) is fed by a
planted pipeline whose time per minibatch is set the same way, in both regimes: model-bound (a
fast pipeline behind a prefetch, a slow step) and input-bound (a slow pipeline, a fast step).
plumbkit's input-bound share (time waiting in ``next()`` / step time) is checked against an
independent figure this file measures with its own loop: 1 - (steps/s on the pipeline) / (steps/s
on one replayed minibatch), the share of a step the pipeline adds over ideal input.
"""

from __future__ import annotations

import html
import time

import numpy as np
import pytest
import tensorflow as tf

import plumbkit
import plumbkit.engine.demand
from plumbkit.bench.model_loop import independent_input_bound
from plumbkit.model.demand import ModelDemand, ModelError
from plumbkit.tfdata.model_state import StateGuard, keras_variables

from conftest import BRIEF, measured_against_the_clock

keras = pytest.importorskip("keras")


def _sleeper(seconds: float):
    def sleep(x):
        time.sleep(seconds)
        return x
    return sleep


def planted_pipeline(ms_per_batch: float) -> tf.data.Dataset:
    """Minibatches of four (x, y) rows, each minibatch costing ``ms_per_batch`` of sleep, prefetched."""
    ds = tf.data.Dataset.random(seed=1).batch(4)  # infinite and random: nothing to cache
    ds = ds.map(lambda i: tf.py_function(_sleeper(ms_per_batch / 1000), [tf.cast(i, tf.float32)], tf.float32))
    ds = ds.map(lambda v: (tf.reshape(tf.tile(v, [8]), [4, 8]), tf.reshape(v, [4, 1])))
    return ds.prefetch(2)


def planted_step(ms_per_step: float):
    """A custom tf.function train step that takes ``ms_per_step`` (a sleep) on any minibatch."""
    @tf.function
    def step(batch):
        x, _ = batch
        return tf.py_function(_sleeper(ms_per_step / 1000), [tf.reduce_sum(x)], tf.float32)
    return step


def small_keras_model(features: int = 8):
    model = keras.Sequential([keras.Input((features,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dropout(0.3), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    return model


def bits(variables) -> list[bytes]:
    return [np.ascontiguousarray(v.numpy()).tobytes() for v in variables]


@measured_against_the_clock
@pytest.mark.parametrize("regime, pipeline_ms, step_ms", [("model-bound", 3, 30), ("input-bound", 40, 8)])
def test_input_bound_share_matches_an_independent_loop(regime, pipeline_ms, step_ms):
    """Within 10 points of the own loop's figure, in both regimes, and the verdict names the
    regime. Truth and estimate are timed a second apart on a shared machine: one rerun."""
    step = planted_step(step_ms)
    demand = plumbkit.engine.demand.measure_model(planted_pipeline(pipeline_ms), step=step, seconds=0.5)
    truth = independent_input_bound(lambda: planted_pipeline(pipeline_ms), step, steps=4)  # the bench's plain loop
    assert abs(demand.input_bound - truth) <= 0.10, (demand, truth)
    assert demand.verdict.startswith(regime), demand.verdict
    assert demand.kind == "tf.function step"
    assert demand.ideal_steps_per_s > demand.steps_per_s * (1.5 if regime == "input-bound" else 0.8)


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_keras_model_through_its_train_function_is_left_bitwise_unchanged():
    """trace(..., model=) drives the model's own train function; every variable (weights, seeds,
    Adam's slots and iteration counter, metrics) comes back bitwise, and its train function too.
    The negative control: one real training step changes the bits this check reads."""
    model = small_keras_model()
    existing = keras_variables(model)  # Adam's slots and the metrics are built on the first step
    before = bits(existing)
    trace = plumbkit.trace(lambda: planted_pipeline(1), model=model, seconds=0.6, min_seconds=0.3, calibrate=False)
    d = trace.model
    built = [v for v in keras_variables(model) if all(v is not e for e in existing)]
    assert built and all(not np.any(v.numpy()) for v in built if "learning_rate" not in v.path), \
        "what fit() builds before its first step (slots, counters, metrics) is as fit builds it: zeros"
    assert d.kind == "keras model" and d.ideal_steps_per_s > 0 and d.steps_per_s > 0
    assert 0.0 <= d.input_bound <= 1.0 and d.cpu_per_step > 0
    assert d.restored == len(keras_variables(model)) >= 4 + 2 + 4  # weights, optimizer, metrics
    # any of the verdict's regimes: which one depends on this machine's speed, not on the restore
    assert d.verdict.split(":")[0] in ("model-bound", "input-bound", "input-bound on shared cores",
                                       "input-bound by turns"), d.verdict
    assert bits(existing) == before
    assert model.train_function is None and int(model.optimizer.iterations.numpy()) == 0
    assert type(trace).from_dict(trace.to_dict()).model == d
    model.train_on_batch(*next(iter(planted_pipeline(0))))  # negative control
    assert bits(existing) != before


def test_a_custom_tf_function_train_step_is_restored_bitwise():
    """A custom training loop's tf.function step (GradientTape, a Keras optimizer built inside it on
    its first trace): its captured variables, the optimizer's slots and counter included, come back."""
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
    loss_fn = keras.losses.MeanSquaredError()

    @tf.function
    def train_step(batch):
        x, y = batch
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    before = bits(model.variables)
    d = plumbkit.engine.demand.measure_model(planted_pipeline(0.5), step=train_step, seconds=0.3)
    assert d.kind == "tf.function step" and d.restored == 4 + 6 and d.steps_per_s > 0
    assert bits(model.variables) == before
    assert int(optimizer.iterations.numpy()) == 0
    assert all(not np.any(v.numpy()) for v in optimizer.variables if "learning_rate" not in v.path)


def test_plain_python_step_and_its_closure_variables_are_restored():
    """A plain Python loop body: its closure's variable counts the steps it ran, and is put back."""
    counter = tf.Variable(0, dtype=tf.int64)

    def step(batch):
        counter.assign_add(1)
        time.sleep(0.002)

    d = plumbkit.engine.demand.measure_model(planted_pipeline(0.5), step=step, seconds=0.3)
    assert d.kind == "python step" and d.restored >= 1 and d.steps_per_s > 0
    assert int(counter.numpy()) == 0


def test_optimize_with_a_model_measures_steps_alike_and_leaves_the_model_unchanged():
    model = small_keras_model()
    guard = StateGuard(keras_variables(model), reach="test")
    plan = plumbkit.optimize(lambda: planted_pipeline(1), model=model, seconds=0.3, compare=False, protocol=BRIEF)
    assert plan.model is not None and plan.model.kind == "keras model"
    assert plan.measured_steps_per_s and plan.measured_steps_per_s > 0
    assert plan.predicted_steps_per_s and plan.predicted_steps_per_s == plan.step_prediction.throughput
    # the model alone on ideal input (measured alike, beside yours and the plan) bounds it
    assert plan.predicted_steps_per_s <= min(plan.prediction.throughput, plan.ideal_steps_per_s)
    assert set(plan.steps_predictions) >= {"yours"}
    assert "yours" in plan.steps_baselines and plan.ideal_steps_per_s > 0 and plan.trace.model is plan.model
    assert guard.changed() == []
    view = plan._repr_html_()  # the Optimize tab shows them: the verdict, a training steps/s row per configuration
    assert html.escape(plan.model.verdict) in view and "plumbkit-training-config'><td>yours</td>" in view
    assert "ideal input (the model alone)" in view and "training steps/s" in str(plan)
    if plan.proposed_changes:  # the training speed-up, measured alike and predicted (one model each)
        predicted = plan.steps_predictions["plumbkit"] / plan.steps_predictions["yours"]
        assert plan.predicted_training_speedup == pytest.approx(predicted)
        assert f"training speed-up over yours: {plan.training_speedup.verdict}; predicted {predicted:.2f}×" in str(plan)
    else:  # nothing proposed: no plan to measure a speed-up of (said, not a silent pass)
        assert plan.training_speedup is None


@pytest.mark.parametrize("demand, bound, starts", [
    (ModelDemand(100, 98, 0.01, 0.001), "model", "model-bound: the model waits 1% of each step"),
    (ModelDemand(100, 60, 0.02, 0.001), "shared cores", "model-bound: the model waits 2%"),  # ran 1.6x slower
    (ModelDemand(100, 37, 0.63, 0.001, pipeline_alone=40), "pipeline", "input-bound: the model waits 63% of each step"),
    (ModelDemand(100, 40, 0.3, 0.005, pipeline_alone=120), "shared cores", "input-bound on shared cores: "),  # 1.75x
    # 10 ms a step on ideal input, 20 with yours of which 10 waiting; yours alone 8.3 ms a minibatch: in turns
    (ModelDemand(100, 50, 0.5, 0.005, pipeline_alone=120), "turns", "input-bound by turns: the model waits 50%"),
])
def test_the_verdict_names_what_bounds_training(demand, bound, starts):
    """Hand-built demands: the TF Profiler's 5% line, the pipeline alone against the model's
    demand, and a step stretched beside the pipeline (or not: the two take turns) decide the verdict."""
    assert demand.bound == bound and demand.verdict.startswith(starts), demand.verdict
    assert ("share the cores" in demand.verdict) == (demand.step_stretch >= 1.25)


def test_ctrl_c_in_the_model_phase_keeps_the_trace_and_restores_the_model(ctrl_c_raises):
    """A kernel interrupt while the step runs: the trace comes back, marked interrupted, without a
    verdict, and the step's variable is put back."""
    import _thread
    moved, calls = tf.Variable(0.0), []

    def step(batch):
        moved.assign_add(1.0)
        calls.append(1)
        if len(calls) == 5:
            _thread.interrupt_main()
        time.sleep(0.001)

    trace = plumbkit.trace(lambda: planted_pipeline(0.5), step=step, seconds=0.5, min_seconds=0.3, calibrate=False)
    assert trace.partial and trace.ended == "interrupted" and trace.model is None and trace.throughput > 0
    assert float(moved.numpy()) == 0.0 and len(calls) >= 5


class TestBadInput:
    """One clear line each (a PipelineError), and nothing of the model changed."""

    def test_a_model_not_compiled(self):
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
        with pytest.raises(ModelError, match="not compiled") as err:
            plumbkit.trace(lambda: planted_pipeline(0), model=model, seconds=0.3, calibrate=False)
        assert isinstance(err.value, plumbkit.PipelineError) and "\n" not in str(err.value)

    def test_a_minibatch_the_model_rejects(self):
        model = small_keras_model(features=5)
        before = bits(keras_variables(model))
        with pytest.raises(ModelError, match="rejects the pipeline's minibatches.*expected axis -1") as err:
            plumbkit.engine.demand.measure_model(planted_pipeline(0), model=model, seconds=0.2)
        assert "\n" not in str(err.value)
        assert bits(keras_variables(model)) == before

    @pytest.mark.parametrize("fails_at", [1, 5])
    def test_a_step_that_raises_first_or_later(self, fails_at):
        moved = tf.Variable(1.5)
        calls = []

        def step(batch):
            calls.append(1)
            moved.assign_add(1.0)
            if len(calls) >= fails_at:
                raise RuntimeError("the step broke")

        with pytest.raises(ModelError, match="raised.*the step broke") as err:
            plumbkit.engine.demand.measure_model(planted_pipeline(0), step=step, seconds=0.2)
        assert "\n" not in str(err.value)
        assert float(moved.numpy()) == 1.5

    @pytest.mark.parametrize("kwargs, said", [
        (dict(model="not a model"), "compiled Keras model"),
        (dict(step=3), "callable"),
        (dict(model=object(), step=print), "not both"),
    ])
    def test_what_is_not_a_model_or_step(self, kwargs, said):
        with pytest.raises(ModelError, match=said):
            plumbkit.trace(lambda: planted_pipeline(0), seconds=0.3, calibrate=False, **kwargs)


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_the_widget_header_shows_the_verdict():
    """The live trace's header carries the verdict once the step has run in the loop (a 20 ms
    pipeline, a 2 ms step: the model waits most of each step)."""
    from plumbkit.widgets.live import LiveTraceWidget
    live = LiveTraceWidget(lambda: planted_pipeline(20), seconds=0.5, min_seconds=0.3, start=False,
                           calibrate=False, step=planted_step(2))
    trace = live.run_here()
    assert trace.model is not None and trace.model.verdict.startswith("input-bound")  # on shared cores too
    assert "plumbkit-verdict" in live.title.value and html.escape(trace.model.verdict) in live.title.value
    live.close()


def test_the_widget_hands_the_step_to_the_trace_and_the_optimization():
    """What %%plumb --train-step / --model names reaches both the live trace and the Optimize tab."""
    from plumbkit.widgets import PlumbWidget
    step = planted_step(1)
    widget = PlumbWidget(lambda: planted_pipeline(1), live=False, in_the_loop={"step": step})
    assert widget.live._kwargs["step"] is step and widget.optimize.options["step"] is step
    widget.close()


@pytest.fixture(scope="module")
def ip():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "plumbkit")
    return shell


@pytest.mark.concurrent  # what it yields or shows, not a speed
def test_the_magic_takes_a_train_step_by_name(ip, capsys):
    ip.user_ns["planted_step"], ip.user_ns["planted_pipeline"] = planted_step(1), planted_pipeline
    ip.run_cell_magic("plumb", "-s 0.5 --no-widget --train-step planted_step", "ds = planted_pipeline(0.5)\nds")
    out = capsys.readouterr().out
    assert "training step (tf.function step), in the loop: " in out and "Traceback" not in out
    ip.run_cell_magic("plumb", "-s 0.5 --no-widget --model no_such_model", "ds = planted_pipeline(0.5)\nds")
    said = capsys.readouterr().out.strip().splitlines()[-1]  # after the cell's own output (its dataset)
    assert said == "plumbkit: --model: no variable 'no_such_model' in the namespace"


def test_the_training_prediction_charges_the_steps_cpu_beside_the_pipelines():
    """predict_training: min(ideal steps/s, free cores / (pipeline CPU + step CPU), the pipeline's
    other limits). A map of 20 ms of CPU a minibatch on 4 threads and 2 cores, a step of 30 ms of
    CPU: alone the pipeline is predicted at 2 / 0.02 = 100 minibatches/s; beside the step, 2 /
    (0.02 + 0.03) = 40 steps/s, below the step's 50 on ideal input."""
    from plumbkit.model.pipeline import Operator, Pipeline
    from plumbkit.planning.predict import TRAINING_STEP, Evidence, Layout, predict, predict_training
    ops = {"batch": Operator("batch", "BatchDatasetV2", "batch", inputs=("map",), label="batch"),
           "map": Operator("map", "ParallelMapDatasetV2", "map", inputs=(), label="map")}
    ev = Evidence(pipeline=Pipeline(operators=ops, root="batch"), cost={"map": 0.02, "batch": 0.0},
                  visits={"map": 8, "batch": 1}, sequential=frozenset(), cores=2)
    layout = Layout(threads={"map": 4}, prefetched=frozenset({"batch"}))
    alone = predict(ev, layout)
    assert alone.throughput == pytest.approx(100, rel=1e-6)
    trained = predict_training(ev, layout, ModelDemand(50, 30, 0.2, cpu_per_step=0.03))
    assert trained.throughput == pytest.approx(40, rel=1e-6) and "training step's CPU charged" in trained.binding
    model_bound = predict_training(ev, layout, ModelDemand(25, 20, 0.2, cpu_per_step=0.03))
    assert model_bound.throughput == pytest.approx(25) and model_bound.binding == TRAINING_STEP
