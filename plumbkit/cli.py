"""``plumbkit`` on the command line: ``demo``, ``trace``, ``cache`` and ``bench``. Thin: parse, call, print.

Quiet by default: TensorFlow's log level is set before TensorFlow is imported and its start-up
notices are dropped, other libraries' chatter is silenced while plumbkit runs (``--verbose``
keeps it all). Progress is a bar on a terminal and plain lines when piped. Ctrl-C ends the
running measurement at once: what was measured so far is printed, marked partial, exit 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from .host.quiet import quiet, tensorflow_imported_quietly
from .model.protocol import PROTOCOL_HELP, PROTOCOLS
from .render.progress import ProgressPrinter

#: Exit status after Ctrl-C (128 + SIGINT), as shells expect.
INTERRUPTED_EXIT = 130


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


def cmd_demo(args: argparse.Namespace) -> int:
    from .bench import examples
    from .engine import optimize, trace
    data = args.data or examples.demo_data_dir()
    print(f"plumbkit demo: writing {args.files} TFRecord files of JPEGs to {data} ...", flush=True)
    files = examples.write_image_records(data, files=args.files, per_file=args.per_file, size=128)

    def pipeline():
        return examples.image_pipeline(files, batch_size=32, epochs=None)

    print("\n1. Tracing the bundled misconfigured image pipeline ...", flush=True)
    traced = _trace_with_progress(trace, pipeline, args.seconds)
    print(traced)
    if traced.partial:
        print(f"\nplumbkit: {traced.ended}; the trace above is what was measured so far")
        return INTERRUPTED_EXIT
    if traced.bottleneck is not None:
        b = traced.bottleneck
        print(f"\n=> bottleneck: {b.label}, {b.rate_per_core:.1f} minibatches/s per core "
              f"with parallelism {b.parallelism}")
    print("\n2. Optimizing (LP parallelism, cache under a memory budget, prefetch; predicted before any "
          "rewrite, then yours, the baselines and the plan measured alike) ...", flush=True)
    from dataclasses import replace

    protocol = PROTOCOLS[args.protocol]
    progress = ProgressPrinter(sys.stdout)
    plan = optimize(pipeline, seconds=args.seconds, memory_budget=args.memory_budget,
                    disk_budget=args.disk_budget, cache_dir=args.cache_dir,
                    protocol=replace(protocol, rounds=args.rounds or protocol.rounds), on_progress=progress)
    progress.close()
    if plan.partial:
        print(f"\n{plan}")
        return INTERRUPTED_EXIT
    print()
    print(plan)
    comparison = plan.comparison
    over = comparison.speedup("plumbkit" if plan.applied else "yours", "autotune") if comparison else None
    if over is not None:
        print(f"\n=> what plumbkit returns vs AUTOTUNE (measured alike): {over.verdict}; "
              f"prediction error before the fact {plan.prediction_error:.0%}")
    return 0


def _trace_with_progress(trace, pipeline, seconds: float, calibrate: bool = True):
    """``trace`` with a progress bar (elapsed of the longest time, throughput so far)."""
    progress = ProgressPrinter(sys.stdout)

    def update(t) -> None:
        progress("tracing", t.elapsed / max(seconds, 1e-9), f"{t.throughput:,.1f} minibatches/s so far")
    try:
        return trace(pipeline, seconds=seconds, on_update=update, update_interval=0.5, calibrate=calibrate)
    finally:
        progress.close()


def cmd_trace(args: argparse.Namespace) -> int:
    from .engine import trace
    traced = _trace_with_progress(trace, _load_pipeline(args.pipeline), args.seconds,
                                  calibrate=not args.no_calibrate)
    print(traced)
    if traced.partial:
        print(f"plumbkit: {traced.ended}; the trace above is what was measured so far")
        return INTERRUPTED_EXIT
    if args.save:
        traced.save(args.save)
        print(f"saved to {args.save}")
    return 0


def cmd_service_up(args: argparse.Namespace) -> int:
    """Start a dispatcher and workers on loopback, print the address, serve until Ctrl-C."""
    import signal
    import threading
    import time

    from .service.cluster import ServiceCluster
    client = [int(c) for c in args.client_cores.split(",")] if args.client_cores else None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"plumbkit service: starting a dispatcher and {args.workers} worker(s) ...", flush=True)
    with ServiceCluster(args.workers, client_cores=client, port=args.port, work_dir=args.work_dir,
                        worker_timeout_ms=args.worker_timeout_ms, measuring_client=False) as cluster:
        print(cluster.describe())
        for note in cluster.notes:
            print(f"note: {note}")
        print(f"dispatcher: {cluster.address}", flush=True)
        print("serving; Ctrl-C stops every process", flush=True)
        ends = time.monotonic() + args.seconds if args.seconds else None

        def lost(worker) -> None:
            print(f"LOST {worker}: jobs with DYNAMIC sharding wait at the end of their epoch for its task "
                  f"(TF 2.21); restart the job or the service", flush=True)
        try:
            cluster.watch(lost, until=lambda: stop.is_set() or (ends is not None and time.monotonic() > ends))
        except KeyboardInterrupt:
            pass
        print("plumbkit service: stopping", flush=True)
    print("plumbkit service: stopped", flush=True)
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    """``plumbkit cache list|clear``: the disk tier's caches, where they are and how large."""
    from .model.disk_tier import clear_caches, list_caches, resolve_cache_dir
    from .model.units import human_bytes
    where = resolve_cache_dir(args.dir)
    if args.cache_command == "clear":
        freed = clear_caches(where, args.fingerprint)
        print(f"plumbkit cache: freed {human_bytes(freed)} in {where}")
        return 0
    entries = [e for e in list_caches(where)
               if args.fingerprint is None or e.fingerprint.startswith(args.fingerprint)]
    if not entries:
        print(f"plumbkit cache: no caches in {where}")
        return 0
    print(f"{'fingerprint':<24}  {'form':<5} {'size':>9} {'elements':>9}  {'created':<16}  state")
    for e in entries:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.created))
        elements = "—" if e.elements is None else str(e.elements)
        state = "complete" if e.complete else "filling (or left by a stopped process)"
        print(f"{e.fingerprint:<24}  {e.form:<5} {human_bytes(e.bytes):>9} {elements:>9}  {created:<16}  {state}")
    print(f"{len(entries)} cache(s), {human_bytes(sum(e.bytes for e in entries))} in {where}")
    return 0


