"""The model's demand, measured for ``trace(..., model=)`` and ``optimize(..., model=)``.

One job: put the user's training step in the loop without changing their model. The step is
built on one real minibatch, run once (it compiles), then timed on ideal input (that minibatch
replayed, FastFlow's ``take(1).cache().repeat()``) and on the user's pipeline, with the time each
step waits in ``next()`` counted apart (:mod:`plumbkit.tfdata.step_demand`). Every variable the
step can move is snapshotted first and restored after, whatever happens
(:mod:`plumbkit.tfdata.model_state`). The result is a :class:`~plumbkit.model.demand.ModelDemand`.
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ..model.demand import ModelDemand, ModelError
from ..tfdata.step_demand import (
    StepDriver,
    StepWindow,
    check_step_arguments,
    first_minibatch,
    first_step,
    measure_step_demand,
    step_driver,
    step_error_line,
)
from .compare import Comparison, Contender, Protocol, compare
from .scheduler import current

if TYPE_CHECKING:
    import tensorflow as tf

#: Seconds each of the two timed windows lasts (ideal input, your pipeline), each after a warm-up
#: of a third as long: with the step's first call (its compilation) the model costs a trace about
#: 1.5 s more. Judgement: a window of a few dozen steps of a millisecond-scale planted step holds
#: the input-bound share within a few points on 2 shared cores (tests/test_model_demand.py).
MODEL_SECONDS = 0.6
#: The contender of the steps comparison fed one replayed minibatch (the model's demand, measured alike).
IDEAL_INPUT = "ideal input"

__all__ = ["IDEAL_INPUT", "MODEL_SECONDS", "check_step_arguments", "input_bound", "measure_model", "stepping",
           "ideal_alike", "training_alike", "training_figures"]


def input_bound(ideal: StepWindow, yours: StepWindow) -> float:
    """The share of each step spent waiting for your pipeline (the TF Profiler's input-bound share,
    time waiting for input / step time), less the wait ``next()`` costs even on ideal input (the
    loop's own floor: ~0.05 ms a step on a quiet machine, but a descheduled thread's wake-up on a
    busy one: 2-25% of a planted step at load 6-10 on 2 cores, where the independent figure, which
    compares step times, read ~0)."""
    if yours.steps == 0 or yours.seconds <= 0:
        return 0.0
    floor = ideal.waiting / ideal.steps if ideal.steps else 0.0
    return min(1.0, max(0.0, yours.waiting - floor * yours.steps) / yours.seconds)


def _should_stop() -> Callable[[], bool] | None:
    op = current()
    return (lambda: op.cancelled) if op is not None else None


@contextmanager
def stepping(ds: "tf.data.Dataset", *, model: Any = None, step: Callable[[Any], Any] | None = None
             ) -> Iterator[StepDriver]:
    """The user's step, ready to run on ``ds``'s minibatches (built and run once); every variable
    it moves is restored when the block ends, however it ends. ModelError: one line."""
    check_step_arguments(model, step)
    batch = first_minibatch(ds)
    driver = step_driver(model, step, batch)
    try:
        first_step(driver, batch)
        yield driver
    finally:
        driver.close()


def _demand(driver: StepDriver, ds: "tf.data.Dataset", *, seconds: float,
            pipeline_alone: float | None) -> ModelDemand:
    """The demand of an open driver's step: ideal input, then ``ds``, ``seconds`` each."""
    try:
        ideal, yours = measure_step_demand(ds, driver, ds, seconds=seconds, should_stop=_should_stop())
    except (ModelError, KeyboardInterrupt):
        raise
    except Exception as err:  # noqa: BLE001 - a step that raises later: one line
        raise ModelError(f"the {driver.kind} raised while measured: {step_error_line(err)}") from None
    notes = (f"restored after measuring: {len(driver.guard)} variables ({driver.guard.reach})",)
    return ModelDemand(ideal_steps_per_s=ideal.steps_per_s, steps_per_s=yours.steps_per_s,
                       input_bound=input_bound(ideal, yours), cpu_per_step=ideal.cpu_per_step, kind=driver.kind,
                       ideal_input_bound=ideal.input_bound, restored=len(driver.guard),
                       pipeline_alone=pipeline_alone, notes=notes)


