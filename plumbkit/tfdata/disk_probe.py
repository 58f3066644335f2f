"""Before the fact: what a cache directory writes and reads for elements of one size (issue 26).

A disk tier pays off only where reading an element back is cheaper than recomputing it, and that
depends on the directory (a VM's virtual disk read ~130 MB/s here, a local NVMe several GB/s):
the plan measures, never assumes. The probe writes incompressible elements of the candidate's
size in the tier's own form (:func:`.disk_tier.write_tier`: a fill's records and shards, through
the same Python hand-over, without its guard) and syncs them, three times 32 MB: the write's
bandwidth and its process CPU per element (which a fill pays on top of making the elements), the
fixed costs (tracing, threads) measured apart on one-element tiers and left out. It then drops
the last write from the page cache (``posix_fadvise``, as the bench does) and reads its first
8 MB back through the tier's reader, timing the wall clock and the process CPU, and removes what
it wrote. Cost on the dev VM: ~100 MB written, 8 MB of it read, ~1.5 s. One probe per directory and
element size (to a factor of two) per session. What the probe cannot measure well: a write that
fast (where the difference is under 1 ms the bandwidth reads as a floor of several GB/s and does
not bind the fill), and a tier read beyond what the VM's host still holds of recent writes.
Measured on a 2-core VM (``benchmarks/cold_reads.py``, 2026-11-27), the guest's page cache
evicted every time: 64 MB and 1.6 GB written just now read back at 2.2 and 3.8 GB/s with almost
no system CPU, a file written weeks before at 600 MB/s with 1.6 ms of system CPU per MB (and at
2.3 GB/s once read); the host serves recent writes and reads, and the guest cannot evict that.
So this probe reads what a tier read right after its fill reads, not the disk's sustained rate.
A placed tier is therefore read again once filled (:func:`read_back`): a stretch of the tier
itself, evicted, whose figures the plan is predicted on (in the third disk-tier run the probe read
4.7 GB/s and 7 us per element, the 4.5 GB tier ~0.7 GB/s). TensorFlow edge.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from ..model.disk_measurement import DiskMeasurement
from .disk import evict_from_page_cache
from ..tunables import PROBE_BYTES, PROBE_READ_BATCH_BYTES, PROBE_WRITE_BYTES, TIER_READ_BACK_BYTES
from . import disk_tier

#: Elements one probe writes at most and at least (tiny elements: per-element costs dominate).
MAX_ELEMENTS, MIN_ELEMENTS = 4096, 8
#: A duration below this is not measured (the bandwidth is then at least what it says).
MIN_SECONDS = 1e-3
#: Timed writes of :data:`PROBE_WRITE_BYTES`, their medians taken (one write's bandwidth read
#: 88 MB/s-1.3 GB/s in four plans on the dev VM, its CPU per element as widely).
WRITES = 3

_measured: dict[tuple[str, int], DiskMeasurement] = {}


def probe_directory(directory: "str | Path", element_bytes: float, *, fresh: bool = False) -> DiskMeasurement:
    """The write and read bandwidth of ``directory`` for elements of ``element_bytes``, the CPU per
    element of reading them back, and its free space (measured once per session per directory and
    size to a factor of two; ``fresh`` measures again). Creates ``directory`` if needed."""
    directory = Path(directory).expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    size = max(1, int(element_bytes))
    key = (str(directory.resolve()), int(round(math.log2(size))))
    if not fresh and key in _measured:
        return _measured[key]
    measured = _probe(directory, size)
    _measured[key] = measured
    return measured


def _probe(directory: Path, size: int) -> DiskMeasurement:
    """Write a one-element tier twice (the save's fixed costs: tracing, threads, metadata) and
    an ``n``-element one (:data:`PROBE_WRITE_BYTES`) :data:`WRITES` times: the median less the
    fixed cost is what ``n - 1`` elements cost to write and sync, in wall and process CPU. Then
    read the last one's first :data:`PROBE_BYTES` back, evicted, timing all but the first
    minibatch (opening the tier)."""
    n = max(MIN_ELEMENTS, min(MAX_ELEMENTS, PROBE_WRITE_BYTES // size))
    read_n = max(MIN_ELEMENTS, min(n, PROBE_BYTES // size))
    data = np.random.default_rng(0).integers(0, 256, size=(n, size), dtype=np.uint8)  # incompressible
    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix=".plumbkit-probe-", dir=directory))
    try:
        _write(data[:1], scratch / "warm")  # a first fill in the process traces its functions
        ones = [_write(data[:1], scratch / f"one-{k}") for k in range(2)]
        many = [_write(data, scratch / f"many-{k}") for k in range(WRITES)]
        last = many[-1]  # its first PROBE_BYTES read back
        evicted = evict_from_page_cache(_files(scratch / f"many-{WRITES - 1}")) > 0
        per_record = disk_tier.record_elements(last.reader.element_spec)  # the untimed first minibatch: one record
        batch = max(_read_batch(size, read_n), min(read_n // 8, per_record))
        read = _read_figures(last.reader.take(read_n), batch=batch, per_element=last.bytes / n)
        free = float(shutil.disk_usage(directory).free)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    setup = min(ones, key=lambda w: w.cpu)  # the fixed cost: its least (a neighbour only adds)
    seconds, cpu = statistics.median(w.seconds for w in many), statistics.median(w.cpu for w in many)
    return DiskMeasurement(
        directory=str(directory), element_bytes=float(size),
        write_bandwidth=(many[0].bytes - setup.bytes) / max(seconds - setup.seconds, MIN_SECONDS), **read,
        free_bytes=free, probe_bytes=sum(w.bytes for w in [*ones, *many]),
        probe_seconds=time.perf_counter() - started, evicted=evicted, write_setup_seconds=setup.seconds,
        write_cpu_per_element=max(0.0, cpu - setup.cpu) / max(n - 1, 1))


def read_back(path: "str | Path", probed: DiskMeasurement, *,
              max_bytes: float = TIER_READ_BACK_BYTES) -> DiskMeasurement | None:
    """``probed`` with its read figures measured again on the filled tier at ``path``: its first
    ``max_bytes`` (at most the whole tier) read back once through the tier's reader with the page
    cache evicted, all but the first minibatch (opening the tier) timed. Once: a second read of the
    same stretch comes from what the VM's host kept of the first (an evaluation tier's stretch read
    again read 3.0 GB/s and 15 us of CPU per element, where its plan read the tier at ~29 us; the
    disk-tier section at 0c6389f). None: the tier is too small to time apart from its opening
    (fewer than 16 elements)."""
    path = Path(path)
    files = _files(path)
    tier_bytes = float(sum(os.path.getsize(f) for f in files))
    reader = disk_tier.open_tier(path)
    elements = int((disk_tier.read_meta(path) or {}).get("elements", 0))
    if not elements or not tier_bytes:
        return None
    per_element = tier_bytes / elements
    wanted = min(elements, int(max_bytes // per_element))
    if wanted < 2 * MIN_ELEMENTS:
        return None
    evicted = evict_from_page_cache(files) > 0
    read = _read_figures(reader.take(wanted), batch=_read_batch(per_element, wanted), per_element=per_element)
    return dataclasses.replace(probed, **read, evicted=evicted, read_back_bytes=per_element * wanted)


def _read_batch(per_element: float, elements: int) -> int:
    """Elements per timed minibatch: :data:`PROBE_READ_BATCH_BYTES` of them, at most an eighth of
    the read (so most of it is timed), at least one."""
    return max(1, min(elements // 8, int(PROBE_READ_BATCH_BYTES // max(per_element, 1.0))))


class _Written(NamedTuple):
    bytes: float
    seconds: float  # wall, the sync included
    cpu: float  # the process's CPU seconds meanwhile (the writer threads' included)
    reader: tf.data.Dataset


def _write(data: np.ndarray, path: Path) -> _Written:
    """Bytes written, wall seconds and process CPU to write ``data`` at ``path`` in the tier's
    form (:func:`.disk_tier.write_tier`: a fill's records and shards without its guard) and sync
    it, and the tier's reader of it (:func:`.disk_tier.read_tier`)."""
    ds = tf.data.Dataset.from_tensor_slices(data)
    t0, c0 = time.perf_counter(), time.process_time()
    disk_tier.write_tier(ds, path)
    files = _files(path)
    _sync(files)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return _Written(float(sum(os.path.getsize(f) for f in files)), seconds, cpu,
                    disk_tier.read_tier(path, ds.element_spec))


def _sync(files: list[str]) -> None:
    """fsync every file: a fill is not written until it is on the disk (the tier's guard syncs too)."""
    for name in files:
        fd = os.open(name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _read_figures(reader: tf.data.Dataset, *, batch: int, per_element: float) -> dict[str, float]:
    """A tier's read figures for :class:`DiskMeasurement` (elements of ``per_element`` bytes on
    disk): its bandwidth, and the process CPU and this thread's CPU per element, over all but the
    first minibatch of ``batch`` (whose read opens the tier). This thread's share is what the
    operator pulling from the tier pays; the shards are read on the reader's own threads (27 KB
    elements from a 4.5 GB tier: 2.5-5 us of 17-60 per element here)."""
    it = iter(_batched(reader, batch))
    next(it)
    elements = 0
    w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
    for minibatch in it:
        elements += int(tf.nest.flatten(minibatch)[0].shape[0])  # a tier below a graph edit: a tuple
    wall, cpu, thread = time.perf_counter() - w0, time.process_time() - c0, time.thread_time() - t0
    timed = max(elements, 1)
    return {"read_bandwidth": per_element * elements / max(wall, MIN_SECONDS), "read_cpu_per_element": cpu / timed,
            "read_thread_cpu_per_element": thread / timed}


def _batched(reader: tf.data.Dataset, batch: int) -> tf.data.Dataset:
    """``reader`` in minibatches of ``batch``: ragged where its elements' shapes vary (a tier of
    minibatches ends with a shorter one, and a dense batch of both raises)."""
    static = all(s.shape.is_fully_defined() for s in tf.nest.flatten(reader.element_spec)
                 if isinstance(s, tf.TensorSpec))
    return reader.batch(batch) if static else reader.ragged_batch(batch)


def _files(path: Path) -> list[str]:
    return [str(p) for p in path.rglob("*") if p.is_file()]
