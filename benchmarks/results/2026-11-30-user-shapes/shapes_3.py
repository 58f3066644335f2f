"""User shapes, batch 3 (randomness hidden in Keras layers and tf.random, Dataset.random, a
shuffle that does not reshuffle, CSV readers, GZIP records): also checks that two epochs of the
plan differ exactly where two epochs of yours do. Run as shapes_1.py.
"""
import tempfile, os
import numpy as np
import tensorflow as tf
import keras
from try_shapes import run
D = tempfile.mkdtemp()

def epochs_differ(ds, n=2):
    es = [[np.asarray(tf.nest.flatten(e)[0]).tolist() for e in ds] for _ in range(n)]
    return es[0] != es[1]

def keras_random_layers():
    aug = keras.Sequential([keras.layers.RandomFlip("horizontal"), keras.layers.RandomRotation(0.1)])
    x = np.random.default_rng(0).random((512, 32, 32, 3)).astype("float32")
    return tf.data.Dataset.from_tensor_slices(x).map(lambda i: tf.image.resize(i, [48, 48])).batch(32).map(lambda b: aug(b, training=True))

def tf_random_uniform():
    return tf.data.Dataset.range(4000).map(lambda x: tf.cast(x, tf.float32) + tf.random.uniform([])).map(lambda v: tf.sin(v) * 3).batch(32)

def dataset_random_zip():
    return tf.data.Dataset.zip((tf.data.Dataset.range(4000).map(lambda x: tf.cast(x, tf.float32) * 2), tf.data.Dataset.random(seed=4))).map(lambda a, r: a + tf.cast(r % 3, tf.float32)).batch(32)

def shuffle_once():
    return tf.data.Dataset.range(4000).map(lambda x: tf.sqrt(tf.cast(x, tf.float32))).shuffle(4000, seed=2, reshuffle_each_iteration=False).batch(32)

def make_csv():
    path = os.path.join(D, "t.csv")
    with open(path, "w") as f:
        f.write("a,b,c,label\n")
        for i in range(6000):
            f.write(f"{i},{i*0.5},{(i*7)%13},{i%2}\n")
    return tf.data.experimental.make_csv_dataset(path, batch_size=32, label_name="label", num_epochs=1, shuffle=False)

def csv_dataset():
    path = os.path.join(D, "u.csv")
    with open(path, "w") as f:
        for i in range(6000):
            f.write(f"{i},{i*0.5},{(i*7)%13}\n")
    return tf.data.experimental.CsvDataset(path, [tf.int32, tf.float32, tf.float32]).map(lambda a, b, c: tf.stack([tf.cast(a, tf.float32), b, c])).batch(64)

def gzip_records():
    paths = []
    for k in range(4):
        p = os.path.join(D, f"r{k}.tfrecord.gz"); paths.append(p)
        with tf.io.TFRecordWriter(p, options="GZIP") as w:
            for i in range(1500):
                w.write(tf.train.Example(features=tf.train.Features(feature={"v": tf.train.Feature(float_list=tf.train.FloatList(value=np.arange(64, dtype=np.float32) + i))})).SerializeToString())
    ds = tf.data.TFRecordDataset(paths, compression_type="GZIP", num_parallel_reads=2)
    return ds.map(lambda s: tf.io.parse_single_example(s, {"v": tf.io.FixedLenFeature([64], tf.float32)})["v"]).batch(64)


def epochs_differ_alike(make, plan) -> str:
    yours, mine = epochs_differ(make()), epochs_differ(plan.dataset)
    return "" if yours == mine else f"   <<< SEMANTICS: yours differ={yours} plan differ={mine}"

cases = [keras_random_layers, tf_random_uniform, dataset_random_zip, shuffle_once, make_csv, csv_dataset, gzip_records]
run(cases, epochs_differ_alike)
