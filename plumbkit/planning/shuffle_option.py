"""An option, never applied: cache the decoded records below which a shuffle sits, and shuffle
above the cache instead (issue 26, "semantics kept").

The shuffled training pipeline (files shuffled, records shuffled, then parse and decode) cannot
be cached above its decode: a cache there would replay the first epoch's order every epoch. It can
be cached if the record shuffle moves above the cache, with the same named buffer, and the file
shuffle goes: then every epoch draws a fresh order from the cached, decoded records. That changes
the order of elements (how, exactly, the option's note says), so it is only offered, priced by
the one prediction, for the user to turn on. Pure Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model.pipeline import Operator
from ..model.plan import CacheDecision, Change, Option
from ..model.units import human_bytes
from ..tunables import TIER_GAIN
from .budget import fits, usable_budget
from .decisions import decide
from .disk_tier import TierCandidate, fits_on_disk, room_on_disk, tier_reads

#: Kinds that map each element to one element, in order: a shuffle moved across them draws the
#: same orders (seeded: the same permutation).
ELEMENTWISE = frozenset({"map"})
#: The option's change kind that says "shuffle above the cache" (never applied by the rebuild).
SHUFFLE_ABOVE = "shuffle_above"


@dataclass(frozen=True)
class Reorder:
    """Where the option puts things: the cache at ``top`` (the highest of the element-wise
    operators directly above ``shuffle``), the record shuffle moved above it, the shuffles below
    it dropped."""

    candidate: TierCandidate  # the operator cached (its decoded records), sized as if unshuffled
    shuffle: str  # the record shuffle that moves above the cache
    buffer: int
    maps: tuple[str, ...]  # labels of the element-wise operators between (the decode)
    dropped: tuple[str, ...]  # labels of the other shuffles below (files), dropped


def reorder_candidate(trace, root: str | None = None) -> Reorder | None:
    """The shuffled-then-decoded shape on the main chain from ``root``, or None: the top-most
    shuffle with element-wise operators directly above it, nothing random but shuffles below
    them, and a known, finite size."""
    p = trace.pipeline
    stats = {o.name: o for o in trace.analysis.ops}
    chain, name = [], root or p.root
    while name is not None and p[name].kind != "cache":
        chain.append(name)
        name = p[name].inputs[0] if p[name].inputs else None
    at = next((i for i, n in enumerate(chain) if p[n].kind == "shuffle"), None)
    if at is None or at == 0 or p[chain[at - 1]].kind not in ELEMENTWISE:
        return None
    top = at - 1
    while top > 0 and p[chain[top - 1]].kind in ELEMENTWISE and not _runs_each_epoch(p[chain[top - 1]]):
        top -= 1
    maps = [chain[i] for i in range(top, at)]
    below = [p[chain[at]], *p.descendants(chain[at])]
    if any(_runs_each_epoch(p[m]) for m in maps) or any(_runs_each_epoch(o) and o.kind != "shuffle" for o in below):
        return None  # a random value (a crop, a flip), or a write to your state, cannot move above a cache
    s = stats.get(maps[0])
    if s is None or not s.bytes_per_element or not s.visit_ratio or not s.cardinality or not math.isfinite(s.cardinality):
        return None
    candidate = TierCandidate(maps[0], p[maps[0]].label, s.bytes_per_element * s.cardinality, s.bytes_per_element,
                              s.visit_ratio, math.ceil(s.cardinality / s.visit_ratio))
    shuffle = p[chain[at]]
    return Reorder(candidate, shuffle.name, int(shuffle.tunables.get("buffer_size") or 0),
                   tuple(p[m].label for m in reversed(maps)),
                   tuple(o.label for o in below[1:] if o.kind == "shuffle"))


def reorder_cache(r: Reorder, memory_budget: float, directory: str | None) -> CacheDecision | None:
    """Memory when the decoded records fit the memory budget; else the disk tier (``directory``:
    measured there); None when neither."""
    c = r.candidate
    why = "the option's cache of the decoded records (the shuffles below it moved or dropped)"
    if fits(c.bytes, memory_budget):
        return CacheDecision(c.label, c.node, c.bytes, memory_budget, why)
    if directory is None:
        return None
    return CacheDecision(c.label, c.node, c.bytes, memory_budget, why, tier="disk", directory=directory)


def reorder_option(r: Reorder, cache: CacheDecision, changes: list[Change], predicted: float,
                   plan: float, shuffle_label: str) -> Option:
    """The option: its changes (the tier or cache, the shuffles moved and dropped) and exactly
    what changes in the order of elements."""
    where = "in memory" if cache.tier == "memory" else f"on disk in {cache.directory}"
    moved = Change("remove", shuffle_label, r.shuffle, "shuffle", "moved above the cache")
    above = Change(SHUFFLE_ABOVE, r.candidate.label, r.candidate.node, r.buffer,
                   f"shuffle_buffer = {r.buffer}: the same buffer, above the cache")
    order = (f"{shuffle_label} moves above the cache as .shuffle(shuffle_buffer) with shuffle_buffer = "
             f"{r.buffer}: each epoch still draws a fresh order from a window of {r.buffer} records, now "
             f"decoded ones; with only {', '.join(r.maps)} between (one element each, in order), the "
             f"orders drawn are the same (seeded: the same permutation)")
    if r.dropped:
        order += (f"; {', '.join(r.dropped)} below it cannot stay (a cache would freeze it): the files are "
                  f"read in their listed order every epoch, so the window of {r.buffer} moves over the "
                  f"records in that order instead of a reshuffled one")
    return Option(
        title=f"cache the decoded records at {r.candidate.label} {where} ({human_bytes(r.candidate.bytes)}), "
              f"shuffle above the cache with a named buffer",
        changes=(moved, *(c for c in changes if c.what in ("cache", "disk_tier")), above),
        predicted_throughput=predicted, plan_throughput=plan,
        note=f"changes the order of elements: {order}; the first epoch writes the records unshuffled. "
             f"Not applied: turn it on yourself")


def offer_reorder(trace, base, *, measured, directory: str, **decide_args) -> Option | None:
    """The option priced on ``trace``: the plan with the decoded records cached (memory, or the
    disk tier where it was measured and fits) against ``base``'s; None where there is no such
    shape or it is not predicted :data:`TIER_GAIN` faster."""
    r = reorder_candidate(trace, decide_args.get("root"))
    if r is None:
        return None
    m = measured.get(r.candidate.node)
    on_disk = directory if m is not None and fits_on_disk(r.candidate, room_on_disk(m, None)) else None
    cache = reorder_cache(r, usable_budget(decide_args.get("memory_budget")).bytes, on_disk)
    if cache is None:
        return None
    d = decide(trace, **decide_args, cache_at=cache, tiers={**base.tiers, **tier_reads([r.candidate], measured)})
    if d.prediction.throughput < TIER_GAIN * base.prediction.throughput:
        return None
    return reorder_option(r, cache, d.changes, d.prediction.throughput, base.prediction.throughput,
                          trace.pipeline[r.shuffle].label)


def _runs_each_epoch(op: Operator) -> bool:
    """Draws random numbers, writes the user's state or reads state that can change: a cache above
    it would freeze it."""
    return op.random or op.writes_state or op.reads_state
