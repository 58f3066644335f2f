"""Guarding a plan's cache: fill it once, under its memory guard, before anything is measured.

The planner places a memory cache where its *estimated* size fits the budget (with a margin);
the rebuilt pipeline's cache is fed through :mod:`plumbkit.tfdata.memory_guard`, which stops
the fill once more than the budget has entered it. :func:`fill_cache` consumes one epoch of
the optimized pipeline, so the cache is full (and its true size known) before the measurement,
and reports the guard's message if the estimate was too low: the optimizer then plans without
the cache and says so. Memory stays within the budget plus one element either way.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..tfdata.memory_guard import guard_text, is_guard_error
from ..tfdata.run import measurable

if TYPE_CHECKING:
    import tensorflow as tf


def fill_cache(ds: "tf.data.Dataset", batches: int, *, seconds: float) -> str | None:
    """Consume ``batches`` minibatches of ``ds`` (epochs repeated), filling its cache.

    Returns the guard's sentence if the cache passed its limit, else None (filled, or the time
    ran out first: the measurement's own warm-up then carries on). Other errors propagate.
    """
    import tensorflow as tf
    it = iter(measurable(ds))
    deadline = time.perf_counter() + seconds
    try:
        for _ in range(batches):
            next(it)
            if time.perf_counter() > deadline:
                return None
    except tf.errors.InvalidArgumentError as err:
        if is_guard_error(err.message):
            return guard_text(err.message)
        raise
    finally:
        del it  # a partial fill's buffer goes with its iterator
    return None
