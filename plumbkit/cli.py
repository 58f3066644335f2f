"""``plumbkit`` on the command line: ``demo``, ``trace`` and ``bench``. Thin: parse, call, print."""

from __future__ import annotations

import argparse
import importlib
import os
import sys


def _load_pipeline(spec: str):
    """``module:function`` or ``path/to/file.py:function`` -> the zero-argument pipeline factory."""
    target, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"plumbkit: expected MODULE:FUNCTION or FILE.py:FUNCTION, got {spec!r}")
    if target.endswith(".py"):
        import runpy
        namespace = runpy.run_path(target)
        if attr not in namespace:
            raise SystemExit(f"plumbkit: {target} defines no {attr!r}")
        return namespace[attr]
    return getattr(importlib.import_module(target), attr)


def _progress(message: str, fraction: float) -> None:
    print(f"  [{int(100 * fraction):3d}%] {message}", flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
    from .bench import examples
    from .engine import optimize, trace
    data = args.data or examples.demo_data_dir()
    print(f"plumbkit demo: writing {args.files} TFRecord files of JPEGs to {data} ...", flush=True)
    files = examples.write_image_records(data, files=args.files, per_file=args.per_file, size=128)

    def pipeline():
        return examples.image_pipeline(files, batch_size=32, epochs=None)

    print("\n1. Tracing the bundled misconfigured image pipeline ...", flush=True)
    traced = trace(pipeline, seconds=args.seconds)
    print(traced)
    if traced.bottleneck is not None:
        b = traced.bottleneck
        print(f"\n=> bottleneck: {b.label}, {b.rate_per_core:.1f} minibatches/s per core "
              f"with parallelism {b.parallelism}")
    print("\n2. Optimizing (LP parallelism, cache under a memory budget, prefetch; predicted before any "
          "rewrite, then yours, the baselines and the plan measured alike) ...", flush=True)
    from dataclasses import replace

    from .engine.compare import QUICK
    plan = optimize(pipeline, seconds=args.seconds, memory_budget=args.memory_budget,
                    protocol=replace(QUICK, rounds=args.rounds), on_progress=_progress)
    print()
    print(plan)
    comparison = plan.comparison
    over = comparison.speedup("plumbkit" if plan.applied else "yours", "autotune") if comparison else None
    if over is not None:
        print(f"\n=> what plumbkit returns vs AUTOTUNE (measured alike): {over.verdict}; "
              f"prediction error before the fact {plan.prediction_error:.0%}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from .engine import trace
    traced = trace(_load_pipeline(args.pipeline), seconds=args.seconds)
    print(traced)
    if args.save:
        traced.save(args.save)
        print(f"saved to {args.save}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plumbkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="trace and optimize a bundled misconfigured image pipeline")
    demo.add_argument("--seconds", type=float, default=6.0, help="tracing time per measurement")
    demo.add_argument("--files", type=int, default=8)
    demo.add_argument("--per-file", type=int, default=128)
    demo.add_argument("--data", help="folder for the generated data (default: a temporary folder)")
    demo.add_argument("--memory-budget", type=float, default=None, help="bytes (default: half of free memory)")
    demo.add_argument("--rounds", type=int, default=3, help="interleaved rounds measuring each configuration")
    demo.set_defaults(func=cmd_demo)
    trace = sub.add_parser("trace", help="trace a pipeline: MODULE:FUNCTION or FILE.py:FUNCTION")
    trace.add_argument("pipeline")
    trace.add_argument("--seconds", type=float, default=10.0)
    trace.add_argument("--save", help="write the trace as JSON")
    trace.set_defaults(func=cmd_trace)
    try:
        from . import bench
        bench_parser = sub.add_parser("bench", help="run the benchmark suite and write a report")
        bench.add_arguments(bench_parser)
        bench_parser.set_defaults(func=bench.run)
    except ImportError:
        pass
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("plumbkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
