"""The user's training step in the loop: its rate on ideal input and on the user's pipeline, and
the time each step waits for input (a TensorFlow edge).

A compiled Keras model is driven through its own ``make_train_function()``: Keras 3 on TF 2.21
sets ``model.train_function``, which takes either a ``tf.data.Iterator`` (``fit``'s form: the
``get_next`` runs inside the compiled function, where no one can time it) or any Python iterable
of minibatches (its other branch: the same compiled ``one_step_on_data`` per minibatch). plumbkit
hands it ``[minibatch]``, one step per call, so the minibatch is pulled by a plain ``next()`` that
is timed apart from the step: the time waiting for input, as the TF Profiler counts it. The same
loop drives ``step=fn``, any callable taking one minibatch (a ``tf.function`` train step, a plain
Python loop body). No device copy is added: minibatches reach the step as ``next()`` gives them.

Ideal input is one real minibatch replayed, ``take(1).cache().repeat()`` (FastFlow's form): the
step rate there is the model's demand, and the process CPU per step there is the model's own CPU.
Everything runs inside a :class:`~plumbkit.tfdata.model_state.StateGuard`: the model's variables
are put back, bitwise, whatever happens.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable

import tensorflow as tf

from ..model.demand import ModelError
from ..model.errors import first_line
from .model_state import StateGuard, callable_variables, keras_variables
from .run import measurable


@dataclass(frozen=True)
class StepWindow:
    """Steps timed over one window: how many, wall seconds, seconds waiting in ``next()``, CPU."""

    steps: int
    seconds: float
    waiting: float
    cpu: float

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def input_bound(self) -> float:
        """Share of step time spent waiting for input (the TF Profiler's definition)."""
        return min(1.0, self.waiting / self.seconds) if self.seconds > 0 else 0.0

    @property
    def cpu_per_step(self) -> float:
        return self.cpu / self.steps if self.steps else 0.0


@dataclass
class StepDriver:
    """One training step on one minibatch (``call``), the snapshot that undoes it, and how it
    was reached (``kind``); :meth:`close` restores the model."""

    call: Callable[[Any], Any]
    kind: str
    guard: StateGuard
    undo: Callable[[], None] = lambda: None

    def close(self) -> None:
        self.guard.restore()
        self.undo()


def step_error_line(err: BaseException) -> str:
    """The error in one line; Keras wraps the cause in "Exception encountered when calling ...",
    with terminal colour codes around it: the cause is the line that says something."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Exception encountered when calling"):
        return first_line(lines[1])
    return first_line(text) if text.strip() else type(err).__name__


def _describe(batch: Any) -> str:
    shapes = tf.nest.map_structure(lambda t: tuple(t.shape) if hasattr(t, "shape") else type(t).__name__, batch)
    return str(shapes)


def _keras_driver(model: Any, batch: Any) -> StepDriver:
    """The model's own train function, one step per call; built as ``fit`` builds it first."""
    previous = model.train_function
    try:
        if hasattr(model, "_symbolic_build"):  # what fit() does before its first step
            model._symbolic_build(data_batch=batch)  # noqa: SLF001 - fit's own set-up, nothing trained
    except Exception as err:  # noqa: BLE001 - said in one line
        raise ModelError(f"the model rejects the pipeline's minibatches {_describe(batch)}: "
                         f"{step_error_line(err)}") from None
    guard = StateGuard(keras_variables(model), reach="the Keras model's variables, optimizer and metrics")
    model.make_train_function()
    train = model.train_function

    def undo() -> None:
        model.train_function = previous
    return StepDriver(lambda b: train([b]), "keras model", guard, undo)


def check_step_arguments(model: Any, step: Any) -> None:
    """What can be said wrong before any minibatch exists (so a trace does not run first)."""
    if model is not None and step is not None:
        raise ModelError("give model= (a compiled Keras model) or step= (a callable taking one "
                         "minibatch), not both")
    if model is not None and not hasattr(model, "make_train_function"):
        raise ModelError(f"model= takes a compiled Keras model, not a {type(model).__name__}; "
                         f"for anything else pass step=fn (a callable taking one minibatch)")
    if model is not None and (not getattr(model, "compiled", False) or getattr(model, "optimizer", None) is None):
        raise ModelError("the model is not compiled: call model.compile(optimizer=..., loss=...) "
                         "before handing it to plumbkit")
    if step is not None and not callable(step):
        raise ModelError(f"step= takes a callable taking one minibatch, not a {type(step).__name__}")


def step_driver(model: Any, step: Callable[[Any], Any] | None, batch: Any) -> StepDriver:
    """The driver for ``model`` (a compiled Keras model) or ``step`` (a callable taking one
    minibatch), with its snapshot taken; ModelError (one line) when it cannot be driven."""
    check_step_arguments(model, step)
    if model is not None:
        return _keras_driver(model, batch)
    if step is None:
        raise ModelError("no model= or step= given")
    if hasattr(step, "get_concrete_function"):  # a tf.function: trace it, then snapshot what it captured
        try:
            captured = list(step.get_concrete_function(batch).variables)
        except Exception as err:  # noqa: BLE001 - said in one line
            raise ModelError(f"the step rejects the pipeline's minibatches {_describe(batch)}: "
                             f"{step_error_line(err)}") from None
        found = callable_variables(step)
        return StepDriver(step, "tf.function step", StateGuard([*captured, *found],
                                                               reach="the tf.function's captured variables"))
    return StepDriver(step, "python step", StateGuard(callable_variables(step),
                                                      reach="variables reachable from the callable"))


def _sync(outputs: Any) -> None:
    """Wait for the step's results (a GPU runs them asynchronously): read one scalar's worth."""
    for leaf in tf.nest.flatten(outputs):
        if hasattr(leaf, "numpy"):
            leaf.numpy()
            return


def run_steps(ds: tf.data.Dataset, call: Callable[[Any], Any], *, seconds: float, warmup: float,
              should_stop: Callable[[], bool] | None = None) -> StepWindow:
    """Steps fed by a fresh iterator of ``ds``: ``warmup`` seconds (at least two steps), then one
    window of about ``seconds``, each ``next()`` timed apart from the step it feeds."""
    it = iter(ds)
    begin = time.perf_counter()
    warm = 0
    while warm < 2 or time.perf_counter() - begin < warmup:
        outputs = call(next(it))
        warm += 1
    _sync(outputs)
    steps, waiting = 0, 0.0
    c0, t0 = time.process_time(), time.perf_counter()
    while True:
        a = time.perf_counter()
        batch = next(it)
        waiting += time.perf_counter() - a
        outputs = call(batch)
        steps += 1
        if time.perf_counter() - t0 >= seconds or (should_stop is not None and should_stop()):
            break
    _sync(outputs)
    return StepWindow(steps, time.perf_counter() - t0, waiting, time.process_time() - c0)


def measure_step_demand(ds: tf.data.Dataset, driver: StepDriver, batch_ds: tf.data.Dataset, *,
                        seconds: float, should_stop: Callable[[], bool] | None = None
                        ) -> tuple[StepWindow, StepWindow]:
    """(ideal, yours): the step on one replayed minibatch of ``batch_ds`` (``take(1).cache()
    .repeat()``), then on ``ds`` (epochs repeated), ``seconds`` each after a warm-up of a third."""
    ideal_ds = batch_ds.take(1).cache().repeat()
    ideal = run_steps(ideal_ds, driver.call, seconds=seconds, warmup=seconds / 3, should_stop=should_stop)
    yours = run_steps(measurable(ds), driver.call, seconds=seconds, warmup=seconds / 3, should_stop=should_stop)
    return ideal, yours


def first_minibatch(ds: tf.data.Dataset) -> Any:
    """One real minibatch of ``ds`` (what the step is built and checked on)."""
    for batch in ds.take(1):
        return batch
    raise ModelError("the pipeline yields no minibatch to feed the model")


def first_step(driver: StepDriver, batch: Any) -> None:
    """Run the step once (it compiles here); an error becomes one line (the caller restores)."""
    try:
        _sync(driver.call(batch))
    except Exception as err:  # noqa: BLE001 - said in one line
        what = "the model rejects" if driver.kind == "keras model" else "the step raised on"
        raise ModelError(f"{what} the pipeline's minibatches {_describe(batch)}: {step_error_line(err)}") from None


__all__ = ["StepDriver", "StepWindow", "check_step_arguments", "first_minibatch", "first_step", "measure_step_demand",
           "run_steps", "step_driver", "step_error_line"]
