"""The disk tier in the plan (issue 26): a cache memory cannot hold, on a local directory.

Every cacheable operator is a candidate for memory (as :func:`.decisions.decide_cache` places it:
closest to the root that fits the memory budget) or for disk: an operator above the memory cache's
place (what memory could not hold) goes to disk when its materialized size fits the disk budget
and the free space there, and the plan that reads it back is predicted faster than the plan that
recomputes what is below it. The tier's read is charged in that prediction as measured before the
fact in the user's process (:mod:`plumbkit.tfdata.disk_probe`): the directory's read bandwidth
(page cache evicted) over the bytes per minibatch, and the CPU per element read back. So a tier
slower than recomputing is never chosen: on the dev VM, where the disk reads ~130-450 MB/s, a
cache of cheap maps' output loses to recomputing them.

The read is charged at the bandwidth measured with the page cache evicted, as the bench runs it:
where the tier fits the page cache, later epochs may read faster than predicted.

The fill is predicted too (:func:`.fill.predict_fill`, the directory's write bandwidth binding),
and both are said. Without a disk budget the tier is off, and the best candidate is *offered*
(an :class:`Option` with its predicted gain and the space it needs), never written unasked.
Pure Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from ..model.disk_measurement import DiskMeasurement
from ..model.plan import CacheDecision, Change, Option
from ..model.units import human_bytes
from ..tunables import DISK_FREE_SHARE, ESTIMATE_MARGIN, TIER_GAIN
from .fill import fill_seconds, predict_fill
from .predict import Evidence, Prediction, TierRead, layout_with, predict

@dataclass(frozen=True)
class TierCandidate:
    """An operator whose output the disk tier could hold (memory could not)."""

    node: str
    label: str
    bytes: float  # materialized size of one pass (the estimate)
    element_bytes: float
    visit_ratio: float  # elements per minibatch
    epoch_batches: float  # minibatches in one pass of it: the fill epoch

    @property
    def bytes_per_minibatch(self) -> float:
        return self.element_bytes * self.visit_ratio


@dataclass(frozen=True)
class TierPlan:
    """The disk tier at one operator: where, how large, and both predictions.

    ``steady`` is the plan's prediction with the tier read back (one :class:`Prediction`, its
    binding limit beside it); ``fill`` the first epoch's, while the tier is written;
    ``fill_seconds`` the whole first epoch: the tier written, then read back once (it yields
    nothing until it is complete). ``applied``: in the plan (a disk budget was given), else
    offered as an option.
    """

    candidate: TierCandidate
    directory: str
    measurement: DiskMeasurement
    steady: Prediction
    fill: Prediction
    fill_seconds: float
    recompute: Prediction  # the same plan without the tier (what reading back must beat)
    applied: bool
    memory_cache: tuple[Change, ...] = ()  # the memory cache the plan holds without the tier

    @property
    def gain(self) -> float:
        return self.steady.throughput / self.recompute.throughput if self.recompute.throughput > 0 else math.inf

    def __str__(self) -> str:
        c, m = self.candidate, self.measurement
        return (f"disk tier at {c.label}: {human_bytes(c.bytes)} in {self.directory} "
                f"(read {human_bytes(m.read_bandwidth)}/s, {m.read_source()}; written "
                f"{human_bytes(m.write_bandwidth)}/s, measured there); steady state predicted "
                f"{self.steady.throughput:,.1f} minibatches/s ({self.steady.binding}), {self.gain:.2f}x "
                f"recomputing it; the first epoch writes it at {self.fill.throughput:,.1f} minibatches/s "
                f"({self.fill.binding}), then reads it back: ~{_seconds(self.fill_seconds)} in all")


def tier_candidates(trace, memory: CacheDecision, root: str | None = None) -> list[TierCandidate]:
    """Cacheable operators on the main chain from ``root`` down to the memory cache's place (or to
    the user's own cache, whose operators below are free already): never above a random or
    infinite operator (those are not cacheable), never a prefetch or an in-memory source."""
    p = trace.pipeline
    stats = {o.name: o for o in trace.analysis.ops}
    out: list[TierCandidate] = []
    name: str | None = root or p.root
    while name is not None and name != memory.node:
        op = p[name]
        if op.kind == "cache":
            break
        s = stats.get(name)
        if (s is not None and op.gains_from_a_cache and s.cacheable and s.materialized_bytes
                and s.bytes_per_element and s.visit_ratio and s.cardinality and math.isfinite(s.cardinality)):
            out.append(TierCandidate(name, op.label, float(s.materialized_bytes), float(s.bytes_per_element),
                                     float(s.visit_ratio), math.ceil(s.cardinality / s.visit_ratio)))
        name = op.inputs[0] if op.inputs else None
    return out


def tier_reads(candidates: list[TierCandidate], measured: Mapping[str, DiskMeasurement]) -> dict[str, TierRead]:
    """What reading each measured candidate back costs, for :class:`Evidence` (node -> read)."""
    return {c.node: TierRead(cpu_per_element=measured[c.node].read_cpu_per_element,
                             bytes_per_element=c.element_bytes,
                             read_bandwidth=measured[c.node].read_bandwidth,
                             thread_cpu_per_element=measured[c.node].read_thread_cpu_per_element,
                             write_cpu_per_element=measured[c.node].write_cpu_per_element)
            for c in candidates if c.node in measured}


def room_on_disk(measurement: DiskMeasurement, disk_budget: float | None) -> float:
    """Bytes the tier may take: the disk budget (None: what the disk has), within a share of the
    free space (the user's other files need the rest)."""
    free = DISK_FREE_SHARE * measurement.free_bytes
    return free if disk_budget is None else min(float(disk_budget), free)


def fits_on_disk(candidate: TierCandidate, room: float) -> bool:
    return candidate.bytes * (1 + ESTIMATE_MARGIN) <= room


def tier_decision(candidate: TierCandidate, directory: str, memory: CacheDecision,
                  measurement: DiskMeasurement, disk_budget: float | None) -> CacheDecision:
    """The cache decision that puts ``candidate`` on disk in ``directory``."""
    budget = "the disk budget" if disk_budget is not None else "the free space"
    why = (f"does not fit the {human_bytes(memory.budget)} memory budget; {human_bytes(candidate.bytes)} "
           f"(+{ESTIMATE_MARGIN:.0%} for the estimate's error) fits {budget} "
           f"({human_bytes(room_on_disk(measurement, disk_budget))} in {directory}), and reading it back "
           f"({human_bytes(measurement.read_bandwidth)}/s, {measurement.read_cpu_per_element * 1e6:.0f} µs "
           f"of CPU per element, {measurement.read_source()}) is predicted faster than recomputing what is below it")
    return CacheDecision(label=candidate.label, node=candidate.node, bytes=candidate.bytes,
                         budget=memory.budget, why=why, tier="disk", directory=directory)


def plan_tier(candidate: TierCandidate, ev: Evidence, changes: list[Change], recompute: Prediction, *,
              directory: str, measurement: DiskMeasurement, applied: bool,
              memory_cache: tuple[Change, ...] = ()) -> TierPlan:
    """Both predictions of the plan ``changes`` (holding the tier at ``candidate``) on ``ev``:
    the steady state (the tier read back) and the first epoch (the tier written, at most the
    directory's write bandwidth)."""
    layout = layout_with(ev, changes)
    steady = predict(ev, layout)
    write = measurement.write_limit(candidate.bytes_per_minibatch)
    fill = predict_fill(ev, layout, write_limit=write)
    # the whole first epoch: on_disk (tfdata/disk_tier.py) writes the tier, with its fixed cost,
    # and yields nothing until it is complete, then reads it back once at the steady rate
    seconds = (fill_seconds(fill, candidate.epoch_batches) + measurement.write_setup_seconds
               + fill_seconds(steady, candidate.epoch_batches))
    return TierPlan(candidate, directory, measurement, steady, fill, seconds, recompute, applied, memory_cache)


def slower_reason(tier: TierPlan) -> Callable[[Prediction, Prediction], str]:
    """Why the best tier is not placed, from the plan's prediction (recomputing) and the tier's
    (reading it back): reading it back is not clearly faster. A reason, not a line: the plan says
    it again from the evidence of the prediction it shows (:class:`.decisions.Declined`)."""
    label, directory = tier.candidate.label, tier.directory
    return lambda recompute, steady: (
        f"no disk tier: reading {label} back from {directory} is predicted at {steady.throughput:,.1f} "
        f"minibatches/s ({steady.binding}), recomputing it at {recompute.throughput:,.1f} ({recompute.binding}); "
        f"a tier is placed only {TIER_GAIN:.2f}x faster than recomputing")


def refusal(candidates: list[TierCandidate], measured: Mapping[str, DiskMeasurement],
            disk_budget: float) -> str | None:
    """One line when no candidate fits the disk budget though one fits the disk: the budget is too
    small for the cache (None when something fits, or nothing would fit the disk either)."""
    fitting_disk = [c for c in candidates if c.node in measured
                    and fits_on_disk(c, room_on_disk(measured[c.node], None))]
    if not fitting_disk or any(fits_on_disk(c, room_on_disk(measured[c.node], disk_budget)) for c in fitting_disk):
        return None
    top, smallest = fitting_disk[0], min(fitting_disk, key=lambda c: c.bytes)
    least = f", {smallest.label} the least: {_need(smallest)}" if smallest is not top else ""
    return (f"disk tier refused: the {human_bytes(disk_budget)} disk budget is smaller than the cache "
            f"({top.label} needs {_need(top)}{least}, with a {ESTIMATE_MARGIN:.0%} margin for the "
            f"estimate); nothing is written to disk")


def no_room_line(candidates: list[TierCandidate], measured: Mapping[str, DiskMeasurement]) -> str | None:
    """One line when no measured candidate fits even the disk's free space (budget or not)."""
    measured_ones = [c for c in candidates if c.node in measured]
    if not measured_ones or any(fits_on_disk(c, room_on_disk(measured[c.node], None)) for c in measured_ones):
        return None
    smallest = min(measured_ones, key=lambda c: c.bytes)
    m = measured[smallest.node]
    return (f"no disk tier: {smallest.label}, the smallest place for one, needs {_need(smallest)} (with a "
            f"{ESTIMATE_MARGIN:.0%} margin for the estimate); {m.directory} has {human_bytes(m.free_bytes)} free, "
            f"of which a tier may take {DISK_FREE_SHARE:.0%}")


def _need(c: TierCandidate) -> str:
    return human_bytes(c.bytes * (1 + ESTIMATE_MARGIN))


def tier_option(tier: TierPlan, changes: list[Change], plan: Prediction) -> Option:
    """The tier offered, not applied (no disk budget: plumbkit writes nothing to disk unasked)."""
    c = tier.candidate
    need = c.bytes * (1 + ESTIMATE_MARGIN)
    return Option(
        title=f"a disk tier at {c.label}: with {human_bytes(need)} in {tier.directory}",
        changes=tuple(changes), predicted_throughput=tier.steady.throughput, plan_throughput=plan.throughput,
        note=(f"same elements, same order; its first epoch writes {human_bytes(c.bytes)} at a predicted "
              f"{tier.fill.throughput:,.1f} minibatches/s ({tier.fill.binding}), then reads it back: "
              f"~{_seconds(tier.fill_seconds)} in all; "
              f"turn it on with disk_budget={_budget_text(need)} (%%plumb --disk-budget "
              f"{_budget_text(need)})"))


def _budget_text(n: float) -> str:
    """A budget a person types: rounded up to a tenth of a GB, or to a MB below a GB."""
    if n >= 1e9:
        return f"{math.ceil(n / 1e8) / 10:g}GB"
    return f"{max(1, math.ceil(n / 1e6))}MB"


def _seconds(s: float) -> str:
    if not math.isfinite(s):
        return "unknown time"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"
