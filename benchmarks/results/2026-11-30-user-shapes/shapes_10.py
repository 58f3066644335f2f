"""User shapes, batch 10 (session 61): the CIFAR-10 binary reader of tensorflow/models
(``FixedLengthRecordDataset`` + ``decode_raw``), ``SqlDataset`` over a sqlite file,
``SequenceExample`` records parsed and padded, keras-io's ``audio_dataset_from_directory`` then
the TF audio tutorial's STFT spectrogram, a vocabulary file behind a ``StaticVocabularyTable``,
a train split by ``enumerate`` + ``filter``, an XLA-compiled map (``jit_compile=True``), a
shuffle seeded only by ``tf.random.set_seed``, epochs repeated inside the pipeline before a
seeded shuffle, a ``py_function`` with two outputs and ``ensure_shape``, and a user's cache after
a random map (their cache, their semantics: every epoch after the first replays the first).

Checks the rows of a whole epoch as a multiset (shapes_7.py), except: the global seed's shuffle
is checked in order (both are seeded alike), the random map under the user's cache by whether
two epochs are equal, alike in yours and the plan. Run as shapes_1.py.
"""
import os
import sqlite3
import tempfile

import numpy as np
import tensorflow as tf
from shapes_7 import whole_epoch
from try_shapes import run, write_records

D = tempfile.mkdtemp()
RNG = np.random.default_rng(10)


def _cifar_files() -> list[str]:
    """CIFAR-10's binary format: each record a label byte, then 3,072 bytes (3x32x32, planes)."""
    paths = []
    for f in range(2):
        path = os.path.join(D, f"data_batch_{f}.bin")
        labels = RNG.integers(0, 10, (1000, 1), dtype=np.uint8)
        pixels = RNG.integers(0, 256, (1000, 3072), dtype=np.uint8)
        np.concatenate([labels, pixels], axis=1).tofile(path)
        paths.append(path)
    return paths


CIFAR = _cifar_files()


def cifar_binary():
    """tensorflow/models official/r1/resnet/cifar10_main.py: parse_record, eval form."""
    def parse_record(raw):
        record = tf.io.decode_raw(raw, tf.uint8)
        label = tf.cast(record[0], tf.int32)
        image = tf.transpose(tf.reshape(record[1:], [3, 32, 32]), [1, 2, 0])
        image = tf.image.per_image_standardization(tf.cast(image, tf.float32))
        return image, label
    ds = tf.data.FixedLengthRecordDataset(CIFAR, record_bytes=3073)
    return ds.map(parse_record, num_parallel_calls=tf.data.AUTOTUNE).batch(64).prefetch(1)


def _sqlite() -> str:
    path = os.path.join(D, "rows.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (id INTEGER, price REAL, city TEXT)")
        db.executemany("INSERT INTO t VALUES (?, ?, ?)",
                       [(i, i * 0.5, ("paris", "lyon", "nice")[i % 3]) for i in range(4000)])
    return path


SQL = _sqlite()


def sql_rows():
    ds = tf.data.experimental.SqlDataset("sqlite", SQL, "SELECT id, price, city FROM t ORDER BY id",
                                         (tf.int64, tf.float64, tf.string))
    return ds.map(lambda i, p, c: (tf.stack([tf.cast(i, tf.float32), tf.cast(p, tf.float32)]),
                                   tf.strings.length(c))).batch(32)


