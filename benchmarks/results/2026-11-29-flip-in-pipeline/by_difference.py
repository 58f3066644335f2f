"""In-pipeline CPU per minibatch of the random-flip plan's operators, by difference: variants
of the plan measured interleaved (process CPU per minibatch, 1 s windows)."""
import time, tempfile, statistics, sys
import tensorflow as tf
from plumbkit.bench import pipelines as bp, examples as ex
d = tempfile.mkdtemp()
paths = bp.image_records(d, files=8, per_file=128)
AUTO = tf.data.AUTOTUNE
def base():
    ds = tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=1)
    return ds.map(ex.parse_example).map(ex.decode_image).map(ex.resize_image).cache()
def make(flip, norm, flip_calls=2, batch=True):
    ds = base()
    if flip: ds = ds.map(ex.random_flip, num_parallel_calls=flip_calls)
    if norm: ds = ds.map(ex.normalize)
    ds = ds.batch(32) if batch else ds.batch(32)
    return ds.repeat().prefetch(6)
variants = {"plan": make(True, True), "no flip": make(False, True), "no norm": make(True, False),
            "neither": make(False, False), "flip 1 call": make(True, True, flip_calls=None)}
its = {}
for k, ds in variants.items():
    it = iter(ds)
    for _ in range(40): next(it)  # fills the cache (1024 images = 32 minibatches)
    its[k] = it
res = {k: [] for k in variants}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
    for k in (list(variants) if r % 2 == 0 else reversed(list(variants))):
        it = its[k]
        for _ in range(20): next(it)
        c0, w0, n = time.process_time(), time.perf_counter(), 0
        while time.perf_counter() - w0 < 1.0:
            next(it); n += 1
        res[k].append((time.process_time() - c0) / n * 1e3)
for k, v in res.items():
    print(f"{k:12s} median {statistics.median(v):.3f} ms/minibatch  range {min(v):.3f}-{max(v):.3f}")
m = {k: statistics.median(v) for k, v in res.items()}
print("flip (2 calls) in-pipeline:", round(m["plan"] - m["no flip"], 3), " flip one call:", round(m["flip 1 call"] - m["no flip"], 3),
      " normalize:", round(m["plan"] - m["no norm"], 3), " rest (batch, loop, prefetch):", round(m["neither"], 3))
