"""User shapes, batch 2 (text files interleaved, dict elements, ignore_errors, shard/skip/take,
a user's file cache, an infinite generator, counter, padded batches filtered, a non-deterministic
map, a large array, save/load). Run as shapes_1.py.
"""
import tempfile, os
import numpy as np
import tensorflow as tf
from try_shapes import run
D = tempfile.mkdtemp()
for i in range(4):
    with open(f"{D}/f{i}.txt", "w") as f:
        f.write("\n".join(f"line {i} {j} " + "word " * (j % 20) for j in range(3000)))

def textlines_interleave():
    files = tf.data.Dataset.list_files(f"{D}/*.txt", shuffle=False)
    ds = files.interleave(tf.data.TextLineDataset, cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    return ds.map(lambda l: tf.strings.length(tf.strings.split(l)), num_parallel_calls=tf.data.AUTOTUNE).batch(64).repeat()

def dict_elements():
    x = np.random.default_rng(0).random((5000, 16)).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices({"x": x, "y": np.arange(5000)})
    return ds.map(lambda d: {"x": tf.nn.l2_normalize(d["x"]), "y": d["y"] % 7}).shuffle(1000, seed=3).batch(64).repeat()

def ignore_errors():
    ds = tf.data.Dataset.range(20000).map(lambda x: tf.debugging.check_numerics(1.0 / tf.cast(x % 100, tf.float32), "inf"))
    return ds.ignore_errors().batch(32).repeat()

def take_skip_shard():
    ds = tf.data.Dataset.range(100000).shard(2, 0).skip(100).take(20000)
    return ds.map(lambda x: tf.cast(x, tf.float32) ** 0.5).batch(64).repeat()

def user_file_cache():
    path = os.path.join(tempfile.mkdtemp(), "c")
    ds = tf.data.Dataset.range(5000).map(lambda x: tf.fill([64], tf.cast(x, tf.float32)))
    return ds.cache(path).batch(32).repeat()

def infinite_generator():
    def gen():
        i = 0
        while True:
            yield np.full([16], i, np.float32); i += 1
    return tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([16], tf.float32)).map(lambda x: x * 2).batch(32)

def counter_zip():
    return tf.data.Dataset.zip((tf.data.Dataset.counter(), tf.data.Dataset.range(10**9).map(lambda x: tf.sin(tf.cast(x, tf.float32))))).batch(128)

def padded_filter():
    ds = tf.data.Dataset.range(20000).map(lambda x: tf.range(x % 31))
    return ds.filter(lambda v: tf.size(v) > 3).padded_batch(32, padded_shapes=[None]).filter(lambda b: tf.shape(b)[1] > 10).repeat()

def nondeterministic_map():
    opts = tf.data.Options(); opts.deterministic = False
    ds = tf.data.Dataset.range(30000).map(lambda x: tf.reduce_sum(tf.sin(tf.range(tf.cast(x % 500, tf.float32)))), num_parallel_calls=4)
    return ds.batch(64).repeat().with_options(opts)

def numpy_big():
    x = np.random.default_rng(1).random((2000, 64, 64, 3)).astype("float32")  # 98 MB embedded
    return tf.data.Dataset.from_tensor_slices(x).map(lambda i: tf.image.resize(i, [32, 32])).batch(32).repeat()

def save_load():
    path = tempfile.mkdtemp()
    tf.data.Dataset.range(5000).map(lambda x: tf.fill([32], x)).save(path)
    return tf.data.Dataset.load(path).map(lambda v: tf.reduce_sum(v)).batch(32).repeat()

cases = [textlines_interleave, dict_elements, ignore_errors, take_skip_shard, user_file_cache, infinite_generator,
         counter_zip, padded_filter, nondeterministic_map, numpy_big, save_load]
run(cases)
