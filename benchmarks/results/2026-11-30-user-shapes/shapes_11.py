"""User shapes, batch 11 (session 61): whole cells as people write them, optimized and then
exported (``plan.rewrite_source(cell)``, what ``%%plumb`` inserts), the exported cell run in a
fresh namespace and its epoch compared with yours. The shapes: keras-io's ``AUTO =
tf.data.AUTOTUNE`` alias in a parenthesized chain; tensorflow/models' CIFAR-10 reader with
``num_parallel_reads`` (eval form), and its training form (shuffle, pad-and-crop, flip); a
helper called for the train and the validation split; a pipeline grown in a ``for`` loop
(``ds = ds.map(...)``); ``list_files(shuffle=False)`` interleaved with ``TFRecordDataset``;
a CSV read with ``TextLineDataset(num_parallel_reads=...)``, its header skipped; a
``from tensorflow import data as tfd`` alias; and a ``Dataset`` bound to a name.

Prints the exported cell's changed lines, and flags an exported cell that fails or yields other
rows (a multiset of a whole epoch; the random training form: the number of minibatches and their
shapes). Run as shapes_1.py.
"""
import collections
import difflib
import hashlib
import os
import sys
import tempfile
import time
import traceback

import numpy as np
import tensorflow as tf

import plumbkit
from plumbkit.engine.compare import BRIEF
from try_shapes import write_records

D = tempfile.mkdtemp()
RNG = np.random.default_rng(11)
for k in range(2):
    RNG.integers(0, 256, (800, 3073), dtype=np.uint8).tofile(os.path.join(D, f"data_batch_{k}.bin"))
np.save(os.path.join(D, "x.npy"), RNG.random((3000, 20)).astype("float32"))
with open(os.path.join(D, "rows.csv"), "w") as f:
    f.write("a,b,label\n" + "".join(f"{i},{i * 0.5},{i % 2}\n" for i in range(3000)))


def _example(f, i):
    feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=[float(i + 1000 * f)] * 16))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


write_records(D, "part-{f}.tfrecord", 4, 500, _example)
HEAD = f'import numpy as np\nimport tensorflow as tf\nD = {D!r}\n'

CELLS = {
    "keras_io_auto_alias": HEAD + '''
AUTO = tf.data.AUTOTUNE
x = np.load(f"{D}/x.npy")

def normalize(v):
    return (v - tf.reduce_mean(v)) / (tf.math.reduce_std(v) + 1e-6)

ds = (
    tf.data.Dataset.from_tensor_slices(x)
    .map(normalize, num_parallel_calls=AUTO)
    .map(lambda v: tf.concat([tf.sin(v), tf.cos(v)], 0))
    .batch(32)
    .prefetch(AUTO)
)
''',
    "cifar_eval_parallel_reads": HEAD + '''
files = [f"{D}/data_batch_{k}.bin" for k in range(2)]

def parse_record(raw):
    record = tf.io.decode_raw(raw, tf.uint8)
    image = tf.transpose(tf.reshape(record[1:], [3, 32, 32]), [1, 2, 0])
    return tf.image.per_image_standardization(tf.cast(image, tf.float32)), tf.cast(record[0], tf.int32)

ds = tf.data.FixedLengthRecordDataset(files, record_bytes=3073, num_parallel_reads=2)
ds = ds.map(parse_record).batch(64)
''',
    "cifar_train_augmented": HEAD + '''
files = [f"{D}/data_batch_{k}.bin" for k in range(2)]

def parse_record(raw):
    record = tf.io.decode_raw(raw, tf.uint8)
    image = tf.transpose(tf.reshape(record[1:], [3, 32, 32]), [1, 2, 0])
    return tf.cast(image, tf.float32), tf.cast(record[0], tf.int32)

def preprocess(image, label):
    image = tf.image.resize_with_crop_or_pad(image, 40, 40)
    image = tf.image.random_crop(image, [32, 32, 3])
    image = tf.image.random_flip_left_right(image)
    return tf.image.per_image_standardization(image), label

ds = tf.data.FixedLengthRecordDataset(files, record_bytes=3073)
ds = ds.shuffle(1000).map(parse_record).map(preprocess).batch(64)
''',
    "helper_for_two_splits": HEAD + '''
x = np.load(f"{D}/x.npy")

def make_split(rows):
    return tf.data.Dataset.from_tensor_slices(rows).map(lambda v: tf.sqrt(v + 1.0)).batch(50)

train = make_split(x[:2400])
val = make_split(x[2400:])
ds = train
''',
    "grown_in_a_loop": HEAD + '''
x = np.load(f"{D}/x.npy")
ds = tf.data.Dataset.from_tensor_slices(x)
for scale in (1.0, 2.0, 3.0):
    ds = ds.map(lambda v, s=scale: tf.tanh(v * s))
ds = ds.batch(32)
''',
    "list_files_interleaved": HEAD + '''
spec = {"x": tf.io.FixedLenFeature([16], tf.float32)}
files = tf.data.Dataset.list_files(f"{D}/part-*.tfrecord", shuffle=False)
ds = files.interleave(tf.data.TFRecordDataset, cycle_length=2, num_parallel_calls=tf.data.AUTOTUNE)
ds = ds.map(lambda r: tf.io.parse_single_example(r, spec)["x"] * 2.0).batch(40)
''',
    "csv_lines_parallel_reads": HEAD + '''
lines = tf.data.TextLineDataset([f"{D}/rows.csv"], num_parallel_reads=2).skip(1)

def parse(line):
    a, b, label = tf.io.decode_csv(line, record_defaults=[0.0, 0.0, 0])
    return tf.stack([a, b]), label

ds = lines.map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(64)
''',
    "module_alias": HEAD + '''
from tensorflow import data as tfd
x = np.load(f"{D}/x.npy")
ds = tfd.Dataset.from_tensor_slices(x).map(lambda v: tf.math.log1p(v * v)).batch(64).prefetch(tfd.AUTOTUNE)
''',
    "dataset_bound_to_a_name": HEAD + '''
Dataset = tf.data.Dataset
x = np.load(f"{D}/x.npy")
ds = Dataset.from_tensor_slices(x).map(lambda v: tf.exp(-v)).batch(64)
''',
}
RANDOM = {"cifar_train_augmented"}


