"""Tracing a pipeline: read its model, run the tracer, analyse the snapshots into a :class:`Trace`."""

from __future__ import annotations

import dataclasses
import math
import os
import random
import time
from typing import TYPE_CHECKING, Any, Callable, Union

from ..model.costs import Calibration
from ..model.errors import PipelineError
from ..model.pipeline import Pipeline
from ..model.samples import RawTrace, Snapshot
from ..tfdata.graph import pipeline_of, resolve_pipeline, static_cardinalities
from ..tfdata.tracer import Tracer
from .calibration import calibrated
from .demand import check_step_arguments, measure_model
from .scheduler import INTERRUPTED, Cancelled, Operation, current, operation
from .trace_result import Trace, build_trace

if TYPE_CHECKING:
    import tensorflow as tf

PipelineLike = Union["tf.data.Dataset", Callable[[], "tf.data.Dataset"]]
#: Said while the pipeline runs: the CPU shares shown are traced wall time, not yet CPU.
LIVE_NOTE = ("CPU shares: traced wall time (it counts waiting for a core); each operator's CPU is "
             "calibrated alone when the trace ends")
CALIBRATING_NOTE = "calibrating: each operator runs alone for a moment (CPU shares so far: wall time)"
MODEL_NOTE = "the model in the loop: its step timed on one replayed minibatch, then on your pipeline"
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
    notes = list(pipeline.problems) + list(pipeline.remarks)
    if cardinalities.get(pipeline.root) == -1:
        notes.append("infinite pipeline (repeat() without a count): traced for a bounded time; "
                     "operators above the repeat cannot be cached")
    random_ops = [op.label for op in pipeline if op.random]
    if random_ops:
        notes.append(f"random operators {random_ops}: they and everything above them cannot be cached")
    writers = [op.label for op in pipeline if op.writes_state]
    if writers:
        notes.append(f"operators that change your variables or tables {writers}: they and everything above "
                     f"them cannot be cached (a cache would run them in the first epoch only)")
    readers = [op.label for op in pipeline if op.reads_state and not op.writes_state]
    if readers:
        notes.append(f"operators that read your variables or tables {readers}: they and everything above them "
                     f"are not cached (a cache would replay the values of its first epoch); if those never "
                     f"change while you train, add .cache() after them yourself")
    return tuple(notes)


def _partial_trace(op: Operation, error: Cancelled, _) -> Trace | None:
    """A trace cut short returns what it measured (None before anything was: the error propagates)."""
    return error.partial


