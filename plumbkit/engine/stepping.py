"""Stepping and walks: give one operator one more thread, rebuild, measure (Plumber §5.1).

A bottleneck step gives the operator with the lowest capacity one more unit of parallelism; a
random step gives a random tunable operator one. Every throughput here is measured.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..model.plan import Change
from ..planning.decisions import bottleneck_choice
from ..tfdata.graph import resolve_pipeline
from ..tfdata.rebuild import apply_changes
from .measuring import calibrated_measure, measure
from .scheduler import Cancelled, Operation, checkpoint, current, keep, operation
from .trace_result import Trace
from .tracing import PipelineLike

if TYPE_CHECKING:
    import tensorflow as tf


@dataclass
class Step:
    """One step: which operator got one more unit of parallelism, and what that measured."""

    dataset: "tf.data.Dataset"
    operator: str | None  # label of the operator changed (None: nothing tunable)
    parallelism: int | None
    before: Trace  # trace of the pipeline the step started from
    after: Trace | None  # trace of the new pipeline (its throughput is measured)
    partial: bool = False  # cut short (Cancel, Ctrl-C): before/after are what was measured

    @property
    def throughput(self) -> float:
        return self.after.throughput if self.after else self.before.throughput


def _current_parallelism(t: Trace, name: str) -> int:
    stats = next(o for o in t.ops if o.name == name)
    return max(1, stats.parallelism or 1)


def _choose(t: Trace, policy: str, rng: random.Random) -> str | None:
    if policy == "bottleneck":
        return bottleneck_choice(t)
    if policy == "random":
        tunable = [o.name for o in t.ops if not o.injected and o.name in t.pipeline.operators
                   and t.pipeline[o.name].can_take_more_parallelism(o.parallelism)]
        return rng.choice(tunable) if tunable else None
    raise ValueError(f"policy must be 'bottleneck' or 'random', got {policy!r}")


def step_from(ds: "tf.data.Dataset", before: Trace, *, policy: str, rng: random.Random,
              seconds: float, cores: int | None) -> Step:
    """One step from ``ds`` whose trace is ``before`` (walks and the stepping widget chain these).

    The bottleneck is chosen on calibrated costs: ``before`` is calibrated first if it is not,
    and the new pipeline's trace reuses that calibration (same operators, new parallelism).
    """
    if policy == "bottleneck":
        before = calibrated_measure(ds, before)
    name = _choose(before, policy, rng)
    if name is None:
        return Step(dataset=ds, operator=None, parallelism=None, before=before, after=None)
    label = before.pipeline[name].label
    value = _current_parallelism(before, name) + 1
    checkpoint()
    changes = [Change("parallelism", label, name, value, f"{policy} step")]
    stats = before.op(name)
    pool = before.analysis.threadpool or before.cores
    if stats.bound == "latency" and value > pool:  # calls beyond tf.data's pool would only queue
        root = before.pipeline.root
        changes.append(Change("threadpool", before.pipeline[root].label, root, pool + 1,
                              f"{label} waits: its calls need threads of their own"))
    new = apply_changes(ds, changes)
    op = current()
    if op is not None:
        op.progress(f"measuring {label} with parallelism {value}")
    after = measure(new, seconds=seconds, cores=cores, calibrate=before.calibration or False)
    return Step(dataset=new, operator=label, parallelism=value, before=before, after=after)


def _partial_step(op: Operation, error: Cancelled, _) -> Step | None:
    """A cut-short step: the user's pipeline unchanged, and the traces measured so far."""
    start: Step | None = op.kept
    if start is None:
        return None
    traces = [m.result for m in op.measurements]
    return Step(dataset=start.dataset, operator=None, parallelism=None,
                before=traces[0] if traces else None, after=traces[1] if len(traces) > 1 else None,
                partial=True)


@operation("step", partial=_partial_step)
def step(pipeline: PipelineLike, *, policy: str = "bottleneck", seed: int | None = None,
         seconds: float = 3.0, cores: int | None = None) -> Step:
    """Trace, give one more unit of parallelism to the bottleneck (or a random tunable operator),
    rebuild, and measure the new pipeline. Cancel or Ctrl-C returns the traces measured so far
    (``step.partial``) with the user's pipeline unchanged."""
    ds = resolve_pipeline(pipeline)
    keep(Step(dataset=ds, operator=None, parallelism=None, before=None, after=None, partial=True))
    current().progress("tracing the starting pipeline")
    before = measure(ds, seconds=seconds, cores=cores, calibrate=policy == "bottleneck")
    return step_from(ds, before, policy=policy, rng=random.Random(seed), seconds=seconds, cores=cores)


@dataclass
class Walk:
    """A sequence of steps under one policy; ``throughputs[0]`` is the starting pipeline."""

    policy: str
    steps: list[Step] = field(default_factory=list)
    start: Trace | None = None
    partial: bool = False  # cut short (Cancel, Ctrl-C): the steps completed until then

    @property
    def throughputs(self) -> list[float]:
        start = [self.start.throughput] if self.start else []
        return start + [s.throughput for s in self.steps]

    @property
    def operators(self) -> list[str | None]:
        return [s.operator for s in self.steps]

    @property
    def dataset(self) -> "tf.data.Dataset | None":
        return self.steps[-1].dataset if self.steps else None

    @property
    def allocation_bounds(self) -> list[float]:
        """The allocation bound (:meth:`Trace.allocation_bound`) at the start of each step (and after the last)."""
        traces = ([self.start] if self.start else []) + [s.after for s in self.steps if s.after]
        return [t.allocation_bound() for t in traces]

    def __str__(self) -> str:
        from ..render.text import walk_text
        return walk_text(self)

    def _repr_html_(self) -> str:
        import html
        return f"<pre>{html.escape(str(self))}</pre>"

    def steps_to_reach(self, fraction: float = 0.9, peak: float | None = None) -> int | None:
        """Steps until throughput first reaches ``fraction`` of ``peak`` (default: best seen)."""
        values = self.throughputs
        peak = max(values) if peak is None else peak
        return next((i for i, v in enumerate(values) if v >= fraction * peak), None)


def _partial_walk(op: Operation, error: Cancelled, _) -> Walk | None:
    """A cut-short walk: the steps completed until then."""
    walked: Walk | None = op.kept
    if walked is None:
        return None
    if walked.start is None and op.measurements:
        walked.start = op.measurements[0].result
    walked.partial = True
    return walked


@operation("walk", partial=_partial_walk)
def walk(pipeline: PipelineLike, *, steps: int = 5, policy: str = "bottleneck", seed: int | None = None,
         seconds: float = 3.0, cores: int | None = None,
         on_step: Callable[[Walk], None] | None = None) -> Walk:
    """Repeat :func:`step` ``steps`` times; each step's trace is the next step's starting point.
    Cancel or Ctrl-C returns the steps completed so far (``walk.partial``)."""
    ds = resolve_pipeline(pipeline)
    rng = random.Random(seed)
    result = Walk(policy=policy)
    keep(result)
    result.start = measure(ds, seconds=seconds, cores=cores, calibrate=policy == "bottleneck")
    here, before = ds, result.start
    for _ in range(steps):
        s = step_from(here, before, policy=policy, rng=rng, seconds=seconds, cores=cores)
        result.steps.append(s)
        if on_step is not None:
            on_step(result)
        if s.after is None:
            break
        here, before = s.dataset, s.after
    return result
