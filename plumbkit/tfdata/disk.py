"""Disk: read bandwidth as a function of read parallelism (Plumber §4.3, "Disk").

Reads the pipeline's own source files with its own reader at several parallelisms, in this
process, and fits a piecewise-linear curve ``BW(p)``; the optimizer adds ``X <= BW(p) / D``
(``D`` = bytes read per minibatch) to the LP. TensorFlow edge.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

_READERS = {"tfrecord": tf.data.TFRecordDataset, "text_line": tf.data.TextLineDataset}
#: The kinds whose files :func:`measure_read_bandwidth` can read (fixed-length records: see
#: :func:`_fixed_length_chunk`).
READABLE_KINDS = frozenset({*_READERS, "fixed_length_record"})
#: Fixed-length files are read in chunks of at most this many bytes, at least the smaller:
#: below it the reader's per-element cost, not the disk, would be measured.
_CHUNK_BYTES = (4096, 1 << 18)


@dataclass(frozen=True)
class BandwidthCurve:
    """Measured (parallelism, bytes/s) points and the piecewise-linear fit through them."""

    points: tuple[tuple[int, float], ...]

    def __call__(self, parallelism: float) -> float:
        ps, bws = zip(*self.points)
        return float(np.interp(parallelism, ps, bws))  # flat beyond the last point

    @property
    def peak(self) -> float:
        return max(bw for _, bw in self.points)


#: The first bytes of a GZIP file (RFC 1952): TFRecord and text readers need to be told.
_GZIP_MAGIC = b"\x1f\x8b"


def compression_of(path: str, kind: str) -> str:
    """The ``compression_type`` ``kind``'s reader needs for ``path``: "GZIP" for a GZIP file,
    "ZLIB" for a TFRecord file that reads only so, else "". The pipeline's own setting sits
    inside the reader's function (``num_parallel_reads``), so the file itself is asked."""
    try:
        with open(path, "rb") as f:
            if f.read(2) == _GZIP_MAGIC:
                return "GZIP"
    except OSError:
        return ""
    if kind == "tfrecord":
        for compression in ("", "ZLIB"):
            try:
                next(iter(tf.data.TFRecordDataset(path, compression_type=compression).take(1)), None)
                return compression
            except tf.errors.OpError:
                continue
    return ""


def measure_read_bandwidth(files: list[str], kind: str, *, parallelisms=(1, 2, 4),
                           seconds: float = 0.5) -> BandwidthCurve | None:
    """Bytes per second read from ``files`` by ``kind``'s reader at each parallelism (None: no
    reader, or the files do not read as ``kind``: the disk is then left out of the plan, not
    guessed)."""
    if not files or kind not in READABLE_KINDS:
        return None
    compression = compression_of(files[0], kind)
    if kind == "fixed_length_record":
        chunk = _fixed_length_chunk(files) if not compression else None
        if chunk is None:
            return None

        def reader(path):
            return tf.data.FixedLengthRecordDataset(path, record_bytes=chunk)
    else:
        def reader(path):
            return _READERS[kind](path, compression_type=compression)
    try:
        return _curve(files, reader, parallelisms, seconds)
    except tf.errors.OpError:
        return None


def _fixed_length_chunk(files: list[str]) -> int | None:
    """A record size every file divides into (the largest within :data:`_CHUNK_BYTES`), or None.
    The pipeline's own record, header and footer sizes are captured inside the reader's function
    (``flat_map`` over the files), where the graph does not say which number is which; the disk
    reads the same bytes whatever their framing, so any size that divides the files reads them."""
    try:
        common = 0
        for path in files:
            common = math.gcd(common, os.path.getsize(path))
    except OSError:
        return None
    low, high = _CHUNK_BYTES
    divisors = (d for i in range(1, math.isqrt(common) + 1) if common % i == 0 for d in (i, common // i))
    best = max((d for d in divisors if d <= high), default=0)
    return best if best >= low else None


def _curve(files: list[str], reader, parallelisms, seconds: float) -> BandwidthCurve:
    """One (parallelism, bytes/s) point per parallelism, each read for ``seconds``."""
    points = []
    for p in parallelisms:
        ds = (tf.data.Dataset.from_tensor_slices(files).repeat()
              .interleave(reader, cycle_length=p, num_parallel_calls=p, deterministic=False)
              .map(tf.strings.length).batch(256))
        total, it = 0, iter(ds)
        next(it)  # open files, start threads
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            total += int(tf.reduce_sum(next(it)))
        points.append((p, total / (time.perf_counter() - t0)))
    return BandwidthCurve(points=tuple(points))


def evict_from_page_cache(files: list[str]) -> int:
    """Ask the kernel to drop ``files`` from the page cache, so the next read comes from the disk
    (``posix_fadvise(POSIX_FADV_DONTNEED)`` after an ``fsync``: dirty pages are not dropped).
    Returns the bytes covered; files that cannot be opened are skipped."""
    import os
    total = 0
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += os.fstat(fd).st_size
        except OSError:
            pass
        finally:
            os.close(fd)
    return total
