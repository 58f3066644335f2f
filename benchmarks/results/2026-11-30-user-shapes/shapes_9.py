"""User shapes, batch 9 (session 60): keras-io's structured data with a ``FeatureSpace`` mapped
over batches, several generators interleaved (one per shard, as people parallelize Python
readers), ``unique``, ``bucket_by_sequence_length``, ``take_while``, two sources concatenated,
a vectorized parse after the batch (``parse_example`` of a batch of records), ``sparse_batch``,
SparseTensor elements batched,
``batch(num_parallel_calls=AUTOTUNE, drop_remainder=True)`` and a map returning a ragged tensor
batched with ``ragged_batch``. Checks the rows of a whole epoch as a multiset (as shapes_7.py).
Run as shapes_1.py.
"""
import tempfile

import numpy as np
import tensorflow as tf
from shapes_7 import whole_epoch
from try_shapes import run, write_records

D = tempfile.mkdtemp()
RNG = np.random.default_rng(9)
N = 3000
AGE = RNG.integers(18, 90, N).astype("float32")
CITY = RNG.choice(np.array(["paris", "lyon", "nice", "lille"]), N)
LABEL = RNG.integers(0, 2, N)


def _feature_space():
    from keras.utils import FeatureSpace
    space = FeatureSpace(features={"age": FeatureSpace.float_normalized(), "city": FeatureSpace.string_categorical()},
                         output_mode="concat")
    space.adapt(tf.data.Dataset.from_tensor_slices({"age": AGE, "city": CITY}).batch(256))
    return space


SPACE = _feature_space()  # adapted once, as the tutorial does before building its datasets


def feature_space():
    ds = tf.data.Dataset.from_tensor_slices(({"age": AGE, "city": CITY}, LABEL)).batch(32)
    return ds.map(lambda x, y: (SPACE(x), y), num_parallel_calls=tf.data.AUTOTUNE)


def _rows(shard):
    for i in range(shard, 1200, 4):
        yield np.full([16], i, dtype=np.float32), i % 3


def generators_interleaved():
    def one(shard):
        return tf.data.Dataset.from_generator(_rows, args=(shard,), output_signature=(
            tf.TensorSpec([16], tf.float32), tf.TensorSpec([], tf.int64)))
    ds = tf.data.Dataset.range(4).interleave(one, cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.map(lambda x, y: (tf.sqrt(x + 1.0), y)).batch(32)


IDS = RNG.integers(0, 1500, 6000)  # drawn once: a draw per call made yours and the plan's differ


def unique_ids():
    ids = tf.data.Dataset.from_tensor_slices(IDS)
    return ids.unique().map(lambda i: tf.cast(i, tf.float32) * 2.0).batch(64)


LENGTHS = RNG.integers(3, 60, 4000)


def bucketed_by_length():
    ds = tf.data.Dataset.from_tensor_slices(LENGTHS).map(lambda n: tf.range(n, dtype=tf.int32))
    return ds.bucket_by_sequence_length(lambda x: tf.shape(x)[0], bucket_boundaries=[10, 20, 40],
                                        bucket_batch_sizes=[64, 32, 16, 8])


def taken_while():
    ds = tf.data.Dataset.range(100_000).map(lambda i: (i, tf.sin(tf.cast(i, tf.float32))))
    return ds.take_while(lambda i, x: i < 5000).map(lambda i, x: x * 2.0).batch(50)


def concatenated_sources():
    a = tf.data.Dataset.from_tensor_slices(AGE).map(lambda x: tf.fill([8], x))
    b = tf.data.TextLineDataset(TEXT).map(lambda s: tf.fill([8], tf.strings.to_number(s)))
    return a.concatenate(b).batch(40)


def _text():
    path = f"{D}/numbers.txt"
    with open(path, "w") as f:
        f.write("\n".join(str(i * 0.25) for i in range(1500)))
    return path


TEXT = _text()


def _example(f, i):
    feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=[float(i)] * 8)),
               "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 5]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


RECORDS = write_records(D, "ex-{f}.tfrecord", 3, 800, _example)


def parse_after_batch():
    spec = {"x": tf.io.FixedLenFeature([8], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}
    ds = tf.data.TFRecordDataset(RECORDS).batch(64)
    return ds.map(lambda b: tf.io.parse_example(b, spec)).map(lambda e: (e["x"] * 2.0, e["y"]))


def sparse_batched():
    """Rows of varying length batched into one SparseTensor (``sparse_batch`` takes dense rows:
    the first version of this shape fed it SparseTensors, and yours failed as the plan's did)."""
    rows = tf.data.Dataset.range(3000).map(lambda i: tf.range(i % 7))
    return rows.sparse_batch(32, row_shape=[7]).map(tf.sparse.to_dense)


def sparse_elements_batched():
    def to_sparse(i):
        return tf.sparse.SparseTensor(indices=[[i % 10]], values=[tf.cast(i, tf.float32)], dense_shape=[10])
    return tf.data.Dataset.range(3000).map(to_sparse).batch(32).map(tf.sparse.to_dense)


def parallel_batch_drop_remainder():
    ds = tf.data.Dataset.range(5000).map(lambda i: tf.fill([32], tf.cos(tf.cast(i, tf.float32))))
    return ds.batch(64, num_parallel_calls=tf.data.AUTOTUNE, drop_remainder=True)


def ragged_rows():
    ds = tf.data.Dataset.from_tensor_slices(LENGTHS).map(lambda n: tf.range(n) * 2)
    return ds.ragged_batch(32).map(lambda r: r.to_tensor())


cases = [feature_space, generators_interleaved, unique_ids, bucketed_by_length, taken_while, concatenated_sources,
         parse_after_batch, sparse_batched, sparse_elements_batched, parallel_batch_drop_remainder, ragged_rows]
if __name__ == "__main__":
    run(cases, whole_epoch)