@operation("trace", partial=_partial_trace)
def trace(pipeline: PipelineLike, *, seconds: float = 10.0, cores: int | None = None,
          max_batches: int | None = None, min_seconds: float = 2.0, converge: bool = True,
          sample_fraction: float | None = None, warmup_batches: int = 0,
          on_update: Callable[[Trace], None] | None = None, update_interval: float = 0.0,
          tracer_ready: Callable[[Tracer], None] | None = None, repeat_epochs: bool = True,
          calibrate: bool | Calibration = True, model: Any = None,
          step: Callable[[Any], Any] | None = None) -> Trace:
    """Trace ``pipeline`` (a Dataset or a zero-argument callable returning one).

    Runs it for at most ``seconds`` (stopping earlier once throughput is stable within 1%, or
    after ``max_batches``), and returns the :class:`Trace`. ``on_update`` receives a partial
    Trace for live views, at most every ``update_interval`` seconds (each one costs an
    analysis, so a view that redraws four times a second asks for no more); ``tracer_ready``
    gets the running :class:`Tracer` so a caller can ``stop()`` it. Ctrl-C or a Cancel ends the
    trace at once and returns what was measured so far (``trace.partial``, ``trace.ended`` is
    "interrupted" or "cancelled"). ``warmup_batches`` are consumed before measuring (one epoch
    fills a cache, so the trace sees steady state). One measurement at a time: a trace waits
    for (or stops, if it is a live trace) whatever plumbkit measurement runs in this process.

    A finite pipeline (or one of unknown length) is traced over repeated epochs, as training
    consumes it (``repeat_epochs``): an evaluation set shorter than the trace is measured over
    several epochs instead of ending after a fraction of a second. The trace's notes say so.
    An empty pipeline, one that produces nothing before the deadline, and one that fails before
    its first element raise :class:`PipelineError` with one line saying why.

    ``calibrate`` (default): once the trace ends, each operator runs alone for a moment (about
    0.3 s each, :mod:`plumbkit.engine.calibration`) so its CPU is CPU and its waiting is waiting;
    until then, and with ``calibrate=False``, CPU shares are traced wall time, scaled to the
    process CPU (``trace.calibrated`` says which). Pass a :class:`Calibration` to reuse one
    (operators matched by label). ``on_update`` gets the uncalibrated trace when the live
    phase ends, then the calibrated one is returned.

    ``model`` (a compiled Keras model) or ``step`` (a callable taking one minibatch): ``trace.model``
    is the training step's demand, measured once traced, the model unchanged (:mod:`.demand`).
    """
    op = current()
    check_step_arguments(model, step)  # before tracing: a model not compiled is said at once
    ds = resolve_pipeline(pipeline)
    pipe = pipeline_of(ds)
    cardinalities = static_cardinalities(ds, pipe)
    root_size = cardinalities.get(pipe.root, -2)
    if root_size == 0:
        raise PipelineError(f"the pipeline is empty: {pipe[pipe.root].label} yields no element "
                            f"(TensorFlow's cardinality is 0); nothing to trace")
    repeated = repeat_epochs and root_size != -1
    files = sorted({f for op_ in pipe for f in op_.files})
    sizes, exact = source_file_sizes(files, sample_fraction=sample_fraction)
    notes = explain_limits(pipe, cardinalities)

    tracer = Tracer(ds.repeat() if repeated else ds, seconds=seconds, max_batches=max_batches,
                    min_seconds=min_seconds, converge=converge, cores=cores, warmup_batches=warmup_batches)
    tracer.raw.epochs_repeated = repeated
    if on_update is not None:
        live = (*notes, LIVE_NOTE) if calibrate is not False else notes
        tracer.on_snapshot = _live_views(on_update, update_interval, lambda: build_trace(
            pipe, tracer.raw, cardinalities=cardinalities, file_sizes=sizes, notes=live, source_exact=exact))
    if tracer_ready is not None:
        tracer_ready(tracer)
    with op.stopping(tracer.stop):
        raw = tracer.run()
    if raw.ended == INTERRUPTED:  # Ctrl-C reached the tracer's loop: the whole operation ends
        op.cancel(INTERRUPTED)
    if op.cancelled:
        raw.ended = op.reason or raw.ended
    batches = raw.snapshots[-1].batches if raw.snapshots else 0
    if not op.cancelled and batches == 0 and raw.ended in ("end of data", "no element", "error"):
        raise PipelineError(nothing_produced(pipe, raw))
    notes = (*notes, *run_notes(pipe, raw, root_size, batches))
    result = build_trace(pipe, raw, cardinalities=cardinalities, file_sizes=sizes, notes=notes,
                         source_exact=exact)
    measured = not op.cancelled and raw.ended != "error" and result.throughput > 0
    result.model = _model_in_the_loop(ds, result, model, step, on_update) if measured else None
    if calibrate is not False and measured and not op.cancelled:
        if on_update is not None:
            on_update(dataclasses.replace(result, notes=(*result.notes, CALIBRATING_NOTE)))
        result = _calibrated(ds, result, calibrate if isinstance(calibrate, Calibration) else None, op)
    op.record(result, complete=not op.cancelled)
    if op.cancelled:
        raise Cancelled(op.reason, partial=result)
    return result


def _model_in_the_loop(ds, result: Trace, model: Any, step: Callable[[Any], Any] | None,
                       on_update: Callable[[Trace], None] | None):
    """The training step in the loop, once the pipeline is traced (its caches filled, as training's
    steady state has them, and the trace undisturbed by the model); live views get the verdict.
    None without a model or step, or when Cancel or Ctrl-C cut it short."""
    if model is None and step is None:
        return None
    if on_update is not None:
        on_update(dataclasses.replace(result, notes=(*result.notes, MODEL_NOTE)))
    op = current()
    try:
        demand = measure_model(ds, model=model, step=step, pipeline_alone=result.throughput)
    except KeyboardInterrupt:  # the trace is kept, marked interrupted; the model was restored
        op.cancel(INTERRUPTED)
        result.raw.ended = INTERRUPTED
        return None
    if op.cancelled:  # cut short: no verdict from windows that did not run their time
        return None
    if on_update is not None:
        on_update(dataclasses.replace(result, model=demand))
    return demand


