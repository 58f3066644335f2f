"""flip / normalize / box crop calibrated-alone style (cached sample, batch, prefetch), with and
without another process burning one core (its CPU is not this process's)."""
import time, statistics, subprocess, sys, numpy as np, tensorflow as tf
from plumbkit.bench import examples as ex, pipelines as bp
rng = np.random.default_rng(0)
def ds_for(fn, calls=None, n=256):
    imgs = rng.integers(0, 255, size=(n, 96, 96, 3), dtype=np.uint8)
    ds = tf.data.Dataset.from_tensor_slices((imgs, np.arange(n, dtype=np.int64) % 10)).cache().repeat()
    if fn is not None: ds = ds.map(fn, num_parallel_calls=calls)
    if fn is bp.box_crop: ds = ds.map(lambda i, b, l: (i, l))
    return ds.batch(32).prefetch(2)
fns = {"none": None, "normalize": ex.normalize, "flip": ex.random_flip, "box_crop": bp.box_crop}
variants = {}
for name, fn in fns.items():
    variants[(name, 1)] = iter(ds_for(fn))
    if fn is not None: variants[(name, 2)] = iter(ds_for(fn, 2))
for it in variants.values():
    for _ in range(100): next(it)
def measure(rounds=5):
    res = {k: [] for k in variants}
    for r in range(rounds):
        for k, it in variants.items():
            c0, w0, m = time.process_time(), time.perf_counter(), 0
            while time.perf_counter() - w0 < 0.4: next(it); m += 1
            res[k].append((time.process_time() - c0) / m / 32 * 1e6)
    med = {k: statistics.median(v) for k, v in res.items()}
    return {k: v - med[("none", 1)] for k, v in med.items() if k[0] != "none"}
for load in (False, True, False, True):
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load else None
    m = measure()
    if p: p.kill()
    print("load" if load else "idle", "  ".join(f"{k[0]}/{k[1]} {v:.1f}" for k, v in m.items()), "us/elem", flush=True)
