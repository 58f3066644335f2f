"""Epoch restarts, measured on the user's pipeline when it is traced: how many minibatches an
epoch holds before the part below a repeat is built again, and what each restart costs
(:class:`plumbkit.planning.predict.EpochRestarts`, the prediction's epoch-averaged rate).

A finite pipeline is consumed with ``repeat()`` on top (training's epochs, the comparison's
:func:`plumbkit.tfdata.run.measurable`), a ``repeat()`` in the pipeline restarts what is below
it: each restart builds that part's threads again, refills its shuffle buffers and waits for the
first elements through its depth. Measured only where an epoch is short enough to matter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..planning.predict import EpochRestarts
from ..tfdata.runtime_costs import epoch_restart, is_infinite
from .trace_result import Trace, reanalyzed

if TYPE_CHECKING:
    import tensorflow as tf

#: TensorFlow's cardinality of an infinite dataset, and of one it cannot tell.
INFINITE, UNKNOWN = -1, -2
#: Epochs longer than this (at the traced rate) are not measured: a restart of a few ms weighs
#: under 1% of them, and measuring several epochs would cost seconds. Judgement, not measured.
LONGEST_EPOCH_SECONDS = 2.0
#: Seconds the measurement may spend (besides the epoch that fills any cache): 3-12 epochs.
MEASURE_SECONDS = 1.5


def restart_scope(t: Trace) -> tuple[float, str] | None:
    """Root minibatches between two restarts and the operator whose subtree restarts: a finite
    pipeline's epoch (the root), or, for an infinite one, one pass of the input of its outermost
    ``repeat()`` (TensorFlow's own cardinalities: the trace's counts are of the run, epochs
    repeated). None: unknown, or nothing finite is repeated."""
    p, sizes = t.pipeline, t.cardinalities
    visits = {o.name: o.visit_ratio for o in t.ops}
    size = sizes.get(p.root, UNKNOWN)
    if size > 0:
        return float(size), p.root
    if size != INFINITE:
        return None
    for op in [p[p.root], *p.descendants(p.root)]:  # the outermost repeat first
        if op.kind != "repeat" or not op.inputs:
            continue
        below, v = op.inputs[0], visits.get(op.inputs[0])
        if sizes.get(below, UNKNOWN) <= 0 or not v:
            return None  # a repeat of an infinite (or unknown) input never restarts it
        n = sizes[below] / whole(v)
        return (n, below) if abs(n - round(n)) < 0.01 else None  # epochs end on a minibatch
    return None


def whole(visits: float) -> float:
    """A traced visit ratio read as the whole number of elements per minibatch it measures (the
    trace's counts are sampled while elements are in flight: 1.06 for a batch's 1): within 10%."""
    k = round(visits) if visits >= 1 else 1 / round(1 / visits)
    return float(k) if k and abs(visits - k) <= 0.1 * k else visits


def measure_restarts(build: Callable[[], "tf.data.Dataset"], t: Trace) -> EpochRestarts | None:
    """The user's epoch restarts, measured on copies ``build`` makes of the user's pipeline
    (traced as ``t``): a finite pipeline (or one of unknown length) is run epoch after epoch, as
    ``repeat()`` on top runs it, its epochs counted on one copy and timed on another; an infinite
    one restarts below its own ``repeat()`` where TensorFlow knows that epoch's length. None
    where the epoch is unknown, infinite or longer than :data:`LONGEST_EPOCH_SECONDS`.

    Why copies: epochs timed on a Dataset object already iterated to its end (by the trace, or
    by the pass that counts the epoch) ran 790-842 minibatches/s on the expert-tuned bench
    pipeline, against 883-981 on a fresh copy or in a plain training loop (session 41's
    ``restarts_same_object.py``): the restart read 28 ms where a user's epoch pays less."""
    ds = build()
    p = t.pipeline
    top = p[p.root]
    if not t.throughput:
        return None
    if is_infinite(ds):  # its own repeat(): TensorFlow's epoch length, or nothing
        scope = restart_scope(t)
        if scope is None or scope[0] < 5 or scope[0] / t.throughput > LONGEST_EPOCH_SECONDS:
            return None
        n, below = int(round(scope[0])), scope[1]
    else:  # epochs of the whole pipeline, as measurable() repeats them: counted
        added = top.kind == "repeat" and top.inputs and t.cardinalities.get(p.root) == INFINITE  # measurable()'s
        n, below = None, top.inputs[0] if added else p.root
        if t.cardinalities.get(below, UNKNOWN) / t.throughput > LONGEST_EPOCH_SECONDS:
            return None  # TensorFlow knows it is long
    epoch = (n or 0) / t.throughput
    epochs = int(min(12, max(3, MEASURE_SECONDS / epoch))) if epoch else 4
    measured = epoch_restart(ds, n, epochs=epochs, fresh=build,
                             limit=LONGEST_EPOCH_SECONDS * (epochs + 1) + 5.0, epoch_limit=2 * LONGEST_EPOCH_SECONDS)
    if measured is None or measured[0] / t.throughput > LONGEST_EPOCH_SECONDS:
        return None
    return EpochRestarts(minibatches=float(measured[0]), startup=measured[1], below=below, epoch=measured[2])


def with_counted_epoch(t: Trace, restarts: EpochRestarts | None) -> Trace:
    """``t`` with its epoch's length where TensorFlow could not tell it (a ``from_generator``
    source) and the restarts counted it (``restarts.below``: your top operator, under the
    ``repeat()`` a measurement adds): each operator's count below follows from it, so what is
    finite and deterministic there can be cached (a generator's 3,000 rows, padded and batched,
    had stayed "size unknown"). Unchanged otherwise."""
    if restarts is None or t.cardinalities.get(restarts.below, UNKNOWN) != UNKNOWN:
        return t
    n = int(round(restarts.minibatches))
    note = (f"TensorFlow cannot tell this pipeline's length: one epoch was counted, {n:,} minibatches, "
            f"and the size of each operator below follows from it")
    return reanalyzed(t, cardinalities={**t.cardinalities, restarts.below: n}, notes=(*t.notes, note))
