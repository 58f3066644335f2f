"""Calibration as its own phase: after a live trace, each operator alone (see
:mod:`plumbkit.tfdata.calibrate`), then the trace rebuilt on the calibrated costs.

A live trace shows wall-time shares (labelled so) while it runs; the calibrated figures replace
them when this phase ends. A calibration can be reused for a rebuilt pipeline (a step, a round
of the optimizer): operators are matched by label, and only new ones are calibrated.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Callable, Mapping

from ..model.costs import Calibration
from ..planning.predict import ran_one_call_at_a_time
from ..tfdata.calibrate import Hint, calibrate
from ..tfdata.tracer import observable
from .trace_result import Trace, reanalyzed

if TYPE_CHECKING:
    import tensorflow as tf


def hints(trace: Trace) -> dict[str, Hint]:
    """What the trace says about each operator, to size its calibration runs."""
    visits = {o.name: o.visit_ratio for o in trace.ops}
    rates = {o.name: o.elements_per_second for o in trace.ops}
    sizes = {o.name: o.cardinality for o in trace.ops}
    out = {}
    fused = _fused_pairs(trace)
    for o in trace.ops:
        if o.injected or o.name not in trace.pipeline.operators:
            continue
        op = trace.pipeline[o.name]
        child = visits.get(op.inputs[0]) if len(op.inputs) == 1 else None
        per = child / o.visit_ratio if child and o.visit_ratio else None
        out[o.name] = Hint(wall_per_element=o.wall_per_element or None, inputs_per_element=per,
                           input_rate=rates.get(op.inputs[0]) if op.inputs else None,
                           input_cardinality=_finite(sizes.get(op.inputs[0])) if op.inputs else None,
                           active=o.elements > 0,
                           ran_parallel=not ran_one_call_at_a_time(o.runtime, op.op, o.parallelism),
                           fused_into=fused.get(o.name, (None, None))[0], fused_batch=fused.get(o.name, (None, None))[1])
    return out


def _fused_pairs(trace: Trace) -> dict[str, tuple[str, float]]:
    """Maps tf.data ran fused with the batch above them (both show MapAndBatch at run time):
    map -> (the batch, the map's elements per minibatch)."""
    by_name = {o.name: o for o in trace.ops}
    out = {}
    for parent in trace.pipeline:
        if parent.kind != "batch" or len(parent.inputs) != 1:
            continue
        child, stats = by_name.get(parent.inputs[0]), by_name.get(parent.name)
        if (child is None or stats is None or trace.pipeline[child.name].kind != "map"
                or "MapAndBatch" not in (child.runtime or "") or "MapAndBatch" not in (stats.runtime or "")
                or not child.visit_ratio or not stats.visit_ratio):
            continue
        out[child.name] = (parent.name, child.visit_ratio / stats.visit_ratio)
    return out


def _finite(n: float | None) -> int | None:
    return int(n) if n is not None and math.isfinite(n) else None


def calibrated(ds: "tf.data.Dataset", trace: Trace, *, reuse: Calibration | None = None,
               on_progress: Callable[[str, float], None] | None = None) -> Trace:
    """``trace`` rebuilt on per-operator costs measured alone (``ds`` is the traced pipeline).

    With ``reuse``, operators it already covers (by label) are not calibrated again.
    """
    known = {}
    if reuse is not None:
        for op in trace.pipeline:
            cost = reuse.for_operator(op.name, op.label)
            if cost is not None:
                known[op.name] = dataclasses.replace(cost, name=op.name)
    todo = {o.name for o in trace.ops if o.elements > 0 and o.name in trace.pipeline.operators} - set(known)
    calibration = Calibration(costs=known, consumer_cpu_per_batch=reuse.consumer_cpu_per_batch if reuse else None)
    if todo or calibration.consumer_cpu_per_batch is None:
        fresh = calibrate(ds, trace.pipeline, hints=hints(trace), options=observable(ds).options(),
                          names=todo, on_progress=on_progress)
        calibration = Calibration(costs={**known, **fresh.costs},
                                  consumer_cpu_per_batch=fresh.consumer_cpu_per_batch,
                                  seconds=fresh.seconds, notes=fresh.notes)
    return reanalyzed(trace, calibration=calibration)


def with_parallel_costs(ds: "tf.data.Dataset", trace: Trace, calls: Mapping[str, int], *,
                        on_progress: Callable[[str, float], None] | None = None) -> Trace:
    """``trace`` with the operators of ``calls`` that ran one call at a time measured again
    alone in their parallel form, with the calls in flight the plan gives them (at least one per
    core; AUTOTUNE or fewer: one per core). A plan parallelizes them, and CPU per element falls
    with concurrency: the speech pipeline's mask spent 0.93 ms per minibatch with one call, 0.53
    with three, and 0.46 inside the pipeline, where the cores are kept busy. Each is measured over
    :data:`~plumbkit.tunables.PARALLEL_BUILDS` builds of its parallel form (one build's figure
    moves far beyond its runs' spread). Only for these: about 0.4 s a build, so ``trace()`` does
    not pay it for every operator (eight operators written sequentially took 2.8-3.2 s, against
    2.0-2.7 s without it)."""
    cores = int(trace.analysis.cores or 1)
    ran_one_at_a_time = {o.name for o in trace.ops if o.name in calls and o.name in trace.pipeline.operators
                         and ran_one_call_at_a_time(o.runtime, trace.pipeline[o.name].op, o.parallelism)}
    if cores < 2 or not ran_one_at_a_time or trace.calibration is None:
        return trace
    asked = hints(trace)
    busiest = _busiest_pool(trace, ran_one_at_a_time)
    asked[busiest] = dataclasses.replace(asked[busiest], idle_cores=cores)
    fresh = calibrate(ds, trace.pipeline, hints=asked, options=observable(ds).options(),
                      names=ran_one_at_a_time, on_progress=on_progress,
                      parallel_calls={name: max(cores, int(calls[name])) for name in ran_one_at_a_time})
    costs = dict(trace.calibration.costs)
    for name, cost in fresh.costs.items():
        first = costs.get(name)
        if first is None or cost.parallel_cpu_per_element is None or not cost.cpu_per_element:
            continue  # the rest as first calibrated
        # measured as a ratio to the one-call figure timed beside it, carried to the one-call
        # figure the trace was read with: the cores' speed moves between the two calibrations
        # (see calibrate._parallel)
        carried = (first.cpu_per_element * cost.parallel_cpu_per_element / cost.cpu_per_element
                   if first.cpu_per_element else cost.parallel_cpu_per_element)
        costs[name] = dataclasses.replace(first, parallel_cpu_per_element=carried, parallel_calls=cost.parallel_calls,
                                          parallel_builds=cost.parallel_builds, parallel_spread=cost.parallel_spread,
                                          parallel_idle_per_element=cost.parallel_idle_per_element)
    return reanalyzed(trace, calibration=dataclasses.replace(trace.calibration, costs=costs))


def _busiest_pool(trace: Trace, names: set[str]) -> str:
    """Of ``names``, the operator whose pool a plan's idle time is charged on: the most elements
    a minibatch (the prediction charges the busiest pool), then the most CPU a minibatch. Only its
    own idle is read (about a second)."""
    ops = {o.name: o for o in trace.ops}

    def weight(name: str) -> tuple[float, float]:
        o = ops[name]
        return (o.visit_ratio or 0.0, (o.cpu_per_element or 0.0) * (o.visit_ratio or 0.0))
    return max(sorted(names), key=weight)


def own_pool_idle(trace: Trace) -> dict[str, float]:
    """Operator -> the idle per element its own parallel form's pool left (where read)."""
    if trace.calibration is None:
        return {}
    return {name: cost.parallel_idle_per_element for name, cost in trace.calibration.costs.items()
            if cost.parallel_idle_per_element is not None}


__all__ = ["calibrated", "hints", "own_pool_idle", "with_parallel_costs"]
