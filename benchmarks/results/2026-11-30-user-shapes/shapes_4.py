"""User shapes, batch 4 (GZIP text, a pandas-like dict of columns, one large element repeated,
a large array captured by a map, a parallel non-deterministic batch, unbatch/rebatch, a nested
prefetch, an empty pipeline, a very slow one): also checks the first elements. Run as shapes_1.py
(``FULL=1`` prints the whole plan).
"""
import gzip
import os
import tempfile
import time
import numpy as np
import tensorflow as tf
from try_shapes import run
D = tempfile.mkdtemp()

def gzip_text():
    paths = []
    for k in range(3):
        p = os.path.join(D, f"t{k}.txt.gz"); paths.append(p)
        with gzip.open(p, "wt") as f:
            f.write("\n".join(f"{k} {i} " + "tok " * (i % 30) for i in range(4000)))
    return tf.data.TextLineDataset(paths, compression_type="GZIP").map(lambda l: tf.size(tf.strings.split(l))).batch(64)

def pandas_like_dict():
    rng = np.random.default_rng(0)
    cols = {f"c{i}": rng.random(200000) for i in range(6)}  # 6 x 1.6 MB float64
    cols["label"] = rng.integers(0, 2, 200000)
    ds = tf.data.Dataset.from_tensor_slices(cols)
    return ds.map(lambda d: (tf.stack([d[f"c{i}"] for i in range(6)]), d["label"])).batch(256)

def from_tensors_repeat():
    imgs = np.random.default_rng(0).random((32, 64, 64, 3)).astype("float32")  # 1.5 MB one element
    return tf.data.Dataset.from_tensors((imgs, np.arange(32))).repeat(400).map(lambda a, b: (a * 2.0, b))

def big_capture_in_map():
    mean = np.random.default_rng(0).random((512, 512)).astype("float32")  # 1 MB captured
    return tf.data.Dataset.range(3000).map(lambda x: tf.reduce_sum(mean * tf.cast(x, tf.float32))).batch(32)

def parallel_batch_nondet():
    return tf.data.Dataset.range(40000).map(lambda x: tf.fill([16], x)).batch(64, num_parallel_calls=2, deterministic=False).repeat()

def unbatch_rebatch():
    x = np.arange(64000, dtype=np.float32).reshape(1000, 64)
    return tf.data.Dataset.from_tensor_slices(x).unbatch().map(lambda v: v * 2).batch(100)

def nested_prefetch():
    return tf.data.Dataset.range(8).interleave(lambda i: tf.data.Dataset.range(2000).map(lambda x: x + i).prefetch(tf.data.AUTOTUNE), cycle_length=4).batch(64)

def empty_after_filter():
    return tf.data.Dataset.range(1000).filter(lambda x: x < 0).batch(4).repeat()

def very_slow():
    def slow(x):
        time.sleep(2.5); return x
    return tf.data.Dataset.range(100).map(lambda x: tf.py_function(slow, [x], tf.int64)).batch(2)


def first_elements_alike(make, plan) -> str:
    try:
        a = [np.asarray(tf.nest.flatten(e)[0]).tolist() for e in make().take(30)]
        b = [np.asarray(tf.nest.flatten(e)[0]).tolist() for e in plan.dataset.take(30)]
    except Exception as e:  # noqa: BLE001
        return f"  <<< compare failed {type(e).__name__}"
    return "" if sorted(map(str, a)) == sorted(map(str, b)) else "  <<< ELEMENTS DIFFER"

cases = [gzip_text, pandas_like_dict, from_tensors_repeat, big_capture_in_map, parallel_batch_nondet, unbatch_rebatch,
         nested_prefetch, empty_after_filter, very_slow]
run(cases, first_elements_alike)
