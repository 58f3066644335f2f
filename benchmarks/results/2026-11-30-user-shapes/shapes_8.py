"""User shapes, batch 8 (session 59): a two-input model's zip of images and text into a dict,
next-step targets by zipping a dataset with itself skipped, CSV lines decoded in a map (header
skipped), ``numpy_function(stateful=False)``, the TPU reader's seeded file shuffle and AUTOTUNE
interleave, a prefetch in the middle and a short evaluation ``take``, ``.npy`` files loaded by
index in Python, a RAM budget for autotuning. Checks the rows of a whole epoch as a multiset
(as shapes_7.py). Run as shapes_1.py.
"""
import os
import tempfile

import numpy as np
import tensorflow as tf
from shapes_7 import whole_epoch
from try_shapes import run, write_records

D = tempfile.mkdtemp()
RNG = np.random.default_rng(8)
IMAGES = RNG.integers(0, 255, (2000, 24, 24, 3), dtype=np.uint8)
WORDS = np.array("a b c d e f g h".split())
TEXTS = [" ".join(RNG.choice(WORDS, size=RNG.integers(2, 12))) for _ in range(2000)]


def two_inputs():
    images = tf.data.Dataset.from_tensor_slices(IMAGES).map(lambda x: tf.image.resize(x, [32, 32]) / 255.0)
    texts = tf.data.Dataset.from_tensor_slices(TEXTS).map(lambda s: tf.size(tf.strings.split(s)))
    labels = tf.data.Dataset.range(2000).map(lambda i: i % 2)
    ds = tf.data.Dataset.zip(({"image": images, "text": texts}, labels))
    return ds.map(lambda f, y: ({"image": f["image"], "text": tf.cast(f["text"], tf.float32)}, y)).batch(32)


SERIES = RNG.random(5000).astype("float32")  # drawn once: a draw per call made yours and the plan's differ


def next_step_targets():
    series = tf.data.Dataset.from_tensor_slices(SERIES).map(lambda x: tf.sin(x) * 3)
    return tf.data.Dataset.zip((series, series.skip(1))).batch(50)


def _csv(n=3000):
    path = os.path.join(D, "rows.csv")
    with open(path, "w") as f:
        f.write("a,b,c,label\n")
        for i in range(n):
            f.write(f"{i * 0.5},{i % 7},{(i * 3) % 11},{i % 2}\n")
    return path


CSV = _csv()


def csv_lines_decoded():
    def parse(line):
        a, b, c, label = tf.io.decode_csv(line, record_defaults=[0.0, 0.0, 0.0, 0])
        return tf.stack([a, b, c]), label
    return tf.data.TextLineDataset(CSV).skip(1).map(parse).batch(64)


def numpy_function_stateless():
    def heavy(x):
        return np.float32(np.sum(np.sin(np.arange(int(x) % 400))))
    ds = tf.data.Dataset.range(3000).map(lambda x: tf.numpy_function(heavy, [x], tf.float32, stateful=False))
    return ds.map(lambda v: tf.ensure_shape(v, [])).batch(32)


RECORDS = write_records(D, "train-{f:05d}-of-{n:05d}", 8, 300,
                        lambda f, i: tf.io.serialize_tensor(tf.constant(IMAGES[(f * 300 + i) % 2000])).numpy())


def tpu_reader_seeded():
    files = tf.data.Dataset.from_tensor_slices(RECORDS).shuffle(len(RECORDS), seed=42, reshuffle_each_iteration=True)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=tf.data.AUTOTUNE, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.map(lambda r: tf.io.parse_tensor(r, tf.uint8)).map(lambda x: tf.reduce_mean(tf.cast(x, tf.float32), [0, 1]))
    return ds.batch(32)


def prefetch_middle_eval_take():
    ds = tf.data.Dataset.from_tensor_slices(IMAGES).map(lambda x: tf.image.resize(x, [48, 48])).prefetch(1)
    return ds.map(lambda x: tf.image.flip_left_right(x) / 255.0).batch(32).take(40)


def _npys(n=400):
    for i in range(n):
        np.save(os.path.join(D, f"{i}.npy"), IMAGES[i].astype(np.float32))
    return n


NPYS = _npys()


def npy_by_index():
    def load(i):
        return np.load(os.path.join(D, f"{int(i)}.npy"))
    ds = tf.data.Dataset.range(NPYS).map(lambda i: tf.ensure_shape(tf.numpy_function(load, [i], tf.float32), [24, 24, 3]))
    return ds.batch(16)


def autotune_ram_budget():
    opts = tf.data.Options()
    opts.autotune.ram_budget = 64 * 2**20
    ds = tf.data.Dataset.from_tensor_slices(IMAGES).map(lambda x: tf.image.resize(x, [40, 40]),
                                                        num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(32).prefetch(tf.data.AUTOTUNE).with_options(opts)


cases = [two_inputs, next_step_targets, csv_lines_decoded, numpy_function_stateless, tpu_reader_seeded,
         prefetch_middle_eval_take, npy_by_index, autotune_ram_budget]
run(cases, whole_epoch)