def _sequence_example(f, i):
    n = 3 + (i % 9)
    context = tf.train.Features(feature={"id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))})
    frames = [tf.train.Feature(float_list=tf.train.FloatList(value=[float(i + t)] * 4)) for t in range(n)]
    lists = tf.train.FeatureLists(feature_list={"frames": tf.train.FeatureList(feature=frames)})
    return tf.train.SequenceExample(context=context, feature_lists=lists).SerializeToString()


SEQUENCES = write_records(D, "seq-{f}.tfrecord", 2, 800, _sequence_example)


def sequence_examples():
    context = {"id": tf.io.FixedLenFeature([], tf.int64)}
    sequence = {"frames": tf.io.FixedLenSequenceFeature([4], tf.float32)}

    def parse(raw):
        c, s = tf.io.parse_single_sequence_example(raw, context_features=context, sequence_features=sequence)
        return s["frames"], c["id"]
    return tf.data.TFRecordDataset(SEQUENCES).map(parse).padded_batch(32, padded_shapes=([None, 4], []))


def _wavs() -> str:
    root = os.path.join(D, "speech")
    for label in ("yes", "no"):
        os.makedirs(os.path.join(root, label))
        for i in range(120):
            t = np.arange(8000 + 40 * (i % 20)) / 16000.0
            wave = (0.3 * np.sin(2 * np.pi * (300 + 7 * i) * t)).astype(np.float32)[:, None]
            tf.io.write_file(os.path.join(root, label, f"{i}.wav"), tf.audio.encode_wav(wave, 16000))
    return root


WAVS = _wavs()


def audio_spectrograms():
    """keras-io / the TF simple_audio tutorial: audio_dataset_from_directory, squeeze, STFT."""
    import keras
    ds = keras.utils.audio_dataset_from_directory(WAVS, batch_size=16, output_sequence_length=16000, shuffle=False)

    def spectrogram(audio, label):
        audio = tf.squeeze(audio, axis=-1)
        s = tf.abs(tf.signal.stft(audio, frame_length=255, frame_step=128))
        return s[..., tf.newaxis], label
    return ds.map(spectrogram, num_parallel_calls=tf.data.AUTOTUNE)


def _vocabulary() -> tuple[str, str]:
    words = [f"w{i}" for i in range(500)]
    vocab = os.path.join(D, "vocab.txt")
    with open(vocab, "w") as f:
        f.write("\n".join(words))
    text = os.path.join(D, "lines.txt")
    with open(text, "w") as f:
        for i in range(3000):
            ids = ((i * 7 + k * 13) % 520 for k in range(5 + i % 6))
            f.write(" ".join(words[j] if j < 500 else f"unseen{j}" for j in ids) + "\n")
    return vocab, text


VOCAB, LINES = _vocabulary()
TABLE = tf.lookup.StaticVocabularyTable(
    tf.lookup.TextFileInitializer(VOCAB, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                                  tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), num_oov_buckets=4)


def vocabulary_file_lookup():
    ds = tf.data.TextLineDataset(LINES).map(lambda s: TABLE.lookup(tf.strings.split(s)))
    return ds.padded_batch(32, padded_shapes=[12])


FEATURES = RNG.random((5000, 24)).astype("float32")


def split_by_enumerate():
    """The train split of a dataset cut in five by index (people split this way when no
    split is given)."""
    ds = tf.data.Dataset.from_tensor_slices(FEATURES).map(lambda x: tf.tanh(x) * 2.0)
    return ds.enumerate().filter(lambda i, x: i % 5 != 0).map(lambda i, x: x).batch(64)


@tf.function(jit_compile=True)
def _normalize(x):
    return (x - tf.reduce_mean(x)) / (tf.math.reduce_std(x) + 1e-6)


def xla_compiled_map():
    ds = tf.data.Dataset.from_tensor_slices(FEATURES)
    return ds.map(lambda x: _normalize(tf.sin(x) + x ** 2)).batch(64)


def global_seed_shuffle():
    """No seed on the shuffle: tf.random.set_seed alone decides its order, in yours and the plan."""
    tf.random.set_seed(61)
    ds = tf.data.Dataset.from_tensor_slices(FEATURES).map(lambda x: tf.reduce_sum(tf.sqrt(x)))
    return ds.shuffle(1000).batch(32)


def repeated_inside():
    ds = tf.data.Dataset.range(1500).map(lambda i: tf.fill([16], tf.cos(tf.cast(i, tf.float32))))
    return ds.repeat(3).shuffle(512, seed=3).batch(48)


def _two_outputs(x):
    v = x.numpy()
    return np.float32(v) * 0.5, np.int64(v % 7)


def py_function_two_outputs():
    def both(x):
        a, b = tf.py_function(_two_outputs, [x], Tout=[tf.float32, tf.int64])
        return tf.ensure_shape(a, []), tf.ensure_shape(b, [])
    return tf.data.Dataset.range(2000).map(both).batch(32)


def cache_after_random_map():
    """The user's mistake, kept as written: a random flip cached, so every epoch replays the first."""
    images = RNG.random((600, 16, 16, 3)).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices(images).map(tf.image.random_flip_left_right).cache()
    return ds.map(lambda x: x * 2.0 - 1.0).batch(32)


def epochs_differ(ds) -> bool:
    """Whether two epochs of ``ds`` differ (shapes_3.py's check; that script runs on import)."""
    first, second = ([np.asarray(tf.nest.flatten(e)[0]).tolist() for e in ds] for _ in range(2))
    return first != second


def check(make, plan) -> str:
    if make is global_seed_shuffle:
        yours = [np.asarray(e).tolist() for e in make()]
        mine = [np.asarray(e).tolist() for e in plan.dataset]
        return "" if yours == mine else "  <<< ORDER DIFFERS (a global seed alone)"
    if make is cache_after_random_map:
        yours, mine = epochs_differ(make()), epochs_differ(plan.dataset)
        return "" if yours == mine else f"  <<< SEMANTICS: yours differ={yours} plan differ={mine}"
    return whole_epoch(make, plan)


cases = [cifar_binary, sql_rows, sequence_examples, audio_spectrograms, vocabulary_file_lookup, split_by_enumerate,
         xla_compiled_map, global_seed_shuffle, repeated_inside, py_function_two_outputs, cache_after_random_map]
if __name__ == "__main__":
    run(cases, check)
