"""Per-operator CPU against the truth: the trace's old estimate (wall self time, scaled to the
process CPU) and the calibrated one, on the bench pipelines; and what calibration costs.

The truth is the issue's: the operator alone over a cheap source -- here its own real inputs,
a sample of them computed once (``take(k).cache().repeat()`` spliced under it) -- in the
pipeline's own options, driven by ``reduce`` (not calibration's graph loop), a fresh iterator
per run, timed by the process CPU clock; a long run minus a short one (start-up and the
sample's one computation cancel), minus the sample read alone, rounds interleaved, medians.
A map tf.data ran fused with the batch above it (MapAndBatch) is timed in that form, as the
pipeline pays it: the pair over a sample of the map's inputs less the batch over a sample of
its outputs (planted ``heavy`` under defaults: 322-406 µs per element alone, 298-339 fused; the
whole planted pipeline matched its maps' costs with heavy fused, not alone).
Operators that may drop every element of a sample (filter) fall back to the difference of
two prefixes of the pipeline (the sub-pipeline ending at the operator minus the one ending
at its input), whose noise is all the work below the operator: measured on this machine it
put a planted light map above a medium one, so it is only the fallback.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import tensorflow as tf

from ..analysis.operational import in_pipeline_scale
from ..engine import trace
from ..engine.calibration import calibrated, hints
from ..tfdata import graph_edits
from ..tfdata.graph import dataset_at
from ..tfdata.tracer import observable

#: Operators whose cost is measured against the truth (those with a function of their own).
MEASURED_KINDS = ("map", "filter", "interleave", "flat_map", "batch", "padded_batch", "map_and_batch")
#: Wall seconds a truth run of the long kind aims at.
TRUTH_SECONDS = 0.4
#: Kinds that make at least one element from any sample (their truth runs on a sample).
SAMPLED_KINDS = ("map", "interleave", "flat_map", "batch", "padded_batch", "map_and_batch")
#: Inputs in the truth's sample.
TRUTH_SAMPLE = 64


def _runner(ds: tf.data.Dataset) -> Callable[[int], float]:
    counted = tf.function(lambda n: ds.take(n).reduce(tf.constant(0, tf.int64), lambda c, _: c + 1))
    concrete = counted.get_concrete_function(tf.TensorSpec([], tf.int64))

    def run(n: int) -> float:
        c0 = time.process_time()
        concrete(tf.constant(n, tf.int64))
        return time.process_time() - c0
    return run


def sample_truth(graph_def, name: str, child: str, options: tf.data.Options, *, elements: int,
                 inputs_per_element: float, rounds: int = 3, sample: int = TRUTH_SAMPLE) -> float:
    """CPU seconds per element of operator ``name`` over a cached sample of ``sample`` of its real inputs."""
    sampled, repeat = graph_edits.insert_sample(graph_def, child, sample, -1)
    return _difference(dataset_at(sampled, name), dataset_at(sampled, repeat), options, elements=elements,
                       inputs_per_element=inputs_per_element, rounds=rounds)


def fused_truth(graph_def, name: str, child: str, options: tf.data.Options, *, elements: int,
                batch: str, per_minibatch: float, rounds: int = 3) -> float:
    """CPU seconds per element of map ``name`` run fused with ``batch`` (MapAndBatch): the pair
    over a cached sample of the map's inputs, less the batch over a cached sample of its outputs."""
    inputs, _ = graph_edits.insert_sample(graph_def, child, TRUTH_SAMPLE, -1)
    outputs, _ = graph_edits.insert_sample(graph_def, name, TRUTH_SAMPLE, -1)
    minibatches = max(8, round(elements / per_minibatch))
    return _difference(dataset_at(inputs, batch), dataset_at(outputs, batch), options, elements=minibatches,
                       inputs_per_element=1.0, rounds=rounds) / per_minibatch


def prefix_truth(graph_def, name: str, child: str, options: tf.data.Options, *, elements: int,
                 inputs_per_element: float, rounds: int = 3) -> float:
    """CPU seconds per element of operator ``name`` (reading ``child``), by difference of prefixes."""
    return _difference(dataset_at(graph_def, name), dataset_at(graph_def, child), options, elements=elements,
                       inputs_per_element=inputs_per_element, rounds=rounds)