def measure_model(ds: "tf.data.Dataset", *, model: Any = None, step: Callable[[Any], Any] | None = None,
                  seconds: float = MODEL_SECONDS, pipeline_alone: float | None = None) -> ModelDemand:
    """The model's demand on ``ds``: steps/s on ideal input and on ``ds``, the share of each step
    spent waiting for input, the model's CPU per step; the model is left exactly as it was."""
    with stepping(ds, model=model, step=step) as driver:
        return _demand(driver, ds, seconds=seconds, pipeline_alone=pipeline_alone)


def training_alike(contenders: Sequence[Contender], protocol: Protocol, *, ds: "tf.data.Dataset",
                   model: Any = None, step: Callable[[Any], Any] | None = None,
                   pipeline_alone: float | None = None, should_stop: Callable[[], bool] | None = None,
                   on_progress: Callable[[str, float], None] | None = None,
                   demand: ModelDemand | None = None) -> tuple[ModelDemand, Comparison]:
    """The model's demand on ``ds`` (yours), then training steps/s of each contender (yours first,
    the plan, AUTOTUNE) and of ideal input (one minibatch of yours replayed), the user's step run
    on every minibatch, measured alike (built fresh, caches filled, steady state, interleaved:
    :mod:`plumbkit.engine.compare`). One build of the step (a Keras model compiles once); the
    model is restored after, bitwise. The demand is evidence about yours and ideal input only:
    what predicts the plan's steps/s before the fact (``demand``: measured already, before planning)."""
    yours = contenders[0]
    ideal = Contender(IDEAL_INPUT, lambda: yours.build().take(1).cache().repeat())
    with stepping(ds, model=model, step=step) as driver:
        if demand is None:
            demand = _demand(driver, ds, seconds=MODEL_SECONDS, pipeline_alone=pipeline_alone)
        stepped = [dataclasses.replace(c, step=driver.call) for c in (*contenders, ideal)]
        return demand, compare(stepped, protocol, should_stop=should_stop, on_progress=on_progress, settle=[])


def ideal_alike(demand: ModelDemand, steps: Comparison) -> ModelDemand:
    """The demand with the step's rate and CPU per step on ideal input taken from the steps
    comparison (medians of interleaved rounds, beside yours and the plan) where it ran: evidence
    about the model alone, so a prediction made from it is still made before the fact, and a
    burst of load during the single 0.6 s window of :func:`measure_model` does not set it."""
    ideal = steps.results.get(IDEAL_INPUT)
    if ideal is None or not ideal.ok or ideal.cpu_per_batch_median is None:
        return demand
    return dataclasses.replace(demand, ideal_steps_per_s=ideal.median, cpu_per_step=ideal.cpu_per_batch_median)


def training_figures(plan: Any, demand: ModelDemand, steps: Comparison, *, yours: str, planned: str) -> None:
    """The plan's training figures beside its pipeline figures: the model's demand, the steps/s
    measured alike with the model in the loop, and the steps/s predicted before the fact."""
    plan.model = demand
    plan.trace.model = demand  # the trace of yours, as trace(..., model=) gives it
    plan.steps_comparison = steps
    plan.steps_baselines = {name: r.median for name, r in steps.results.items() if r.ok}
    plan.measured_steps_per_s = steps.median(planned if planned in steps.results else yours)
    plan.steps_baselines.pop(IDEAL_INPUT, None)
    plan.ideal_steps_per_s = steps.median(IDEAL_INPUT)
    for name, result in steps.results.items():
        if not result.ok:
            plan.notes.append(f"{name} with the model in the loop: failed ({result.failed})")
