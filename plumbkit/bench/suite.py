"""``plumbkit bench``: the paper's figures for this machine, written as Markdown + PNG + JSON.

Every comparison is measured in this process and interleaved (rounds of A, B, C, D), so ratios
hold on a noisy machine. ``--quick`` runs one small pipeline in seconds (CI keeps it from rotting).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import psutil

from ..engine import baselines, optimize, pick_best, trace, walk
from ..host.machine import available_cores
from ..engine.measuring import measure
from ..tfdata.graph import dataset_at, serialized_graph
from . import pipelines as bench_pipelines
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


def end_to_end(name: str, make: Callable, *, seconds: float, rounds: int, log: Callable[[str], None]) -> dict:
    """naive / heuristic / AUTOTUNE / plumbkit, measured interleaved; plumbkit's prediction."""
    log(f"[{name}] optimizing")
    plan = optimize(make, seconds=seconds, compare=False)
    warm = plan.warmup_batches
    contenders = {
        "naive": lambda: baselines.naive(make()),
        "heuristic": lambda: baselines.heuristic(make(), plan.trace.cores),
        "autotune": lambda: baselines.autotune(make(), plan.trace.cores),
        "plumbkit": lambda: plan.dataset,
    }
    measured: dict[str, list[float]] = {k: [] for k in contenders}
    for r in range(rounds):
        for key in (list(contenders) if r % 2 == 0 else list(contenders)[::-1]):
            log(f"[{name}] round {r + 1}: {key}")
            w = warm if key == "plumbkit" else 0
            measured[key].append(measure(contenders[key](), seconds=seconds, warmup_batches=w).throughput)
    med = {k: statistics.median(v) for k, v in measured.items()}
    return {
        "pipeline": name, "measured": med, "samples": measured,
        "predicted_plumbkit": plan.predicted_throughput,
        "prediction_error": abs(plan.predicted_throughput - med["plumbkit"]) / med["plumbkit"],
        "speedup_over_naive": {k: v / med["naive"] for k, v in med.items()},
        "plumbkit_over_autotune": med["plumbkit"] / med["autotune"],
        "cache": plan.cache.label, "cache_bytes": plan.cache.bytes,
        "changes": [str(c) for c in plan.changes], "notes": plan.notes,
    }


def stepping(name: str, make: Callable, *, steps: int, seeds: int, seconds: float,
             log: Callable[[str], None]) -> dict:
    """Bottleneck walk vs random walks; steps to 90% of peak; LP bound along the walk."""
    log(f"[{name}] bottleneck walk")
    b = walk(make, steps=steps, policy="bottleneck", seconds=seconds)
    randoms = []
    for s in range(seeds):
        log(f"[{name}] random walk, seed {s}")
        randoms.append(walk(make, steps=steps, policy="random", seed=s, seconds=seconds))
    peak = statistics.median([max(w.throughputs) for w in [b, *randoms]])
    to90 = lambda w: w.steps_to_reach(0.9, peak)  # noqa: E731
    r90 = [to90(w) if to90(w) is not None else steps + 1 for w in randoms]
    return {"pipeline": name, "bottleneck": b.throughputs, "bottleneck_ops": b.operators,
            "random": [w.throughputs for w in randoms], "lp_bounds": b.lp_bounds,
            "steps_to_90_bottleneck": to90(b) if to90(b) is not None else steps + 1,
            "steps_to_90_random_mean": statistics.mean(r90),
            "lp_over_measured": [lp / max(m, 1e-9) for lp, m in zip(b.lp_bounds, b.throughputs)]}


#: Smaller nodes (a list of file names) never decide a cache; their byte counts differ only in
#: how TensorFlow and numpy count string headers.
MIN_CACHE_BYTES = 64 * 1024


