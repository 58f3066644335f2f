"""Why the speech pipeline's plan is under-predicted in every bench run (-17% to -28%): what the
prediction charges each operator per minibatch, against the process CPU per minibatch of the
plan and of its mask map written three ways, measured here (2026-11-27 NOTE, "speech").

Run it alone (~1 minute):

    python benchmarks/speech_costs.py
"""

from __future__ import annotations

import time

import tensorflow as tf

import plumbkit
from plumbkit.bench import pipelines as P
from plumbkit.engine.compare import QUICK
from plumbkit.planning.predict import evidence_from_trace
from plumbkit.tfdata.rebuild import apply_changes
from plumbkit.tfdata.run import Runner

EPOCH_BATCHES = 2000 // 16


def cpu_per_minibatch(ds: tf.data.Dataset, fill: int, windows: int = 5) -> list[tuple[float, float]]:
    """(process CPU seconds per minibatch, minibatches/s) over ``windows`` 0.5 s windows of the
    comparison's own loop (:class:`~plumbkit.tfdata.run.Runner`), after ``fill`` minibatches (the
    cache filled)."""
    runner = Runner(ds)
    try:
        runner.consume(fill, limit=60.0)
        out = []
        for _ in range(windows):
            c0, n0 = time.process_time(), runner.batches
            rate = runner.window(0.5)
            out.append(((time.process_time() - c0) / (runner.batches - n0), rate))
        return out
    finally:
        runner.close()


def main() -> None:
    make = P.speech()
    plan = plumbkit.optimize(make, seconds=3, compare=False, protocol=QUICK)
    ev = evidence_from_trace(plan.trace, runtime=plan.runtime)
    labels = {op.name: op.label for op in plan.trace.pipeline}
    print("plan:", "; ".join(str(c) for c in plan.proposed_changes))
    print(f"predicted {plan.prediction.throughput:,.0f}/s ({plan.prediction.binding}): "
          f"{plan.prediction.cpu_per_batch * 1e3:.3f} ms CPU + {plan.prediction.idle_per_batch * 1e3:.3f} ms idle "
          f"per minibatch")
    for name, cost in ev.cost.items():
        parallel = ev.parallel_cost.get(name)
        print(f"  charged {labels.get(name, name):18s} {cost * 1e3:.4f} ms/minibatch"
              + (f", parallel form {parallel * 1e3:.4f}" if parallel is not None else ", no parallel form measured"))
    for o in plan.trace.ops:
        if o.kind == "map":
            print(f"  {o.label:18s} ran as {o.runtime}, CPU per element {o.cpu_per_element * 1e6:.1f} µs "
                  f"({o.cpu_from})")
    cached_mel = lambda: tf.data.Dataset.range(2000).map(P.waveform).map(P.spectrogram).map(P.mel).cache()  # noqa: E731
    variants = {
        "the plan": lambda: apply_changes(make(), plan.proposed_changes),
        "cache, batch": lambda: cached_mel().batch(16).repeat().prefetch(6),
        "cache, mask (1 call), batch": lambda: cached_mel().map(P.mask).batch(16).repeat().prefetch(6),
        "cache, mask (3 calls), batch": lambda: cached_mel().map(P.mask, num_parallel_calls=3).batch(16).repeat().prefetch(6),
    }
    for name, build in variants.items():
        runs = cpu_per_minibatch(build(), EPOCH_BATCHES + 5)
        print(f"{name:30s} CPU ms/minibatch {' '.join(f'{c * 1e3:.3f}' for c, _ in runs)}; "
              f"minibatches/s {' '.join(f'{r:,.0f}' for _, r in runs)}")


if __name__ == "__main__":
    main()
