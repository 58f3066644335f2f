"""User shapes, batch 1 (scan, sampling, bucketing, ragged, windows, Keras layers, tables,
rejection sampling, py_function, short evaluation, reshuffling): each optimized under the brief
protocol; prints the verdict and changes, or the exception and its plumbkit frames.

Run from a checkout: ``python benchmarks/results/2026-11-30-user-shapes/shapes_1.py [name ...]``.
"""
import numpy as np
import tensorflow as tf
from try_shapes import run

def sample_from():
    a = tf.data.Dataset.range(10000).map(lambda x: tf.cast(x, tf.float32) * 2.0)
    b = tf.data.Dataset.range(10000).map(lambda x: tf.cast(x, tf.float32) + 0.5)
    return tf.data.Dataset.sample_from_datasets([a, b], weights=[0.7, 0.3], seed=1).batch(64).repeat()

def choose_from():
    a = tf.data.Dataset.range(10000).map(lambda x: tf.sqrt(tf.cast(x, tf.float32)))
    b = tf.data.Dataset.range(10000).map(lambda x: tf.cast(x, tf.float32))
    idx = tf.data.Dataset.range(2).repeat(5000)
    return tf.data.Dataset.choose_from_datasets([a, b], idx).batch(32).repeat()

def bucket():
    def gen():
        rng = np.random.default_rng(0)
        for i in range(4000):
            yield rng.integers(1, 100, size=rng.integers(5, 60)).astype(np.int64)
    ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([None], tf.int64))
    return ds.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [10, 20, 40], [32, 32, 32, 32]).repeat()

def ragged():
    ds = tf.data.Dataset.range(20000).map(lambda x: tf.range(x % 17))
    return ds.ragged_batch(32).repeat()

def unbatch_window():
    ds = tf.data.Dataset.range(100000).batch(10).map(lambda x: x * 2).unbatch()
    return ds.window(8, shift=4, drop_remainder=True).flat_map(lambda w: w.batch(8)).batch(16).repeat()

def scan_enum():
    ds = tf.data.Dataset.range(50000).enumerate()
    ds = ds.scan(tf.constant(0, tf.int64), lambda s, e: (s + e[1], s + e[1]))
    return ds.map(lambda x: tf.cast(x, tf.float32) / 3.0).batch(128).repeat()

def text_vectorization():
    lines = [f"the quick brown fox {i} jumps over the lazy dog {i % 13}" for i in range(3000)]
    layer = tf.keras.layers.TextVectorization(max_tokens=2000, output_sequence_length=16)
    layer.adapt(lines)
    ds = tf.data.Dataset.from_tensor_slices(lines)
    return ds.batch(32).map(layer).repeat()

def static_lookup():
    keys = tf.constant([f"w{i}" for i in range(500)])
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, tf.range(500, dtype=tf.int64)), -1)
    ds = tf.data.Dataset.range(30000).map(lambda x: tf.strings.join(["w", tf.strings.as_string(x % 600)]))
    return ds.map(lambda s: table.lookup(s)).batch(64).repeat()

def rejection():
    ds = tf.data.Dataset.range(50000).map(lambda x: (x, tf.cast(x % 3, tf.int32)))
    ds = ds.rejection_resample(lambda x, c: c, target_dist=[0.33, 0.33, 0.34], initial_dist=[0.33, 0.33, 0.34], seed=1)
    return ds.map(lambda c, xc: xc[0]).batch(32).repeat()

def pyfunc_numpy():
    def aug(x):
        return np.fliplr(x.numpy()).copy()
    ds = tf.data.Dataset.range(2000).map(lambda i: tf.fill([32, 32], tf.cast(i, tf.float32)))
    ds = ds.map(lambda x: tf.py_function(aug, [x], tf.float32))
    return ds.batch(16).repeat()

def zipped_short_eval():
    x = tf.data.Dataset.range(640).map(lambda i: tf.cast(i, tf.float32) * tf.ones([64]))
    y = tf.data.Dataset.range(640)
    return tf.data.Dataset.zip((x, y)).batch(64)  # a finite, short evaluation epoch

def shuffle_reshuffle():
    return (tf.data.Dataset.range(20000).shuffle(20000, reshuffle_each_iteration=True)
            .map(lambda x: tf.math.bincount(tf.cast(tf.range(x % 50), tf.int32), minlength=64)).batch(32).repeat())

cases = [sample_from, choose_from, bucket, ragged, unbatch_window, scan_enum, text_vectorization,
         static_lookup, rejection, pyfunc_numpy, zipped_short_eval, shuffle_reshuffle]
run(cases)
