"""After one eviction, does a tier read slower in its first epoch than in the next (page cache)?"""
import sys, time, shutil, tempfile, os
import tensorflow as tf
from plumbkit.tfdata.disk_tier import on_disk, tier_paths
from plumbkit.tfdata.disk_probe import probe_directory, read_back, _files
from plumbkit.tfdata.disk import evict_from_page_cache
gb = float(sys.argv[1])
d = tempfile.mkdtemp(dir="/tmp/exp")
n = int(gb * 1e9 / 27648)
ds = tf.data.Dataset.range(n).map(lambda i: tf.cast(tf.random.stateless_uniform([96, 96, 3], tf.stack([i, tf.constant(0, tf.int64)]), maxval=256, dtype=tf.int32), tf.uint8), num_parallel_calls=2)
probed = probe_directory(d, 27648, fresh=True)
r = on_disk(ds, d); [p] = tier_paths(r)
m = read_back(p, probed)
print(f"{gb} GB tier; read back: {m.read_bandwidth/1e9:.2f} GB/s {m.read_cpu_per_element*1e6:.0f} us/el thread {m.read_thread_cpu_per_element*1e6:.1f}", flush=True)
files = _files(p)
def plan_like():
    return r.map(lambda x: tf.cast(x, tf.float32) / 255.0).batch(32).prefetch(4)
for trial in range(2):
    evict_from_page_cache(files)
    ds2 = plan_like()
    for epoch in range(3):
        w, c = time.perf_counter(), time.process_time()
        k = 0
        for _ in ds2:
            k += 1
        w, c = time.perf_counter() - w, time.process_time() - c
        print(f"  trial {trial} epoch {epoch}: {k/w:.0f} minibatches/s, {c/k*1e3:.2f} ms CPU/minibatch, {c/(k*32)*1e6:.0f} us/el", flush=True)
    # raw tier only
    evict_from_page_cache(files)
    for epoch in range(2):
        w, c = time.perf_counter(), time.process_time()
        k = 0
        for _ in r.batch(32):
            k += 1
        w, c = time.perf_counter() - w, time.process_time() - c
        print(f"  trial {trial} raw epoch {epoch}: {k/w:.0f} minibatches/s, {c/(k*32)*1e6:.0f} us/el", flush=True)
shutil.rmtree(d)
