"""``plumbkit bench``: the paper's figures for this machine, written as Markdown + PNG + JSON.

End to end, every pipeline is optimized (its prediction made before any rewrite ran), then six
configurations — yours, naive, heuristic, AUTOTUNE, AUTOTUNE + the plan's cache and prefetch, and
the plan — are measured again, independently, under one protocol (:mod:`plumbkit.engine.compare`:
fresh builds, caches filled, steady state, interleaved rounds, median and IQR). The report checks
the speed-up optimize() reported against that independent timing. The pipelines cover the
regimes users live in: larger than the memory budget and read from disk, shuffled with random
augmentation, already tuned by an expert, and small evaluation-style sets that fit the cache.
``--quick`` runs one small pipeline in seconds (CI keeps it from rotting).

Two sets, reported apart: the *tuning* set (:mod:`plumbkit.bench.pipelines`, the nine pipelines
the model's costs, constants and rules were made on) and the *held-out* set
(:mod:`plumbkit.bench.public_pipelines`, public pipelines restated from tensorflow/models,
tensorflow/tpu, tensorflow/nmt, keras-io and the tf.data guide). No model change is ever tuned on
the held-out set: its error is read, never fitted. ``--split`` picks one set or both; the other
sections (stepping, accuracy, overhead, cancel) run on the tuning set.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import psutil

from ..engine import baselines, optimize, pick_best, trace, walk
from ..host.machine import available_cores
from ..engine.compare import FULL, Comparison, Contender, Protocol, compare
from ..engine.optimization import AUTOTUNE_WITH, Plan
from ..tfdata.disk import evict_from_page_cache
from ..tfdata.graph import dataset_at, serialized_graph
from ..render.table import pct
from ..tfdata.rebuild import apply_changes
from . import busy_core, disk_tier, model_loop
from . import offload as offload_bench
from . import pipelines as bench_pipelines
from . import public_pipelines
from .pipelines import HELD_OUT, SPLITS, TUNING
from .alike import as_dict, num
from .accuracy import operator_errors, summary as accuracy_summary
from .cancel import cancel_latency
from .overhead import overhead as tracing_overhead


def machine() -> dict[str, Any]:
    import tensorflow as tf
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": available_cores(), "host_cores": psutil.cpu_count(),
            "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "tensorflow": tf.__version__, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M")}


#: Configurations measured end to end, in table order.
CONFIGS = ("yours", "naive", "heuristic", "autotune", AUTOTUNE_WITH, "plumbkit")
#: The speed-up plumbkit reports must agree with an independent timing within this.
AGREEMENT = 0.15

#: ``--quick`` checks that every section's code runs, not its figures: the skewed pipeline small
#: (40 minibatches an epoch: each cache fill, and each true size the cache section computes, is
#: cheap) and BRIEF's short windows, still two interleaved rounds.
QUICK_ELEMENTS = 320
QUICK_PROTOCOL = Protocol(rounds=2, window=0.1, max_windows=2, fill_limit=5.0)


def end_to_end(name: str, make: Callable, *, seconds: float, protocol: Protocol, log: Callable[[str], None],
               memory_budget: float | None = None, before_each: Callable[[str], None] | None = None,
               regime: str = "", split: str = TUNING) -> dict:
    """optimize() (its own comparison: yours vs its plan), then all six configurations measured
    again, independently, under the same protocol: yours, naive, heuristic, AUTOTUNE, AUTOTUNE +
    the plan's cache and prefetch, and the plan. The plan's prediction was made before it ran."""
    log(f"[{name}] optimizing")
    plan = optimize(make, seconds=seconds, compare=False, protocol=protocol, memory_budget=memory_budget,
                    before_each=before_each, on_progress=lambda m, f: log(f"[{name}]   {m}"))
    log(f"[{name}] measuring six configurations alike ({protocol.rounds} rounds)")
    comparison = compare(_six_configurations(plan, make), protocol, before_each=before_each,
                         on_progress=lambda m, f: log(f"[{name}]   {m}"))
    med = {k: r.median for k, r in comparison.results.items()}
    return {"pipeline": name, "split": split, "regime": regime, **_measured_fields(comparison, med),
            **_prediction_fields(plan, med), **_speedup_fields(plan, comparison, med)}


def _six_configurations(plan: Plan, make: Callable) -> list[Contender]:
    """Yours, the three baselines, AUTOTUNE given the plan's caches and prefetch, and the plan:
    each built fresh from ``make``, filled with its own warm-up."""
    cores, changes = plan.trace.cores, plan.proposed_changes
    return [
        Contender("yours", make, plan.yours_warmup_batches),
        Contender("naive", lambda: baselines.naive(make()), plan.yours_warmup_batches),
        Contender("heuristic", lambda: baselines.heuristic(make(), cores), plan.yours_warmup_batches),
        Contender("autotune", lambda: baselines.autotune(make(), cores), plan.yours_warmup_batches),
        Contender(AUTOTUNE_WITH, lambda: baselines.autotune_with(make(), changes, cores), plan.warmup_batches),
        Contender("plumbkit", lambda: apply_changes(make(), changes), plan.warmup_batches),
    ]


def _measured_fields(comparison: Comparison, med: dict[str, float]) -> dict:
    """What the bench's own comparison measured, per configuration (``med``: its medians)."""
    res = comparison.results
    return {
        "measured": med,
        "quartiles": {k: r.quartiles for k, r in res.items()},
        "spread": {k: r.spread for k, r in res.items()},
        "failed": {k: r.failed for k, r in res.items() if r.failed},
        "rounds": {k: r.rounds for k, r in res.items()},
        "neighbour_cores": {k: r.neighbour_cores for k, r in res.items()},
        "cpu_per_batch": {k: r.cpu_per_batch_median for k, r in res.items()},
        # cores kept busy, measured: what the idle per hand-off predicts (the CPU limit's share)
        "busy_cores": ((med.get("plumbkit") or 0) * (res["plumbkit"].cpu_per_batch_median or 0)
                       if "plumbkit" in res else None),
        "protocol_notes": {k: r.notes for k, r in res.items() if r.notes},
        "speedup_over_naive": {k: v / med["naive"] for k, v in med.items() if v and med.get("naive")},
    }


