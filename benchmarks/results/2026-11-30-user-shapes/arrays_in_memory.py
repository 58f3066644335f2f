"""``from_tensor_slices`` of an in-memory array (N rows of 32x32x3 float32; 10,000 = 123 MB):
build, trace and optimize times and the process's peak memory.

Run from a checkout: ``python benchmarks/results/2026-11-30-user-shapes/arrays_in_memory.py 10000``.
"""
import time, sys, numpy as np, tensorflow as tf, plumbkit, resource
from plumbkit.engine.compare import BRIEF
n = int(sys.argv[1])
x = np.random.default_rng(1).random((n, 32, 32, 3)).astype("float32")
y = np.arange(n) % 10
print(f"array {x.nbytes/1e6:.0f} MB", flush=True)
def make():
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000, seed=1)
    return ds.map(lambda a, b: (tf.image.random_flip_left_right(a), b)).batch(64).repeat()
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
t0 = time.time(); make(); print(f"build {time.time()-t0:.1f}s maxrss {rss():.0f} MB", flush=True)
t0 = time.time(); t = plumbkit.trace(make, seconds=1.5); print(f"trace {time.time()-t0:.1f}s thr {t.throughput:.0f} maxrss {rss():.0f} MB", flush=True)
def prog(*a, **k): print("   progress", a[:2], f"{time.time()-t0:.1f}s", flush=True)
t0 = time.time(); p = plumbkit.optimize(make, seconds=1.5, protocol=BRIEF, on_progress=prog)
print(f"optimize {time.time()-t0:.1f}s maxrss {rss():.0f} MB", str(p).splitlines()[0][:200], flush=True)
