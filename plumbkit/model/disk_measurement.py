"""What a cache directory can do, measured before the fact: the disk tier's evidence (issue 26).

Made by :func:`plumbkit.tfdata.disk_probe.probe_directory` in the user's process, its read
figures measured again on a filled tier (:func:`plumbkit.tfdata.disk_probe.read_back`), read by
the planner (:mod:`plumbkit.planning.disk_tier`). Pure record.
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import human_bytes


@dataclass(frozen=True)
class DiskMeasurement:
    """One directory, probed with elements of one size.

    Bandwidths are bytes per second of the tier's own form (what it writes and reads back, its
    metadata included); the read was measured with the files evicted from the page cache.
    ``read_cpu_per_element`` is the process CPU one element read back costs (decoding the tier's
    records, the hand-off of the element), not counting the disk's wait.
    """

    directory: str
    element_bytes: float  # size of the elements probed (the candidate node's)
    write_bandwidth: float  # bytes/s, synced to the disk
    read_bandwidth: float  # bytes/s, page cache evicted
    read_cpu_per_element: float  # CPU seconds per element read back
    free_bytes: float  # free space in the directory's file system when probed
    probe_bytes: float  # what the probe wrote (removed afterwards)
    probe_seconds: float  # what the probe took, wall
    evicted: bool = True  # False: the page cache could not be dropped (the read may be optimistic)
    write_setup_seconds: float = 0.0  # a fill's fixed cost: writing one element (tracing, threads, sync)
    read_back_bytes: float = 0.0  # the read measured on this much of the filled tier itself (0: the probe's)
    #: of ``read_cpu_per_element``, what the thread pulling the elements spends (the rest runs on
    #: the reader's own threads, its shards read in parallel); None: not measured apart
    read_thread_cpu_per_element: float | None = None
    #: process CPU seconds per element a fill spends writing it (the hand-over from your pipeline,
    #: the records' serialization, the writer threads' copies into the page cache); 0: not measured
    write_cpu_per_element: float = 0.0

    def read_source(self) -> str:
        """Where the read figures come from, as the plan says it."""
        if self.read_back_bytes:
            return f"read back from {human_bytes(self.read_back_bytes)} of the filled tier, evicted"
        return "a probe of the directory, evicted"

    def read_limit(self, bytes_per_minibatch: float) -> float:
        """Minibatches/s the directory can read back at ``bytes_per_minibatch``."""
        return self.read_bandwidth / bytes_per_minibatch if bytes_per_minibatch > 0 else float("inf")

    def write_limit(self, bytes_per_minibatch: float) -> float:
        """Minibatches/s a fill can write at ``bytes_per_minibatch``."""
        return self.write_bandwidth / bytes_per_minibatch if bytes_per_minibatch > 0 else float("inf")