def _size(text: str) -> float:
    """An argparse type: ``2GB``, ``500MB``, ``1e9`` -> bytes (a bad one: argparse's one line)."""
    from .model.units import parse_bytes
    try:
        return float(parse_bytes(text, "size"))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plumbkit", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's, absl's and the solver's own log lines")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", parents=[common],
                          help="trace and optimize a bundled misconfigured image pipeline")
    demo.add_argument("--seconds", type=float, default=6.0, help="tracing time per measurement")
    demo.add_argument("--files", type=int, default=8)
    demo.add_argument("--per-file", type=int, default=128)
    demo.add_argument("--data", help="folder for the generated data (default: a temporary folder)")
    demo.add_argument("--memory-budget", type=float, default=None, help="bytes (default: half of free memory)")
    demo.add_argument("--disk-budget", type=_size, default=None,
                      help="disk tier budget, e.g. 2GB (default: off; the plan offers it with the space it needs)")
    demo.add_argument("--cache-dir", default=None, help="the disk tier's folder (default: ~/.cache/plumbkit)")
    demo.add_argument("--protocol", choices=tuple(PROTOCOLS), default="quick", help=PROTOCOL_HELP)
    demo.add_argument("--rounds", type=int, default=None,
                      help="interleaved rounds measuring each configuration (default: the protocol's)")
    demo.set_defaults(func=cmd_demo)
    trace = sub.add_parser("trace", parents=[common],
                           help="trace a pipeline: MODULE:FUNCTION or FILE.py:FUNCTION")
    trace.add_argument("pipeline")
    trace.add_argument("--seconds", type=float, default=10.0)
    trace.add_argument("--save", help="write the trace as JSON")
    trace.add_argument("--no-calibrate", action="store_true",
                       help="skip running each operator alone after the trace (CPU shares stay "
                            "traced wall time)")
    trace.set_defaults(func=cmd_trace)
    service = sub.add_parser("service", help="a tf.data service on this machine (loopback)")
    service_sub = service.add_subparsers(dest="service_command", required=True)
    up = service_sub.add_parser("up", help="start a dispatcher and workers, print the address, serve until Ctrl-C")
    up.add_argument("--workers", type=int, default=1)
    up.add_argument("--port", type=int, default=0, help="dispatcher port (default: any free port)")
    up.add_argument("--work-dir", default=None, help="the dispatcher's journal (default: a temporary folder)")
    up.add_argument("--client-cores", default=None, help="cores kept free for the client, e.g. 0 or 0,1")
    up.add_argument("--worker-timeout-ms", type=int, default=1000)
    up.add_argument("--seconds", type=float, default=None, help="stop after this long (default: until Ctrl-C)")
    up.set_defaults(func=cmd_service_up)
    cache = sub.add_parser("cache", help="the disk tier's caches: list them, or clear them")
    cache.add_argument("cache_command", choices=("list", "clear"))
    cache.add_argument("--dir", default=None, help="the cache folder (default: ~/.cache/plumbkit)")
    cache.add_argument("--fingerprint", default=None, help="only the caches whose fingerprint starts so")
    cache.set_defaults(func=cmd_cache)
    try:
        from . import bench
        bench_parser = sub.add_parser("bench", parents=[common],
                                      help="run the benchmark suite and write a report")
        bench.add_arguments(bench_parser)
        bench_parser.set_defaults(func=bench.run)
    except ImportError:
        pass
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    verbose = "--verbose" in argv
    try:
        tensorflow_imported_quietly(verbose)  # before anything (the bench's parser too) imports it
        args = build_parser().parse_args(argv)
        with quiet(verbose):
            return int(args.func(args) or 0)
    except KeyboardInterrupt:  # outside a measurement (those return what they measured)
        print("\nplumbkit: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
