"""Offloading to tf.data service, benchmarked: predicted vs measured throughput for 0 and 1
worker with the client alone on one core, the predicted curve for more workers, and the
worker count sized for two target rates. Also the example pipelines the notebook and the
tests use.

On a two-core machine: the client (plumbkit's measuring process) is pinned to core 0, the
dispatcher and one worker to core 1. Counts beyond one worker are predictions.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from ..engine.offload import OffloadPlan, offload
from ..planning.offload import curve, predict
from ..service.cluster import ServiceCluster
from ..service.processes import usable_cores
from .examples import looped_work, planted_work

Log = Callable[[str], None]


# -- pipelines ------------------------------------------------------------------------------

def two_stage(per_element: int = 40, per_batch: int = 900, *, finite: bool = False) -> tf.data.Dataset:
    """A costly per-element map, a batch, a costly per-batch map (its chain in a loop,
    :func:`~.examples.looped_work`, so each measuring request starts it fast): the cut after the
    batch splits the work between a worker and the client. Repeated forever (sharding OFF)
    unless ``finite`` (one pass of a ``range``: DYNAMIC sharding, one split per element)."""
    ds = tf.data.Dataset.range(100_000)
    if not finite:
        ds = ds.repeat()
    ds = ds.map(lambda x: planted_work(x, per_element), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(32)
    return ds.map(lambda b: b + looped_work(tf.reduce_sum(tf.cast(b, tf.int64)), per_batch))


def big_and_cheap() -> tf.data.Dataset:
    """Cheap to compute, big to move: 96x96x3 float images, 1.8 MB a minibatch."""
    ds = tf.data.Dataset.range(100_000).repeat()
    ds = ds.map(lambda x: tf.fill([96, 96, 3], tf.cast(x, tf.float32)))
    return ds.batch(16)


def with_python(units: int = 40) -> tf.data.Dataset:
    """A heavy TensorFlow map, then a Python one (``py_function``): the Python map and what is
    above it must stay on the client."""
    ds = tf.data.Dataset.range(100_000).repeat()
    ds = ds.map(lambda x: planted_work(x, units), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.map(lambda x: tf.py_function(lambda v: v * 2.0, [x], tf.float32))
    return ds.batch(32)


# -- the section ----------------------------------------------------------------------------

def summarize(name: str, plan: OffloadPlan, targets: tuple[float, ...] = (), max_workers: int = 16) -> dict[str, Any]:
    """One pipeline's row: decision and cut; predicted vs measured with no worker and, for every
    cut measured, with the workers running; the curve; the sizing for ``targets``."""
    n = plan.workers_available
    local = {"predicted": plan.predicted_at(0), "measured": plan.measured.get(0),
             "samples": [r.throughput for r in plan.runs.get(0, [])]}
    per_cut = []
    for c in plan.cuts:
        point = predict(plan.setting, c, n)
        chosen = plan.distribute is not None and c.node == plan.distribute.cut
        measured = plan.measured.get(n) if chosen else c.measured.get(n)
        per_cut.append({"cut": c.label, "chosen": chosen, "predicted": point.throughput, "bound": point.bound,
                        "measured": measured, "samples": [r.throughput for r in plan.runs.get(n, [])] if chosen
                        else [c.measured.get(n)], "dispatcher_ms": 1e3 * c.dispatcher_cpu,
                        "serving_ms": 1e3 * c.service_cpu})
    sizing = []
    for target in targets:
        d = plan.size(target, max_workers)
        points = curve(plan.setting, d.cut, max_workers) if d.cut is not None else []
        sizing.append({"target": target, "decision": d.action, "cut": d.cut.label if d.cut else None,
                       "workers": d.workers, "predicted": d.predicted, "meets": d.meets_target,
                       "curve": [[p.workers, p.throughput, p.bound] for p in points]})
    return {
        "pipeline": name, "decision": plan.decision, "reason": plan.reason,
        "cut": plan.distribute.cut_label if plan.distribute else None,
        "sharding": plan.distribute.sharding if plan.distribute else None,
        "workers_available": n, "local": local, "per_cut": per_cut, "sizing": sizing,
        "predicted_speedup": plan.predicted_speedup, "measured_speedup": plan.measured_speedup,
        "predicted_cpu_speedup": plan.predicted_cpu_speedup, "dedicated": plan.dedicated,
        "cpu_shares": plan.cpu_shares, "notes": plan.notes, "ideal": plan.ideal,
    }


def offload_section(*, seconds: float, rounds: int, log: Log) -> dict[str, Any]:
    """Runs the offload benchmark on a cluster of one worker on this machine: each plan is made
    for the one worker running (so its cut is measured side by side with the local pipeline),
    then sized for two targets on the same measured costs."""
    cores = usable_cores()
    client = cores[:1] if len(cores) > 1 else None
    rows = []
    log("[offload] starting a dispatcher and one worker")
    with ServiceCluster(1, client_cores=client) as cluster:
        layout = cluster.describe()
        log("[offload] two-stage pipeline, sharding OFF")
        plan = offload(two_stage, dispatcher=cluster, max_workers=1, seconds=seconds, rounds=rounds)
        reference = plan.setting.local
        targets = (round(1.5 * reference, 1), round(4 * reference, 1))
        rows.append(summarize("two-stage (OFF)", plan, targets))
        log("[offload] the same, one pass of a range: DYNAMIC sharding")
        plan = offload(lambda: two_stage(finite=True), dispatcher=cluster, max_workers=1, seconds=seconds,
                       rounds=rounds)
        rows.append(summarize("two-stage, one pass (DYNAMIC)", plan, targets))
        log("[offload] cheap pipeline, big elements")
        rows.append(summarize("big and cheap", offload(big_and_cheap, dispatcher=cluster, seconds=seconds,
                                                       rounds=rounds)))
    return {"layout": layout, "client_cores": client, "rows": rows}


def _error(predicted: float, measured: float | None) -> str:
    return "—" if not measured else f"{100 * abs(predicted - measured) / measured:.0f}%"


def markdown(section: dict[str, Any] | None) -> list[str]:
    """The report's lines for the section (none when it did not run)."""
    if not section:
        return []
    lines = ["## Offloading to tf.data service", "",
             f"Client (plumbkit's measuring process) on core(s) {section['client_cores']}; "
             + section["layout"].replace("\n", "; ") + ". Minibatches/s. *Predicted* comes from CPU per "
             "minibatch measured on each part alone (for cores of their own), the cost of moving a cached "
             "sample of the cut's elements, and what serving the remote part costs the worker (served "
             "alone, nothing above the cut); never from a run of the served pipeline itself. *Measured* "
             "is the median of interleaved runs (the chosen cut) or one run (the other cuts). Counts "
             "above the workers running are predictions.", "",
             "| pipeline | workers | cut after | predicted | measured | error | bound |",
             "|---|---|---|---|---|---|---|"]
    for row in section["rows"]:
        loc = row["local"]
        lines.append(f"| {row['pipeline']} | 0 | (local) | {loc['predicted']:.1f} | {loc['measured'] or 0:.1f} | "
                     f"{_error(loc['predicted'], loc['measured'])} | |")
        for c in row["per_cut"]:
            mark = " **(chosen)**" if c["chosen"] else ""
            measured = "—" if c["measured"] is None else f"{c['measured']:.1f}"
            lines.append(f"| {row['pipeline']} | {row['workers_available']} | {c['cut']}{mark} | "
                         f"{c['predicted']:.1f} | {measured} | {_error(c['predicted'], c['measured'])} | {c['bound']}; serving "
                         f"{c['serving_ms']:.2f} + dispatcher {c['dispatcher_ms']:.2f} ms |")
    lines.append("")
    for row in section["rows"]:
        lines.append(f"- **{row['pipeline']}**: {row['decision']} — {row['reason']}")
        speed = row.get("predicted_speedup")
        if speed:
            lines.append(f"  - speed-up with the worker running: predicted {speed:.2f}×, measured "
                         f"{row['measured_speedup']:.2f}× (throughput); predicted from the CPU per minibatch "
                         f"the served runs spent, on cores of their own: {row['predicted_cpu_speedup'] or 0:.2f}×")
        for s in row["sizing"]:
            if s["decision"] == "offload":
                curve = ", ".join(f"{w}: {x:.0f}" for w, x, _ in s["curve"])
                reach = "" if s["meets"] else " (out of reach: the most it can give)"
                lines.append(f"  - target {s['target']:.1f}/s → {s['workers']} worker(s), cut after {s['cut']}, "
                             f"predicted {s['predicted']:.1f}{reach}; predicted curve (workers: /s) {curve}")
            else:
                lines.append(f"  - target {s['target']:.1f}/s → {s['decision']}")
        if not row["dedicated"]:
            shares = ", ".join(f"{x:.0%}" for x in row["cpu_shares"])
            lines.append(f"  - busy machine: a spinning probe got {shares} of the client's core; measured "
                         f"throughput is that share of what the predictions say")
    lines.append("")
    return lines


__all__ = ["big_and_cheap", "markdown", "offload_section", "summarize", "two_stage", "with_python"]
