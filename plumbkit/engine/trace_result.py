"""The :class:`Trace`: what plumbkit measured about one pipeline, and what it derived.

Immutable in spirit and saveable (``save``/``load`` as JSON) so the CLI, widgets, notebooks
and tests can all start from a recorded trace. Rendering lives in :mod:`plumbkit.render`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.operational import Analysis, OpStats, analyze, bottleneck
from ..model.costs import Calibration
from ..model.demand import ModelDemand
from ..model.pipeline import Pipeline
from ..model.samples import RawTrace, snapshot_from_dict, snapshot_to_dict
from ..planning.decisions import solve
from ..planning.lp import LPSolution


@dataclass
class Trace:
    """One traced run of a pipeline: operators, their rates, the bottleneck, the allocation bound."""

    pipeline: Pipeline
    raw: RawTrace
    analysis: Analysis
    cardinalities: dict[str, int] = field(default_factory=dict)
    file_sizes: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what cannot be done with this pipeline, in plain words
    calibration: Calibration | None = None  # per-operator costs measured alone, after the trace
    model: ModelDemand | None = None  # the training step's demand, with trace(..., model=/step=)

    @property
    def calibrated(self) -> bool:
        """True once CPU per operator comes from calibration (else: traced wall time, scaled)."""
        return self.analysis.calibrated

    # -- the numbers people ask for -------------------------------------------------------
    @property
    def throughput(self) -> float:
        """Measured minibatches per second at the root, over the steady-state window."""
        return self.analysis.throughput

    @property
    def ops(self) -> list[OpStats]:
        return self.analysis.ops

    @property
    def cores(self) -> int:
        return self.analysis.cores

    @property
    def ended(self) -> str:
        return self.raw.ended

    @property
    def partial(self) -> bool:
        """Cut short by Cancel or Ctrl-C: this is what was measured until then."""
        return self.raw.ended in ("cancelled", "interrupted")

    @property
    def elapsed(self) -> float:
        return self.raw.snapshots[-1].t if self.raw.snapshots else 0.0

    @property
    def bottleneck(self) -> OpStats | None:
        """The operator with the lowest capacity theta_i * R_i under the current configuration."""
        return bottleneck(self.analysis)

    def op(self, label: str) -> OpStats:
        """An operator's stats by label (``"map(decode)"``) or graph node name."""
        for o in self.ops:
            if label in (o.label, o.name):
                return o
        raise KeyError(f"no operator {label!r}; operators are: {[o.label for o in self.ops]}")

    def allocation(self, cores: float | None = None, **kwargs: Any) -> LPSolution:
        """The resource LP on this trace (cores, each operator's concurrency, the GIL); solved
        once per trace for the plain question (every view of one snapshot asks it: the widget,
        its static copy, the text)."""
        if kwargs:
            return solve(self, cores=cores or self.cores, **kwargs)
        key = cores or self.cores
        solved = self.__dict__.setdefault("_lp_solved", {})
        if key not in solved:
            solved[key] = solve(self, cores=key)
        return solved[key]

    def allocation_bound(self, cores: float | None = None) -> float:
        """The allocation bound: the most the operators allow (minibatches/s) with ``cores``
        (default: this machine's) ideally allocated, every operator given the parallelism it
        needs (up to 64 calls in flight for an operator that waits, with tf.data's thread pool
        raised to match) and all Python on one core. The runtime's own costs (your loop's
        ``next()``, thread hand-offs, cache reads) are not charged: an upper bound of what the
        operators allow, not a prediction of a plan (that is ``optimize()``'s ``prediction``)."""
        return self.allocation(cores).throughput

    # -- presentation hooks -----------------------------------------------------------------
    def __str__(self) -> str:
        from ..render.text import text_report
        return text_report(self)

    def __repr__(self) -> str:
        b = self.bottleneck
        return (f"<Trace {self.throughput:.2f} batches/s over {self.elapsed:.1f}s, "
                f"bottleneck {b.label if b else 'none'}>")

    def _repr_html_(self) -> str:
        from ..render.html import html_report
        return html_report(self)

    # -- persistence ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline.to_dict(),
            "raw": {"snapshots": [snapshot_to_dict(s) for s in self.raw.snapshots],
                    "ended": self.raw.ended, "error": self.raw.error, "cores": self.raw.cores,
                    "warmup_seconds": self.raw.warmup_seconds, "epochs_repeated": self.raw.epochs_repeated},
            "cardinalities": self.cardinalities, "file_sizes": self.file_sizes,
            "notes": list(self.notes), "source_exact": self.analysis.source_exact,
            "calibration": self.calibration.to_dict() if self.calibration is not None else None,
            "model": self.model.to_dict() if self.model is not None else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trace":
        pipeline = Pipeline.from_dict(d["pipeline"])
        r = d["raw"]
        raw = RawTrace(snapshots=[snapshot_from_dict(s) for s in r["snapshots"]], ended=r["ended"],
                       error=r.get("error"), cores=r["cores"], warmup_seconds=r.get("warmup_seconds", 0.0),
                       epochs_repeated=r.get("epochs_repeated", False))
        trace = build_trace(pipeline, raw, cardinalities=d.get("cardinalities", {}),
                            file_sizes=d.get("file_sizes", {}), notes=tuple(d.get("notes", ())),
                            source_exact=d.get("source_exact", True),
                            calibration=Calibration.from_dict(d["calibration"]) if d.get("calibration") else None)
        trace.model = ModelDemand.from_dict(d["model"]) if d.get("model") else None
        return trace

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict()))

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        return cls.from_dict(json.loads(Path(path).read_text()))


def build_trace(pipeline: Pipeline, raw: RawTrace, *, cardinalities: dict[str, int],
                file_sizes: dict[str, int], notes: tuple[str, ...] = (), source_exact: bool = True,
                calibration: Calibration | None = None) -> Trace:
    analysis = analyze(pipeline, raw, cardinalities=cardinalities, file_sizes=file_sizes,
                       source_exact=source_exact, calibration=calibration)
    return Trace(pipeline=pipeline, raw=raw, analysis=analysis, cardinalities=dict(cardinalities),
                 file_sizes=dict(file_sizes), notes=notes, calibration=calibration)


def reanalyzed(trace: Trace, *, cardinalities: dict[str, int] | None = None,
               calibration: Calibration | None = None, notes: tuple[str, ...] | None = None) -> Trace:
    """``trace``'s run analyzed again with what was learnt since (a calibration, an epoch
    counted): the same snapshots, never a new measurement. The model's demand is kept."""
    out = build_trace(trace.pipeline, trace.raw,
                      cardinalities=trace.cardinalities if cardinalities is None else cardinalities,
                      file_sizes=trace.file_sizes, notes=trace.notes if notes is None else notes,
                      source_exact=trace.analysis.source_exact,
                      calibration=trace.calibration if calibration is None else calibration)
    out.model = trace.model
    return out
