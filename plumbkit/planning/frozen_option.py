"""An option, never applied: a cache above what reads your variables or a mutable table.

The plan never caches above a map that reads a variable (a model's weights, a curriculum's knob)
or a mutable table: a cache there replays its first epoch's values, and a training loop or a
callback may change them between epochs. Where they never change (a frozen feature extractor,
``ds.batch(64).map(lambda x: base(x, training=False))`` with ``base.trainable = False``), that
cache is the large gain, and only the user knows which it is: so it is offered, priced by the one
prediction, saying what it changes. Pure Python.
"""

from __future__ import annotations

from ..model.plan import Change, Option
from ..model.units import human_bytes
from ..tunables import TIER_GAIN
from .budget import fits
from .predict import Evidence, Prediction, layout_with, predict


def frozen_cache(trace, budget: float, root: str | None = None) -> Change | None:
    """The cache the option places: the operator closest to ``root`` on the main chain that only
    the state it reads keeps from being cached, and whose output fits ``budget``; None where the
    plan's own rule already caches at or above it, or there is none."""
    p = trace.pipeline
    stats = {s.name: s for s in trace.analysis.ops}
    name = root or p.root
    while name is not None and p[name].kind != "cache":
        s = stats.get(name)
        if s is not None and s.cacheable:
            return None  # the plan's own cache goes here: nothing above it was held back
        if (s is not None and p[name].gains_from_a_cache and s.cacheable_if_state_frozen
                and fits(s.materialized_bytes or 0.0, budget)):
            readers = _readers(trace, name)
            why = (f"closest to the root that is deterministic and finite were the state "
                   f"{', '.join(readers)} read{'s' if len(readers) == 1 else ''} frozen; "
                   f"{human_bytes(s.materialized_bytes or 0.0)} fits the {human_bytes(budget)} budget")
            return Change("cache", p[name].label, name, "", why)
        name = p[name].inputs[0] if p[name].inputs else None
    return None


def _readers(trace, name: str) -> list[str]:
    """Labels of the operators at or below ``name`` (up to the user's own caches) that read state."""
    p, out, stack = trace.pipeline, [], [name]
    while stack:
        op = p[stack.pop()]
        if op.reads_state:
            out.append(op.label)
        if op.kind != "cache":
            stack.extend(op.inputs)
    return out


def frozen_option(trace, ev: Evidence, changes: list[Change], plan: Prediction, budget: float,
                  root: str | None = None) -> Option | None:
    """The option priced by the one prediction (the plan's layout with the cache added), or None
    where there is no such cache or it is not predicted :data:`TIER_GAIN` faster than the plan."""
    cache = frozen_cache(trace, budget, root)
    if cache is None:
        return None
    with_it = predict(ev, layout_with(ev, [*changes, cache]))
    if with_it.throughput < TIER_GAIN * plan.throughput:
        return None
    readers = _readers(trace, cache.node)
    read, them = ("reads", "its") if len(readers) == 1 else ("read", "their")
    return Option(
        title=f"cache at {cache.where} in memory, if what {', '.join(readers)} {read} never changes while you train",
        changes=(cache,), predicted_throughput=with_it.throughput, plan_throughput=plan.throughput,
        note=(f"every epoch after the first replays the values {', '.join(readers)} {read} in the first: right "
              f"for a frozen model or a fixed table, wrong where your training or a callback changes "
              f"{them} variables or tables. Not applied: to turn it on, add .cache() after {cache.where}"))
