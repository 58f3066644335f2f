"""User shapes, batch 7 (session 59): images loaded with PIL in a py_function, a dict generator
padded with padding values, an infinite generator cut by take, one large tensor repeated, a
pipeline-wide ``deterministic = False``, and two notebook leftovers that change tf.data for the
whole process (``tf.data.experimental.enable_debug_mode()``, inter-op threads set to 1: each run
alone, ``python shapes_7.py debug_mode`` / ``inter_op_one``). Checks the rows of a whole epoch as
a multiset. Run as shapes_1.py.
"""
import collections
import hashlib
import os
import sys
import tempfile

import numpy as np

if "inter_op_one" in sys.argv[1:]:
    import tensorflow as tf
    tf.config.threading.set_inter_op_parallelism_threads(1)  # before anything runs
    tf.config.threading.set_intra_op_parallelism_threads(1)
import tensorflow as tf  # noqa: E402
from PIL import Image  # noqa: E402
from try_shapes import run  # noqa: E402

D = tempfile.mkdtemp()
RNG = np.random.default_rng(7)


def _pngs(n=300):
    out = []
    for i in range(n):
        path = os.path.join(D, f"{i}.png")
        Image.fromarray(RNG.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(path)
        out.append(path)
    return out


PNGS = _pngs()


def pil_loader():
    def load(path):
        with Image.open(path.numpy().decode()) as im:
            return np.asarray(im.resize((48, 48)), dtype=np.float32) / 255.0

    def wrapped(path):
        image = tf.py_function(load, [path], tf.float32)
        return tf.ensure_shape(image, [48, 48, 3])
    return tf.data.Dataset.from_tensor_slices(PNGS).map(wrapped).batch(16)


def dict_generator_padded():
    def rows():
        for i in range(3000):
            yield {"ids": np.arange(i % 17, dtype=np.int32), "label": np.int32(i % 2)}
    sig = {"ids": tf.TensorSpec([None], tf.int32), "label": tf.TensorSpec([], tf.int32)}
    ds = tf.data.Dataset.from_generator(rows, output_signature=sig)
    ds = ds.map(lambda d: {"ids": d["ids"] * 2 + 1, "label": d["label"]})
    return ds.padded_batch(32, padding_values={"ids": -1, "label": 0})


def infinite_generator_taken():
    def forever():
        i = 0
        while True:
            yield np.full([8], i, np.float32)
            i += 1
    ds = tf.data.Dataset.from_generator(forever, output_signature=tf.TensorSpec([8], tf.float32))
    return ds.take(4000).map(lambda x: tf.sin(x) * 2).batch(40)


BIG = RNG.random((512, 512)).astype("float32")  # drawn once: a draw per call made yours and the plan's differ


def large_tensor_repeated():
    big = tf.constant(BIG)
    return tf.data.Dataset.from_tensors(big).repeat(200).map(lambda m: tf.reduce_mean(tf.matmul(m, m), axis=0))


def pipeline_not_deterministic():
    opts = tf.data.Options()
    opts.deterministic = False
    ds = tf.data.Dataset.range(6000).map(lambda x: tf.reduce_sum(tf.sin(tf.cast(tf.range(x % 300), tf.float32))))
    return ds.batch(32).with_options(opts)


def debug_mode():
    tf.data.experimental.enable_debug_mode()  # a notebook's leftover: every map runs eagerly, in order
    ds = tf.data.Dataset.range(3000).map(lambda x: tf.reduce_sum(tf.sin(tf.cast(tf.range(x % 300), tf.float32))))
    return ds.batch(32)


def inter_op_one():
    ds = tf.data.Dataset.range(6000).map(lambda x: tf.reduce_sum(tf.sin(tf.cast(tf.range(x % 300), tf.float32))))
    return ds.batch(32)


def whole_epoch(make, plan) -> str:
    def rows(ds):
        out = collections.Counter()
        for e in ds:
            first = np.asarray(tf.nest.flatten(e)[0])
            for row in first.reshape(len(first), -1) if first.ndim else [first]:
                out[hashlib.blake2b(np.ascontiguousarray(row).tobytes(), digest_size=12).digest()] += 1
        return out
    try:
        return "" if rows(make()) == rows(plan.dataset) else "  <<< ELEMENTS DIFFER"
    except Exception as e:  # noqa: BLE001
        return f"  <<< compare failed {type(e).__name__}: {str(e)[:160]}"


alone = {"debug_mode", "inter_op_one"}
cases = [pil_loader, dict_generator_padded, infinite_generator_taken, large_tensor_repeated, pipeline_not_deterministic,
         debug_mode, inter_op_one]
if __name__ == "__main__":  # shapes_8.py imports whole_epoch
    run([c for c in cases if c.__name__ not in alone or c.__name__ in sys.argv[1:]], whole_epoch)
