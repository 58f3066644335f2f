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
from ..planning import offload as model
from ..tfdata.service_processes import ServiceCluster, usable_cores
from .examples import planted_work

Log = Callable[[str], None]


# -- pipelines ------------------------------------------------------------------------------

def two_stage(per_element: int = 40, per_batch: int = 900, *, finite: bool = False) -> tf.data.Dataset:
    """A costly per-element map, a batch, a costly per-batch map: the cut after the batch splits
    the work between a worker and the client. Repeated forever (sharding OFF) unless ``finite``
    (one pass of a ``range``: DYNAMIC sharding, one split per element)."""
    ds = tf.data.Dataset.range(100_000)
    if not finite:
        ds = ds.repeat()
    ds = ds.map(lambda x: planted_work(x, per_element), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(32)
    return ds.map(lambda b: b + planted_work(tf.reduce_sum(tf.cast(b, tf.int64)), per_batch))


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

def summarize(name: str, plan: OffloadPlan, targets: tuple[float, ...] = ()) -> dict[str, Any]:
    """One pipeline's row: decision, cut, predicted vs measured at 0 and the workers running,
    every cut's served measurement, the curve, and the sizing for ``targets``."""
    n = plan.workers_available
    errors = {}
    for workers in sorted(plan.measured):
        predicted = plan.predicted_at(workers)
        errors[workers] = {"predicted": predicted, "measured": plan.measured[workers],
                           "samples": [r.throughput for r in plan.runs.get(workers, [])],
                           "error": abs(predicted - plan.measured[workers]) / max(plan.measured[workers], 1e-12)}
    per_cut = [{"cut": c.label, "predicted": model.predict(plan.setting, c, n).throughput,
                "bound": model.predict(plan.setting, c, n).bound, "measured": c.measured.get(n),
                "dispatcher_ms": 1e3 * c.dispatcher_cpu, "serving_ms": 1e3 * c.service_cpu} for c in plan.cuts]
    sizing = []
    for target in targets:
        d = model.decide(plan.setting, plan.cuts, target=target, max_workers=plan.max_workers,
                         invalid=plan.invalid)
        sizing.append({"target": target, "decision": d.action, "cut": d.cut.label if d.cut else None,
                       "workers": d.workers, "predicted": d.predicted, "meets": d.meets_target})
    return {
        "pipeline": name, "decision": plan.decision, "reason": plan.reason,
        "cut": plan.distribute.cut_label if plan.distribute else None,
        "sharding": plan.distribute.sharding if plan.distribute else None,
        "workers_available": n, "points": {str(k): v for k, v in errors.items()},
        "curve": [[p.workers, p.throughput, p.bound] for p in plan.predicted], "per_cut": per_cut,
        "sizing": sizing, "predicted_speedup": plan.predicted_speedup, "measured_speedup": plan.measured_speedup,
        "measured_cpu_speedup": plan.measured_cpu_speedup, "dedicated": plan.dedicated, "notes": plan.notes,
        "local": plan.local, "ideal": plan.ideal,
    }


def offload_section(*, seconds: float, rounds: int, log: Log) -> dict[str, Any]:
    """Runs the offload benchmark on a cluster of one worker on this machine."""
    cores = usable_cores()
    client = cores[:1] if len(cores) > 1 else None
    rows = []
    log("[offload] starting a dispatcher and one worker")
    with ServiceCluster(1, client_cores=client) as cluster:
        layout = cluster.describe()
        log("[offload] two-stage pipeline, sharding OFF")
        plan = offload(two_stage, dispatcher=cluster, max_workers=16, seconds=seconds, rounds=rounds)
        local = plan.local
        rows.append(summarize("two-stage (OFF)", plan, targets=(round(1.5 * local, 1), round(4 * local, 1))))
        log("[offload] the same, one pass of a range: DYNAMIC sharding")
        plan = offload(lambda: two_stage(finite=True), dispatcher=cluster, max_workers=16, seconds=seconds,
                       rounds=rounds)
        rows.append(summarize("two-stage, one pass (DYNAMIC)", plan, targets=(round(1.5 * local, 1),)))
        log("[offload] cheap pipeline, big elements")
        rows.append(summarize("big and cheap", offload(big_and_cheap, dispatcher=cluster, seconds=seconds,
                                                       rounds=rounds)))
    return {"layout": layout, "client_cores": client, "rows": rows}


def markdown(section: dict[str, Any] | None) -> list[str]:
    """The report's lines for the section (none when it did not run)."""
    if not section:
        return []
    lines = ["## Offloading to tf.data service", "",
             f"Client (plumbkit's measuring process) on core(s) {section['client_cores']}; "
             + section["layout"].replace("\n", "; ") + ". Throughput in minibatches/s; measured points are "
             "medians of interleaved runs; counts above the workers running are predictions.", ""]
    lines += ["| pipeline | decision | cut | workers | predicted | measured | error |", "|---|---|---|---|---|---|---|"]
    for row in section["rows"]:
        for workers, p in row["points"].items():
            lines.append(f"| {row['pipeline']} | {row['decision']} | {row['cut'] or '—'} | {workers} | "
                         f"{p['predicted']:.1f} | {p['measured']:.1f} | {100 * p['error']:.0f}% |")
    lines.append("")
    lines += ["Every cut measured with the workers running (predicted vs measured, minibatches/s):", "",
              "| pipeline | cut after | predicted | measured | bound | serving + dispatcher per minibatch |",
              "|---|---|---|---|---|---|"]
    for row in section["rows"]:
        for c in row["per_cut"]:
            measured = "—" if c["measured"] is None else f"{c['measured']:.1f}"
            lines.append(f"| {row['pipeline']} | {c['cut']} | {c['predicted']:.1f} | {measured} | "
                         f"{c['bound']} | {c['serving_ms']:.2f} + {c['dispatcher_ms']:.2f} ms |")
    lines.append("")
    for row in section["rows"]:
        if row["curve"] and len(row["curve"]) > 2:
            curve = ", ".join(f"{w}: {x:.0f}" for w, x, _ in row["curve"])
            lines.append(f"- **{row['pipeline']}**, predicted curve (workers: minibatches/s): {curve}")
        for s in row["sizing"]:
            verdict = (f"{s['workers']} worker(s), cut after {s['cut']}, predicted {s['predicted']:.1f}"
                       if s["decision"] == "offload" else s["decision"])
            lines.append(f"  - target {s['target']:.1f}/s → {verdict}" + ("" if s["meets"] or s["decision"] != "offload"
                                                                          else " (target out of reach)"))
        speed = row.get("predicted_speedup")
        if speed:
            lines.append(f"  - speed-up with the worker running: predicted {speed:.2f}×, measured "
                         f"{row['measured_speedup']:.2f}× (throughput), {row['measured_cpu_speedup'] or 0:.2f}× "
                         f"(from measured CPU per minibatch)")
        for note in row["notes"]:
            if note.startswith("busy machine"):
                lines.append(f"  - {note}")
    lines.append("")
    return lines


__all__ = ["big_and_cheap", "markdown", "offload_section", "summarize", "two_stage", "with_python"]
