"""The disk tier in :func:`plumbkit.optimize` (issue 26): measure the directory, plan, fill once.

Before the fact, in the user's process: the operators memory cannot hold are the candidates
(:func:`plumbkit.planning.tier_plan.probe_targets`); the cache directory is probed for elements
of each one's size (:func:`plumbkit.tfdata.disk_probe.probe_directory`: ~100 MB written and
removed, once per directory and size per session); the planner places the tier (a disk budget
given) or offers it (none given). A placed tier is filled once here, through the tier's guard,
before anything is measured; where the fill fails (the disk or the budget ran out, another process
fills it), the plan is made again without it and the line says why. A filled tier is read back in
part, evicted (:func:`plumbkit.tfdata.disk_probe.read_back`), and the plan made again on that read:
a probe's 8 MB read back read what the VM's host still holds, gigabytes read slower.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..model.disk_measurement import DiskMeasurement
from ..model.disk_tier import DiskTierError, FillInterrupted, default_cache_dir, remove_tree
from ..model.errors import first_line
from ..planning.budget import usable_budget
from ..planning.decisions import Decisions, decide_cache
from ..planning.tier_plan import decide_with_disk, probe_targets, worth_probing
from ..tfdata.disk_probe import probe_directory, read_back
from ..tfdata.disk_tier import tier_paths
from ..tfdata.rebuild import apply_changes
from .scheduler import checkpoint, stop_event

if TYPE_CHECKING:
    import tensorflow as tf

Progress = Callable[[str, float], None]


def directory_of(cache_dir: "str | Path | None") -> str:
    """The tier's directory as the plan and the exported cell name it (``~`` expanded)."""
    return str(Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir())


def measure_candidates(trace, *, memory_budget: float | None, root: str, directory: str,
                       progress: Progress, **decide_args) -> tuple[dict[str, DiskMeasurement], list[str]]:
    """The directory probed for the element size of each candidate a tier could pay off at (none:
    nothing is written), and a line when it could not be (unwritable...): the tier is then off."""
    memory = decide_cache(trace, usable_budget(memory_budget).bytes, root)
    candidates = worth_probing(trace, probe_targets(trace, memory, root), memory_budget=memory_budget, root=root,
                               **decide_args)
    if not candidates:
        return {}, []
    progress(f"measuring {directory} for a disk tier (~100 MB written, removed)", 0.16)
    measured: dict[str, DiskMeasurement] = {}
    try:
        for c in candidates:
            measured[c.node] = probe_directory(directory, c.element_bytes)
    except Exception as err:  # noqa: BLE001 - the tier is an addition: the plan goes on without it
        return {}, [f"no disk tier: {directory} could not be measured ({first_line(err)})"]
    return measured, []


def decide_tiered(trace, *, disk_budget: float | None, cache_dir: "str | Path | None", memory_budget: float | None,
                  root: str, progress: Progress, read_back: tuple[str, DiskMeasurement] | None = None,
                  **decide_args) -> Decisions:
    """The plan's decisions with the disk tier placed, offered, or said why not. ``read_back``
    (a node and its filled tier's read): decided again with the tier at that node only, on that
    read (the other candidates' probes are cached for the session: nothing is written again)."""
    directory = directory_of(cache_dir)
    measured, notes = measure_candidates(trace, memory_budget=memory_budget, root=root, directory=directory,
                                         progress=progress, **decide_args)
    only = None
    if read_back is not None:
        only, measured = read_back[0], {**measured, read_back[0]: read_back[1]}
    decisions = decide_with_disk(trace, disk_budget=disk_budget, directory=directory, measured=measured,
                                 memory_budget=memory_budget, root=root, only=only, **decide_args)
    decisions.notes += notes
    return decisions


def fill_tier(ds: "tf.data.Dataset", changes: list, progress: Progress,
              should_stop: Callable[[], bool] | None = None) -> tuple[str | None, Path | None]:
    """Fill the plan's disk tier once (the rebuild fills it; a complete tier with the same
    fingerprint is read as it is): ``(None, its path)``, or one line when it could not be. Cancel
    (the operation's, or ``should_stop``) stops the fill with nothing of it left, and the
    operation ends there."""
    event = stop_event()

    def stop() -> bool:
        return bool(event is not None and event.is_set()) or bool(should_stop is not None and should_stop())

    progress("filling the plan's disk tier once (guarded: nothing partial is left)", 0.18)
    try:
        rebuilt = apply_changes(ds, changes, should_stop=stop)
    except FillInterrupted as err:
        checkpoint()  # a Cancel: the operation ends here, with what it measured
        return first_line(err), None
    except DiskTierError as err:
        return first_line(err), None
    yours = set(tier_paths(ds))  # your own on_disk() tiers are not the plan's
    return None, next((p for p in tier_paths(rebuilt) if p not in yours), None)


def read_tier_back(path: Path | None, probed: DiskMeasurement, progress: Progress) -> DiskMeasurement | None:
    """The filled tier's own read (a stretch of it, evicted), or None where it cannot be timed."""
    if path is None:
        return None
    progress("reading a stretch of the filled tier back, evicted: the disk at the tier's size", 0.19)
    return read_back(path, probed)


def remove_unused_tier(path: Path) -> str:
    """A tier filled, then not chosen on its own read: removed (a plan leaves no unused gigabytes)."""
    remove_tree(path)
    return f"the tier filled at {path} was removed: read back, it no longer beat recomputing"