def cache_accuracy(name: str, make: Callable, *, seconds_list: list[float], log: Callable[[str], None],
                   min_bytes: float = MIN_CACHE_BYTES) -> dict:
    """Predicted vs true materialized size per cacheable node, and error vs tracing time."""
    rows = []
    for seconds in seconds_list:
        log(f"[{name}] cache estimate after {seconds:g} s")
        t = trace(make(), seconds=seconds, converge=False)
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
    if report["end_to_end"]:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        names = [r["pipeline"] for r in report["end_to_end"]]
        keys = ["naive", "heuristic", "autotune", "plumbkit"]
        width = 0.2
        for k, key in enumerate(keys):
            ax.bar([i + k * width for i in range(len(names))],
                   [r["speedup_over_naive"][key] for r in report["end_to_end"]], width, label=f"{key} (measured)")
        ax.scatter([i + 3 * width for i in range(len(names))],
                   [r["predicted_plumbkit"] / r["measured"]["naive"] for r in report["end_to_end"]],
                   marker="x", color="black", label="plumbkit (predicted)", zorder=3)
        ax.set_xticks([i + 1.5 * width for i in range(len(names))], names)
        ax.set_yscale("log")
        ax.set_ylabel("speedup over naive")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "end_to_end.png", dpi=110)
        files.append("end_to_end.png")
    for s in report["stepping"]:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(s["bottleneck"], "o-", color="#d62728", label="bottleneck walk (measured)")
        for k, r in enumerate(s["random"]):
            ax.plot(r, ".--", color="#1f77b4", alpha=0.6, label="random walks (measured)" if k == 0 else None)
        ax.plot(s["lp_bounds"], ":", color="black", label="LP bound (predicted)")
        ax.set_xlabel("step")
        ax.set_ylabel("minibatches/s")
        ax.set_title(f"stepping: {s['pipeline']}")
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


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [f"# plumbkit bench — {m['date']}", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']} GiB; TensorFlow {m['tensorflow']}, "
             f"Python {m['python']}. All throughputs in minibatches/s, measured in one process, "
             f"interleaved, medians of {report['rounds']} rounds; *predicted* marks the model's numbers.", ""]
    if report["end_to_end"]:
        lines += ["## End to end", "",
                  "| pipeline | naive | heuristic | AUTOTUNE | plumbkit | plumbkit predicted | plumbkit / AUTOTUNE | prediction error | cache |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in report["end_to_end"]:
            me = r["measured"]
            lines.append(f"| {r['pipeline']} | {me['naive']:.1f} | {me['heuristic']:.1f} | {me['autotune']:.1f} | "
                         f"{me['plumbkit']:.1f} | {r['predicted_plumbkit']:.1f} | {r['plumbkit_over_autotune']:.2f}× | "
                         f"{100 * r['prediction_error']:.0f}% | {r['cache'] or '—'} |")
        lines.append("")
    if report["stepping"]:
        lines += ["## Stepping (steps to 90% of peak)", "",
                  "| pipeline | bottleneck walk | random walks (mean) | LP bound / measured along the walk | ops chosen |",
                  "|---|---|---|---|---|"]
        for s in report["stepping"]:
            ratios = s.get("lp_over_measured") or [float("nan")]
            lines.append(f"| {s['pipeline']} | {s['steps_to_90_bottleneck']} | {s['steps_to_90_random_mean']:.1f} | "
                         f"{min(ratios):.2f}–{max(ratios):.2f} | {', '.join(str(o) for o in s['bottleneck_ops'])} |")
        lines.append("")
    if report["cache"]:
        lines += ["## Materialized size: predicted vs true", "", "| pipeline | trace s | operator | predicted | true | error |",
                  "|---|---|---|---|---|---|"]
        for c in report["cache"]:
            for row in c["rows"]:
                lines.append(f"| {c['pipeline']} | {row['seconds']:g} | {row['operator']} | {row['predicted']:.0f} | "
                             f"{row['true']:.0f} | {100 * row['error']:.1f}% |")
        lines.append("")
    if report.get("accuracy"):
        acc = accuracy_summary(report["accuracy"])
        lines += ["## CPU per operator: estimate vs truth", "",
                  "Truth: the sub-pipeline ending at the operator minus the one ending at its input, "
                  "process CPU, `reduce`-driven, long run minus short run. *Before*: the trace's wall "
                  "self time scaled to the process CPU (the first version); *after*: calibrated alone. "
                  "Error of the per-core rate.", "",
                  f"Median error over {acc['operators']} operators: before {100 * acc['median_before']:.0f}%, "
                  f"after {100 * acc['median_after']:.0f}%.", "",
                  "| pipeline | operator | truth µs/elem | before µs | before error | after µs | after error |",
                  "|---|---|---|---|---|---|---|"]
        for res in report["accuracy"]:
            for r in res["rows"]:
                lines.append(f"| {res['pipeline']} | {r['operator']} | {_us(r['truth'])} | {_us(r['before'])} | "
                             f"{_pct(r['before_error'])} | {_us(r['after'])} | {_pct(r['after_error'])} |")
        lines += ["", "| pipeline | operators | calibrated | calibration (s) |", "|---|---|---|---|"]
        for res in report["accuracy"]:
            lines.append(f"| {res['pipeline']} | {res['operators']} | {res['calibrated']} | "
                         f"{res['calibration_seconds']:.2f} |")
        lines.append("")
    if report["overhead"]:
        lines += ["## Tracing overhead", "",
                  "Medians of interleaved rounds; *with widget* is the same trace drawn by the `%%plumb` live "
                  "widget (one analysis and at most one LP per redraw, kernel side; goal: within 2 points of the "
                  "tracer). *Widget CPU* is the extra CPU time the widget's thread takes per second of trace, as "
                  "points of the machine's cores (what it costs a pipeline that keeps them all busy).", "",
                  "| pipeline | untraced | traced | overhead | with widget | widget overhead | widget − tracer | widget CPU |",
                  "|---|---|---|---|---|---|---|---|"]
        for o in report["overhead"]:
            nan = float("nan")
            wo = o.get("widget_overhead")
            lines.append(f"| {o['pipeline']} | {o.get('untraced', nan):.1f} | {o.get('traced', nan):.1f} | "
                         f"{100 * o['overhead']:.1f}% | {o.get('widget', nan):.1f} | "
                         + (f"{100 * wo:.1f}% | {100 * (wo - o['overhead']):+.1f} points | "
                            f"{o['widget_points_if_saturated']:.2f} points |" if wo is not None else "— | — | — |"))
        lines.append("")
    if report.get("cancel"):
        lines += ["## Cancel and Ctrl-C", "",
                  "Seconds from the request to `optimize` returning its partial plan, stopped at several "
                  "points of the protocol (goal: at most 2 s).", "",
                  "| pipeline | how | after (s) | took (s) | where it was |", "|---|---|---|---|---|"]
        for c in report["cancel"]:
            for row in c["rows"]:
                lines.append(f"| {c['pipeline']} | {row['how']} | {row['after']:g} | {row['seconds']:.2f} | "
                             f"{row['phase']} |")
        lines.append("")
    if report.get("pick_best"):
        pb = report["pick_best"]
        lines += ["## pick_best (image classification: decode + random crop, fused or not)", "",
                  f"Chosen: **{pb['best']}** — {pb['reason']}", ""]
    lines += [f"![{f}]({f})" for f in report["plots"]]
    return "\n".join(lines) + "\n"


def _us(x: float | None) -> str:
    return "—" if x is None else f"{x * 1e6:,.1f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="bench-report", help="folder for report.md, report.json and PNGs")
    parser.add_argument("--quick", action="store_true", help="one small pipeline, a few seconds (CI)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds per comparison")
    parser.add_argument("--only", default=None, help="comma-separated pipeline names")


def step_targets(pipelines: dict[str, Callable], quick: bool) -> dict[str, Callable]:
    """Pipelines to walk: the skewed one as given; three planted maps of different cost (the
    issue's case); the image and speech pipelines from their naive form (parallelism 1 everywhere)."""
    targets = {k: v for k, v in pipelines.items() if k == "skewed"}
    if quick:
        return targets
    targets["three maps"] = bench_pipelines.planted_three_maps()
    for name in ("image (cacheable)", "speech"):
        if name in pipelines:
            targets[f"{name.split(' ')[0]} from naive"] = (lambda make: lambda: baselines.naive(make()))(pipelines[name])
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


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = tempfile.mkdtemp(prefix="plumbkit-bench-")
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    quick = args.quick
    seconds = args.seconds or (1.0 if quick else 4.0)
    rounds = args.rounds or (1 if quick else 3)
    if quick:
        pipelines = {"skewed": bench_pipelines.planted_skewed(elements=800)}
    else:
        pipelines = {
            "image (cacheable)": bench_pipelines.image_cacheable(data),
            "image + random flip": bench_pipelines.image_random(data),
            "detection": bench_pipelines.detection(data),
            "text": bench_pipelines.text(data),
            "speech": bench_pipelines.speech(),
            "skewed": bench_pipelines.planted_skewed(),
        }
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        pipelines = {k: v for k, v in pipelines.items() if k in wanted}
    report: dict[str, Any] = {"machine": machine(), "rounds": rounds, "seconds": seconds,
                              "end_to_end": [], "stepping": [], "cache": [], "overhead": [], "cancel": [],
                              "plots": [], "accuracy": []}
    for name, make in pipelines.items():
        report["end_to_end"].append(end_to_end(name, make, seconds=seconds, rounds=rounds, log=log))
    for name, make in step_targets(pipelines, quick).items():
        report["stepping"].append(stepping(name, make, steps=2 if quick else 5, seeds=1 if quick else 3,
                                           seconds=seconds, log=log))
    for name, make in accuracy_targets(pipelines, quick).items():
        report["accuracy"].append(operator_errors(name, make, seconds=min(seconds, 3.0) if not quick else 1.0,
                                                  log=log, rounds=1 if quick else 3))
    if quick:  # the same code paths, on the small pipeline
        finite = lambda: pipelines["skewed"]().take(20)  # noqa: E731
        report["cache"].append(cache_accuracy("skewed", finite, seconds_list=[0.5], log=log, min_bytes=1))
        report["overhead"].append(overhead("skewed", pipelines["skewed"], seconds=seconds, rounds=1))
        report["cancel"].append(responsiveness("skewed", pipelines["skewed"], seconds=seconds,
                                               delays=(0.5, 2.0), log=log))
    else:
        # one pass (4096 images) takes about a second: shorter traces see part of it
        cache_src = bench_pipelines.image_cacheable(Path(data) / "cache-estimate", files=16, per_file=256)
        report["cache"].append(cache_accuracy("image (cacheable)", cache_src, seconds_list=[0.25, 0.5, 1.0, 2.0], log=log))
        # Overhead on CPU-saturated variants where one exists (the user's image and text
        # pipelines idle on a sequential reader, which would hide the tracer's cost).
        saturated = {"image (cacheable)": bench_pipelines.decode_only(data),
                     "text": bench_pipelines.text(data, tuned=True)}
        for name, make in pipelines.items():
            log(f"[{name}] tracing overhead")
            report["overhead"].append(overhead(name, saturated.get(name, make), seconds=seconds, rounds=2 * rounds + 1))
        for name in ("image (cacheable)", "text"):
            if name in pipelines:
                report["cancel"].append(responsiveness(name, pipelines[name], seconds=seconds,
                                                       delays=(0.5, 2.0, 5.0, 10.0), log=log))
    if not quick and (not args.only or "pick_best" in args.only):
        log("[pick_best] fused vs unfused decode + crop")
        best, plan, reason = pick_best(bench_pipelines.classification_candidates(data), seconds=seconds)
        report["pick_best"] = {"best": best, "reason": reason, "measured": plan.measured_throughput,
                               "cache": plan.cache.label}
    report["plots"] = plots(report, out)
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "report.md").write_text(markdown(report))
    print(markdown(report))
    print(f"report written to {out}/")
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = argparse.ArgumentParser(prog="plumbkit bench", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
