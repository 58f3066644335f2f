"""Everything a training step can change, snapshotted before plumbkit measures it and restored after.

Why a snapshot and not a clone: a clone (``keras.models.clone_model``) rebuilds the layers but not
a subclassed model's own ``call``, nor the optimizer's state, nor a custom step's closure, and it
would measure a different object on perhaps a different device; the snapshot measures the user's
very model and puts back, bitwise, every variable a step can move: weights, optimizer slots and
its iteration counter, metrics' accumulators, seed generators' state (Keras 3 lists them in
``model.variables``), and TensorFlow's global generator if one exists. Values are copied to host
memory (``numpy``) and assigned back, which keeps every bit.

Which variables: a Keras model's ``variables``, ``optimizer.variables`` and ``metrics_variables``
(built first, as ``fit`` builds them before its first step, so none is created by the measurement);
a ``tf.function`` step's captured variables (its concrete function for the minibatch, traced before
it runs once, so variables it creates on its first trace are snapshotted at their initial values);
a Python step's: what is reachable from it (a bound object's or a closure's Keras models,
optimizers, ``tf.Module``s and variables). A Python step's state that is none of these (a Python
counter, a file it writes) is its own: :attr:`StateGuard.reach` says how it was found.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable

import numpy as np
import tensorflow as tf

#: How deep a Python step's closures and bound objects are searched for variables.
_MAX_DEPTH = 3


def _is_variable(x: Any) -> bool:
    return isinstance(x, tf.Variable) or (hasattr(x, "assign") and hasattr(x, "numpy") and hasattr(x, "path"))


def _unique(variables: Iterable[Any]) -> list[Any]:
    """Each variable once: a Keras 3 variable wraps a ``tf.Variable`` (``_value``), which is what a
    concrete function captures, so both name one variable."""
    seen, out = set(), []
    for v in variables:
        key = id(getattr(v, "_value", None) if isinstance(getattr(v, "_value", None), tf.Variable) else v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def keras_variables(model: Any) -> list[Any]:
    """Every variable a Keras model's training step can change (weights, seeds, optimizer,
    metrics), de-duplicated."""
    optimizer = getattr(model, "optimizer", None)
    return _unique([*model.variables, *(optimizer.variables if optimizer is not None else ()),
                    *getattr(model, "metrics_variables", ())])


def _variables_of_object(obj: Any, depth: int) -> list[Any]:
    """Variables reachable from one object of a Python step (see the module docstring)."""
    if _is_variable(obj):
        return [obj]
    if hasattr(obj, "optimizer") and hasattr(obj, "metrics_variables") and hasattr(obj, "variables"):
        return keras_variables(obj)  # a Keras model
    if isinstance(obj, tf.Module) or (hasattr(obj, "variables") and not callable(getattr(obj, "variables"))):
        try:
            return [v for v in obj.variables if _is_variable(v)]
        except Exception:  # noqa: BLE001 - an object whose variables cannot be listed is skipped
            return []
    if callable(obj) and depth < _MAX_DEPTH:
        return callable_variables(obj, depth + 1)
    if isinstance(obj, (list, tuple, dict)) and depth < _MAX_DEPTH:
        items = obj.values() if isinstance(obj, dict) else obj
        return [v for item in items for v in _variables_of_object(item, depth + 1)]
    return []


def callable_variables(fn: Callable, depth: int = 0) -> list[Any]:
    """Variables reachable from a Python callable: its bound object, closure cells, a partial's
    arguments, a ``tf.function``'s Python function."""
    found: list[Any] = []
    if isinstance(fn, functools.partial):
        found += _variables_of_object(fn.func, depth)
        found += [v for a in (*fn.args, *fn.keywords.values()) for v in _variables_of_object(a, depth)]
        return _unique(found)
    inner = getattr(fn, "python_function", None)  # a tf.function
    if inner is not None:
        return callable_variables(inner, depth)
    owner = getattr(fn, "__self__", None)
    if owner is not None:
        found += _variables_of_object(owner, depth)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            found += _variables_of_object(cell.cell_contents, depth)
        except ValueError:  # an empty cell
            pass
    return _unique(found)


def _global_generator_variables() -> list[Any]:
    """TensorFlow's global random generator's state, if the process made one (never made here)."""
    from tensorflow.python.ops import stateful_random_ops
    generator = getattr(stateful_random_ops, "global_generator", None)
    return [generator.state] if generator is not None else []


def _bits(value: Any) -> np.ndarray:
    """The raw bytes of a value (a NaN equals itself, -0.0 differs from 0.0: bitwise)."""
    return np.ascontiguousarray(np.asarray(value)).reshape(-1).view(np.uint8)


class StateGuard:
    """A snapshot of ``variables`` (host copies); :meth:`restore` assigns them back bitwise."""

    def __init__(self, variables: Iterable[Any], reach: str):
        self.variables = _unique([*variables, *_global_generator_variables()])
        self.reach = reach
        self._saved = [np.array(v.numpy(), copy=True) for v in self.variables]

    def restore(self) -> None:
        for v, value in zip(self.variables, self._saved):
            v.assign(value)

    def changed(self) -> list[str]:
        """Names of the variables whose bits differ from the snapshot (for tests and checks)."""
        return [getattr(v, "path", None) or v.name for v, value in zip(self.variables, self._saved)
                if not np.array_equal(_bits(v.numpy()), _bits(value))]

    def __len__(self) -> int:
        return len(self.variables)


__all__ = ["StateGuard", "callable_variables", "keras_variables"]