def _difference(op_ds: tf.data.Dataset, input_ds: tf.data.Dataset, options: tf.data.Options, *, elements: int,
                inputs_per_element: float, rounds: int) -> float:
    """Per element: (long - short run of ``op_ds``) minus the same of ``input_ds`` per input."""
    with_op = _runner(op_ds.with_options(options))
    without = _runner(input_ds.with_options(options))
    big, small = elements, max(1, elements // 4)
    big_in, small_in = (max(1, round(n * inputs_per_element)) for n in (big, small))
    with_op(small), without(small_in)  # warm: functions traced, files in the page cache
    runs: dict[str, list[float]] = {"a": [], "a_small": [], "b": [], "b_small": []}
    for r in range(rounds):
        order = [("a", with_op, big), ("a_small", with_op, small), ("b", without, big_in), ("b_small", without, small_in)]
        for key, run, n in (order if r % 2 == 0 else order[::-1]):
            runs[key].append(run(n))
    m = {k: statistics.median(v) for k, v in runs.items()}
    per_output = (m["a"] - m["a_small"]) / (big - small)
    per_input = (m["b"] - m["b_small"]) / max(1, big_in - small_in)
    return max(0.0, per_output - inputs_per_element * per_input)


def operator_errors(name: str, make: Callable[[], tf.data.Dataset], *, seconds: float,
                    log: Callable[[str], None] = print, rounds: int = 3) -> dict:
    """One traced pipeline: every measured operator's CPU per element — truth, the old estimate
    (before) and the calibrated one (after) — and the calibration's wall time."""
    log(f"[{name}] trace, then calibration")
    ds = make()
    before = trace(ds, seconds=seconds, converge=False, calibrate=False)
    t0 = time.perf_counter()
    after = calibrated(ds, before)
    calibration_seconds = time.perf_counter() - t0
    graph_def = graph_edits.graph_def_of(ds, allow_external_state=True)
    options = observable(ds).options()
    rows = []
    visits = {o.name: o.visit_ratio for o in before.ops}
    fused = {k: h for k, h in hints(before).items() if h.fused_into and h.fused_batch}
    for old in before.ops:
        op = before.pipeline.operators.get(old.name)
        if op is None or op.kind not in MEASURED_KINDS or len(op.inputs) != 1 or not old.elements:
            continue
        new = after.op(old.name)
        child_v, v = visits.get(op.inputs[0]), old.visit_ratio
        if not child_v or not v or old.elements_per_second <= 0:
            continue
        per_input = child_v / v
        n = int(min(20_000, max(32, TRUTH_SECONDS * old.elements_per_second)))
        log(f"[{name}] truth for {op.label} ({n} elements)")
        if old.name in fused:
            how = fused_truth
            truth = fused_truth(graph_def, op.name, op.inputs[0], options, elements=n, rounds=rounds,
                                batch=fused[old.name].fused_into, per_minibatch=fused[old.name].fused_batch)
        else:
            how = sample_truth if op.kind in SAMPLED_KINDS else prefix_truth
            truth = how(graph_def, op.name, op.inputs[0], options, elements=n,
                        inputs_per_element=per_input, rounds=rounds)
        scale = in_pipeline_scale(after.analysis, new)  # what the LP and the predictions use
        used = new.cpu_per_element * scale if new.cpu_per_element is not None else None
        rows.append({"operator": op.label, "truth": truth, "truth_how": how.__name__.split("_")[0],
                     "before": _per_element(old),
                     "after": new.cpu_per_element, "before_error": _error(_per_element(old), truth),
                     "after_error": _error(new.cpu_per_element, truth),
                     "used": used, "used_error": _error(used, truth)})
    return {"pipeline": name, "operators": len(before.pipeline), "calibrated": sum(
        1 for c in (after.calibration.costs.values() if after.calibration else ()) if c.cpu_per_element is not None),
        "calibration_seconds": calibration_seconds, "in_pipeline_scale": in_pipeline_scale(after.analysis), "rows": rows}


def _per_element(o) -> float | None:
    """The old estimate: wall self time scaled to the process CPU, per element."""
    return o.cpu_seconds / o.elements if o.elements else None


def _error(estimate: float | None, truth: float) -> float | None:
    """Relative error of the per-core rate (1 / CPU per element) against the truth's."""
    if estimate is None or not truth or estimate <= 0:
        return None
    return abs(truth / estimate - 1.0)


def summary(results: list[dict]) -> dict:
    """Median rate error before and after, over every measured operator."""
    before = [r["before_error"] for res in results for r in res["rows"] if r["before_error"] is not None]
    after = [r["after_error"] for res in results for r in res["rows"] if r["after_error"] is not None]
    used = [r["used_error"] for res in results for r in res["rows"] if r.get("used_error") is not None]
    return {"median_before": statistics.median(before) if before else math.nan,
            "median_after": statistics.median(after) if after else math.nan,
            "median_used": statistics.median(used) if used else math.nan,
            "operators": len(after)}


__all__ = ["fused_truth", "operator_errors", "prefix_truth", "sample_truth", "summary"]
