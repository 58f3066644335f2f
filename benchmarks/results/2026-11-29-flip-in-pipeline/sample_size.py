"""Maps alone over cached samples of 32, 1,024 and 4,096 images (does the sample's size move a
map's CPU per element?), batch(32), prefetch(2), 0.5 s windows, five rounds."""
import numpy as np, tensorflow as tf
from interleaved import cpu_per_element
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
med = cpu_per_element(variants, 32, window=0.5)
for n in (32, 1024, 4096):
    print(n, "none %.1f" % med[(n,'none')], *("%s %.1f" % (f, med[(n,f)] - med[(n,'none')]) for f in ("normalize","flip","flip2")), "us/elem")
