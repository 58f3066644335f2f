"""Calibrate each operator's cost: run it alone, on a cached sample of its real inputs.

Why: tf.data's per-node self time (what a live trace reads) is wall time. With tf.data's
parallel maps sharing two cores, or a neighbour busy on one, a cheap operator's wall time
includes waiting for a core a heavy one holds; and an operator that waits (a sleep, a remote
fetch) shows wall time with almost no CPU. So each operator is run alone, in the pipeline's own
execution mode (the same options and parallelism), and timed by the process CPU clock:

- an operator reading one input: the graph with ``take(k).cache().repeat()`` spliced under it
  (a sample of its real inputs, computed once), pulled by a graph loop from one long-lived
  iterator (no Python per element, the iterator's start-up outside the timing), minus the same
  sample read without the operator; runs interleaved, each timed from quiet to quiet, medians;
- a source (or ``from_generator``): itself, repeated, driven the same way;
- operators that only pass elements on (prefetch, repeat, take, ...) and several-input ones
  keep the trace's figures (labelled so).

Operators that may wait (Python functions, sources, or an operator whose traced wall time per
element is well above its CPU) also get a short sequential probe, one call at a time: its wall
time per element, less the time its threads sat ready waiting for a core (the kernel's run-queue
accounting), is the operator's *latency*: on a busy machine a CPU-bound operator is slowed
down, it does not wait. Runs in this process (pipelines holding Python
functions are rebuilt here, never elsewhere), and needs the machine to itself: it is its own
phase, after a live trace, never during one.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import tensorflow as tf
from tensorflow.python.data.util import structure
from tensorflow.python.ops import gen_dataset_ops

from ..host.machine import available_cores
from ..host.threads import NO_BACKGROUND, Background, measure_background, runnable_seconds, schedstat
from ..model.costs import ALONE, FUSED, SOURCE, Calibration, OperatorCost
from ..model.pipeline import Operator, Pipeline
from ..tunables import (
    CORES_SPARE_SHARE,
    IN_FLIGHT_CALLS,
    LATENCY_RATIO,
    MAX_CONCURRENCY,
    PARALLEL_BUILDS,
    PROBE_CANDIDATE_RATIO,
    PULLED_PER_STEP,
    QUEUED_STRETCH,
    QUIET_SHARE,
    QUIET_STEP_SECONDS,
    SETTLED_SPREAD,
    TARGET_CPU_SECONDS,
    WORKER_SHARE,
)
from . import graph_edits
from .graph import dataset_at
from .python_ops import python_call_cpu
from .runtime_costs import idle_per_element
from ..model.errors import first_line

#: Inputs cached per operator (its real inputs, computed once by the pipeline below it), at
#: most; fewer (not under MIN_SAMPLE) when computing them would take over SAMPLE_SECONDS.
SAMPLE_ELEMENTS, MIN_SAMPLE, SAMPLE_SECONDS = 32, 4, 0.1
#: Elements pulled before timing (the iterator's start-up, buffers filled).
WARM_ELEMENTS = 4
#: Loop steps one timed run takes: at most MAX_STEPS, at least MIN_STEPS unless it waits.
MAX_STEPS, MIN_STEPS = 100_000, 16
#: Wall seconds one ``next()`` of the driver aims at (it consumes many elements inside TensorFlow).
NEXT_SECONDS = 0.003
#: Wall seconds a timed run may last at most (an operator that mostly waits).
TARGET_WALL_SECONDS = 0.05
#: Timed runs of the operator (and of its sample alone), interleaved, after the warm-up: at
#: least ROUNDS, more (up to MAX_ROUNDS) while their spread is above SETTLED_SPREAD.
ROUNDS, MAX_ROUNDS = 3, 6
#: Wall seconds the sequential latency probe aims at.
PROBE_WALL_SECONDS = 0.06
#: Kinds that make at least one element of every input (or batch of inputs): run on a sample
#: repeated forever, they never starve (others are first counted on one pass of the sample).
NEVER_EMPTY_KINDS = frozenset({"map", "batch", "padded_batch", "map_and_batch", "shuffle"})
#: Elements counted at most on one pass of a sample (an interleave over files makes thousands).
COUNT_CAP = 256
#: Kinds that pass elements on without work of their own: the trace's figures stand.
PASS_THROUGH_KINDS = frozenset({"prefetch", "cache", "repeat", "take", "skip", "shard",
                                "assert_cardinality", "options"})


#: What this process's threads do while nothing is pulled, measured when a calibration starts and
#: subtracted from each of its runs (:mod:`..host.threads`); calibrations run one at a time.
_background: Background = NO_BACKGROUND


@dataclass(frozen=True)
class Hint:
    """What the live trace says about an operator, to size the calibration runs."""

    wall_per_element: float | None = None  # traced self time per element produced (per call)
    inputs_per_element: float | None = None  # elements read per element produced
    input_rate: float | None = None  # elements per second its input produced in the pipeline
    input_cardinality: int | None = None  # elements in one pass of its input (None: unknown or infinite)
    active: bool = True  # produced elements in the trace (idle operators are not calibrated)
    ran_parallel: bool = False  # ran in a parallel form (as written, or parallelized by tf.data)
    fused_into: str | None = None  # the batch tf.data fused this map with (MapAndBatch), if it did
    fused_batch: float | None = None  # elements of this map per minibatch of that batch
    #: >0: in its parallel form fused with its batch, also read the idle time its own pool leaves
    #: this many cores (the pool a plan's idle is charged on: ``OperatorCost.parallel_idle_per_element``)
    idle_cores: int = 0


def calibrate(ds: tf.data.Dataset, pipeline: Pipeline, *, hints: Mapping[str, Hint] | None = None,
              options: tf.data.Options | None = None, names: set[str] | None = None,
              parallel_calls: Mapping[str, int] | None = None,
              on_progress: Callable[[str, float], None] | None = None) -> Calibration:
    """Calibrate every operator of ``pipeline`` (the model of ``ds``; or only ``names``).

    ``options`` are the execution mode (default: ``ds.options()``); ``hints`` come from a
    trace of the same pipeline and only size the runs. An operator named in ``parallel_calls``
    (operator name -> calls: those a plan gives it, say) that ran one call at a time but has a
    parallel form is also measured with that many calls in flight, as the plan would run it.
    Never raises for one operator: an operator TensorFlow cannot run alone is reported with
    ``cpu_per_element=None`` and why.
    """
    global _background
    t0 = time.perf_counter()
    hints = hints or {}
    options = _alone(options if options is not None else ds.options())
    graph_def = graph_edits.graph_def_of(ds, allow_external_state=True)
    todo = [op for op in pipeline if names is None or op.name in names]
    costs: dict[str, OperatorCost] = {}
    _quiet()  # the trace's iterators wound down: what is left runs in the background
    _background = measure_background(quiet_share=QUIET_SHARE)
    try:
        for i, op in enumerate(todo):
            if on_progress is not None:
                on_progress(f"calibrating {op.label}", i / max(1, len(todo)))
            costs[op.name] = _calibrate_timed(graph_def, op, options, hints.get(op.name, Hint()),
                                              (parallel_calls or {}).get(op.name))
    finally:
        _background = NO_BACKGROUND
    consumer = consumer_cpu_per_batch(ds)
    return Calibration(costs=costs, consumer_cpu_per_batch=consumer, seconds=time.perf_counter() - t0)


def _calibrate_timed(graph_def, op: Operator, options, hint: Hint, parallel_calls: int | None) -> OperatorCost:
    """One operator's cost and the seconds its calibration took (never raises for TensorFlow's
    refusals: the cost says why it was not calibrated)."""
    start = time.perf_counter()
    try:
        cost = _calibrate_operator(graph_def, op, options, hint, parallel_calls)
    except (tf.errors.OpError, graph_edits.RewriteError, ValueError, TypeError) as err:
        cost = OperatorCost(op.name, op.label, None, how=f"not calibrated: {first_line(err)}")
    return _replace_seconds(cost, time.perf_counter() - start)


def _alone(options: tf.data.Options) -> tf.data.Options:
    """The pipeline's options, less the prefetch tf.data injects above a synchronous root: cut
    below the pipeline's own root, an operator is a root it never was (and the injected prefetch
    is an operator of its own in the model). Its buffer, autotuned, grew and refilled after each
    timed run: a ``batch(32)`` of images waited 43 ms for quiet after each of 18 runs, and its
    first runs paid for the buffer's growth (949-990 µs per minibatch with three runs, 673-840
    with six)."""
    own = tf.data.Options()
    own.experimental_optimization.inject_prefetch = False
    return options.merge(own)


def _calibrate_operator(graph_def, op: Operator, options, hint: Hint,
                        parallel_calls: int | None = None) -> OperatorCost:
    if not hint.active:
        return OperatorCost(op.name, op.label, None, how="idle in the trace: not calibrated")
    if op.kind in PASS_THROUGH_KINDS:
        return OperatorCost(op.name, op.label, None, how="passes elements on: from the trace")
    if not op.inputs or "from_generator" in op.inner_kinds:
        return _calibrate_source(graph_def, op, options, hint)
    if len(op.inputs) == 1 and hint.fused_into and hint.fused_batch and not op.holds_gil:
        return _calibrate_fused(graph_def, op, options, hint, parallel_calls)
    if len(op.inputs) == 1:
        return _calibrate_alone(graph_def, op, options, hint, parallel_calls)
    return OperatorCost(op.name, op.label, None, how="several inputs: from the trace")


# -- running and timing -------------------------------------------------------------------------

def _count(ds: tf.data.Dataset) -> int:
    """Elements in a small finite dataset (a Python loop: ``reduce`` would trace a function)."""
    return sum(1 for _ in ds)


@dataclass(frozen=True)
class _Run:
    cpu: float
    wall: float
    elements: int
    per_next: int = 1
    runnable: float = 0.0  # seconds this process's threads waited for a core (ready, not running)

    @property
    def waiting(self) -> float:
        """Wall time minus the time spent waiting for a core: what the run would have lasted
        had every thread got a core the moment it was ready (a busy machine slows a run down,
        it does not make an operator wait)."""
        return max(0.0, self.wall - self.runnable)


class _Driver:
    """Pulls elements from one long-lived iterator inside TensorFlow (a graph loop calling
    ``get_next``: no Python per element), so the iterator's start-up (threads, function
    instantiation, tf.data's static rewrites) is paid once, outside the timed runs.

    Each loop step consumes ``per_next`` elements (``shard(k, k - 1)``: the skipped elements
    are produced in full); the operator under test and its input alone are pulled with as many
    loop steps, so the loop's own cost cancels (see PULLED_PER_STEP for how many).
    """

    def __init__(self, ds: tf.data.Dataset, per_next: int, *, latency: bool = True):
        self.per_next = max(1, per_next)
        self.latency = latency  # read the kernel's run-queue accounting (~1 ms a run: only where used)
        ds = ds.shard(self.per_next, self.per_next - 1) if self.per_next > 1 else ds
        self._iterator = iter(ds)
        self._handle = self._iterator._iterator_resource  # noqa: SLF001 - the iterator's resource
        self._pull = _puller(tuple(structure.get_flat_tensor_types(ds.element_spec)),
                             tuple(tuple(s.as_list()) if s.rank is not None else None
                                   for s in structure.get_flat_tensor_shapes(ds.element_spec)))

    def run(self, nexts: int) -> _Run:
        """``nexts`` loop steps. Timed from quiet to quiet: the operator's threads keep filling
        their buffers after the last step, and that work belongs to this run (it starts and ends
        with full buffers, so it did exactly its elements' work)."""
        q0 = schedstat() if self.latency or _background.rates else {}
        c0, w0 = time.process_time(), time.perf_counter()
        self._pull(self._handle, tf.constant(nexts, tf.int64))
        wall = time.perf_counter() - w0
        runnable = runnable_seconds(q0, schedstat(), worker_share=WORKER_SHARE,
                                    background=_background, wall=wall) if self.latency else 0.0
        cpu = _quiet() - c0
        if _background.rates:  # the user's busy threads are not the run's
            cpu -= _background.cpu_spent(q0, schedstat(), time.perf_counter() - w0)
        return _Run(max(0.0, cpu), wall, nexts * self.per_next, self.per_next, runnable)


@functools.lru_cache(maxsize=64)
def _puller(types: tuple, shapes: tuple):
    """A graph loop pulling ``steps`` elements from an iterator given by its resource handle,
    traced once per element structure (tracing is slow: not once per operator)."""
    output_shapes = [tf.TensorShape(s) for s in shapes]

    def step(handle, i):
        element = gen_dataset_ops.iterator_get_next(handle, output_types=list(types), output_shapes=output_shapes)
        with tf.control_dependencies(element):  # the pull is what costs; its value is unused
            return i + 1

    @tf.function(autograph=False)
    def pull(handle, steps):
        return tf.while_loop(lambda i: i < steps, lambda i: step(handle, i), [tf.constant(0, tf.int64)])

    return pull.get_concrete_function(tf.TensorSpec([], tf.resource), tf.TensorSpec([], tf.int64))


def _quiet(step: float = QUIET_STEP_SECONDS, max_wait: float = 0.5) -> float:
    """Wait until this process's threads are back to what they do in the background (a run's
    buffers refilled); the CPU clock then."""
    deadline = time.perf_counter() + max_wait
    quiet = (QUIET_SHARE + _background.cpu_rate) * step
    while True:
        c0 = time.process_time()
        time.sleep(step)
        c1 = time.process_time()
        if c1 - c0 < quiet or time.perf_counter() > deadline:
            return c0 if c1 - c0 < quiet else c1


def _built(graph_def, node: str, options: tf.data.Options | None) -> tf.data.Dataset:
    ds = dataset_at(graph_edits.with_output(graph_def, node), node)
    return ds.with_options(options) if options is not None else ds


def _clamp(x: float, lo: int, hi: int) -> int:
    if not math.isfinite(x):
        return hi
    return int(max(lo, min(hi, math.ceil(x))))


def _chunk(seconds_per_element: float, target: float) -> int:
    """Elements per ``next()`` so that one ``next()`` takes about ``target``."""
    return _clamp(target / max(seconds_per_element, 1e-7), 1, 200_000)


def _nexts(trial: _Run) -> int:
    """``next()`` calls per timed run, from a trial run: about TARGET_CPU_SECONDS of CPU, and
    never more than TARGET_WALL_SECONDS of wall time (operators that wait)."""
    calls = trial.elements / trial.per_next
    by_cpu = TARGET_CPU_SECONDS / max(trial.cpu / calls, 1e-7)
    by_wall = TARGET_WALL_SECONDS / max(trial.wall / calls, 1e-7)
    return _clamp(min(by_cpu, by_wall), 1, 100_000)


def _settled(runs: list[_Run]) -> bool:
    """ROUNDS runs or more, ROUNDS of which agree within SETTLED_SPREAD (a median of three runs
    with a 40% spread was measured 20-50% off; more runs pull it back). Any ROUNDS of them, not
    all: the spread of all runs only grows with more, so one disturbed run used to cost every
    round up to MAX_ROUNDS (half the operators of an eight-operator pipeline ran six rounds)."""
    if len(runs) < ROUNDS:
        return False
    cpu = sorted(r.cpu for r in runs)
    return any(_spread(cpu[i:i + ROUNDS]) <= SETTLED_SPREAD for i in range(len(cpu) - ROUNDS + 1))


def _medians(runs: list[_Run]) -> tuple[float, float, int]:
    """(median CPU, median wall) per element, and elements per run."""
    n = runs[-1].elements
    return (statistics.median(r.cpu for r in runs) / n, statistics.median(r.wall for r in runs) / n, n)


# -- an operator reading one input: alone on a cached sample ---------------------------------------

def _calibrate_alone(graph_def, op: Operator, options, hint: Hint,
                     parallel_calls: int | None = None) -> OperatorCost:
    """CPU per element produced: the operator over its cached sample, minus the sample read
    alone (per input, times the inputs it reads per element), interleaved, medians."""
    size = sample_size(hint)
    ratio = hint.inputs_per_element if op.kind in NEVER_EMPTY_KINDS else None
    if ratio is None:  # an operator that may drop elements: see what it makes of its sample
        sampled, _ = graph_edits.insert_sample(graph_def, op.inputs[0], size, 1)
        first = _built(sampled, op.name, options)
        outputs = _count(first.take(COUNT_CAP))  # also instantiates the functions
        if outputs <= 0:
            return OperatorCost(op.name, op.label, None, how="produced nothing from its sample: from the trace")
        inputs = size if hint.input_cardinality is None else min(size, hint.input_cardinality)
        ratio = inputs / outputs  # inputs read per element produced, on this sample
        if outputs >= COUNT_CAP and hint.inputs_per_element:
            ratio = hint.inputs_per_element  # it expands its inputs (files into records): as traced
    else:
        sampled, _ = graph_edits.insert_sample(graph_def, op.inputs[0], size, -1)
        first = _built(sampled, op.name, options)
        outputs = None
    # Serialized again, the cache node holds the handle of ``first``'s cache: datasets rebuilt
    # from this graph read the sample once it is computed (it is never computed twice).
    again = graph_edits.graph_def_of(first, allow_external_state=True)
    top = graph_edits.root_name(again)
    repeat = graph_edits.input_of(again, top)
    counted_once = outputs is not None and outputs < COUNT_CAP and op.kind not in NEVER_EMPTY_KINDS
    if counted_once and _dries_up(again, top, repeat, options, outputs):
        return OperatorCost(op.name, op.label, None, how="yields less from its sample read again (it drops what "
                                                            "it has seen, as unique() does): from the trace")
    forever = graph_edits.set_count(again, repeat, -1)
    alone = _over_sample(forever, top, repeat, options, ratio)
    cost = OperatorCost(op.name, op.label, alone.cpu, wall_per_element=alone.wall, elements=alone.elements,
                        one_call=not hint.ran_parallel,
                        runs=len(alone.runs), spread=_spread([r.cpu for r in alone.runs]), how=ALONE)
    if parallel_calls and parallel_calls > 1 and op.parallelizable and not hint.ran_parallel and not op.holds_gil:
        cost = _parallel(forever, top, options, ratio, cost, parallel_calls, alone)
    if _probe_wanted(op, hint, cost.cpu_per_element or 0.0):
        cost = _probe(forever, top, options, cost, alone.read_wall, holds_gil=op.holds_gil)
    return cost


def _calibrate_fused(graph_def, op: Operator, options, hint: Hint,
                     parallel_calls: int | None = None) -> OperatorCost:
    """A map tf.data ran fused with the batch above it (MapAndBatch): the pair over a cached
    sample of the map's inputs, less the batch alone over a cached sample of its outputs, per
    element. Cut out of the pair, such a map is a
    plain map tf.data runs one call at a time, each call pulled on its own: a speech pipeline's
    random mask cost 80-120 µs per element so (however driven: this graph loop, ``reduce``, a
    prefetch above it, two calls in flight), 41-57 µs inside the pair, and the plan that ran it
    spent under 50 µs per element for everything."""
    size = sample_size(hint)
    sampled, _ = graph_edits.insert_sample(graph_def, op.inputs[0], size, -1)
    first = _built(sampled, hint.fused_into, options)
    again = graph_edits.graph_def_of(first, allow_external_state=True)
    top = graph_edits.root_name(again)  # the batch
    mapped = graph_edits.input_of(again, top)
    forever = graph_edits.set_count(again, graph_edits.input_of(again, mapped), -1)
    pair = _Driver(_built(forever, top, options), PULLED_PER_STEP, latency=False)
    nexts = _grown(pair)
    # the batch over a cached sample of the map's outputs: the same reads of cached elements
    outputs, _ = graph_edits.insert_sample(graph_def, op.name, size, -1)
    second = graph_edits.graph_def_of(_built(outputs, hint.fused_into, options), allow_external_state=True)
    batch_top = graph_edits.root_name(second)
    batch_forever = graph_edits.set_count(second, graph_edits.input_of(second, batch_top), -1)
    batch_alone = _Driver(_built(batch_forever, batch_top, options), PULLED_PER_STEP, latency=False)
    batch_alone.run(WARM_ELEMENTS)
    with_map, without = _interleaved(nexts, pair, batch_alone)
    a_cpu, a_wall, n = _medians(with_map)
    b_cpu, b_wall, _ = _medians(without)
    size_of_batch = hint.fused_batch
    cost = OperatorCost(op.name, op.label, max(0.0, a_cpu - b_cpu) / size_of_batch,
                        wall_per_element=max(0.0, a_wall - b_wall) / size_of_batch, elements=round(n * size_of_batch),
                        runs=len(with_map), spread=_spread([r.cpu for r in with_map]), how=FUSED)
    if parallel_calls and parallel_calls > 1 and op.parallelizable and not hint.ran_parallel:
        # with the map's calls set, tf.data fuses a MapAndBatch with that many: without it a plan
        # priced the speech pipeline's random mask at its one-call cost, 0.90-1.21 ms per
        # minibatch, where three calls spent 0.49-0.75 (2026-11-27 NOTE, "speech")
        cost = _with_calls(forever, top, mapped, options, pair, cost, parallel_calls, nexts,
                           elements_per_output=size_of_batch)
        cost = _with_own_pool_idle(cost, _widened(forever, mapped, cost, parallel_calls), top, options, hint)
    return cost


def _dries_up(graph_def, top: str, repeat: str, options, once: int) -> bool:
    """``top`` yields under half as much again from its sample read a second time as it did from
    the first read (``once`` elements): it remembers what it has seen, and over the sample
    repeated forever it would never yield again. A ``unique()`` so timed hung the trace of a
    user's pipeline (found trying user shapes, session 60)."""
    twice = _built(graph_edits.set_count(graph_def, repeat, 2), top, options)
    return _count(twice.take(2 * once)) < 1.5 * once


@dataclass(frozen=True)
class _OverSample:
    cpu: float  # seconds per element produced, the sample's own reads taken out
    wall: float
    read_cpu: float  # seconds of reading the sample, per element produced
    read_wall: float
    elements: int  # per timed run
    runs: list[_Run]  # the timed runs with the operator
    # what measured it, kept for a parallel form measured beside it (:func:`_parallel`)
    with_op: "_Driver"
    without: "_Driver"
    nexts: int  # loop steps per timed run


def _over_sample(graph_def, top: str, repeat: str, options, ratio: float) -> _OverSample:
    """``top`` over the repeated sample ``repeat``, less ``ratio`` times the sample read alone
    (per element produced), runs interleaved, medians."""
    with_op = _Driver(_built(graph_def, top, options), PULLED_PER_STEP, latency=False)
    nexts = _grown(with_op)  # computes the sample if not yet, then sizes the runs
    without = _Driver(_built(graph_def, repeat, options), PULLED_PER_STEP * max(1, round(ratio)), latency=False)
    without.run(WARM_ELEMENTS)
    a_runs, b_runs = _interleaved(nexts, with_op, without)
    a_cpu, a_wall, n = _medians(a_runs)
    b_cpu, b_wall, _ = _medians(b_runs)
    return _OverSample(max(0.0, a_cpu - ratio * b_cpu), max(0.0, a_wall - ratio * b_wall), ratio * b_cpu,
                       ratio * b_wall, n, a_runs, with_op, without, nexts)


def _interleaved(nexts: int, *drivers: "_Driver") -> list[list[_Run]]:
    """Runs of every driver, in turn (the order turned every round), until the first's have
    settled (at least ROUNDS, at most MAX_ROUNDS); one list of runs per driver."""
    runs: list[list[_Run]] = [[] for _ in drivers]
    for r in range(MAX_ROUNDS):
        order = range(len(drivers)) if r % 2 == 0 else reversed(range(len(drivers)))
        for k in order:
            runs[k].append(drivers[k].run(nexts))
        if _settled(runs[0]):
            break
    return runs


def _parallel(graph_def, top: str, options, ratio: float, cost: OperatorCost, calls: int,
              alone: _OverSample) -> OperatorCost:
    """An operator that ran one call at a time, measured again in its parallel form with
    ``calls`` calls in flight, over the same sample: its CPU per element changes with concurrency
    (a planted matmul map: 387 µs per element sequential, 356 with 2 calls, 347 with 3), and a
    plan that parallelizes it runs it so.

    Measured beside its one-call form, as a ratio: each build of the parallel form runs in turn
    with the very drivers that measured the one-call figure (``alone``: the operator over the
    sample, and the sample read alone), and the parallel figure is the one-call figure times the
    median of the builds' ratios. On a shared host a core's speed steps for seconds at a time (a
    fixed matmul loop pinned to each of the dev VM's two cores read 2.8 µs and 4.8-5.0 µs per
    call by turns, the two cores stepping apart; ``docs/history.md``), and a parallel form timed
    a second after its one-call form carried that step into the figure: on CI a plan's CPU per
    minibatch was predicted at 27 ms where it spent 16-21, its parallel figures timed in a slow
    stretch. Measured beside it, the step falls on both and cancels in the ratio."""
    wide_graph = _widened(graph_def, top, cost, calls)
    if wide_graph is None or not cost.cpu_per_element:
        return cost
    ratios = []
    for _ in range(PARALLEL_BUILDS):
        wide = _Driver(_built(wide_graph, top, options), PULLED_PER_STEP, latency=False)
        wide.run(WARM_ELEMENTS)
        wide.run(WARM_ELEMENTS)
        beside = _beside_one_call(wide, alone, ratio)
        if beside is not None:
            ratios.append(beside)
    if not ratios:
        return cost
    return _with_parallel_figures(cost, [cost.cpu_per_element * r for r in ratios], calls)


def _beside_one_call(wide: "_Driver", alone: _OverSample, ratio: float) -> float | None:
    """The parallel form's CPU per element over the one-call form's, each less the sample's reads,
    from runs of the three drivers in turn (the order turned every round) until the parallel
    form's runs settle (:func:`_interleaved`); None when the one-call form's own figure reads
    nothing here."""
    runs = _interleaved(alone.nexts, wide, alone.with_op, alone.without)
    wide_cpu, one_cpu, read_cpu = (_medians(r)[0] for r in runs)
    one = one_cpu - ratio * read_cpu
    if one <= 0:
        return None
    return max(0.0, wide_cpu - ratio * read_cpu) / one


def _with_parallel_figures(cost: OperatorCost, figures: list[float], calls: int) -> OperatorCost:
    """``cost`` with its parallel form: the median of ``figures`` (CPU per element, one per build
    of the parallel form, :data:`PARALLEL_BUILDS`) and their spread. One build's figure alone set
    a plan's CPU per minibatch 46% above what it spent (the box crop's 137 us among 77-96)."""
    return _replace(cost, parallel_cpu_per_element=statistics.median(figures), parallel_calls=calls,
                    parallel_builds=len(figures), parallel_spread=_spread(figures))


def _with_own_pool_idle(cost: OperatorCost, wide_graph, batch_node: str, options, hint: Hint) -> OperatorCost:
    """``cost`` with the idle time its parallel form's pool leaves the cores per element, where
    ``hint`` asks for it: a map tf.data fused with its batch, in ``wide_graph`` with the plan's
    calls in flight over its repeated sample, built at ``batch_node`` (that MapAndBatch, the form
    the plan runs), prefetched, pulled by the plain ``next()`` loop, as the probe of
    :func:`~plumbkit.tfdata.runtime_costs.pool_idle_per_element` runs its planted work.

    Why its own: the idle a pool leaves depends on the function it runs, not only on the calls in
    flight. Speech's mask so, three calls, idled 9-10.5 µs an element, its plan 7-10, the probe
    17.6-19.0 (benchmarks/results/2026-11-30-same-code-repeat/NOTE.md). Why only fused: a map with
    work between it and its batch idles with that work too. Detection's box crop (a filter and a
    padded batch above it), read with a plain batch of its own, idled 4.8 µs an element where its
    plan idled ~22, the probe reading 17 (benchmarks/results/2026-11-30-own-pool-idle/NOTE.md)."""
    if not hint.idle_cores or wide_graph is None or not cost.parallel_calls or not hint.fused_batch:
        return cost
    batch = max(1, round(hint.fused_batch))
    idle = idle_per_element(_built(wide_graph, batch_node, options).prefetch(2), hint.idle_cores, batch)
    return _replace(cost, parallel_idle_per_element=idle)


def _widened(graph_def, node: str, cost: OperatorCost, calls: int):
    """The graph with ``node`` given ``calls`` calls in flight; None when it has no one-call
    figure to go with or no parallel form."""
    if cost.cpu_per_element is None:
        return None
    try:
        return graph_edits.set_parallelism(graph_def, node, calls)
    except graph_edits.RewriteError:
        return None


def _with_calls(graph_def, top: str, node: str, options, plain: "_Driver", cost: OperatorCost, calls: int,
                nexts: int, *, elements_per_output: float) -> OperatorCost:
    """``cost`` with its parallel form: ``top`` built with ``node`` given ``calls`` calls,
    interleaved with ``plain`` (the same graph as it ran), the difference per element of
    ``node`` added to its one-call figure. The difference, not the ratio: a ratio of an
    operator's few µs to its noise can read 100x."""
    wide = _widened(graph_def, node, cost, calls)
    if wide is None:
        return cost
    figures = []
    for _ in range(PARALLEL_BUILDS):  # each build of the parallel form read against the plain one
        parallel = _Driver(_built(wide, top, options), PULLED_PER_STEP, latency=False)
        parallel.run(WARM_ELEMENTS)
        parallel.run(WARM_ELEMENTS)
        p_runs, s_runs = _interleaved(nexts, parallel, plain)
        change = (_medians(p_runs)[0] - _medians(s_runs)[0]) / elements_per_output
        figures.append(max(0.0, cost.cpu_per_element + change))
    return _with_parallel_figures(cost, figures, calls)


def sample_size(hint: Hint) -> int:
    """Inputs to cache: SAMPLE_ELEMENTS, fewer when the pipeline below produces them slowly
    (computing the sample should take at most SAMPLE_SECONDS)."""
    if hint.input_rate:
        return _clamp(min(SAMPLE_ELEMENTS, SAMPLE_SECONDS * hint.input_rate), MIN_SAMPLE, SAMPLE_ELEMENTS)
    return SAMPLE_ELEMENTS


def _probe_wanted(op: Operator, hint: Hint, cpu: float) -> bool:
    """Python operators always (they may wait); others when the trace saw them spend well
    above their CPU per element (an operator fused away by tf.data shows no time of its own)."""
    if op.holds_gil:
        return True
    return hint.wall_per_element is not None and hint.wall_per_element > PROBE_CANDIDATE_RATIO * cpu


#: The first trial run is sized from the second warm-up run, growing at most this many times.
FIRST_GROWTH = 64


def _grown(driver: "_Driver", start: int = WARM_ELEMENTS) -> int:
    """Steps per timed run: grown from ``start`` until a run costs about TARGET_CPU_SECONDS of
    CPU or TARGET_WALL_SECONDS of wall time (the growing runs also warm the iterator up). The
    first trial aims at the target from the second warm-up's CPU per step (which its fixed costs
    only overstate, so it lands between half the target and the target): one trial instead of
    five for a 50 µs map."""
    steps = start
    driver.run(steps)  # the iterator's start-up (and the sample, computed once)
    warm = driver.run(steps)  # buffers refilled after it
    if warm.wall < TARGET_WALL_SECONDS / 2:
        by_cpu = TARGET_CPU_SECONDS / max(warm.cpu / steps, 1e-7)
        by_wall = TARGET_WALL_SECONDS / max(warm.wall / steps, 1e-7)  # an operator that waits
        steps = _clamp(min(by_cpu, by_wall), start, FIRST_GROWTH * start)
    while steps < MAX_STEPS:
        trial = driver.run(steps)
        if trial.wall >= TARGET_WALL_SECONDS / 2:
            return max(1, _nexts(trial))  # an operator that waits: few, long steps
        if trial.cpu >= TARGET_CPU_SECONDS / 2:
            return max(MIN_STEPS, _nexts(trial))
        steps = min(MAX_STEPS, steps * 4)
    return steps


def _probe(graph_def, top: str, options, cost: OperatorCost, read_wall: float, *,
           holds_gil: bool) -> OperatorCost:
    """One call at a time: wall seconds per element is the operator's latency; a Python
    operator's calls are timed apart (the CPU it spends holding the GIL)."""
    sequential_graph = graph_edits.set_sequential(graph_def, top)
    sequential = tf.data.Options()
    sequential.experimental_optimization.map_parallelization = False
    # no prefetch injected above it: a buffer filled before a short timed run hides one call's
    # wait (measured: a 8 ms sleep read as 7.8 ms where one call at a time took 8.8 ms)
    sequential.experimental_optimization.inject_prefetch = False
    probe_options = options.merge(sequential) if options is not None else sequential
    driver = _Driver(_built(sequential_graph, top, probe_options), 1)
    driver.run(2)  # warm: the iterator, the first Python call
    steps = 2
    with python_call_cpu() as python:
        while True:
            before = python[0]
            run = driver.run(steps)
            if run.wall >= PROBE_WALL_SECONDS / 2 or steps >= MAX_STEPS:
                break
            steps = _clamp(steps * min(8.0, PROBE_WALL_SECONDS / max(run.wall, 1e-6)), steps + 1, MAX_STEPS)
    latency = max(0.0, run.waiting / run.elements - read_wall)
    cpu, wall = run.cpu / run.elements, max(0.0, run.wall / run.elements - read_wall)
    cost = _replace(cost, latency_per_element=latency, probe_cpu_per_element=cpu,
                    python_share=_share(python[0] - before, run.cpu) if holds_gil else None)
    # waiting, it runs with many calls in flight in a plan: its CPU and Python share as it will
    if latency >= LATENCY_RATIO * max(cpu, 1e-9):
        return _in_flight(graph_def, top, options, cost, holds_gil=holds_gil, sequential_wall=wall)
    if wall < PROBE_CANDIDATE_RATIO * max(cpu, 1e-9):
        return cost
    # The clocks may misread a wait (threads the user left busy, TensorFlow's pools spinning on
    # a shared machine: a 3 ms sleeping py_function read 3.2 ms of CPU and 0.7 ms of latency):
    # calls in flight say it directly, as they speed it up past what the cores could
    overlapped = _in_flight(graph_def, top, options, cost, holds_gil=holds_gil, sequential_wall=wall)
    if not overlapped.overlaps:
        return cost
    return _replace(overlapped, latency_per_element=max(latency, wall - overlapped.cpu_per_element))


def _in_flight(graph_def, top: str, options, cost: OperatorCost, *, holds_gil: bool,
               sequential_wall: float) -> OperatorCost:
    """A waiting operator with IN_FLIGHT_CALLS calls in flight (tf.data's pool raised to match):
    its CPU (and Python) per element as a plan that raises its concurrency will run it, and how
    much faster than one call at a time (``sequential_wall`` seconds per element) it ran."""
    driver = _with_calls_in_flight(graph_def, top, options, IN_FLIGHT_CALLS)
    if driver is None:
        return cost  # no parallel form: it runs one call at a time, as probed
    latency = max(cost.latency_per_element or 0.0, sequential_wall, 1e-4)
    steps = _clamp(IN_FLIGHT_CALLS * PROBE_WALL_SECONDS / latency, 2 * IN_FLIGHT_CALLS, MAX_STEPS)
    with python_call_cpu() as python:
        run = driver.run(steps)
    speedup = sequential_wall / (run.wall / run.elements) if run.wall > 0 else None
    cost = _replace(cost, cpu_per_element=min(cost.cpu_per_element or math.inf, run.cpu / run.elements),
                    python_share=_share(python[0], run.cpu) if holds_gil else None,
                    in_flight_calls=IN_FLIGHT_CALLS, in_flight_speedup=speedup,
                    overlaps=speedup is not None and speedup > available_cores() + 1)
    return _queued(graph_def, top, options, cost) if holds_gil else cost


def _with_calls_in_flight(graph_def, top: str, options, calls: int) -> "_Driver | None":
    """A warmed driver of ``top`` with ``calls`` calls in flight and tf.data's pool raised to
    match, no prefetch injected (None: ``top`` has no parallel form)."""
    try:
        wide_graph = graph_edits.set_parallelism(graph_def, top, calls)
    except graph_edits.RewriteError:
        return None
    wide = tf.data.Options()
    wide.threading.private_threadpool_size = calls + 2
    wide.experimental_optimization.inject_prefetch = False
    driver = _Driver(_built(wide_graph, top, options.merge(wide) if options is not None else wide), 1)
    driver.run(2 * calls)  # warm: every call slot started
    return driver


def _queued(graph_def, top: str, options, cost: OperatorCost) -> OperatorCost:
    """A waiting Python operator with MAX_CONCURRENCY calls in flight: if its calls last well over
    one call alone while the cores have room, they queue for the GIL, and its wall seconds per
    element there is the GIL's time per element as its calls see it (``gil_per_element``)."""
    driver = _with_calls_in_flight(graph_def, top, options, MAX_CONCURRENCY)
    if driver is None:
        return cost
    latency = cost.latency_per_element or 1e-3
    run = driver.run(_clamp(2 * MAX_CONCURRENCY * PROBE_WALL_SECONDS / latency, 2 * MAX_CONCURRENCY, MAX_STEPS))
    per_element = run.wall / run.elements
    one_call = latency + (cost.cpu_per_element or 0.0)
    stretched = MAX_CONCURRENCY * per_element >= QUEUED_STRETCH * one_call
    if stretched and run.cpu / run.wall < CORES_SPARE_SHARE * available_cores():
        return _replace(cost, gil_per_element=per_element)
    return cost


def _share(python_cpu: float, cpu: float) -> float | None:
    """The share of a run's CPU spent in Python calls (None: the run spent no CPU to share)."""
    return min(1.0, python_cpu / cpu) if cpu > 0 else None


# -- sources: their own first elements -------------------------------------------------------------

def _calibrate_source(graph_def, op: Operator, options, hint: Hint) -> OperatorCost:
    """A source alone, repeated (a fresh pass each epoch, as in training). Sources run one
    element at a time: their wall time per element is also their latency."""
    guess = hint.wall_per_element or 2e-5
    base = _built(graph_def, op.name, options).repeat()
    driver = _Driver(base, _chunk(guess, NEXT_SECONDS))
    nexts = _grown(driver, 1)
    runs: list[_Run] = []
    with python_call_cpu() as python:
        while len(runs) < MAX_ROUNDS and not _settled(runs):
            runs.append(driver.run(nexts))
    cpu, wall, n = _medians(runs)
    # The runs' total over their elements, not a median of runs: a source's wait can come once an
    # epoch (the tf.data guide's generator sleeps 30 ms to open, then 15 ms an element, 3 an
    # epoch), and runs of 2 elements each see one phase of it: 2 runs in 3 held the opening, so
    # their median read 30 ms an element (32.6 on a busy machine) where the source waits 25.
    latency = sum(r.waiting for r in runs) / sum(r.elements for r in runs)
    in_python = _share(python[0], sum(r.cpu for r in runs)) if op.holds_gil else None
    return OperatorCost(op.name, op.label, cpu, wall_per_element=wall, latency_per_element=latency,
                        probe_cpu_per_element=cpu, python_share=in_python, elements=n, runs=len(runs),
                        spread=_spread([r.cpu for r in runs]), how=SOURCE)


# -- the consumer -------------------------------------------------------------------------------

def consumer_cpu_per_batch(ds: tf.data.Dataset, seconds: float = 0.05) -> float | None:
    """CPU seconds one ``next()`` of a Python consumer loop costs (it holds the GIL for most of
    it): measured on the pipeline's first minibatch served from memory, so nothing else runs."""
    try:
        iterator = iter(ds.take(1).cache().repeat())
        next(iterator)
        n, c0, t0 = 0, time.thread_time(), time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            next(iterator)
            n += 1
        return (time.thread_time() - c0) / n if n else None
    except (tf.errors.OpError, StopIteration, ValueError, TypeError):
        return None


# -- small helpers ------------------------------------------------------------------------------

def _spread(values: list[float]) -> float:
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else 0.0


def _replace(cost: OperatorCost, **changes) -> OperatorCost:
    import dataclasses
    return dataclasses.replace(cost, **changes)


def _replace_seconds(cost: OperatorCost, seconds: float) -> OperatorCost:
    return _replace(cost, seconds=seconds)


__all__ = ["Hint", "calibrate", "consumer_cpu_per_batch"]
