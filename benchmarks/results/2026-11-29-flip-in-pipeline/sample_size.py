import time, statistics, numpy as np, tensorflow as tf
from plumbkit.bench import examples as ex
rng = np.random.default_rng(0)
def ds_for(n, fn, calls=None):
    imgs = rng.integers(0, 255, size=(n, 96, 96, 3), dtype=np.uint8)
    ds = tf.data.Dataset.from_tensor_slices((imgs, np.zeros(n, np.int64))).cache().repeat()
    if fn is not None: ds = ds.map(fn, num_parallel_calls=calls)
    return ds.batch(32).prefetch(2)
variants = {}
for n in (32, 1024, 4096):
    for name, fn in (("none", None), ("normalize", ex.normalize), ("flip", ex.random_flip)):
        variants[(n, name)] = iter(ds_for(n, fn))
    variants[(n, "flip2")] = iter(ds_for(n, ex.random_flip, 2))
for it in variants.values():
    for _ in range(200): next(it)
res = {k: [] for k in variants}
for r in range(5):
    for k, it in variants.items():
        c0, w0, m = time.process_time(), time.perf_counter(), 0
        while time.perf_counter() - w0 < 0.5: next(it); m += 1
        res[k].append((time.process_time() - c0) / m / 32 * 1e6)
med = {k: statistics.median(v) for k, v in res.items()}
for n in (32, 1024, 4096):
    print(n, "none %.1f" % med[(n,'none')], *("%s %.1f" % (f, med[(n,f)] - med[(n,'none')]) for f in ("normalize","flip","flip2")), "us/elem")
