"""Maps timed alone (CPU per element less the source read alone, 0.4 s windows, five interleaved
rounds), on an idle machine and beside a busy loop in another process (its CPU is not this
process's). ``images``: normalize, flip and box crop over a cached sample of 256 images, batch(32),
prefetch(2). ``matmul``: the tests' planted matmul maps over range(), batch(16), as the two-map
tests run them (sequential options)."""
import subprocess, sys
import numpy as np, tensorflow as tf
from interleaved import cpu_per_element
from plumbkit.bench import examples as ex, pipelines as bp
from plumbkit.bench.examples import planted_work

rng = np.random.default_rng(0)


def images(fn, calls=None, n=256):
    imgs = rng.integers(0, 255, size=(n, 96, 96, 3), dtype=np.uint8)
    ds = tf.data.Dataset.from_tensor_slices((imgs, np.arange(n, dtype=np.int64) % 10)).cache().repeat()
    if fn is not None:
        ds = ds.map(fn, num_parallel_calls=calls)
    if fn is bp.box_crop:
        ds = ds.map(lambda i, b, l: (i, l))
    return ds.batch(32).prefetch(2)


def matmul(fn, calls=None):
    opts = tf.data.Options()
    opts.autotune.enabled = False
    opts.experimental_optimization.map_parallelization = False
    ds = tf.data.Dataset.range(10**9)
    if fn is not None:
        ds = ds.map(fn, num_parallel_calls=calls)
    return ds.batch(16).with_options(opts)


SETS = {"images": (images, 32, {"normalize": ex.normalize, "flip": ex.random_flip, "box_crop": bp.box_crop}),
        "matmul": (matmul, 16, {"heavier": lambda x: planted_work(x, 288), "medium": lambda x: planted_work(x, 64)})}
build, per_next, fns = SETS[sys.argv[1] if len(sys.argv) > 1 else "images"]
variants = {("none", 1): iter(build(None))}
for name, fn in fns.items():
    variants[(name, 1)] = iter(build(fn))
    variants[(name, 2)] = iter(build(fn, 2))
for it in variants.values():
    for _ in range(20):
        next(it)


def measure():
    med = cpu_per_element(variants, per_next, window=0.4)
    return {k: v - med[("none", 1)] for k, v in med.items() if k[0] != "none"}


for load in (False, True, False, True):
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load else None
    m = measure()
    if loop:
        loop.kill()
    print("load" if load else "idle", "  ".join(f"{k[0]}/{k[1]} {v:.1f}" for k, v in m.items()), "us/elem", flush=True)
