import time, statistics, subprocess, sys, tensorflow as tf
from plumbkit.bench.examples import planted_work
from plumbkit.bench import examples as ex
def heavier(x): return planted_work(x, 288)
def medium(x): return planted_work(x, 64)
opts = tf.data.Options(); opts.autotune.enabled = False
opts.experimental_optimization.map_parallelization = False
def ds_for(fn, calls=None):
    ds = tf.data.Dataset.range(10**9)
    if fn is not None: ds = ds.map(fn, num_parallel_calls=calls)
    return ds.batch(16).with_options(opts)
fns = {"none": None, "heavier": heavier, "medium": medium}
variants = {}
for name, fn in fns.items():
    variants[(name, 1)] = iter(ds_for(fn))
    if fn is not None: variants[(name, 2)] = iter(ds_for(fn, 2))
for it in variants.values():
    for _ in range(20): next(it)
def measure(rounds=5):
    res = {k: [] for k in variants}
    for r in range(rounds):
        for k, it in variants.items():
            c0, w0, m = time.process_time(), time.perf_counter(), 0
            while time.perf_counter() - w0 < 0.4: next(it); m += 1
            res[k].append((time.process_time() - c0) / m / 16 * 1e6)
    med = {k: statistics.median(v) for k, v in res.items()}
    return {k: v - med[("none", 1)] for k, v in med.items() if k[0] != "none"}
for load in (False, True, False, True):
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load else None
    m = measure()
    if p: p.kill()
    print("load" if load else "idle", "  ".join(f"{k[0]}/{k[1]} {v:.1f}" for k, v in m.items()), "us/elem", flush=True)
