import os, time
import tensorflow as tf
from pathlib import Path
from plumbkit.tfdata import disk_tier
from plumbkit.tfdata.disk import evict_from_page_cache
from plumbkit.tfdata.disk_probe import probe_directory
path = Path("/tmp/exp/tier")
files = sorted(str(p) for p in path.rglob("*") if p.is_file())
def take(mb):
    evict_from_page_cache(files)
    n = int(mb * 1e6 / 27648) // 32
    r = disk_tier.read_tier(path, tf.TensorSpec([96, 96, 3], tf.uint8)).batch(32).take(n + 1)
    it = iter(r); next(it)
    t0 = time.perf_counter(); c0 = time.process_time(); k = 0
    for b in it: k += 1
    s = time.perf_counter() - t0
    return k / s, (time.process_time() - c0) / (k * 32) * 1e6, k * 32 * 27648 / s / 1e9
for rep in range(2):
    m = probe_directory("/tmp/exp/probe", 27648, fresh=True)
    print(f"probe: read {m.read_bandwidth/1e9:.2f} GB/s, {m.read_cpu_per_element*1e6:.1f} us/element ({m.probe_seconds:.1f}s)", flush=True)
    for mb in (32, 128, 512, 4500):
        mbps, cpu, gbs = take(mb)
        print(f"tier first {mb} MB: {mbps:.0f} minibatches/s, {cpu:.1f} us CPU/element, {gbs:.2f} GB/s", flush=True)
