"""What a cut-short optimization returns: the user's pipeline unchanged and what was measured.

The :func:`plumbkit.engine.scheduler.operation` decorator calls these builders when Cancel or
Ctrl-C ends ``optimize`` or ``pick_best``: every measurement the operation made was recorded
with the phase it belonged to, so a partial :class:`Plan` can be built without knowing the
optimizer's protocol. Nothing of a plan is applied: ``plan.dataset`` is the user's pipeline.
"""

from __future__ import annotations

import inspect
import math
from typing import TYPE_CHECKING, Any, Callable

from ..model.plan import CacheDecision
from ..planning.lp import LPSolution
from ..planning.predict import Prediction
from ..tfdata.graph import resolve_pipeline
from .scheduler import INTERRUPTED, Cancelled, Operation

if TYPE_CHECKING:
    from .optimization import Plan


def why_it_ended(op: Operation) -> str:
    """``"interrupted (Ctrl-C) while measuring the naive baseline"``."""
    reason = "interrupted (Ctrl-C)" if op.reason == INTERRUPTED else (op.reason or "cancelled")
    phase = op.phase if op.phase and op.phase != op.name else "starting"
    return f"{reason} while {phase}"


def measured_so_far(op: Operation) -> list[str]:
    """One line per measurement the operation made, in order, cut-short ones marked."""
    lines = []
    for m in op.measurements:
        value = getattr(m.result, "throughput", None)
        if value is None:
            continue
        lines.append(f"{m.phase}: {value:,.1f} minibatches/s (measured"
                     + ("" if m.complete else ", cut short") + ")")
    return lines


def partial_plan(Plan: Callable[..., "Plan"], op: Operation, error: Cancelled,  # noqa: N803
                 arguments: inspect.BoundArguments) -> "Plan":
    """A ``Plan`` marked partial: no changes, the user's pipeline, the traces measured.

    ``Plan`` is passed in by :mod:`plumbkit.engine.optimization` (which defines it and imports
    this module)."""
    pipeline = arguments.arguments.get("pipeline")
    dataset = op.kept if op.kept is not None else _users_dataset(pipeline)
    first = op.measurements[0] if op.measurements else None
    budget = arguments.arguments.get("memory_budget") or 0.0
    nan = math.nan
    plan = Plan(dataset=dataset, changes=[], measured_throughput=nan,
                prediction=Prediction(nan, "not predicted: the optimization was cut short", {}, nan, frozenset()),
                baseline_throughput=first.result.throughput if first and first.complete else nan,
                allocation=LPSolution(throughput=nan, theta={}, binding=None),
                cache=CacheDecision(label=None, node=None, bytes=None, budget=budget,
                                    why="not decided: the optimization was cut short"),
                theta_by_label={}, trace=first.result if first else None, final_trace=None,
                notes=[f"{why_it_ended(op)}: nothing was changed, your pipeline is as it was",
                       *measured_so_far(op)])
    if first is not None and first.complete:
        plan.baselines["yours"] = first.result.throughput
    plan.partial = True
    return plan


def partial_pick(Plan: Callable[..., "Plan"], op: Operation, error: Cancelled,  # noqa: N803
                 arguments: inspect.BoundArguments) -> tuple[Any, "Plan", str]:
    """``pick_best`` cut short: no winner, a partial plan of what was measured, and why."""
    candidates = arguments.arguments.get("candidates") or {}
    first = next(iter(candidates.values()), None)
    plan = partial_plan(Plan, op, error, inspect.signature(lambda pipeline: None).bind(first))
    return None, plan, why_it_ended(op)


def _users_dataset(pipeline: Any) -> Any:
    try:
        return resolve_pipeline(pipeline) if pipeline is not None else None
    except Exception:  # noqa: BLE001 - a factory that fails again: no dataset to hand back
        return None
