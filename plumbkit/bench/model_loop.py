"""Issue 27's goals, measured: the model in the loop.

- **planted, model-bound**: three planted maps on a random source (nothing to cache: only threads
  matter), faster than the step even as written, fed to a step that takes a set time (a sleep: an
  accelerator's step, which costs the host no CPU); the plan's pipeline threads against
  AUTOTUNE's, both traced with a consumer that takes the step's time.
- **planted, input-bound**: the bench's skewed pipeline as written (slow, cacheable) fed to a fast
  step: the plan against AUTOTUNE + the same cache.
- **keras**: a small real Keras 3 model (a convolution, pooling, a dense layer) trained on the
  bench's image pipeline that fits in memory, driven through its own ``train_function``.

Each row: plumbkit's input-bound share against an independent one timed by a plain loop here
(the step on one replayed minibatch and on your pipeline, alternating); training steps/s of the
plan predicted before the fact against measured; yours, AUTOTUNE, AUTOTUNE + the same cache, the
plan and ideal input measured alike with the step on every minibatch; what the model-in-the-loop
trace costs over a plain one (interleaved, the same trace length).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import tensorflow as tf

from ..engine import baselines, optimize, trace
from ..engine.compare import Contender, Protocol
from ..engine.demand import stepping
from ..engine.optimization import AUTOTUNE_WITH
from ..planning.predict import ran_parallel
from ..tfdata.rebuild import apply_changes
from . import pipelines as bench_pipelines
from .alike import Log, attempt, error, failed, measured_alike, num, ratio_cell, signed_pct

SECTION = "model_in_the_loop"
PLAN = "plumbkit"
IDEAL = "ideal input"
#: Step times of the planted regimes (seconds): the random-source maps as written give ~60
#: minibatches/s on this VM, the skewed pipeline as written ~100-200, planned (cached) thousands.
MODEL_BOUND_STEP = 0.040
INPUT_BOUND_STEP = 0.002


def sleeping_step(seconds: float) -> Callable[[Any], None]:
    """A planted step that takes ``seconds`` on any minibatch and no CPU (an accelerator's)."""
    def step(batch: Any) -> None:
        time.sleep(seconds)
    return step


def independent_input_bound(make: Callable, step: Callable, *, rounds: int = 5, steps: int = 20) -> float:
    """The input-bound share timed by a plain loop, not plumbkit's: the step on one replayed
    minibatch and on the pipeline in alternating runs of ``steps`` (the first three of each run,
    which a prefetch filled meanwhile, untimed); 1 - ideal time / pipeline time, median of rounds."""
    feeds = {"ideal": iter(make().take(1).cache().repeat()), "yours": iter(make())}
    shares = []
    for _ in range(rounds):
        took = {}
        for name, it in feeds.items():
            for _ in range(3):
                step(next(it))
            began = time.perf_counter()
            for _ in range(steps):
                step(next(it))
            took[name] = time.perf_counter() - began
        shares.append(max(0.0, 1.0 - took["ideal"] / took["yours"]))
    return statistics.median(shares)


def trace_cost(make: Callable, *, seconds: float, rounds: int = 3, **model: Any) -> dict:
    """Wall seconds of a trace with the model in the loop over a plain one of the same length,
    interleaved, uncalibrated (calibration is the same work in both)."""
    def timed(**kw: Any) -> float:
        began = time.perf_counter()
        trace(make(), seconds=seconds, min_seconds=seconds, converge=False, calibrate=False, **kw)
        return time.perf_counter() - began
    plain, with_model = [], []
    for r in range(rounds):
        for run in ((plain, {}), (with_model, model))[:: 1 if r % 2 == 0 else -1]:
            run[0].append(timed(**run[1]))
    extra = [m - p for m, p in zip(with_model, plain)]
    return {"plain": statistics.median(plain), "with_model": statistics.median(with_model),
            "extra": statistics.median(extra), "extras": extra}


def consumed_at(ds: tf.data.Dataset, seconds: float) -> tf.data.Dataset:
    """``ds`` pulled by a consumer that takes ``seconds`` a minibatch (the step's demand), as the
    last operator: a sequential Python map tf.data cannot parallelize."""
    def wait(_: Any) -> float:
        time.sleep(seconds)
        return 0.0
    return ds.map(lambda *x: tf.py_function(wait, [tf.constant(0.0)], tf.float32))


def pipeline_threads(ds: tf.data.Dataset, *, step_seconds: float, seconds: float,
                     idle: frozenset[str] = frozenset()) -> dict:
    """Threads the pipeline's parallel operators ran with (after tf.data's autotuning) while a
    consumer took the step's time per minibatch: their sum, and per operator (an operator in its
    plain, sequential form runs on the thread of the stage it sits in: none of its own); ``idle``: labels of
    operators below a cache, which run only while it fills (counted apart, not in the sum)."""
    t = trace(consumed_at(ds, step_seconds), seconds=seconds, min_seconds=seconds, converge=False,
              calibrate=False)
    top = t.pipeline.root
    per = {o.label: o.parallelism for o in t.analysis.ops  # a sequential operator runs on its stage's thread
           if o.parallelism and o.name != top and o.kind not in ("prefetch", "cache")
           and ran_parallel(o.runtime, t.pipeline[o.name].op)}
    return {"threads": sum(v for k, v in per.items() if k not in idle), "per_operator": per,
            "only_while_filling": sorted(idle & set(per))}


def steps_alike(name: str, make: Callable, plan, step: Callable, protocol: Protocol, log: Log) -> dict:
    """Yours, AUTOTUNE, AUTOTUNE + the plan's cache, the plan and ideal input, the step on every
    minibatch, measured alike (steps/s)."""
    cores, changes = plan.trace.cores, plan.proposed_changes
    chosen = [Contender("yours", make, plan.yours_warmup_batches, step),
              Contender("autotune", lambda: baselines.autotune(make(), cores), plan.yours_warmup_batches, step),
              Contender(AUTOTUNE_WITH, lambda: baselines.autotune_with(make(), changes, cores), plan.warmup_batches,
                        step),
              Contender(PLAN, lambda: apply_changes(make(), changes), plan.warmup_batches, step),
              Contender(IDEAL, lambda: make().take(1).cache().repeat(), 0, step)]
    return measured_alike(name, chosen, protocol, log=log,
                          ratios=[(PLAN, "yours"), (PLAN, "autotune"), (PLAN, AUTOTUNE_WITH), (PLAN, IDEAL)])


def regime(name: str, make: Callable, *, seconds: float, protocol: Protocol, log: Log,
           step_seconds: float | None = None, **model: Any) -> dict:
    """One row: ``model`` is ``step=`` (planted, ``step_seconds`` its set time) or ``model=`` (Keras)."""
    log(f"[{name}] what the model in the loop adds to a trace")
    cost = trace_cost(make, seconds=min(seconds, 2.0), **model)
    log(f"[{name}] optimizing with the model in the loop")
    plan = optimize(make, seconds=seconds, compare=False, protocol=protocol,
                    on_progress=lambda m, f: log(f"[{name}]   {m}"), **model)
    with stepping(make(), **model) as driver:  # the Keras model restored after, as plumbkit does
        log(f"[{name}] the input-bound share by a plain loop")
        truth = independent_input_bound(make, driver.call)
        steps = steps_alike(name, make, plan, driver.call, protocol, log)
    demand = plan.model
    row = {"pipeline": name, "kind": demand.kind, "input_bound": demand.input_bound, "independent": truth,
           "input_bound_gap": demand.input_bound - truth, "verdict": demand.verdict, "bound": demand.bound,
           "ideal_steps_per_s": demand.ideal_steps_per_s, "steps_per_s": demand.steps_per_s,
           "predicted_steps_per_s": plan.predicted_steps_per_s, "measured_steps_per_s": plan.measured_steps_per_s,
           "steps_binding": plan.step_prediction.binding if plan.step_prediction is not None else None,
           "steps_error": error(plan.predicted_steps_per_s, steps["measured"].get(PLAN)),
           "optimize_steps": plan.steps_baselines, "pipeline_predicted": plan.prediction.throughput,
           "trace_cost": cost, "changes": [str(c) for c in plan.proposed_changes], "notes": plan.notes, **steps}
    if step_seconds is not None:
        log(f"[{name}] pipeline threads: the plan's and AUTOTUNE's, pulled at the step's rate")
        row["threads"] = {PLAN: pipeline_threads(apply_changes(make(), plan.proposed_changes),
                                                 step_seconds=step_seconds, seconds=min(seconds, 3.0),
                                                 idle=frozenset(plan.free)),
                          "autotune": pipeline_threads(baselines.autotune(make(), plan.trace.cores),
                                                       step_seconds=step_seconds, seconds=min(seconds, 3.0))}
    return row


def small_keras_model():
    """A small real Keras 3 model for 96x96x3 images and 10 labels."""
    import keras
    model = keras.Sequential([keras.Input((96, 96, 3)), keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def model_loop_section(data: str, *, seconds: float, protocol: Protocol, log: Log,
                       planted_elements: int = 8000, image_sizes: dict | None = None) -> dict:
    """The three rows (a row that fails says so in one line; the others still run)."""
    images = bench_pipelines.image_cacheable(data, **(image_sizes or {}))
    rows: dict[str, Any] = {}
    planted = (("model-bound", MODEL_BOUND_STEP, bench_pipelines.planted_three_maps(random_source=True)),
               ("input-bound", INPUT_BOUND_STEP, bench_pipelines.planted_skewed(elements=planted_elements)))
    for key, seconds_a_step, make in planted:
        attempt(rows, key, log, lambda: regime(
            f"planted, {key} ({1e3 * seconds_a_step:g} ms step)", make, seconds=seconds, protocol=protocol,
            log=log, step_seconds=seconds_a_step, step=sleeping_step(seconds_a_step)))
    attempt(rows, "keras", log, lambda: regime("Keras conv model, image pipeline", images, seconds=seconds,
                                               protocol=protocol, log=log, model=small_keras_model()))
    return {"rows": rows}


def _threads_cell(row: dict) -> str:
    t = row.get("threads")
    if not t:
        return "—"
    return f"{t[PLAN]['threads']} vs {t['autotune']['threads']}"


def markdown(section: dict | None) -> list[str]:
    """The report's lines for the section (none when it did not run)."""
    if not section:
        return []
    rows = list(section["rows"].values())
    ok = [r for r in rows if not failed(r)]
    lines = ["## The model in the loop (issue 27)", "",
             "Training steps/s, the step on every minibatch, medians of interleaved rounds under one protocol. "
             "*Independent*: the input-bound share timed by the bench's own plain loop (1 - step time on one "
             "replayed minibatch / on your pipeline). Threads: the parallel operators' threads after "
             "autotuning, pulled by a consumer at the step's time, the plan's below its cache (idle once it is "
             "filled) left out (model-bound goal: the plan at most half AUTOTUNE's). Trace cost: a trace with the "
             "model over a plain one, same length (goal ≤ 2 s).", "",
             "| case | input-bound: plumbkit, independent (goal ±10 points) | verdict | steps/s: predicted, measured "
             "(error; goal ±20%) | yours | AUTOTUNE | AUTOTUNE + same cache | plan | ideal input | plan / AUTOTUNE + "
             "same cache | plan / ideal | threads: plan vs AUTOTUNE | trace cost (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in ok:
        m, s = r["measured"], r["speedups"]
        lines.append(
            f"| {r['pipeline']} | {100 * r['input_bound']:.0f}%, {100 * r['independent']:.0f}% | {r['bound']} | "
            f"{num(r['predicted_steps_per_s'])}, {num(m.get(PLAN))} ({signed_pct(r['steps_error'])}) | "
            + " | ".join(num(m.get(k)) for k in ("yours", "autotune", AUTOTUNE_WITH, PLAN, IDEAL))
            + f" | {ratio_cell(s.get(f'{PLAN} / {AUTOTUNE_WITH}'))} | {ratio_cell(s.get(f'{PLAN} / {IDEAL}'))} | "
              f"{_threads_cell(r)} | +{r['trace_cost']['extra']:.2f} |")
    lines += [""] + [f"- **{r['pipeline']}** — {r['verdict']}; steps/s predicted bound by "
                     f"{r.get('steps_binding') or '—'}" for r in ok]
    lines += [f"- **{r['pipeline']}**: failed — {r['failed']}" for r in rows if failed(r)]
    return lines + [""]
