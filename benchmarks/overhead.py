"""Tracing overhead: the same pipeline traced and untraced, interleaved in one process.

    python benchmarks/overhead.py --seconds 4 --rounds 5

Untraced = a plain ``next()`` loop over the pipeline for the same time; traced = the same loop
inside ``plumbkit.trace`` (sampling tf.data's model 4x a second). Reports the median ratio.
Goals: < 5% on the decode-heavy image pipeline, < 10% on the tiny-op text pipeline.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from plumbkit.bench import pipelines as bench_pipelines  # noqa: E402
from plumbkit.bench.overhead import overhead  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    data = tempfile.mkdtemp(prefix="plumbkit-overhead-")
    cases = {"image (decode-heavy)": (bench_pipelines.decode_only(data), 0.05),
             "text (tiny ops)": (bench_pipelines.text(data, tuned=True), 0.10)}
    print(f"{'pipeline':22s} {'untraced':>10s} {'traced':>10s} {'ratio':>7s} {'overhead':>9s}  goal")
    for name, (make, goal) in cases.items():
        r = overhead(make, seconds=args.seconds, rounds=args.rounds)
        ok = "ok" if r["overhead"] <= goal else "ABOVE"
        print(f"{name:22s} {r['untraced']:10.1f} {r['traced']:10.1f} {r['ratio']:7.3f} "
              f"{100 * r['overhead']:8.1f}%  <{100 * goal:.0f}% {ok}   (ratios {', '.join(f'{x:.3f}' for x in r['ratios'])})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
