"""The first epoch: what a layout reaches while its caches fill (issue 26, item 4).

In steady state an operator below a cache costs nothing (:func:`~.predict.free_in_steady_state`),
so a plan judged by its steady state alone leaves the fill as slow as the user wrote it: an 8 ms
fetch below a cache of the whole epoch kept sequential fills at 1/8 ms, whatever the steady state
promises. The filling epoch is a configuration of its own: everything below each cache runs, with
the threads the layout gives it, and every element is also written into the cache. Pure Python.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .predict import Evidence, Layout, Prediction, predict

#: The limit a disk tier's write bandwidth sets (minibatches/s it can absorb).
WRITE_LIMIT = "cache tier write bandwidth"


def predict_fill(ev: Evidence, layout: Layout, *, write_limit: float | None = None) -> Prediction:
    """The first epoch's throughput while every cache of `layout` fills: operators below each
    cache are charged (with the threads the layout gives them), and so is writing the cache;
    `write_limit` (minibatches/s a disk tier can absorb) binds too. Same Prediction type as
    predict(): throughput, binding, limits, cpu_per_batch."""
    fill = predict(ev, layout, filling=True)
    if write_limit is None or not math.isfinite(write_limit):
        return fill
    limits = {**fill.limits, WRITE_LIMIT: write_limit}
    binding = min(limits, key=limits.get)
    return replace(fill, throughput=limits[binding], binding=binding, limits=limits)


def fills_a_cache(ev: Evidence, layout: Layout) -> bool:
    """A cache of ``layout`` fills in the first epoch (plumbkit's, or one of the user's)."""
    return bool(layout.cached) or any(op.kind == "cache" for op in ev.pipeline)


def fill_seconds(fill: Prediction, epoch_batches: float) -> float:
    """Seconds the first epoch takes at ``fill``'s throughput (``epoch_batches`` minibatches);
    inf when it is predicted to yield nothing."""
    if fill.throughput <= 0:
        return math.inf
    return epoch_batches / fill.throughput
