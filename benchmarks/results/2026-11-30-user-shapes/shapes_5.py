"""User shapes, batch 5 (the Keras tutorial's cache/shuffle/batch/prefetch over arrays, MNIST-like
uint8 and float16 arrays, mixed small and large arrays, numpy_function tuples, a variable counter,
options users set, ragged and sparse elements, group_by_window, snapshot): also checks the first
rows of an epoch (or of 20 batches), as a multiset. Run as shapes_1.py.
"""
import collections
import hashlib
import os
import tempfile

import numpy as np
import tensorflow as tf
from try_shapes import run

D = tempfile.mkdtemp()
RNG = np.random.default_rng(0)
MNIST = (RNG.integers(0, 255, (20000, 28, 28), dtype=np.uint8), RNG.integers(0, 10, 20000))
HALF = RNG.random((4000, 32, 32, 3)).astype("float16")


def keras_tutorial_arrays():
    x, y = MNIST
    return (tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (tf.cast(a, tf.float32) / 255.0, b))
            .cache().shuffle(20000).batch(128).prefetch(tf.data.AUTOTUNE))


def float16_images():
    return tf.data.Dataset.from_tensor_slices(HALF).map(lambda a: tf.image.flip_left_right(a) * 2).batch(32).repeat()


def mixed_arrays():
    small = np.arange(4000, dtype=np.int32)  # 16 kB: stays inline
    return tf.data.Dataset.from_tensor_slices((HALF, small)).map(lambda a, b: (tf.reduce_mean(a), b * 2)).batch(50)


def numpy_function_tuple():
    def f(x):
        return np.float32(x) * 2, np.int64(x % 3)
    ds = tf.data.Dataset.range(5000).map(lambda x: tf.numpy_function(f, [x], [tf.float32, tf.int64]))
    return ds.map(lambda a, b: (tf.ensure_shape(a, []), tf.ensure_shape(b, []))).batch(64).repeat()


def variable_counter():
    seen = tf.Variable(0, dtype=tf.int64)

    def count(x):
        seen.assign_add(1)
        return x + 0 * seen.read_value()
    return tf.data.Dataset.range(20000).map(count).batch(64)


def private_threadpool():
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = 1
    opts.autotune.enabled = False
    ds = tf.data.Dataset.range(20000).map(lambda x: tf.reduce_sum(tf.sin(tf.range(tf.cast(x % 300, tf.float32)))))
    return ds.batch(64).repeat().with_options(opts)


def ragged_slices():
    rt = tf.ragged.constant([[i] * (i % 9) for i in range(3000)], dtype=tf.int64)
    return tf.data.Dataset.from_tensor_slices(rt).map(lambda r: tf.reduce_sum(r)).batch(32).repeat()


def sparse_elements():
    def to_sparse(x):
        return tf.sparse.SparseTensor(indices=[[x % 10]], values=[x], dense_shape=[10])
    return tf.data.Dataset.range(10000).map(to_sparse).batch(32).map(tf.sparse.to_dense).repeat()


def group_by_window():
    ds = tf.data.Dataset.range(20000).map(lambda x: tf.fill([x % 20 + 1], x))
    return ds.group_by_window(key_func=lambda v: tf.cast(tf.size(v) // 5, tf.int64),
                              reduce_func=lambda k, w: w.padded_batch(16), window_size=16).repeat()


def user_snapshot():
    path = os.path.join(D, "snap")
    return tf.data.Dataset.range(5000).map(lambda x: tf.fill([32], x)).snapshot(path).batch(32).repeat()


def rows(ds) -> "collections.Counter":
    """The rows of the first component of every batch, as a multiset of their bytes: one whole
    epoch where the pipeline is finite (a shuffle reorders only within it), else 20 batches."""
    finite = int(ds.cardinality()) >= 0
    out = collections.Counter()
    for e in (ds if finite else ds.take(20)):
        first = np.asarray(tf.nest.flatten(e)[0])
        for row in first.reshape(len(first), -1) if first.ndim else [first]:
            out[hashlib.blake2b(np.ascontiguousarray(row).tobytes(), digest_size=12).digest()] += 1
    return out


def same_rows(make, plan) -> str:
    try:
        alike = rows(make()) == rows(plan.dataset)
    except Exception as e:  # noqa: BLE001
        return f"  <<< compare failed {type(e).__name__}: {str(e)[:120]}"
    return "" if alike else "  <<< ELEMENTS DIFFER"


cases = [keras_tutorial_arrays, float16_images, mixed_arrays, numpy_function_tuple, variable_counter,
         private_threadpool, ragged_slices, sparse_elements, group_by_window, user_snapshot]
if __name__ == "__main__":  # shapes_6.py imports same_rows
    run(cases, same_rows)
