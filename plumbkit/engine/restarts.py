"""Epoch restarts, measured on the user's pipeline when it is traced: how many minibatches an
epoch holds before the part below a repeat is built again, and what each restart costs
(:class:`plumbkit.planning.predict.EpochRestarts`, the prediction's epoch-averaged rate).

A finite pipeline is consumed with ``repeat()`` on top (training's epochs, the comparison's
:func:`plumbkit.tfdata.run.measurable`), a ``repeat()`` in the pipeline restarts what is below
it: each restart builds that part's threads again, refills its shuffle buffers and waits for the
first elements through its depth. Measured only where an epoch is short enough to matter.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..planning.predict import EpochRestarts
from ..tfdata.runtime_costs import epoch_restart
from .trace_result import Trace

if TYPE_CHECKING:
    import tensorflow as tf

#: Epochs longer than this (at the traced rate) are not measured: a restart of a few ms weighs
#: under 1% of them, and measuring several epochs would cost seconds. Judgement, not measured.
LONGEST_EPOCH_SECONDS = 2.0
#: Seconds the measurement may spend (besides the epoch that fills any cache): 3-12 epochs.
MEASURE_SECONDS = 1.5


def restart_scope(t: Trace) -> tuple[float, str] | None:
    """Root minibatches between two restarts and the operator whose subtree restarts: a finite
    pipeline's epoch (the root), or, for an infinite one, one pass of the input of its outermost
    ``repeat()``. None: unknown, or nothing finite is repeated."""
    ops = {o.name: o for o in t.ops}
    p = t.pipeline
    root = ops.get(p.root)
    if root is None or root.cardinality is None:
        return None
    if math.isfinite(root.cardinality):
        return (float(root.cardinality), p.root) if root.cardinality > 0 else None
    for op in [p[p.root], *p.descendants(p.root)]:  # the outermost repeat first
        if op.kind != "repeat" or not op.inputs:
            continue
        below = ops.get(op.inputs[0])
        if below is None or below.cardinality is None or not math.isfinite(below.cardinality):
            return None  # a repeat of an infinite input never restarts it
        if below.cardinality <= 0 or not below.visit_ratio:
            return None
        return below.cardinality / below.visit_ratio, below.name
    return None


def measure_restarts(ds: "tf.data.Dataset", t: Trace) -> EpochRestarts | None:
    """The user's epoch restarts, measured on ``ds`` (the user's pipeline, traced as ``t``):
    None where the epoch is unknown, infinite or longer than :data:`LONGEST_EPOCH_SECONDS`."""
    scope = restart_scope(t)
    n = scope[0] if scope else 0.0
    if not scope or not t.throughput or n / t.throughput > LONGEST_EPOCH_SECONDS or n < 5:
        return None
    epoch = n / t.throughput
    epochs = int(min(12, max(3, MEASURE_SECONDS / epoch)))
    startup = epoch_restart(ds, int(round(n)), epochs=epochs, limit=4 * (epochs + 1) * epoch + 5.0)
    return EpochRestarts(minibatches=n, startup=startup, below=scope[1]) if startup is not None else None
