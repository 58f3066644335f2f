"""After a fill: does the first evicted read's CPU per element depend on how long after the fill it runs? user vs sys."""
import sys, time, shutil, tempfile, os
import tensorflow as tf
from plumbkit.tfdata.disk_tier import on_disk, tier_paths, open_tier
from plumbkit.tfdata.disk_probe import probe_directory, _files, _batched
from plumbkit.tfdata.disk import evict_from_page_cache
gb = 0.34
def read(p, wanted):
    it = iter(_batched(open_tier(p).take(wanted), 128)); next(it)
    t0=os.times(); w0=time.perf_counter(); n=0
    for mb in it: n += int(mb.shape[0])
    t1=os.times(); w=time.perf_counter()-w0
    return (t1.user-t0.user)/n*1e6, (t1.system-t0.system)/n*1e6, n*27648/w/1e9
for trial, wait in enumerate([0, 20, 0, 20]):
    d = tempfile.mkdtemp(dir="/tmp/exp")
    n = int(gb * 1e9 / 27648)
    ds = tf.data.Dataset.range(n).map(lambda i: tf.cast(tf.random.stateless_uniform([96, 96, 3], tf.stack([i, tf.constant(trial, tf.int64)]), maxval=256, dtype=tf.int32), tf.uint8), num_parallel_calls=2)
    r = on_disk(ds, d); 
    for _ in r: pass
    [p] = tier_paths(r)
    files = _files(p)
    wanted = int(256 * 2**20 // 27648)
    time.sleep(wait)
    for k in range(3):
        evict_from_page_cache(files)
        u,s,bw = read(p, wanted)
        print(f"wait {wait} read {k}: user {u:.0f} sys {s:.0f} us/el  {bw:.2f} GB/s", flush=True)
    shutil.rmtree(d)