def _prediction_fields(plan: Plan, med: dict[str, float]) -> dict:
    """What the plan predicted before the fact, and how far the bench's medians ``med`` are from it."""
    measured_plan = med["plumbkit"]
    return {
        "predicted_cpu_per_batch": plan.prediction.cpu_per_batch,
        # your pipeline's CPU per minibatch and throughput as the trace read them (under the
        # tracer, no warm-up), minutes before the comparison
        "traced_cpu_per_batch": plan.trace.analysis.cpu_per_batch,
        "traced_throughput": plan.trace.analysis.throughput,
        "predicted_idle_per_batch": plan.prediction.idle_per_batch,
        "predicted_plumbkit": plan.predicted_throughput,
        "predicted": plan.predictions,
        "prediction_binding": plan.prediction.binding,
        "prediction_limits": plan.prediction.limits,
        # like with like: the first epoch's prediction where the comparison measured first epochs
        "prediction_error": (abs(plan.compared_prediction.throughput - measured_plan) / measured_plan
                             if measured_plan else None),
        "plumbkit_over_predicted": (measured_plan / plan.compared_prediction.throughput
                                    if measured_plan and plan.compared_prediction.throughput else None),
        "predicted_fill": plan.fill_prediction.throughput if plan.fill_prediction else None,
        "fill_seconds": plan.fill_seconds, "measured_first_epoch": plan.first_epoch,
        "runtime": vars(plan.runtime) if plan.runtime else None,
        # your pipeline as written, predicted from its own trace against its measurement: nothing
        # changed, so this is the floor the machine's drift and the as-traced model set
        "yours_error": (plan.predictions["yours"] / med["yours"] - 1
                        if plan.predictions.get("yours") and med.get("yours") else None),
        "cache": plan.cache.label, "cache_bytes": plan.cache.bytes, "memory_budget": plan.cache.budget,
        "cache_why": plan.cache.why,
        "changes": [str(c) for c in plan.proposed_changes], "notes": plan.notes,
        "theta": plan.theta_by_label, "charged": plan.charged,
    }


def _speedup_fields(plan: Plan, comparison: Comparison, med: dict[str, float]) -> dict:
    """The speed-up optimize() reported against the same pair timed again here, and what the
    pipeline handed back gains over AUTOTUNE."""
    measured_plan = med["plumbkit"]
    reported = plan.speedup
    independent = comparison.speedup("plumbkit", "yours")
    agreement = None
    if independent is not None:
        claimed = reported.ratio if reported is not None else 1.0  # no changes: the same pipeline
        agreement = independent.ratio / claimed - 1
    returned = "plumbkit" if plan.applied else "yours"
    return {
        "reported_speedup": as_dict(reported), "independent_speedup": as_dict(independent),
        "speedup_agreement": agreement,
        # the headline's predicted speed-up, and its error against the one measured alike: the
        # machine's drift between the trace and the comparison cancels in both ratios, the
        # model's miss does not
        "predicted_speedup": plan.predicted_speedup,
        "speedup_error": (plan.predicted_speedup / reported.ratio - 1
                          if reported is not None and plan.predicted_speedup and reported.ratio else None),
        "speedup_agrees": agreement is not None and abs(agreement) <= AGREEMENT,
        "returned": returned, "applied": plan.applied, "verdict": plan.verdict,
        "returned_over_autotune": as_dict(comparison.speedup(returned, "autotune")),
        "plumbkit_over_autotune": (measured_plan / med["autotune"]) if measured_plan and med.get("autotune") else None,
    }


def stepping(name: str, make: Callable, *, steps: int, starts: int, seconds: float,
             log: Callable[[str], None]) -> dict:
    """Bottleneck walks against random walks, each from ``starts`` fresh starts: steps to 90% of
    peak with their spread; "not separable" where the noise (the spread of the same starting
    pipeline measured at every start) is as wide as the 10% threshold."""
    walks_b, walks_r = [], []
    for s in range(starts):
        log(f"[{name}] bottleneck walk, start {s + 1}")
        walks_b.append(walk(make, steps=steps, policy="bottleneck", seconds=seconds))
        log(f"[{name}] random walk, seed {s}")
        walks_r.append(walk(make, steps=steps, policy="random", seed=s, seconds=seconds))
    everything = walks_b + walks_r
    peak = statistics.median([max(w.throughputs) for w in everything])
    steps_b = [x if (x := w.steps_to_reach(0.9, peak)) is not None else steps + 1 for w in walks_b]
    steps_r = [x if (x := w.steps_to_reach(0.9, peak)) is not None else steps + 1 for w in walks_r]
    starts_measured = [w.throughputs[0] for w in everything]
    noise = _relative_iqr(starts_measured)
    separable = noise < 0.10 and max(steps_b) < min(steps_r)
    b = walks_b[0]
    return {"pipeline": name, "bottleneck": b.throughputs, "bottleneck_ops": b.operators,
            "bottleneck_walks": [w.throughputs for w in walks_b], "random": [w.throughputs for w in walks_r],
            "allocation_bounds": b.allocation_bounds, "peak": peak,
            "steps_to_90_bottleneck": steps_b, "steps_to_90_random": steps_r,
            "steps_to_90_bottleneck_median": statistics.median(steps_b),
            "steps_to_90_random_median": statistics.median(steps_r),
            "start_noise": noise, "separable": separable,
            "verdict": ("separable" if separable else
                        "not separable: " + (f"the same start measured {100 * noise:.0f}% apart (IQR/median), "
                                             f"as wide as the 10% threshold" if noise >= 0.10 else
                                             "the walks' step counts overlap")),
            "allocation_over_measured": [lp / max(m, 1e-9) for lp, m in zip(b.allocation_bounds, b.throughputs)]}


