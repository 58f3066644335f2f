"""The detection plan's box crop, inside the plan, by difference: the plan's steady state (a filled
cache after decode, box_crop with 3 calls, filter, padded_batch(16), repeat, prefetch(6)) against
the same with the box crop replaced by a fixed crop of the same output (a slice and a resize to
96x96, the same boxes), interleaved rounds of 1 s, process CPU per minibatch."""
import sys, tempfile
import tensorflow as tf
from interleaved import cpu_per_minibatch
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
m = cpu_per_minibatch(variants, (int(sys.argv[1]) if len(sys.argv) > 1 else 8), fill=80)
print("box crop over the fixed crop, 3 calls:", round(m["plan"] - m["fixed crop, 3 calls"], 3),
      " 1 call:", round(m["box crop 1 call"] - m["fixed crop, 1 call"], 3), "ms per minibatch")
