"""Does a tier read back right after its fill read slower than the same stretch read later?"""
import time, shutil, tempfile
import tensorflow as tf
from pathlib import Path
from plumbkit.tfdata.disk_tier import on_disk, tier_paths
from plumbkit.tfdata.disk_probe import probe_directory, read_back
for trial in range(2):
    d = tempfile.mkdtemp(dir="/tmp/exp")
    n = int(1.5e9 / 27648)
    ds = tf.data.Dataset.range(n).map(lambda i: tf.cast(tf.random.stateless_uniform([96, 96, 3], tf.stack([i, tf.constant(trial, tf.int64)]), maxval=256, dtype=tf.int32), tf.uint8), num_parallel_calls=2)
    probed = probe_directory(d, 27648, fresh=True)
    t0 = time.perf_counter(); r = on_disk(ds, d); [p] = tier_paths(r); filled = time.perf_counter()
    print(f"trial {trial}: filled 1.5 GB in {filled - t0:.0f} s; probe {probed.read_bandwidth/1e9:.2f} GB/s {probed.read_cpu_per_element*1e6:.0f} us (thread {probed.read_thread_cpu_per_element*1e6:.1f})", flush=True)
    for wait in (0, 10, 30, 60):
        time.sleep(max(0, filled + wait - time.perf_counter()))
        m = read_back(p, probed)
        print(f"  {wait:3d} s after the fill: {m.read_bandwidth/1e9:.2f} GB/s, {m.read_cpu_per_element*1e6:.0f} us/element, thread {m.read_thread_cpu_per_element*1e6:.1f}", flush=True)
    shutil.rmtree(d)