def _relative_iqr(values: list[float]) -> float:
    import numpy as np
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return float((q3 - q1) / med) if med else float("inf")


#: Smaller nodes (a list of file names) never decide a cache; their byte counts differ only in
#: how TensorFlow and numpy count string headers.
MIN_CACHE_BYTES = 64 * 1024


def cache_accuracy(name: str, make: Callable, *, seconds_list: list[float], log: Callable[[str], None],
                   min_bytes: float = MIN_CACHE_BYTES) -> dict:
    """Predicted vs true materialized size per cacheable node, and error vs tracing time."""
    rows = []
    for seconds in seconds_list:
        log(f"[{name}] cache estimate after {seconds:g} s")
        t = trace(make(), seconds=seconds, converge=False, calibrate=False)
        graph_def, _ = serialized_graph(make())
        for op in t.ops:
            if not op.cacheable or op.materialized_bytes is None or op.kind in ("prefetch", "cache"):
                continue
            true = _true_bytes(graph_def, op.name)
            if true and true >= min_bytes:
                rows.append({"seconds": seconds, "operator": op.label, "predicted": op.materialized_bytes,
                             "true": true, "error": abs(op.materialized_bytes - true) / true})
    return {"pipeline": name, "rows": rows}


def _true_bytes(graph_def, node: str, limit: int = 200_000) -> float | None:
    import numpy as np
    import tensorflow as tf
    total, n = 0, 0
    for element in dataset_at(graph_def, node).take(limit).as_numpy_iterator():
        total += sum(np.asarray(x).nbytes for x in tf.nest.flatten(element))
        n += 1
    return float(total) if n < limit else None


def overhead(name: str, make: Callable, *, seconds: float, rounds: int) -> dict:
    """The bare tracer's overhead and the live widget's, interleaved (goal: within 2 points)."""
    result = tracing_overhead(make, seconds=seconds, rounds=rounds, with_widget=_widgets_installed())
    return {"pipeline": name, **{k: v for k, v in result.items() if not k.endswith("ratios")}}


def _widgets_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("ipywidgets") is not None


def responsiveness(name: str, make: Callable, *, seconds: float, delays: tuple[float, ...],
                   log: Callable[[str], None]) -> dict:
    """How long Cancel and Ctrl-C take to end an optimization (goal: at most 2 s)."""
    log(f"[{name}] cancel and Ctrl-C latency")
    return {"pipeline": name, **cancel_latency(make, seconds=seconds, delays=delays)}


def plots(report: dict, out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    files = []
    rows = [r for r in report["end_to_end"] if r["measured"].get("naive")]
    if rows:
        fig, ax = plt.subplots(figsize=(9, 3.8))
        names = [r["pipeline"] for r in rows]
        width = 0.8 / len(CONFIGS)
        for k, key in enumerate(CONFIGS):
            ax.bar([i + k * width for i in range(len(names))],
                   [r["speedup_over_naive"].get(key, 0) for r in rows], width, label=f"{key} (measured)")
        plan_at = CONFIGS.index("plumbkit")
        ax.scatter([i + plan_at * width for i in range(len(names))],
                   [r["predicted_plumbkit"] / r["measured"]["naive"] for r in rows],
                   marker="x", color="black", label="plumbkit, predicted before the fact", zorder=3)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names, fontsize=7, rotation=15)
        ax.set_yscale("log")
        ax.set_ylabel("speed-up over naive (median)")
        ax.legend(fontsize=6, ncol=2)
        fig.tight_layout()
        fig.savefig(out / "end_to_end.png", dpi=110)
        files.append("end_to_end.png")
    for s in report["stepping"]:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for k, w in enumerate(s["bottleneck_walks"]):
            ax.plot(w, "o-", color="#d62728", alpha=0.7, label="bottleneck walks (measured)" if k == 0 else None)
        for k, r in enumerate(s["random"]):
            ax.plot(r, ".--", color="#1f77b4", alpha=0.6, label="random walks (measured)" if k == 0 else None)
        ax.plot(s["allocation_bounds"], ":", color="black", label="allocation bound, first bottleneck walk")
        ax.axhline(0.9 * s["peak"], color="#7f7f7f", lw=0.8, label="90% of peak")
        ax.set_xlabel("step")
        ax.set_ylabel("minibatches/s")
        ax.set_title(f"stepping: {s['pipeline']} ({s['verdict'].split(':')[0]})", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        name = f"stepping_{s['pipeline']}.png".replace(" ", "_")
        fig.savefig(out / name, dpi=110)
        files.append(name)
    for c in report["cache"]:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        by_op: dict[str, list[tuple[float, float]]] = {}
        for row in c["rows"]:
            by_op.setdefault(row["operator"], []).append((row["seconds"], 100 * row["error"]))
        for op, points in by_op.items():
            ax.plot(*zip(*sorted(points)), "o-", label=op)
        ax.set_xlabel("tracing time (s)")
        ax.set_ylabel("materialized-size error (%)")
        ax.set_title(f"cache size estimate vs tracing time: {c['pipeline']}")
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(out / "cache_estimate.png", dpi=110)
        files.append("cache_estimate.png")
    if report["overhead"]:
        fig, ax = plt.subplots(figsize=(6, 3))
        names = [o["pipeline"] for o in report["overhead"]]
        ax.bar(names, [100 * o["overhead"] for o in report["overhead"]], color="#7f7f7f")
        ax.axhline(5, color="#d62728", ls=":", label="goal, image (5%)")
        ax.axhline(10, color="#ff7f0e", ls=":", label="goal, text (10%)")
        ax.set_ylabel("tracing overhead (%)")
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "overhead.png", dpi=110)
        files.append("overhead.png")
    plt.close("all")
    return files


