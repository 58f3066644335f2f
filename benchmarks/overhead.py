"""Tracing overhead: the same pipeline untraced, traced, and traced with the live widget drawing
it, interleaved in one process.

    python benchmarks/overhead.py --seconds 4 --rounds 5

Untraced = the plain pull loop over the pipeline for the same time; traced = the same loop
inside ``plumbkit.trace`` (sampling tf.data's model 4x a second); widget = that trace drawn by
the ``%%plumb`` live widget. Reports the median ratios. Goals: tracer < 5% on the decode-heavy
image pipeline, < 10% on the tiny-op text pipeline; the widget within 2 points of the tracer.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from plumbkit.bench import pipelines as bench_pipelines  # noqa: E402
from plumbkit.bench.overhead import overhead  # noqa: E402
from plumbkit.host.machine import available_cores  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    data = tempfile.mkdtemp(prefix="plumbkit-overhead-")
    cases = {"image (decode-heavy)": (bench_pipelines.decode_only(data), 0.05),
             "text (tiny ops)": (bench_pipelines.text(data, tuned=True), 0.10)}
    print(f"{'pipeline':22s} {'untraced':>10s} {'traced':>10s} {'overhead':>9s}  goal        "
          f"{'widget':>10s} {'overhead':>9s} {'- tracer':>9s}")
    for name, (make, goal) in cases.items():
        r = overhead(make, seconds=args.seconds, rounds=args.rounds, with_widget=True)
        ok = "ok" if r["overhead"] <= goal else "ABOVE"
        points = 100 * (r["widget_overhead"] - r["overhead"])
        print(f"{name:22s} {r['untraced']:10.1f} {r['traced']:10.1f} {100 * r['overhead']:8.1f}%  <{100 * goal:.0f}% {ok:5s} "
              f"{r['widget']:10.1f} {100 * r['widget_overhead']:8.1f}% {points:+8.1f} {'ok' if points <= 2 else 'ABOVE'}"
              f"   (tracer ratios {', '.join(f'{x:.3f}' for x in r['ratios'])}; "
              f"widget {', '.join(f'{x:.3f}' for x in r['widget_ratios'])})", flush=True)
        print(f"{'':22s} sampling thread CPU per second of trace: tracer {1000 * r['traced_thread_cpu']:.1f} ms, "
              f"with widget {1000 * r['widget_thread_cpu']:.1f} ms: the widget takes {1000 * r['widget_extra_cpu']:.1f} ms/s "
              f"= {r['widget_points_if_saturated']:.2f} points of {available_cores()} busy cores "
              f"{'ok' if r['widget_points_if_saturated'] <= 2 else 'ABOVE'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
