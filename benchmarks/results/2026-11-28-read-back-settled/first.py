"""Right after a fill: is the first evicted read of a tier slower than the next ones? (batch 128)"""
import sys, time, shutil, tempfile
import tensorflow as tf
from plumbkit.tfdata.disk_tier import on_disk, tier_paths, open_tier
from plumbkit.tfdata.disk_probe import probe_directory, _files, _read_figures
from plumbkit.tfdata.disk import evict_from_page_cache
gb = float(sys.argv[1])
for trial in range(2):
    d = tempfile.mkdtemp(dir="/tmp/exp")
    n = int(gb * 1e9 / 27648)
    ds = tf.data.Dataset.range(n).map(lambda i: tf.cast(tf.random.stateless_uniform([96, 96, 3], tf.stack([i, tf.constant(trial, tf.int64)]), maxval=256, dtype=tf.int32), tf.uint8), num_parallel_calls=2)
    probed = probe_directory(d, 27648, fresh=True)
    r = on_disk(ds, d); [p] = tier_paths(r)
    files = _files(p)
    wanted = int(256 * 2**20 // 27648)
    for k in range(4):
        evict_from_page_cache(files)
        f = _read_figures(open_tier(p).take(wanted), batch=128, per_element=27648)
        print(f"trial {trial} read {k}: {f['read_bandwidth']/1e9:.2f} GB/s {f['read_cpu_per_element']*1e6:.0f} us/el thread {f['read_thread_cpu_per_element']*1e6:.1f}", flush=True)
    shutil.rmtree(d)