def _live_views(on_update: Callable[[Trace], None], interval: float,
                build: Callable[[], Trace]) -> Callable[[Snapshot], None]:
    """A snapshot hook that hands live views a partial trace at most every ``interval`` seconds
    (each one costs an analysis: a view that would not draw it is spared it)."""
    last = [-math.inf]

    def hook(_: Snapshot) -> None:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            on_update(build())
    return hook


def _calibrated(ds, result: Trace, reuse: Calibration | None, op: Operation) -> Trace:
    """The calibration phase; an interrupt keeps the uncalibrated trace (labelled so) and ends
    the operation like any Ctrl-C."""
    def between_operators(message: str, fraction: float) -> None:
        op.check()  # a Cancel (the widget's button) ends the calibration before the next operator

    try:
        return dataclasses.replace(calibrated(ds, result, reuse=reuse, on_progress=between_operators),
                                   model=result.model)
    except (KeyboardInterrupt, Cancelled):
        result.notes = (*result.notes, "calibration interrupted: CPU shares are traced wall time")
        if not op.cancelled:
            op.cancel(INTERRUPTED)
        return result


def run_notes(model: Pipeline, raw: RawTrace, root_size: int, batches: int) -> list[str]:
    """What the run itself showed: epochs repeated, a consumer left waiting, an error."""
    notes = []
    if raw.epochs_repeated:
        elapsed = raw.snapshots[-1].t if raw.snapshots else 0.0
        if root_size > 0 and batches >= root_size:
            epochs = batches / root_size
            notes.append(f"finite pipeline: one epoch is {root_size:,} minibatches; traced over repeated "
                         f"epochs ({epochs:.1f} in {elapsed:.1f} s), as training consumes it")
        elif root_size < 0:
            notes.append("pipeline of unknown length: traced with repeat() on top, so a short epoch "
                         "is measured over several, as training consumes it")
    if raw.ended == "error":
        notes.append(f"the pipeline raised after {batches:,} minibatches: {raw.error}; "
                     f"the numbers are for what ran until then")
    elif raw.consumer_blocked and raw.ended != "no element":
        notes.append("the pipeline was still computing its next minibatch when the trace ended "
                     "(a slow first element, or a filter that rejects a long run of elements)")
    return notes


def nothing_produced(model: Pipeline, raw: RawTrace) -> str:
    """One line: why a run yielded no minibatch, and where the elements stopped."""
    where = _where_elements_stop(model, raw)
    if raw.ended == "end of data":
        return f"the pipeline is empty: it ended without producing an element{where}"
    if raw.ended == "no element":
        elapsed = raw.snapshots[-1].t if raw.snapshots else 0.0
        return (f"the pipeline produced no element in {elapsed:.1f} s{where}; if its first minibatch "
                f"just takes longer, trace for longer (seconds=...)")
    return f"the pipeline failed before producing anything: {raw.error}"


def _depth(nodes: dict, rid: int) -> int:
    """Runtime node ``rid``'s distance from the root (the node nobody reads)."""
    parents = {i: p for p, n in nodes.items() for i in n.inputs}
    depth = 0
    while rid in parents and depth < len(nodes):
        rid, depth = parents[rid], depth + 1
    return depth


def _where_elements_stop(model: Pipeline, raw: RawTrace) -> str:
    """``: filter(keep) passed none of the 1,234 elements it read`` (or nothing when unknown)."""
    from ..analysis.runtime_map import map_runtime
    if not raw.snapshots:
        return ""
    nodes = raw.snapshots[-1].nodes
    rmap = map_runtime(model, nodes, epochs_repeated=raw.epochs_repeated)
    for rid in sorted(nodes, key=lambda i: -_depth(nodes, i)):  # closest to the sources first
        node = nodes[rid]
        read = sum(nodes[i].elements for i in node.inputs if i in nodes)
        owner = rmap.owner.get(rid)
        if node.elements == 0 and read > 0 and owner in model.operators and rmap.role.get(rid) == "op":
            return f": {model[owner].label} passed none of the {read:,} elements it read"
    return ""


__all__ = ["PipelineLike", "trace", "source_file_sizes", "PipelineError"]
