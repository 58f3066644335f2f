"""In-pipeline CPU per minibatch of the random-flip plan's operators, by difference: variants
of the plan's steady state (a filled cache after resize) measured in interleaved rounds of 1 s,
process CPU per minibatch. ``python by_difference.py [rounds] [plan|binding]``: ``plan`` leaves
one map out at a time; ``binding`` leaves the normalize out, so that the flip is the slowest
stage, and times the flip with one call and with two."""
import sys, tempfile
import tensorflow as tf
from interleaved import cpu_per_minibatch
from plumbkit.bench import pipelines as bp, examples as ex

paths = bp.image_records(tempfile.mkdtemp(), files=8, per_file=128)


def make(flip, norm, flip_calls=2):
    ds = tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=1)
    ds = ds.map(ex.parse_example).map(ex.decode_image).map(ex.resize_image).cache()
    if flip:
        ds = ds.map(ex.random_flip, num_parallel_calls=flip_calls)
    if norm:
        ds = ds.map(ex.normalize)
    return ds.batch(32).repeat().prefetch(6)


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
mode = sys.argv[2] if len(sys.argv) > 2 else "plan"
if mode == "plan":
    variants = {"plan": make(True, True), "no flip": make(False, True), "no norm": make(True, False),
                "neither": make(False, False), "flip 1 call": make(True, True, flip_calls=None)}
else:
    variants = {"flip 2 calls": make(True, False), "flip 1 call": make(True, False, flip_calls=None),
                "no flip": make(False, False)}
m = cpu_per_minibatch(variants, rounds, fill=40)
if mode == "plan":
    print("flip (2 calls) in-pipeline:", round(m["plan"] - m["no flip"], 3), " flip one call:",
          round(m["flip 1 call"] - m["no flip"], 3), " normalize:", round(m["plan"] - m["no norm"], 3),
          " rest (batch, loop, prefetch):", round(m["neither"], 3))
else:
    print("flip: 2 calls", round(m["flip 2 calls"] - m["no flip"], 3), " 1 call", round(m["flip 1 call"] - m["no flip"], 3))
