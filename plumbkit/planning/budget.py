"""The memory a plan may cache into: what the user asked for, capped at what the machine can give.

A budget above the memory this process can still allocate (the cgroup's limit minus its usage,
or the OS's available memory) would let a cache grow until the kernel kills the process; it is
capped, and the plan says so. A cache is placed only where its *estimated* size, grown by
:data:`ESTIMATE_MARGIN` for the estimate's error, fits; the fill itself is guarded
(:mod:`plumbkit.tfdata.memory_guard`) in case the estimate was still too low.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..host.machine import available_memory
from ..model.units import human_bytes
from ..tunables import ESTIMATE_MARGIN, MAX_BUDGET_SHARE

#: Share of the available memory a plan takes when the user names no budget.
DEFAULT_BUDGET_SHARE = 0.5


@dataclass(frozen=True)
class Budget:
    bytes: float
    note: str = ""  # why it differs from what was asked, in plain words ("" when it does not)


def usable_budget(requested: float | None) -> Budget:
    """The budget a plan uses: ``requested`` (default: half the available memory), capped."""
    free, source = available_memory()
    if requested is None:
        return Budget(DEFAULT_BUDGET_SHARE * free)
    requested = float(requested)
    if requested < 0:
        return Budget(0.0, f"a negative memory budget ({requested:g} bytes) means no cache")
    cap = MAX_BUDGET_SHARE * free
    if requested > cap:
        return Budget(cap, f"memory budget {human_bytes(requested)} is more than this machine can give: "
                           f"capped at {human_bytes(cap)} ({MAX_BUDGET_SHARE:.0%} of the "
                           f"{human_bytes(free)} available, from the {source})")
    return Budget(requested)


def fits(estimate: float, budget: float) -> bool:
    """Does a cache estimated at ``estimate`` bytes fit ``budget``, with the estimate's margin?"""
    return estimate * (1 + ESTIMATE_MARGIN) <= budget
