"""The plan with its disk tier (issue 26): :func:`.decisions.decide`, then a tier placed where a
disk budget allows it and reading it back beats recomputing, offered where none is given, refused
in one line where it does not fit; and the shuffled-then-decoded option (:mod:`.shuffle_option`).
The pieces are :mod:`.disk_tier`'s; this module puts them in order. Pure Python.
"""

from __future__ import annotations

from typing import Mapping

from ..model.disk_measurement import DiskMeasurement
from ..model.plan import CacheDecision
from ..tunables import TIER_GAIN
from .decisions import Declined, Decisions, decide
from .disk_tier import (TierCandidate, fits_on_disk, no_room_line, plan_tier, refusal, room_on_disk, slower_reason,
                        tier_candidates, tier_decision, tier_option, tier_reads)
from .predict import evidence_from_trace
from .shuffle_option import offer_reorder, reorder_candidate


def probe_targets(trace, memory: CacheDecision, root: str | None = None) -> list[TierCandidate]:
    """Every operator a disk tier may hold, this plan's or an option's: the directory is probed
    for elements of each one's size."""
    reorder = reorder_candidate(trace, root)
    return tier_candidates(trace, memory, root) + ([reorder.candidate] if reorder else [])


def worth_probing(trace, candidates: list[TierCandidate], **decide_args) -> list[TierCandidate]:
    """The candidates a tier could pay off at: with their output read back as cheaply as from
    memory (a tier reads no faster and costs more CPU per element), the plan is predicted at least
    :data:`TIER_GAIN` faster than without. Only these are worth a probe of the directory."""
    if not candidates:
        return []
    base = decide(trace, **decide_args).prediction.throughput
    out = []
    for c in candidates:
        ideal = CacheDecision(c.label, c.node, c.bytes, 0.0, "an upper bound: read back as from memory")
        if decide(trace, **decide_args, cache_at=ideal).prediction.throughput >= TIER_GAIN * base:
            out.append(c)
    return out


def decide_with_disk(trace, *, disk_budget: float | None, directory: str,
                     measured: Mapping[str, DiskMeasurement], only: str | None = None, **decide_args) -> Decisions:
    """:func:`.decisions.decide`, then the disk tier: each measured candidate (``measured``: node
    -> its directory's probe) that fits is planned with the tier at it; the fastest is placed when
    ``disk_budget`` is given and its plan beats recomputing by :data:`TIER_GAIN`, offered as an
    option when no disk budget is given, and a line says why when none is placed. ``only``: the
    tier may go at that node alone (the one already filled, decided again on its own read)."""
    base = decide(trace, **decide_args)
    root = decide_args.get("root")
    reorder = reorder_candidate(trace, root)
    reads = tier_reads(tier_candidates(trace, base.cache, root) + ([reorder.candidate] if reorder else []), measured)
    base.tiers = reads
    reordered = offer_reorder(trace, base, measured=measured, directory=directory, **decide_args)
    base.options += [reordered] if reordered else []
    candidates = [c for c in tier_candidates(trace, base.cache, root) if c.node in measured and only in (None, c.node)]
    if not candidates:
        return base
    ev = evidence_from_trace(trace, cores=decide_args.get("cores"), runtime=decide_args.get("runtime"),
                             disk=decide_args.get("disk_bound"), costs=decide_args.get("costs"),
                             ceilings=decide_args.get("bounds"), tiers=reads)
    memory_cache = tuple(c for c in base.changes if c.what == "cache")
    planned = []
    for c in candidates:
        if fits_on_disk(c, room_on_disk(measured[c.node], disk_budget)):
            at = tier_decision(c, directory, base.cache, measured[c.node], disk_budget)
            d = decide(trace, **decide_args, cache_at=at, tiers=reads)
            planned.append((c, d, plan_tier(c, ev, d.changes, base.prediction, directory=directory,
                                            measurement=measured[c.node], applied=disk_budget is not None,
                                            memory_cache=memory_cache)))
    best = max(planned, key=lambda t: t[2].steady.throughput, default=None)
    if best is None:
        line = refusal(candidates, measured, disk_budget) if disk_budget is not None else None
        line = line or no_room_line(candidates, measured)
        base.notes += [line] if line else []
        return base
    candidate, d, tier = best
    if tier.steady.throughput < TIER_GAIN * base.prediction.throughput:
        slower = Declined.weighed(d.changes, slower_reason(tier), base.prediction, tier.steady, whole=True)
        base.notes.append(slower.note)
        base.declined.append(slower)  # said again where the plan is predicted on other evidence
        return base
    if disk_budget is None:
        base.options.append(tier_option(tier, d.changes, base.prediction))
        return base
    d.tier, d.tiers = tier, reads
    d.options += [reordered] if reordered else []  # priced again against this plan where it ships
    return d