def build(cell: str) -> tf.data.Dataset:
    namespace: dict = {}
    exec(compile(cell, "<cell>", "exec"), namespace)  # noqa: S102 - the script's own cells
    return namespace["ds"]


def rows(ds) -> collections.Counter:
    out = collections.Counter()
    for e in ds:
        first = np.asarray(tf.nest.flatten(e)[0])
        for row in first.reshape(len(first), -1):
            out[hashlib.blake2b(np.ascontiguousarray(row).tobytes(), digest_size=12).digest()] += 1
    return out


def shapes(ds) -> list:
    return [tuple(np.asarray(t).shape for t in tf.nest.flatten(e)) for e in ds]


def main(only) -> None:
    for name, cell in CELLS.items():
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            plan = plumbkit.optimize(lambda cell=cell: build(cell), seconds=1.5, protocol=BRIEF)
            exported = plan.rewrite_source(cell)
            changed = [d for d in difflib.unified_diff(cell.splitlines(), exported.splitlines(), lineterm="", n=0)
                       if d[:1] in "+-" and d[:3] not in ("+++", "---")]
            yours, mine = build(cell), build(exported)
            same = shapes(yours) == shapes(mine) if name in RANDOM else rows(yours) == rows(mine)
            flag = "" if same else "  <<< EXPORTED CELL YIELDS OTHER ROWS"
            print(f"OK   {name:26s} {time.time() - t0:5.1f}s {plan.verdict_line[:90] if hasattr(plan, 'verdict_line') else ''}"
                  f" changes={[c.what + ':' + c.where for c in plan.changes]}{flag}", flush=True)
            for d in changed:
                print("       ", d[:160], flush=True)
        except Exception as e:  # noqa: BLE001 - a sweep reports every failure and goes on
            print(f"FAIL {name:26s} {time.time() - t0:5.1f}s {type(e).__name__}: {str(e)[:400]}", flush=True)
            for fr in traceback.extract_tb(e.__traceback__):
                if "plumbkit" in fr.filename:
                    print("   ", fr.filename.split("plumbkit/")[-1], fr.lineno, fr.name)


if __name__ == "__main__":
    main(sys.argv[1:])
