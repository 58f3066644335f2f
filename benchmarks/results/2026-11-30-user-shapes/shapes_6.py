"""User shapes, batch 6 (session 59): a frozen Keras model mapped over batches, the augmentation
guide's tf.random.Generator with stateless ops, list_files' default shuffle, interleave and batch
run non-deterministically, the performance guide's batch-then-parse, assert_cardinality, image
files read by path, keras-io's text_dataset_from_directory + TextVectorization, unequal zips, a
distributed dataset handed in. Checks the rows of an epoch as a multiset where the pipeline is
deterministic in content (as shapes_5.py), and that two epochs differ where it draws. Run as
shapes_1.py.
"""
import collections
import hashlib
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf
from shapes_5 import same_rows
from try_shapes import run, write_records

D = tempfile.mkdtemp()
RNG = np.random.default_rng(6)
X = RNG.random((6000, 32)).astype("float32")


BASE = keras.Sequential([keras.Input((32,)), keras.layers.Dense(256, activation="relu"),
                         keras.layers.Dense(256, activation="relu"), keras.layers.Dense(64)])
BASE.trainable = False  # built once: a model built per call has new weights each time


def frozen_feature_extractor():
    base = BASE
    return tf.data.Dataset.from_tensor_slices(X).batch(64).map(lambda x: base(x, training=False))


def generator_augment():
    rng = tf.random.Generator.from_seed(123, alg="philox")

    def augment(x):
        seed = rng.make_seeds(2)[0]
        return tf.image.stateless_random_brightness(tf.reshape(x, [4, 8, 1]), 0.2, seed)
    return tf.data.Dataset.from_tensor_slices(X).map(augment).batch(64)


def _example(f: int, i: int) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=X[(f * 400 + i) % len(X)])),
        "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i % 7))))})).SerializeToString()


PATHS = write_records(D, "part-{f}.tfrecord", 6, 400, _example)
FEATURES = {"x": tf.io.FixedLenFeature([32], tf.float32), "ids": tf.io.VarLenFeature(tf.int64)}


def list_files_default_shuffle():
    files = tf.data.Dataset.list_files(os.path.join(D, "part-*.tfrecord"))  # shuffled every epoch
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=2)
    return ds.map(lambda r: tf.io.parse_single_example(r, FEATURES)["x"]).batch(32)


def interleave_nondeterministic():
    ds = tf.data.Dataset.range(8).interleave(lambda i: tf.data.Dataset.range(i * 1000, i * 1000 + 600),
                                             cycle_length=4, block_length=4, num_parallel_calls=tf.data.AUTOTUNE,
                                             deterministic=False)
    return ds.map(lambda x: tf.reduce_sum(tf.sin(tf.cast(tf.range(x % 300), tf.float32)))).batch(32)


def batch_parallel_nondeterministic():
    ds = tf.data.Dataset.from_tensor_slices(X).map(lambda x: tf.tanh(x) * 2)
    return ds.batch(32, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)


def batch_then_parse():
    ds = tf.data.TFRecordDataset(PATHS).batch(128)
    ds = ds.map(lambda rs: tf.io.parse_example(rs, FEATURES))
    return ds.map(lambda f: (f["x"], tf.sparse.to_dense(f["ids"])))


def assert_cardinality():
    def rows():
        for r in X[:3000]:
            yield r
    ds = tf.data.Dataset.from_generator(rows, output_signature=tf.TensorSpec([32], tf.float32))
    return ds.apply(tf.data.experimental.assert_cardinality(3000)).map(lambda x: x * 2).batch(50)


def _images(n=400):
    paths = []
    for i in range(n):
        path = os.path.join(D, f"img-{i}.jpg")
        img = tf.cast(tf.random.stateless_uniform([64, 64, 3], [i, 0], 0, 255), tf.uint8)
        tf.io.write_file(path, tf.io.encode_jpeg(img))
        paths.append(path)
    return paths


IMAGES = _images()


def images_by_path():
    def load(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.image.resize(image, [48, 48]) / 255.0
    return tf.data.Dataset.from_tensor_slices(IMAGES).map(load).batch(32)


def _text_dirs():
    root = os.path.join(D, "reviews")
    rng = np.random.default_rng(1)
    words = "good bad great awful plot actor film scene slow fast".split()
    for label in ("neg", "pos"):
        os.makedirs(os.path.join(root, label), exist_ok=True)
        for i in range(300):
            with open(os.path.join(root, label, f"{i}.txt"), "w") as f:
                f.write(" ".join(rng.choice(words, size=rng.integers(5, 40))))
    return root


TEXT = _text_dirs()


def text_dataset_from_directory():
    raw = keras.utils.text_dataset_from_directory(TEXT, batch_size=32, shuffle=False)
    vectorize = keras.layers.TextVectorization(max_tokens=200, output_sequence_length=40)
    vectorize.adapt(raw.map(lambda t, y: t))
    return raw.map(lambda t, y: (vectorize(t), y))


def unequal_zip():
    a = tf.data.Dataset.range(1000).map(lambda x: tf.reduce_sum(tf.sin(tf.cast(tf.range(x % 300), tf.float32))))
    return tf.data.Dataset.zip((a, tf.data.Dataset.range(700))).batch(32)


def distributed_dataset():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    return strategy.experimental_distribute_dataset(tf.data.Dataset.range(100).batch(10))


def check(make, plan):
    if make.__name__ == "generator_augment":  # draws: two epochs of the plan differ, as yours do
        ds = plan.dataset
        a, b = (np.concatenate([e.numpy().ravel() for e in ds]) for _ in range(2))
        return "" if not np.array_equal(a, b) else "  <<< EPOCHS EQUAL (cached above the draw?)"
    if make.__name__ in ("list_files_default_shuffle", "interleave_nondeterministic"):
        return whole_epoch(make, plan)
    return same_rows(make, plan)


def whole_epoch(make, plan) -> str:
    """The rows of one whole epoch as a multiset, however the cardinality reads (a shuffled file
    list and a non-deterministic interleave read unknown: rows() would take 20 batches)."""
    def rows(ds):
        return collections.Counter(hashlib.blake2b(np.ascontiguousarray(r).tobytes(), digest_size=12).digest()
                                   for e in ds for r in np.asarray(tf.nest.flatten(e)[0]))
    return "" if rows(make()) == rows(plan.dataset) else "  <<< ELEMENTS DIFFER"


cases = [frozen_feature_extractor, generator_augment, list_files_default_shuffle, interleave_nondeterministic,
         batch_parallel_nondeterministic, batch_then_parse, assert_cardinality, images_by_path,
         text_dataset_from_directory, unequal_zip, distributed_dataset]
run(cases, check)
