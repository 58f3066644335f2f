"""What a "cold" read of a disk tier reads on this machine: the guest's page cache evicted, is the
data served by the disk, or by a cache below the guest? (issue 26: the tier's slow stretch, and
why a disk-bound prediction is not verified).

Three measurements, each after ``posix_fadvise(DONTNEED)`` (the guest's page cache checked empty
with ``fincore`` where it is installed):

1. files written just now (the probe's situation: it writes a few MB and reads them back), of
   ``--fresh-mb`` sizes;
2. a large file written long ago (``--old``: a file nobody wrote this session), the disk as a
   dataset that has sat on it reads;
3. a disk tier written by plumbkit's fill (``on_disk``) of ``--tier-gb`` of 27 KB elements (96 x
   96 x 3 uint8, the bench's resized images), read back in passes of minibatches of 32, per 0.5 s:
   minibatches/s, the process's user and system CPU per minibatch, and the bytes it read from the
   block device (``/proc/self/io``).

Run it alone (it writes ``--tier-gb`` GB and removes it):

    python benchmarks/cold_reads.py --old /path/to/an/old/large/file
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHUNK = 8 << 20
ELEMENT = (96, 96, 3)


def evict(paths: list[str]) -> str:
    """Drop ``paths`` from the guest's page cache; say how much of them it still holds."""
    from plumbkit.tfdata.disk import evict_from_page_cache
    evict_from_page_cache(paths)
    if shutil.which("fincore") is None:
        return "guest page cache: not checked (no fincore)"
    out = subprocess.run(["fincore", "-b", "-n", "-o", "RES", *paths], capture_output=True, text=True).stdout
    return f"guest page cache holds {sum(int(x) for x in out.split()) / 1e6:,.0f} MB"


def read_file(path: str, step: float = 0.25) -> str:
    """Read ``path`` in 8 MB chunks: MB/s over all and per ``step``, system CPU per MB."""
    buf = bytearray(CHUNK)
    rows, total, since = [], 0, 0
    began = last = time.perf_counter()
    cpu = os.times()
    fd = os.open(path, os.O_RDONLY)
    try:
        while n := os.readv(fd, [buf]):
            total += n
            now = time.perf_counter()
            if now - last >= step:
                rows.append(f"{(total - since) / 1e6 / (now - last):,.0f}")
                last, since = now, total
    finally:
        os.close(fd)
    seconds, spent = time.perf_counter() - began, os.times()
    return (f"{total / 1e6:,.0f} MB at {total / 1e6 / seconds:,.0f} MB/s, system CPU "
            f"{1e3 * (spent.system - cpu.system) / (total / 1e6):.2f} ms/MB; per {step} s: {' '.join(rows) or '-'}")


def fresh_file(directory: Path, megabytes: int) -> str:
    """A file of ``megabytes`` incompressible MB, written and synced just now."""
    path, data = directory / f"fresh-{megabytes}", os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for _ in range(max(1, megabytes * (1 << 20) // CHUNK)):
            os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return str(path)


def device_bytes_read() -> int:
    """Bytes this process has read from the block device (page cache hits not counted)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes"))


def tier_passes(directory: Path, gigabytes: float, passes: int) -> None:
    """Fill a tier through plumbkit, evict it, read it back ``passes`` times."""
    import tensorflow as tf
    from plumbkit.tfdata.disk_tier import on_disk

    n = int(gigabytes * 1e9 / (ELEMENT[0] * ELEMENT[1] * ELEMENT[2]))

    def image(i):
        return tf.cast(tf.random.stateless_uniform(ELEMENT, seed=tf.stack([i, 7]), maxval=256, dtype=tf.int32),
                       tf.uint8)

    began = time.perf_counter()
    tier = on_disk(tf.data.Dataset.range(n).map(image, num_parallel_calls=2), directory)
    files = [str(f) for f in directory.rglob("*") if f.is_file()]
    size = sum(os.path.getsize(f) for f in files)
    print(f"tier: {n:,} elements, {size / 1e9:.2f} GB, filled in {time.perf_counter() - began:.1f} s; {evict(files)}")
    reader = tier.batch(32).prefetch(2)
    for p in range(passes):
        rows, count, since = [], 0, 0
        began = last = time.perf_counter()
        cpu, disk = os.times(), device_bytes_read()
        it = iter(reader)
        for _ in it:
            count += 1
            now = time.perf_counter()
            if now - last >= 0.5:
                spent, read, k = os.times(), device_bytes_read(), count - since
                rows.append(f"{now - began:4.1f} s: {k / (now - last):6,.0f} minibatches/s, user "
                            f"{1e3 * (spent.user - cpu.user) / k:.2f} + system {1e3 * (spent.system - cpu.system) / k:.2f}"
                            f" ms/minibatch, device {(read - disk) / 1e6 / (now - last):5,.0f} MB/s")
                last, since, cpu, disk = now, count, spent, read
        seconds = time.perf_counter() - began  # before the iterator is dropped (its destructor can wait)
        del it
        print(f"pass {p}: {count:,} minibatches in {seconds:.1f} s ({count / seconds:,.0f}/s)")
        for row in rows:
            print("   ", row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary folder)")
    parser.add_argument("--fresh-mb", default="64,1600", help="sizes of the files written just now, MB")
    parser.add_argument("--old", action="append", default=[], help="a large file written long ago (repeatable)")
    parser.add_argument("--tier-gb", type=float, default=2.0)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cold-reads-", dir=args.dir))
    try:
        for megabytes in (int(x) for x in args.fresh_mb.split(",") if x):
            path = fresh_file(root, megabytes)
            print(f"written just now, {megabytes} MB ({evict([path])}): {read_file(path)}")
            os.remove(path)
        for path in args.old:
            print(f"written long ago, {path} ({evict([path])}): {read_file(path)}")
        if args.tier_gb > 0:
            tier_passes(root / "tier", args.tier_gb, args.passes)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
