"""Does a stretch of a large tier, read evicted, read at the rate the whole tier reads?"""
import os, time, sys, shutil
import numpy as np, tensorflow as tf
from pathlib import Path
from plumbkit.tfdata import disk_tier
from plumbkit.tfdata.disk import evict_from_page_cache
GB = float(sys.argv[1]) if len(sys.argv) > 1 else 4.5
path = Path("/tmp/exp/tier")
shutil.rmtree(path, ignore_errors=True)
n = int(GB * 1e9 / 27648)
ds = tf.data.Dataset.range(n).map(lambda i: tf.cast(tf.random.stateless_uniform([96, 96, 3], [i, 0], maxval=256, dtype=tf.int32), tf.uint8), num_parallel_calls=2)
t0 = time.perf_counter(); disk_tier.write_tier(ds, path); print(f"wrote {n} elements in {time.perf_counter()-t0:.1f}s", flush=True)
files = sorted(str(p) for p in path.rglob("*") if p.is_file() and p.stat().st_size > 1e6)
total = sum(os.path.getsize(f) for f in files)
print(len(files), "files", total/1e9, "GB", flush=True)
def stretches(k, size):
    evict_from_page_cache(files)
    t0 = time.perf_counter(); got = 0
    for f in files:
        fsz = os.path.getsize(f)
        fd = os.open(f, os.O_RDONLY)
        try:
            for j in range(k):
                off = int((j + 0.5) * fsz / k) - size // 2
                off = max(0, off)
                left = size
                while left > 0:
                    b = os.pread(fd, min(1 << 20, left), off + size - left)
                    if not b: break
                    got += len(b); left -= len(b)
        finally:
            os.close(fd)
    s = time.perf_counter() - t0
    return got / s / 1e9, got / 1e6
def tier_read(limit_elements=None):
    evict_from_page_cache(files)
    r = disk_tier.read_tier(path, tf.TensorSpec([96, 96, 3], tf.uint8)).batch(32)
    t0 = time.perf_counter(); c0 = time.process_time(); k = 0
    for b in r:
        k += 1
    s = time.perf_counter() - t0
    return k / s, (time.process_time() - c0) / (k * 32) * 1e6, k * 32 * 27648 / s / 1e9
for rep in range(2):
    for k, size in ((1, 8 << 20), (8, 8 << 20), (16, 16 << 20), (32, 32 << 20)):
        bw, mb = stretches(k, size)
        print(f"stretches {k}x{size>>20}MB per file: {mb:.0f} MB at {bw:.2f} GB/s", flush=True)
    bw, mb = stretches(1, 10**12)
    print(f"whole files raw: {mb:.0f} MB at {bw:.2f} GB/s", flush=True)
    mbps, cpu, gbs = tier_read()
    print(f"tier reader: {mbps:.0f} minibatches/s, {cpu:.1f} us CPU/element, {gbs:.2f} GB/s", flush=True)
