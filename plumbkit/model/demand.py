"""The model's demand: how fast the user's training step runs, and how long it waits for input.

Pure records. :class:`ModelDemand` holds what was measured with the user's model (or train step)
in the loop: the step rate on ideal input (one real minibatch, ``take(1).cache().repeat()``, the
form FastFlow uses), the step rate with the user's pipeline, and the input-bound share as the TF
Profiler defines it (time the step waits for input / step time). Its :attr:`~ModelDemand.verdict`
says what bounds training: the model, the pipeline, or the cores the two share.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from .errors import PipelineError

#: The TF Profiler's input-bound classes (its overview page): under 5% of step time waiting for
#: input "not input-bound", 5-20% "moderately", over 20% "highly". A definition, not a measurement.
MODERATELY_INPUT_BOUND = 0.05
HIGHLY_INPUT_BOUND = 0.20
#: The pipeline alone gives at least this share of the model's ideal rate, yet the step waits: the
#: two are slowed by the cores they share (the step stretched) or take turns (it is not), not by
#: what the pipeline can do alone. Judgement: the
#: comparison protocol calls differences within ~5% "no measurable change".
SHARED_CORES_MARGIN = 0.95
#: The step itself (its time less its wait) runs this many times slower beside the pipeline than
#: on ideal input: the two compete for the cores (and Python's GIL). Judgement from the planted
#: cases: a 0.7 ms Keras step beside a 2 ms py_function pipeline ran 1.0-2.6x slower at load 5-7
#: on 2 cores, a sleeping step beside a sleeping pipeline 0.9-1.15x.
STRETCHED_STEP = 1.25


class ModelError(PipelineError):
    """The model or step given cannot be measured: not compiled, it raised, or it rejects the
    pipeline's minibatches (the message says which, in one line; the model is left unchanged)."""


@dataclass(frozen=True)
class ModelDemand:
    """What the user's training step asks of the pipeline, measured with it in the loop.

    ``ideal_steps_per_s``: steps/s fed one real minibatch from ``take(1).cache().repeat()`` (the
    model's demand). ``steps_per_s``: steps/s fed by the user's pipeline. ``input_bound``: the
    share of each step spent waiting for the next minibatch from the user's pipeline (0-1), less
    what ``next()`` costs on ideal input (``ideal_input_bound``, the loop's own floor).
    ``cpu_per_step``: process CPU seconds per step on ideal input (the model's own CPU, which
    competes with the pipeline's on a CPU-only machine). ``pipeline_alone``: the pipeline's own
    minibatches/s without the model (the trace's), when known. ``restored``: variables
    snapshotted before measuring and restored after (the model is left as it was).
    """

    ideal_steps_per_s: float
    steps_per_s: float
    input_bound: float
    cpu_per_step: float
    kind: str = "step"  # "keras model", "tf.function step", "python step"
    ideal_input_bound: float = 0.0  # the same share on ideal input (the loop's own floor)
    restored: int = 0
    pipeline_alone: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def model_cores(self) -> float:
        """Cores the model keeps busy at its ideal rate (CPU per step x steps/s)."""
        return self.cpu_per_step * self.ideal_steps_per_s

    @property
    def step_stretch(self) -> float:
        """The step's own time beside your pipeline (step time less its wait) over its time on
        ideal input: above 1, the pipeline slows the step itself (shared cores, the GIL)."""
        if not self.steps_per_s or not self.ideal_steps_per_s:
            return 1.0
        return (1.0 - self.input_bound) * self.ideal_steps_per_s / self.steps_per_s

    @property
    def bound(self) -> str:
        """What bounds training: ``"model"``, ``"pipeline"``, ``"shared cores"`` (the step runs
        :data:`STRETCHED_STEP` times slower beside the pipeline, waiting or not) or ``"turns"`` (the
        step waits although the pipeline alone would keep up with the model, and the step itself is
        not slowed: the two take turns, each minibatch produced while the step does not run)."""
        if self.input_bound < MODERATELY_INPUT_BOUND:
            return "shared cores" if self.step_stretch >= STRETCHED_STEP else "model"
        if self.pipeline_alone and self.pipeline_alone >= SHARED_CORES_MARGIN * self.ideal_steps_per_s:
            return "shared cores" if self.step_stretch >= STRETCHED_STEP else "turns"
        return "pipeline"

    @property
    def verdict(self) -> str:
        """One sentence: "input-bound: the model waits 63% of each step ..." or "model-bound: ..."."""
        waits = f"the model waits {100 * self.input_bound:.0f}% of each step for input"
        rates = (f"{self.steps_per_s:,.1f} steps/s with your pipeline, {self.ideal_steps_per_s:,.1f} "
                 f"on ideal input")
        stretched = (f"; the step itself ran {self.step_stretch:.1f}× slower beside your pipeline than on "
                     f"ideal input: they share the cores" if self.step_stretch >= STRETCHED_STEP else "")
        if self.input_bound < MODERATELY_INPUT_BOUND:
            alone = ""
            if self.pipeline_alone and self.ideal_steps_per_s > 0:
                alone = (f"; your pipeline alone gives {self.pipeline_alone:,.1f} minibatches/s, "
                         f"{self.pipeline_alone / self.ideal_steps_per_s:.1f}× what the model takes")
            return f"model-bound: {waits} ({rates}){alone}{stretched}"
        degree = "highly" if self.input_bound >= HIGHLY_INPUT_BOUND else "moderately"
        if self.bound == "turns":
            return (f"input-bound by turns: {waits} ({rates}), though your pipeline alone gives "
                    f"{self.pipeline_alone:,.1f} minibatches/s, {self.pipeline_alone / self.ideal_steps_per_s:.1f}× "
                    f"what the model takes, and the step is not slowed beside it: each minibatch is made while the "
                    f"step waits; a prefetch overlaps the two")
        if self.bound == "shared cores" and self.pipeline_alone:
            return (f"input-bound on shared cores: {waits} ({rates}), though your pipeline alone gives "
                    f"{self.pipeline_alone:,.1f} minibatches/s: the model ({self.model_cores:.1f} cores "
                    f"at its ideal rate) and the pipeline compete for the same cores{stretched}")
        return f"input-bound: {waits} ({degree} input-bound, as the TF Profiler classes it; {rates}){stretched}"

    def with_pipeline(self, throughput: float | None) -> "ModelDemand":
        """The same demand, told the pipeline's own throughput (the trace's)."""
        return replace(self, pipeline_alone=throughput if throughput else None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelDemand":
        return cls(**{**d, "notes": tuple(d.get("notes", ()))})


__all__ = ["HIGHLY_INPUT_BOUND", "MODERATELY_INPUT_BOUND", "STRETCHED_STEP", "ModelDemand", "ModelError"]
