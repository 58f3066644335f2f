"""Tracing a pipeline: read its model, run the tracer, analyse the snapshots into a :class:`Trace`."""

from __future__ import annotations

import dataclasses
import math
import os
import random
from typing import TYPE_CHECKING, Callable, Union

from ..model.costs import Calibration
from ..model.errors import PipelineError
from ..model.pipeline import Pipeline
from ..model.samples import RawTrace, Snapshot
from ..tfdata.graph import pipeline_of, resolve_pipeline, static_cardinalities
from ..tfdata.tracer import Tracer
from .calibration import calibrated
from .trace_result import Trace, build_trace

if TYPE_CHECKING:
    import tensorflow as tf

PipelineLike = Union["tf.data.Dataset", Callable[[], "tf.data.Dataset"]]
#: Said while the pipeline runs: the CPU shares shown are traced wall time, not yet CPU.
LIVE_NOTE = ("CPU shares: traced wall time (it counts waiting for a core); each operator's CPU is "
             "calibrated alone when the trace ends")
CALIBRATING_NOTE = "calibrating: each operator runs alone for a moment (CPU shares so far: wall time)"
#: Above this many files, the source size is estimated from a sample (statting is not free).
MAX_FILES_STATTED = 10_000


def source_file_sizes(files: list[str], *, sample_fraction: float | None = None,
                      seed: int = 0) -> tuple[dict[str, int], bool]:
    """Sizes of the source files, and whether they are exact.

    With ``sample_fraction`` (or more than :data:`MAX_FILES_STATTED` files) only a random sample
    is statted and every unstatted file is given the sample's mean size, so the total is the
    paper's ``m/n x sum(sampled)`` estimate.
    """
    if sample_fraction is None and len(files) <= MAX_FILES_STATTED:
        return {f: os.path.getsize(f) for f in files if os.path.isfile(f)}, True
    fraction = sample_fraction or MAX_FILES_STATTED / len(files)
    k = max(1, math.ceil(len(files) * fraction))
    sample = random.Random(seed).sample(files, min(k, len(files)))
    sizes = {f: os.path.getsize(f) for f in sample if os.path.isfile(f)}
    mean = sum(sizes.values()) / len(sizes) if sizes else 0
    return {f: sizes.get(f, int(round(mean))) for f in files}, len(sample) == len(files)


def explain_limits(pipeline: Pipeline, cardinalities: dict[str, int]) -> tuple[str, ...]:
    """Plain-words notes on what cannot be done with this pipeline."""
    notes = list(pipeline.problems)
    if cardinalities.get(pipeline.root) == -1:
        notes.append("infinite pipeline (repeat() without a count): traced for a bounded time; "
                     "operators above the repeat cannot be cached")
    random_ops = [op.label for op in pipeline if op.random]
    if random_ops:
        notes.append(f"random operators {random_ops}: they and everything above them cannot be cached")
    return tuple(notes)


def trace(pipeline: PipelineLike, *, seconds: float = 10.0, cores: int | None = None,
          max_batches: int | None = None, min_seconds: float = 2.0, converge: bool = True,
          sample_fraction: float | None = None, warmup_batches: int = 0,
          on_update: Callable[[Trace], None] | None = None,
          tracer_ready: Callable[[Tracer], None] | None = None,
          calibrate: bool | Calibration = True) -> Trace:
    """Trace ``pipeline`` (a Dataset or a zero-argument callable returning one).

    Runs it for at most ``seconds`` (stopping earlier once throughput is stable within 1%, or
    after ``max_batches``), and returns the :class:`Trace`. ``on_update`` receives a partial
    Trace with every snapshot (a few times a second) for live views; ``tracer_ready`` gets the
    running :class:`Tracer` so a caller can ``stop()`` it. A KeyboardInterrupt ends the trace
    early and keeps what was measured (``trace.ended == "interrupted"``). ``warmup_batches``
    are consumed before measuring (one epoch fills a cache, so the trace sees steady state).

    ``calibrate`` (default): once the trace ends, each operator runs alone for a moment (about
    0.3 s each, :mod:`plumbkit.engine.calibration`) so its CPU is CPU and its waiting is waiting;
    until then, and with ``calibrate=False``, CPU shares are traced wall time, scaled to the
    process CPU (``trace.calibrated`` says which). Pass a :class:`Calibration` to reuse one
    (operators matched by label). ``on_update`` gets the uncalibrated trace when the live
    phase ends, then the calibrated one is returned.
    """
    ds = resolve_pipeline(pipeline)
    model = pipeline_of(ds)
    cardinalities = static_cardinalities(ds, model)
    files = sorted({f for op in model for f in op.files})
    sizes, exact = source_file_sizes(files, sample_fraction=sample_fraction)
    notes = explain_limits(model, cardinalities)

    def snapshot_hook(raw: RawTrace) -> Callable[[Snapshot], None] | None:
        if on_update is None:
            return None
        live = (*notes, LIVE_NOTE) if calibrate is not False else notes

        def hook(_: Snapshot) -> None:
            on_update(build_trace(model, raw, cardinalities=cardinalities, file_sizes=sizes,
                                  notes=live, source_exact=exact))
        return hook

    tracer = Tracer(ds, seconds=seconds, max_batches=max_batches, min_seconds=min_seconds,
                    converge=converge, cores=cores, warmup_batches=warmup_batches)
    tracer.on_snapshot = snapshot_hook(tracer.raw)
    if tracer_ready is not None:
        tracer_ready(tracer)
    raw = tracer.run()
    if raw.ended == "error" and not raw.snapshots:
        raise PipelineError(f"the pipeline failed before producing anything: {raw.error}")
    result = build_trace(model, raw, cardinalities=cardinalities, file_sizes=sizes, notes=notes,
                         source_exact=exact)
    if raw.ended == "error":
        result.notes = (*result.notes, f"the pipeline raised while tracing: {raw.error}")
    if calibrate is not False and raw.ended not in ("error", "interrupted") and result.throughput > 0:
        if on_update is not None:
            on_update(dataclasses.replace(result, notes=(*result.notes, CALIBRATING_NOTE)))
        result = _calibrated(ds, result, calibrate if isinstance(calibrate, Calibration) else None)
    return result


def _calibrated(ds, result: Trace, reuse: Calibration | None) -> Trace:
    """The calibration phase; an interrupt keeps the uncalibrated trace (labelled so)."""
    try:
        return calibrated(ds, result, reuse=reuse)
    except KeyboardInterrupt:
        result.notes = (*result.notes, "calibration interrupted: CPU shares are traced wall time")
        return result


__all__ = ["PipelineLike", "trace", "source_file_sizes", "PipelineError"]
