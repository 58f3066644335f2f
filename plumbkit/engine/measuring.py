"""Measuring a pipeline for the engine: steady state, the disk's ceiling, one epoch's length.

Every throughput called *measured* comes from here: the pipeline is traced in this process
(epochs repeated as training consumes them). TensorFlow is reached through ``plumbkit.tfdata``.
Each measurement honours the running operation's Cancel (:mod:`plumbkit.engine.scheduler`):
it checks before it starts and ends at once when stopped.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..model.costs import Calibration
from ..model.errors import PipelineError
from ..tfdata import run
from ..tfdata.disk import READABLE_KINDS, measure_read_bandwidth
from ..tfdata.run import measurable
from .scheduler import Progress, checkpoint, stop_event
from .trace_result import Trace
from .tracing import trace

if TYPE_CHECKING:
    import tensorflow as tf

__all__ = ["Progress", "calibrated_measure", "disk_bound", "ideal_throughput", "measure", "one_epoch_batches"]


def measure(ds: "tf.data.Dataset", *, seconds: float, warmup_batches: int = 0, cores: int | None = None,
            calibrate: bool | Calibration = False) -> Trace:
    """Trace ``ds`` in steady state (epochs repeated; ``warmup_batches`` consumed first).

    Not calibrated by default (a throughput measurement needs none); ``calibrate=True`` where a
    decision is made from the trace, or a :class:`Calibration` to reuse (a rebuilt pipeline).
    A pipeline that raises while being measured is not measured: PipelineError, one line.
    """
    checkpoint()
    t = trace(measurable(ds), seconds=seconds, warmup_batches=warmup_batches, cores=cores,
              min_seconds=min(2.0, seconds), calibrate=calibrate)
    if t.ended == "error":
        raise PipelineError(f"the pipeline raised while being measured, after "
                            f"{t.raw.snapshots[-1].batches if t.raw.snapshots else 0:,} minibatches: {t.raw.error}")
    return t


def calibrated_measure(ds: "tf.data.Dataset", t: Trace) -> Trace:
    """``t`` (a measurement of ``ds``) with per-operator costs calibrated, if it has none yet."""
    if t.calibrated:
        return t
    from .calibration import calibrated
    return calibrated(measurable(ds), t)


def ideal_throughput(ds: "tf.data.Dataset", **kwargs) -> float:
    """The consumer's ideal bound (:func:`plumbkit.tfdata.run.ideal_throughput`), stoppable."""
    checkpoint()
    bound = run.ideal_throughput(ds, stop=stop_event(), **kwargs)
    checkpoint()
    return bound


def disk_bound(t: Trace, *, parallelism: int) -> float | None:
    """``BW(p) / D``: minibatches/s the disk allows at read parallelism ``p`` (None: no files)."""
    a = t.analysis
    readers = [op for op in t.pipeline if op.reads_files]
    files = sorted({f for op in t.pipeline for f in op.files})
    batches = t.raw.snapshots[-1].batches if t.raw.snapshots else 0
    if not readers or not files or not a.bytes_read or not batches:
        return None
    kind = next((k for k in (readers[0].kind, *readers[0].inner_kinds) if k in READABLE_KINDS), None)
    if kind is None:
        return None
    checkpoint()
    curve = measure_read_bandwidth(files, kind, parallelisms=(1, 2, max(2, parallelism)), seconds=0.3)
    checkpoint()
    if curve is None:
        return None
    return curve(parallelism) / (a.bytes_read / batches)


def one_epoch_batches(t: Trace, node: str | None = None) -> int:
    """Root minibatches that consume one full pass of ``node``: ``n_node / V_node``.

    That many batches fill a cache placed at ``node`` (0 if its size is infinite or unknown).
    """
    op = next((o for o in t.ops if o.name == (node or t.pipeline.root)), None)
    if op is None or op.cardinality is None or not math.isfinite(op.cardinality) or not op.visit_ratio:
        return 0
    return int(math.ceil(op.cardinality / op.visit_ratio)) + 2
