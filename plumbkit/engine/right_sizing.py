"""Right-sizing in ``optimize(..., model=)``: where the model bounds training, the plan that ships is
the smallest one predicted to keep up with it (:mod:`plumbkit.planning.right_size`), and whether it
ships is decided by training steps/s measured alike, not by the pipeline's own throughput.

One job: apply that decision to an optimize call's state. The fastest plan is decided first, as
without a model; right-sizing then trims it before anything is measured alike, so its prediction is
still made before the fact.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..model.demand import ModelDemand
from ..planning.predict import Evidence, free_in_steady_state, layout_with
from ..planning.right_size import WITHIN, RightSizing, right_size
from .compare import Comparison


def right_size_planned(planned: Any, ev: Evidence, demand: ModelDemand | None) -> RightSizing | None:
    """Trim ``planned`` (an optimize call's ``_Planned``) to the model's demand where the model
    binds: its changes, and its cache and fill where the cache is dropped. None: left as it was."""
    if demand is None:
        return None
    sizing = right_size(ev, planned.changes, demand)
    if sizing is None:
        return None
    planned.changes = sizing.changes
    if sizing.dropped_cache:
        planned.cache = dataclasses.replace(planned.cache, label=None, node=None, bytes=None,
                                            why=f"no cache: the model's demand does not need the one after "
                                                f"{sizing.dropped_cache}")
        planned.fill = planned.yours_fill
        free = free_in_steady_state(ev, layout_with(ev, sizing.changes))
        planned.decisions = dataclasses.replace(planned.decisions, free=[ev.pipeline[n].label for n in free])
    planned.notes.append(sizing.note)
    return sizing


def ships_for_training(plan: Any, steps: Comparison, *, yours: str, planned: str,
                       rebuild: Callable[[list], Any]) -> None:
    """A right-sized plan ships when training with it, measured alike, is not measurably more than
    :data:`~plumbkit.planning.right_size.WITHIN` slower than with yours, and its median at most that
    much below (the model binds, so the pipeline's own throughput is not what the user waits for;
    the issue's terms: the step rate within 5%, the threads and memory given back). A loss inside
    that allowance ships, said with its figure; otherwise yours comes back. ``rebuild(changes)`` builds a
    pipeline. Why not "never measurably slower": a 40 ms step fed by one thread instead of AUTOTUNE's
    measured 0.99x yours with a spread tight enough to call 1% measurable, and the plan that frees
    every thread but one was refused for a loss the user was promised they might take."""
    if plan.right_sizing is None or not plan.proposed_changes:
        return
    speedup = steps.speedup(planned, yours)
    floor = 1 - WITHIN
    if speedup is None or not steps.complete or (speedup.measurable and speedup.high < floor) \
            or speedup.ratio < floor:
        if plan.applied:
            plan.dataset, plan.changes, plan.applied = rebuild([]), [], False
        plan.notes.append("the right-sized plan was not kept: training with it was "
                          + ("not measured alike" if speedup is None or not steps.complete
                             else f"{speedup.ratio:.2f}× yours ({speedup.low:.2f}–{speedup.high:.2f}, measured "
                                  f"alike; it may lose at most {100 * WITHIN:.0f}%)"))
        return
    if not plan.applied:
        plan.dataset, plan.changes, plan.applied = rebuild(plan.proposed_changes), plan.proposed_changes, True
    plan.notes.append(f"the right-sized plan is returned: training with it ran {speedup.ratio:.2f}× yours "
                      f"(measured alike, the model in the loop), with "
                      f"{plan.right_sizing.threads} pipeline thread{'s' if plan.right_sizing.threads != 1 else ''}")


__all__ = ["right_size_planned", "ships_for_training"]
