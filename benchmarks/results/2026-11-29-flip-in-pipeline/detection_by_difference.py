"""The detection plan's box crop, inside the plan, by difference: the plan's steady state (a filled
cache after decode, box_crop with 3 calls, filter, padded_batch(16), repeat, prefetch(6)) against
the same with the box crop replaced by a fixed crop of the same output (a slice and a resize to
96x96, the same boxes), interleaved rounds of 1 s, process CPU per minibatch."""
import statistics, sys, tempfile, time
import tensorflow as tf
from plumbkit.bench import examples as ex, pipelines as bp

paths = bp.image_records(tempfile.mkdtemp(), files=8, per_file=128)


def fixed_crop(image, label):
    box = tf.stack([0.1, 0.1, 0.2 + 0.05 * tf.cast(label, tf.float32), 0.6])
    crop = image[:64, :64]
    boxes = tf.reshape(box, [1, 4]) * tf.cast(label % 3 != 0, tf.float32)
    return tf.image.resize(crop, [96, 96]), boxes, label


def make(crop, calls):
    ds = tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=1)
    ds = ds.map(ex.parse_example).map(ex.decode_image).cache()
    ds = ds.map(crop, num_parallel_calls=calls).filter(bp.has_boxes)
    return ds.padded_batch(16, padded_shapes=([96, 96, 3], [None, 4], [])).repeat().prefetch(6)


variants = {"plan": make(bp.box_crop, 3), "box crop 1 call": make(bp.box_crop, None),
            "fixed crop, 3 calls": make(fixed_crop, 3), "fixed crop, 1 call": make(fixed_crop, None)}
its = {}
for k, ds in variants.items():
    it = iter(ds)
    for _ in range(80):  # fills the cache (1,024 images, ~43 minibatches)
        next(it)
    its[k] = it
res = {k: [] for k in variants}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
    for k in (list(variants) if r % 2 == 0 else reversed(list(variants))):
        it = its[k]
        for _ in range(20):
            next(it)
        c0, w0, n = time.process_time(), time.perf_counter(), 0
        while time.perf_counter() - w0 < 1.0:
            next(it)
            n += 1
        res[k].append((time.process_time() - c0) / n * 1e3)
for k, v in res.items():
    print(f"{k:22s} median {statistics.median(v):.3f} ms/minibatch  range {min(v):.3f}-{max(v):.3f}")
m = {k: statistics.median(v) for k, v in res.items()}
print("box crop over the fixed crop, 3 calls:", round(m["plan"] - m["fixed crop, 3 calls"], 3),
      " 1 call:", round(m["box crop 1 call"] - m["fixed crop, 1 call"], 3), "ms per minibatch")
