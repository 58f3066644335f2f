"""Changes ship only where the one prediction says they gain: a thread at a time, then the plan.

The LP gives every operator its share of the cores, and the hedge turns a share into threads.
But an operator's parallel form costs what its sequential one does not (a pool, a hand-off per
element, wake-ups), and the model charges those costs only as well as it measured them. Where
the plan's own prediction (:func:`plumbkit.planning.predict.predict`, the figure the user sees)
is no faster with an operator's extra threads than without them, the extra threads buy a risk
and no predicted gain: the operator keeps what you wrote. Fewer threads than you wrote are
left to the plan (they save CPU a training step can use, which a pipeline-alone prediction does
not see), and so are the threads that fill a cache in the first epoch (free in steady state,
planned on the fill's own prediction).

The same holds for the plan as a whole: where it is predicted no faster than your pipeline as
written, every change it makes is a risk the prediction does not pay for (the bench measured
such plans at 0.87-1.05x yours), so your pipeline comes back as you wrote it, with a note.
With a model in the loop the plan is judged on the training step instead (fewer threads leave
CPU to the step), so this rule is for the pipeline alone. Pure Python.
"""

from __future__ import annotations

from ..model.plan import Change
from ..tunables import PREDICTED_GAIN
from .predict import Evidence, free_in_steady_state, layout_as_traced, layout_with, predict


def threads_worth_their_cost(ev: Evidence, changes: list[Change]) -> tuple[list[Change], list[str]]:
    """``changes`` without the extra threads the plan's prediction does not need, and a note per
    operator left as written.

    Greedy, cheapest loss first: drop the change whose absence lowers the prediction least,
    while the plan without it is still predicted within :data:`PREDICTED_GAIN` of the full plan
    (each test against the full plan, so together they cost at most that factor)."""
    full = predict(ev, layout_with(ev, changes))
    written = layout_as_traced(ev).threads
    free = free_in_steady_state(ev, layout_with(ev, changes))  # set by the caches, which stay
    candidates = [c for c in changes
                  if c.what == "parallelism" and c.node not in free and int(c.value) > written.get(c.node, 1)]
    kept = list(changes)
    notes: list[str] = []
    while candidates:
        rest, cheapest = max(((predict(ev, layout_with(ev, [k for k in kept if k is not c])), c) for c in candidates),
                             key=lambda pair: pair[0].throughput)
        if rest.throughput * PREDICTED_GAIN < full.throughput:
            break
        kept = [k for k in kept if k is not cheapest]
        candidates = [c for c in candidates if c is not cheapest]
        n = written.get(cheapest.node, 1)
        notes.append(f"{cheapest.where} keeps what you wrote ({n} thread{'s' if n != 1 else ''}): "
                     f"{rest.throughput:,.0f} minibatches/s are predicted so, {full.throughput:,.0f} with "
                     f"{cheapest.value} threads there (more threads ship only where they are predicted "
                     f"{100 * (PREDICTED_GAIN - 1):.0f}% faster)")
    return kept, notes


def plan_worth_its_changes(ev: Evidence, changes: list[Change]) -> tuple[list[Change], list[str]]:
    """``changes``, or none (with a note) where the plan is predicted less than
    :data:`PREDICTED_GAIN` faster than your pipeline as it ran when traced."""
    if not changes:
        return changes, []
    plan = predict(ev, layout_with(ev, changes)).throughput
    yours = predict(ev, layout_as_traced(ev)).throughput
    if plan >= yours * PREDICTED_GAIN:
        return changes, []
    weighed = "; ".join(f"{c.where}: {c.what}" + ("" if c.value is None else f" {c.value}") for c in changes)
    return [], [f"your pipeline stays as you wrote it: the plan ({weighed}) is predicted at {plan:,.0f} "
                f"minibatches/s against {yours:,.0f} for yours, and a plan ships only where it is "
                f"predicted {100 * (PREDICTED_GAIN - 1):.0f}% faster (with a model in the loop, "
                f"CPU it leaves to the training step counts too)"]