def _cell(row: dict, key: str) -> str:
    if key in row.get("failed", {}):
        return "failed"
    return num(row["measured"].get(key))


def _cpu_error(row: dict) -> float | None:
    measured, predicted = row.get("cpu_per_batch", {}).get("plumbkit"), row.get("predicted_cpu_per_batch")
    return (predicted - measured) / measured if measured and predicted else None


def _drift(row: dict) -> float | None:
    """Your pipeline's CPU per minibatch in the comparison over what the trace read: the same
    pipeline, minutes apart. What the machine changed meanwhile, not the model (a 150 s run of
    one pipeline on this VM read 8.1 ms per minibatch for 95 s, then 6.5: 2026-11-27-fused-scale NOTE)."""
    traced, measured = row.get("traced_cpu_per_batch"), row.get("cpu_per_batch", {}).get("yours")
    return measured / traced - 1 if traced and measured else None


def _ms_pair(first: float | None, second: float | None, change: float | None) -> str:
    """Two CPU figures per minibatch and how far apart they are."""
    if change is None or first is None or second is None:
        return "—"
    return f"{1e3 * first:.2f} ms, {1e3 * second:.2f} ms ({100 * change:+.0f}%)"


def _predicted_speedup_cell(row: dict) -> str:
    predicted, error = row.get("predicted_speedup"), row.get("speedup_error")
    if predicted is None or error is None:
        return "—"
    return f"{predicted:.2f}× ({100 * error:+.0f}%)"


def _drift_cell(row: dict) -> str:
    return _ms_pair(row.get("traced_cpu_per_batch"), row.get("cpu_per_batch", {}).get("yours"), _drift(row))


def _cpu_cell(row: dict) -> str:
    return _ms_pair(row.get("predicted_cpu_per_batch"), row.get("cpu_per_batch", {}).get("plumbkit"), _cpu_error(row))


def end_to_end_table(rows: list[dict]) -> list[str]:
    """The headline table (also the README's)."""
    lines = ["| pipeline | yours | naive | heuristic | AUTOTUNE | AUTOTUNE + same cache | plumbkit | "
             "plumbkit predicted | prediction error | spread (IQR/median, plumbkit) | returned |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        returned = "plan" if r["applied"] else ("yours (nothing to change)" if not r["changes"]
                                                else "yours (no measurable gain)")
        lines.append(f"| {r['pipeline']} | " + " | ".join(_cell(r, k) for k in CONFIGS)
                     + f" | {num(r['predicted_plumbkit'])} | {pct(r['prediction_error'])} | "
                       f"{pct(r['spread'].get('plumbkit'))} | {returned} |")
    return lines


#: How the report names each set.
SPLIT_TITLES = {TUNING: "Tuning set (the model was made on these)",
                HELD_OUT: "Held-out set (public pipelines; no model change is tuned on them)"}


def _by_split(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows grouped by set, tuning first (rows of reports from before the split are tuning rows)."""
    groups = {split: [r for r in rows if r.get("split", TUNING) == split] for split in SPLITS}
    return {split: members for split, members in groups.items() if members}


def prediction_errors(rows: list[dict], key: str = "prediction_error") -> dict[str, dict[str, float | int]]:
    """Per set: the median and worst of a row's error ``key`` (its size: a signed error counts as
    its absolute value) over the set's pipelines, and how many had one."""
    summary = {}
    for split, members in _by_split(rows).items():
        errors = [abs(r[key]) for r in members if r.get(key) is not None]
        if errors:
            summary[split] = {"median": statistics.median(errors), "worst": max(errors), "pipelines": len(errors)}
    return summary


def prediction_error_lines(rows: list[dict]) -> list[str]:
    """Per set: the throughput's prediction error, then the predicted speed-up's against the one
    measured alike (the headline's two figures; the machine's drift between trace and comparison
    moves the first, it cancels in the second)."""
    lines = [f"Prediction error before the fact, {split} set: median {100 * e['median']:.0f}%, "
             f"worst {100 * e['worst']:.0f}% over {e['pipelines']} pipelines."
             for split, e in prediction_errors(rows).items()]
    return lines + [f"Speed-up over yours, predicted (both predictions from the trace) against measured alike, "
                    f"{split} set: median error {100 * e['median']:.0f}%, worst {100 * e['worst']:.0f}% over "
                    f"{e['pipelines']} pipelines whose plan changed something."
                    for split, e in prediction_errors(rows, "speedup_error").items()] + [
        f"Your pipeline as written, predicted from its own trace against measured (nothing changed: the floor "
        f"the machine's drift and the as-traced model set), {split} set: median error {100 * e['median']:.0f}%, "
        f"worst {100 * e['worst']:.0f}% over {e['pipelines']} pipelines."
        for split, e in prediction_errors(rows, "yours_error").items()]


def markdown(report: dict) -> str:
    """The bench's report: one section per part that ran, in the order they ran."""
    m = report["machine"]
    lines = [f"# plumbkit bench — {m['date']}", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']} GiB; TensorFlow {m['tensorflow']}, "
             f"Python {m['python']}. Throughputs in minibatches/s, medians over the rounds of one protocol "
             f"({report['protocol']}). *predicted* marks the model's numbers, made before any rewrite ran.", ""]
    lines += _end_to_end_section(report["end_to_end"])
    lines += _stepping_section(report["stepping"])
    lines += _cache_section(report["cache"])
    lines += _accuracy_section(report.get("accuracy"))
    lines += _overhead_section(report["overhead"])
    lines += _cancel_section(report.get("cancel"))
    lines += _pick_best_section(report.get("pick_best"))
    lines += offload_bench.markdown(report.get("offload"))
    lines += issue_markdown(report)
    lines += [f"![{f}]({f})" for f in report["plots"]]
    return "\n".join(lines) + "\n"


def _end_to_end_section(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = ["## End to end", ""]
    for split, members in _by_split(rows).items():
        lines += [f"### {SPLIT_TITLES[split]}", ""] + end_to_end_table(members) + [""]
    lines += ["What each pipeline is, and where plumbkit's figure comes from:", ""]
    for r in rows:
        cache = (f"cache at {r['cache']} ({r['cache_bytes'] / 1e6:,.1f} MB of a {r['memory_budget'] / 1e6:,.0f} MB "
                 f"budget)" if r["cache"] else f"no new cache ({r['cache_why']})")
        lines.append(f"- **{r['pipeline']}** — {r['regime']} plumbkit: {cache}; prediction bound by "
                     f"{r['prediction_binding']}. {r['verdict']}.")
    return lines + _checks_table(rows) + [""] + prediction_error_lines(rows) + _cpu_lines(rows) + [""]


def _checks_table(rows: list[dict]) -> list[str]:
    lines = ["", "## Checks", "",
             "| pipeline | speed-up optimize() reported | predicted (its error) | same two timed independently | agreement | "
             "returned vs AUTOTUNE | plumbkit measured / predicted | plumbkit CPU per minibatch: predicted, measured "
             "| your CPU per minibatch: at the trace, in the comparison | other processes (cores, median) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rep, ind, auto = r["reported_speedup"], r["independent_speedup"], r["returned_over_autotune"]
        agree = ("—" if r["speedup_agreement"] is None else
                 f"{100 * r['speedup_agreement']:+.0f}% ({'within' if r['speedup_agrees'] else 'OUTSIDE'} 15%)")
        neighbours = [v for v in r["neighbour_cores"].values() if v is not None]
        lines.append(f"| {r['pipeline']} | {rep['verdict'] if rep else '1 (nothing to change)'} | "
                     f"{_predicted_speedup_cell(r)} | {ind['verdict'] if ind else '—'} | {agree} | {auto['verdict'] if auto else '—'} | "
                     f"{pct(r['plumbkit_over_predicted'])} | {_cpu_cell(r)} | {_drift_cell(r)} | "
                     f"{num(statistics.median(neighbours), 2) if neighbours else '—'} |")
    return lines


def _cpu_lines(rows: list[dict]) -> list[str]:
    """The plan's CPU per minibatch against its prediction, and your own CPU's drift between trace
    and comparison (what the machine did, the model not involved)."""
    lines = []
    cpu = [e for r in rows if (e := _cpu_error(r)) is not None]
    if cpu:
        lines += [f"CPU per minibatch, predicted before the fact vs measured (robust to a busy neighbour): "
                  f"median error {100 * statistics.median(map(abs, cpu)):.0f}%, worst "
                  f"{100 * max(map(abs, cpu)):.0f}%."]
    drift = [d for r in rows if (d := _drift(r)) is not None]
    if drift:
        lines += [f"Your pipeline's CPU per minibatch, the comparison's over the trace's (the machine's drift "
                  f"between prediction and measurement, the model not involved): median "
                  f"{100 * statistics.median(map(abs, drift)):.0f}%, worst {100 * max(map(abs, drift)):.0f}%."]
    return lines


def _stepping_section(steps: list[dict]) -> list[str]:
    if not steps:
        return []
    lines = ["## Stepping (steps to 90% of peak, over several starts)", "",
             "| pipeline | bottleneck walks: median (all) | random walks: median (all) | start measured apart (IQR/median) | verdict | ops chosen (first walk) |",
             "|---|---|---|---|---|---|"]
    for s in steps:
        lines.append(f"| {s['pipeline']} | {s['steps_to_90_bottleneck_median']:g} ({', '.join(map(str, s['steps_to_90_bottleneck']))}) | "
                     f"{s['steps_to_90_random_median']:g} ({', '.join(map(str, s['steps_to_90_random']))}) | "
                     f"{pct(s['start_noise'])} | {s['verdict']} | {', '.join(str(o) for o in s['bottleneck_ops'])} |")
    return lines + [""]


def _cache_section(caches: list[dict]) -> list[str]:
    if not caches:
        return []
    lines = ["## Materialized size: predicted vs true", "", "| pipeline | trace s | operator | predicted | true | error |",
             "|---|---|---|---|---|---|"]
    for c in caches:
        for row in c["rows"]:
            lines.append(f"| {c['pipeline']} | {row['seconds']:g} | {row['operator']} | {row['predicted']:.0f} | "
                         f"{row['true']:.0f} | {100 * row['error']:.1f}% |")
    return lines + [""]


def _accuracy_section(results: list[dict] | None) -> list[str]:
    if not results:
        return []
    acc = accuracy_summary(results)
    lines = ["## CPU per operator: estimate vs truth", "",
             "Truth: the operator alone over a cached sample of its real inputs (a filter: the "
             "sub-pipeline ending at it minus the one ending at its input; a map tf.data fuses "
             "with its batch: that pair over the sample, less the batch alone), process CPU, "
             "`reduce`-driven, a fresh iterator per run, long run minus short run. *Before*: the trace's wall "
             "self time scaled to the process CPU (the first version); *after*: calibrated alone, or fused "
             "with its batch where tf.data fuses them (what the trace shows); *used*: after, scaled to the CPU the process really spent in "
             "the pipeline (what the LP and the predictions use). Error of the per-core rate.", "",
             f"Median error over {acc['operators']} operators: before {100 * acc['median_before']:.0f}%, "
             f"after {100 * acc['median_after']:.0f}%, used {100 * acc['median_used']:.0f}%.", "",
             "| pipeline | operator | truth µs/elem | before µs | before error | after µs | after error "
             "| used µs | used error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        for r in res["rows"]:
            lines.append(f"| {res['pipeline']} | {r['operator']} | {_us(r['truth'])} | {_us(r['before'])} | "
                         f"{pct(r['before_error'])} | {_us(r['after'])} | {pct(r['after_error'])} | "
                         f"{_us(r.get('used'))} | {pct(r.get('used_error'))} |")
    lines += ["", "| pipeline | operators | calibrated | calibration (s) |", "|---|---|---|---|"]
    for res in results:
        lines.append(f"| {res['pipeline']} | {res['operators']} | {res['calibrated']} | "
                     f"{res['calibration_seconds']:.2f} |")
    return lines + [""]


def _overhead_section(overheads: list[dict]) -> list[str]:
    if not overheads:
        return []
    lines = ["## Tracing overhead", "",
             "Medians of interleaved rounds; *with widget* is the same trace drawn by the `%%plumb` live "
             "widget (one analysis and at most one LP per redraw, kernel side; goal: within 2 points of the "
             "tracer). *Widget CPU* is the extra CPU time the widget's thread takes per second of trace, as "
             "points of the machine's cores (what it costs a pipeline that keeps them all busy).", "",
             "| pipeline | untraced | traced | overhead | with widget | widget overhead | widget − tracer | widget CPU |",
             "|---|---|---|---|---|---|---|---|"]
    for o in overheads:
        nan = float("nan")
        wo = o.get("widget_overhead")
        lines.append(f"| {o['pipeline']} | {o.get('untraced', nan):.1f} | {o.get('traced', nan):.1f} | "
                     f"{100 * o['overhead']:.1f}% | {o.get('widget', nan):.1f} | "
                     + (f"{100 * wo:.1f}% | {100 * (wo - o['overhead']):+.1f} points | "
                        f"{o['widget_points_if_saturated']:.2f} points |" if wo is not None else "— | — | — |"))
    return lines + [""]


def _cancel_section(cancels: list[dict] | None) -> list[str]:
    if not cancels:
        return []
    lines = ["## Cancel and Ctrl-C", "",
             "Seconds from the request to `optimize` returning its partial plan, stopped at several "
             "points of the protocol (goal: at most 2 s).", "",
             "| pipeline | how | after (s) | took (s) | where it was |", "|---|---|---|---|---|"]
    for c in cancels:
        for row in c["rows"]:
            lines.append(f"| {c['pipeline']} | {row['how']} | {row['after']:g} | {row['seconds']:.2f} | "
                         f"{row['phase']} |")
    return lines + [""]


def _pick_best_section(pick_best: dict | None) -> list[str]:
    if not pick_best:
        return []
    return ["## pick_best (image classification: decode + random crop, fused or not)", "",
            f"Chosen: **{pick_best['best']}** — {pick_best['reason']}", ""]


def _us(x: float | None) -> str:
    return "—" if x is None else f"{x * 1e6:,.1f}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="bench-report", help="folder for report.md, report.json and PNGs")
    parser.add_argument("--quick", action="store_true", help="one small pipeline, a few seconds (CI)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per trace")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds per comparison (>= 5 for the report)")
    parser.add_argument("--window", type=float, default=None, help="seconds per measurement window")
    parser.add_argument("--only", default=None, help="comma-separated pipeline names")
    parser.add_argument("--split", choices=(TUNING, HELD_OUT, "all"), default="all",
                        help="end to end on the tuning set, the held-out set (public pipelines) or both")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: end_to_end,stepping,accuracy,cache,overhead,"
                             "cancel,pick_best,offload,disk_tier,model_in_the_loop,busy_core")
    parser.add_argument("--eval-gb", type=float, default=3.0,
                        help="GB of JPEG records the disk_tier section's evaluation pipeline reads (written, then "
                             "removed); that section runs only when --only names it")
    parser.add_argument("--resume", action="store_true",
                        help="keep the end-to-end rows already in OUT/partial.json and run only the rest")


def step_targets(pipelines: dict[str, Callable], quick: bool) -> dict[str, Callable]:
    """Pipelines to walk: the skewed one as given; three planted maps of different cost (the
    issue's case); the image and speech pipelines from their naive form (parallelism 1 everywhere)."""
    targets = {k: v for k, v in pipelines.items() if k == "skewed"}
    if quick:
        return targets
    targets["three maps"] = bench_pipelines.planted_three_maps()
    for name, target in (("image fits in memory", "image from naive"), ("speech", "speech from naive")):
        if name in pipelines:
            targets[target] = (lambda make: lambda: baselines.naive(make()))(pipelines[name])
    return targets


def accuracy_targets(pipelines: dict[str, Callable], quick: bool) -> dict[str, Callable]:
    """Pipelines whose per-operator CPU is checked against the truth: every bench pipeline as the
    user wrote it, plus two under tf.data's defaults (parallel maps, no pinning) and an
    eight-operator chain (the calibration's cost goal: under 3 s)."""
    if quick:
        return {k: v for k, v in pipelines.items() if k == "skewed"}
    targets = dict(pipelines)
    targets["three maps, defaults"] = bench_pipelines.planted_three_maps(defaults=True)
    targets["eight operators"] = bench_pipelines.planted_chain(maps=6)
    return targets


@dataclass(frozen=True)
class Case:
    """A bench pipeline: its factory, the regime it stands for, and how it is measured."""

    make: Callable
    regime: str
    memory_budget: float | None = None
    before_each: Callable[[str], None] | None = None
    split: str = TUNING


def cases(data: str, quick: bool, split: str = "all") -> dict[str, Case]:
    """The bench's pipelines of ``split`` (``"tuning"``, ``"held-out"`` or ``"all"``); ``quick``:
    the one small tuning pipeline, whatever the split."""
    if quick:
        return tuning_cases(data, quick)
    chosen = {} if split == HELD_OUT else tuning_cases(data, quick)
    if split != TUNING:
        chosen.update(held_out_cases(data))
    return chosen


def held_out_cases(data: str) -> dict[str, Case]:
    return {name: Case(p.make, f"{p.regime} Restated from {p.source}.", split=p.split)
            for name, p in public_pipelines.held_out(data).items()}


def tuning_cases(data: str, quick: bool) -> dict[str, Case]:
    if quick:
        return {"skewed": Case(bench_pipelines.planted_skewed(elements=QUICK_ELEMENTS),
                               "planted maps two orders of magnitude apart, small and cacheable.")}
    big = dict(files=24, per_file=512)
    big_paths = bench_pipelines.image_records(data, **big)
    decoded = bench_pipelines.decoded_bytes(**big)
    budget = decoded / 4.5
    evict = lambda _name: evict_from_page_cache(big_paths)  # noqa: E731
    return {
        "image larger than memory": Case(
            bench_pipelines.image_larger_than_memory(data, **big),
            f"{big['files'] * big['per_file']:,} JPEGs read from disk (evicted from the page cache before every "
            f"run); decoded {decoded / 1e6:,.0f} MB, {decoded / budget:.1f}× the {budget / 1e6:,.0f} MB memory budget "
            f"given to plumbkit.", memory_budget=budget, before_each=evict),
        "image shuffled + random crop": Case(
            bench_pipelines.shuffled_training(data),
            "a training pipeline as tutorials write it: files and records shuffled, random crop and flip; "
            "random from the source up, so nothing can be cached."),
        "image expert-tuned": Case(
            bench_pipelines.expert_tuned(data),
            "AUTOTUNE everywhere, a cache after decode, shuffle + random flip above it, prefetch(AUTOTUNE): "
            "the right answer is no change."),
        "image fits in memory": Case(
            bench_pipelines.image_cacheable(data),
            "the misconfigured demo pipeline on a small evaluation-style set (1,024 images) whose "
            "decoded minibatches fit the memory budget whole."),
        "image + random flip": Case(bench_pipelines.image_random(data),
                                    "the same with a random flip: the cache must go below it."),
        "detection": Case(bench_pipelines.detection(data), "decode, box-aware random crop, filter, padded batch."),
        "text": Case(bench_pipelines.text(data), "16,000 lines of tiny ops; fits the cache whole."),
        "speech": Case(bench_pipelines.speech(), "synthetic audio, STFT, mel, random masks."),
        "skewed": Case(bench_pipelines.planted_skewed(), "planted maps two orders of magnitude apart."),
    }


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = tempfile.mkdtemp(prefix="plumbkit-bench-")
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    quick = args.quick
    seconds = args.seconds or (1.0 if quick else 4.0)
    base = QUICK_PROTOCOL if quick else FULL
    protocol = Protocol(rounds=args.rounds or base.rounds, window=args.window or base.window,
                        tolerance=base.tolerance, max_windows=base.max_windows, fill_limit=base.fill_limit,
                        extra_rounds=base.extra_rounds)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    chosen = cases(data, quick, getattr(args, "split", "all"))
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        chosen = {k: v for k, v in chosen.items() if k in wanted}
    report: dict[str, Any] = {"machine": machine(), "protocol": protocol.describe(), "rounds": protocol.rounds,
                              "seconds": seconds, "end_to_end": [], "stepping": [], "cache": [], "overhead": [],
                              "cancel": [], "plots": [], "accuracy": []}
    _end_to_end_rows(report, {} if "end_to_end" in skip else chosen, out, resume=getattr(args, "resume", False),
                     seconds=seconds, protocol=protocol, log=log)
    pipelines = {k: v.make for k, v in chosen.items() if v.split == TUNING}
    if "stepping" not in skip:
        for name, make in step_targets(pipelines, quick).items():
            report["stepping"].append(stepping(name, make, steps=2 if quick else 4, starts=1 if quick else 3,
                                               seconds=0.5 if quick else 3.0, log=log))
    if "accuracy" not in skip:
        for name, make in accuracy_targets(pipelines, quick).items():
            report["accuracy"].append(operator_errors(name, make, seconds=min(seconds, 3.0) if not quick else 0.5,
                                                      log=log, rounds=1 if quick else 3))
    if quick:
        _quick_sections(report, pipelines, seconds=seconds, log=log)
    else:
        _full_sections(report, args, pipelines, data=data, out=out, seconds=seconds, protocol=protocol,
                       skip=skip, log=log)
    report["prediction_errors"] = prediction_errors(report["end_to_end"])
    report["speedup_errors"] = prediction_errors(report["end_to_end"], "speedup_error")
    report["yours_errors"] = prediction_errors(report["end_to_end"], "yours_error")
    report["plots"] = plots(report, out)
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "report.md").write_text(markdown(report))
    (out / "partial.json").unlink(missing_ok=True)
    print(markdown(report))
    print(f"report written to {out}/")
    return 0


def _end_to_end_rows(report: dict, chosen: dict[str, Case], out: Path, *, resume: bool, seconds: float,
                     protocol: Protocol, log: Callable[[str], None]) -> None:
    """One end-to-end row per chosen pipeline, each saved to ``partial.json`` as it lands (a long
    run keeps its results; ``resume`` picks them up and measures only the rest)."""
    done = set()
    if resume and (out / "partial.json").exists():
        report["end_to_end"] = json.loads((out / "partial.json").read_text())["end_to_end"]
        done = {r["pipeline"] for r in report["end_to_end"]}
        log(f"resuming: {', '.join(sorted(done))} already measured")
    for name, case in chosen.items():
        if name in done:
            continue
        report["end_to_end"].append(end_to_end(name, case.make, seconds=seconds, protocol=protocol, log=log,
                                               memory_budget=case.memory_budget, before_each=case.before_each,
                                               regime=case.regime, split=case.split))
        (out / "partial.json").write_text(json.dumps(report, indent=1, default=str))


def _quick_sections(report: dict, pipelines: dict[str, Callable], *, seconds: float,
                    log: Callable[[str], None]) -> None:
    """The same code paths as a full run, on the small pipeline, each once: CI checks they run,
    not their figures."""
    finite = lambda: pipelines["skewed"]().take(20)  # noqa: E731
    report["cache"].append(cache_accuracy("skewed", finite, seconds_list=[0.5], log=log, min_bytes=1))
    report["overhead"].append(overhead("skewed", pipelines["skewed"], seconds=seconds, rounds=2))
    report["cancel"].append(responsiveness("skewed", pipelines["skewed"], seconds=seconds,
                                           delays=(0.5,), log=log))


def _full_sections(report: dict, args: argparse.Namespace, pipelines: dict[str, Callable], *, data: str,
                   out: Path, seconds: float, protocol: Protocol, skip: set[str],
                   log: Callable[[str], None]) -> None:
    """Every section a full run measures besides end to end, stepping and accuracy."""
    if "cache" not in skip:
        # one pass (4096 images) takes about a second: shorter traces see part of it
        cache_src = bench_pipelines.image_cacheable(Path(data) / "cache-estimate", files=16, per_file=256)
        report["cache"].append(cache_accuracy("image (cacheable)", cache_src, seconds_list=[0.25, 0.5, 1.0, 2.0],
                                              log=log))
    if "overhead" not in skip:
        # Overhead on CPU-saturated variants where one exists (the user's image and text
        # pipelines idle on a sequential reader, which would hide the tracer's cost).
        saturated = {"image fits in memory": bench_pipelines.decode_only(data),
                     "text": bench_pipelines.text(data, tuned=True)}
        for name, make in pipelines.items():
            log(f"[{name}] tracing overhead")
            report["overhead"].append(overhead(name, saturated.get(name, make), seconds=seconds, rounds=5))
    if "cancel" not in skip:
        for name in ("image fits in memory", "text"):
            if name in pipelines:
                report["cancel"].append(responsiveness(name, pipelines[name], seconds=seconds,
                                                       delays=(0.5, 2.0, 5.0, 10.0), log=log))
    if "pick_best" not in skip and (not args.only or "pick_best" in args.only):
        log("[pick_best] fused vs unfused decode + crop")
        best, plan, reason = pick_best(bench_pipelines.classification_candidates(data), seconds=seconds)
        report["pick_best"] = {"best": best, "reason": reason, "measured": plan.returned_throughput,
                               "cache": plan.cache.label}
    if "offload" not in skip and (not args.only or "offload" in args.only):
        report["offload"] = offload_bench.offload_section(seconds=min(seconds, 1.5), rounds=protocol.rounds, log=log)
    report.update(issue_sections(args, data=data, out=out, seconds=seconds, protocol=protocol, skip=skip, log=log))


def issue_sections(args: argparse.Namespace, *, data: str, out: Path, seconds: float, protocol: Protocol,
                   skip: set[str], log: Callable[[str], None]) -> dict[str, dict]:
    """Issues 26 and 27's sections (disk tier, model in the loop, one core kept busy): each runs
    unless skipped, and with ``--only`` only when named there; the disk tier (tens of minutes, GBs
    written and removed) only when ``--only`` names it, so an end-to-end run stays as it was."""
    only = {n.strip() for n in (args.only or "").split(",") if n.strip()}
    runs = {disk_tier.SECTION: lambda: disk_tier.disk_tier_section(data, out, seconds=seconds, protocol=protocol,
                                                                   log=log, eval_gb=getattr(args, "eval_gb", 3.0)),
            model_loop.SECTION: lambda: model_loop.model_loop_section(data, seconds=seconds, protocol=protocol, log=log),
            busy_core.SECTION: lambda: busy_core.busy_core_section(data, seconds=seconds, protocol=protocol, log=log)}
    opt_in = {disk_tier.SECTION}
    return {name: run() for name, run in runs.items()
            if name not in skip and (name in only or not only and name not in opt_in)}


def issue_markdown(report: dict) -> list[str]:
    from . import busy_core, disk_tier, model_loop
    return [line for section in (disk_tier, model_loop, busy_core) for line in section.markdown(report.get(section.SECTION))]


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = argparse.ArgumentParser(prog="plumbkit bench", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
