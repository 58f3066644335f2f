"""Bundled example pipelines and the data they read, generated on the spot.

Used by ``plumbkit demo``, the notebooks, the benchmarks and the tests: real codecs (JPEG in
TFRecords, text lines), made locally so nothing is ever downloaded. Also the *planted*
operators whose CPU cost is controlled, which the accuracy tests use as ground truth.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

def planted_work(x: tf.Tensor, units: int) -> tf.Tensor:
    """Deterministic TensorFlow work whose cost grows linearly with ``units`` (a chain of matmuls).

    The result depends on ``x`` so nothing is constant-folded away.
    """
    m = _seed_matrix(x)
    for _ in range(units):
        m = tf.matmul(m, m)
    return tf.cast(x, tf.float32) + tf.reduce_sum(m)


def looped_work(x: tf.Tensor, units: int, unrolled: int = 100) -> tf.Tensor:
    """:func:`planted_work`'s work and result, its chain run ``unrolled`` matmuls at a time in a
    ``tf.while_loop``: a function of ~``unrolled`` nodes whatever ``units``. Grappler optimizes
    every node of a map's function each time an iterator starts, so a 3,200-matmul chain took
    ~0.75 s to start and ~1 s to build where this takes ~0.1 s each, at the same rate."""
    reps, rest = divmod(units, unrolled)

    def chunk(i, m):
        for _ in range(unrolled):
            m = tf.matmul(m, m)
        return i + 1, m
    _, m = tf.while_loop(lambda i, _m: i < reps, chunk, (tf.constant(0), _seed_matrix(x)))
    for _ in range(rest):
        m = tf.matmul(m, m)
    return tf.cast(x, tf.float32) + tf.reduce_sum(m)


def _seed_matrix(x: tf.Tensor) -> tf.Tensor:
    """A 48x48 matrix that depends on ``x``, so nothing is constant-folded away."""
    return tf.fill([48, 48], tf.cast(x % 7, tf.float32) * 1e-3 + 1.0) / 48.0


# --- generated data ------------------------------------------------------------------------

def _random_image(rng: np.random.Generator, size: int) -> np.ndarray:
    """A smooth random image (compresses like a photo, not like noise)."""
    base = rng.integers(0, 255, size=(size // 8 + 1, size // 8 + 1, 3), dtype=np.uint8)
    img = np.kron(base, np.ones((8, 8, 1), dtype=np.uint8))[:size, :size]
    noise = rng.integers(0, 16, size=img.shape, dtype=np.uint8)
    return (img // 2 + noise).astype(np.uint8)


def write_image_records(directory: str | os.PathLike, *, files: int = 8, per_file: int = 64,
                        size: int = 128, seed: int = 0) -> list[str]:
    """Write TFRecord files of JPEG-encoded images with integer labels; returns their paths."""
    rng = np.random.default_rng(seed)
    paths = _numbered_paths(directory, "images", ".tfrecord", files)
    for f, path in enumerate(paths):
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(per_file):
                jpeg = tf.io.encode_jpeg(_random_image(rng, size), quality=90).numpy()
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[(f * per_file + i) % 10])),
                }))
                writer.write(example.SerializeToString())
    return paths


def _numbered_paths(directory: str | os.PathLike, stem: str, suffix: str, count: int) -> list[str]:
    """``directory/stem-0000suffix`` ... (the directory is created)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return [str(directory / f"{stem}-{i:04d}{suffix}") for i in range(count)]


_WORDS = ("the quick brown fox jumps over lazy dog data pipeline input batch tensor model train "
          "loss cache prefetch parallel map filter shuffle record decode image text token").split()


def write_text_files(directory: str | os.PathLike, *, files: int = 4, lines: int = 2000,
                     seed: int = 0) -> list[str]:
    """Write text files of random sentences (one per line); returns their paths."""
    rng = np.random.default_rng(seed)
    paths = _numbered_paths(directory, "text", ".txt", files)
    for path in paths:
        with open(path, "w") as out:
            for _ in range(lines):
                out.write(" ".join(rng.choice(_WORDS, size=rng.integers(5, 40))) + "\n")
    return paths


# --- pipelines -----------------------------------------------------------------------------

IMAGE_FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def parse_example(record: tf.Tensor) -> dict[str, tf.Tensor]:
    return tf.io.parse_single_example(record, IMAGE_FEATURES)


def decode_image(example: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
    image = tf.io.decode_jpeg(example["image"], channels=3)
    return image, example["label"]


def resize_image(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    image = tf.image.resize(image, [96, 96])
    return tf.cast(image, tf.uint8), label


def normalize(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.cast(image, tf.float32) / 255.0, label


def random_flip(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.image.random_flip_left_right(image), label


def image_pipeline(files: list[str], *, batch_size: int = 32, augment: bool = False,
                   epochs: int | None = 1) -> tf.data.Dataset:
    """The misconfigured image pipeline of the demo: everything sequential, no cache, no prefetch.

    TFRecords of JPEGs -> parse -> decode -> resize -> (flip) -> normalize -> batch.
    """
    ds = tf.data.Dataset.from_tensor_slices(files)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=1)
    ds = ds.map(parse_example)
    ds = ds.map(decode_image)
    ds = ds.map(resize_image)
    if augment:
        ds = ds.map(random_flip)
    ds = ds.map(normalize)
    ds = ds.batch(batch_size)
    if epochs != 1:
        ds = ds.repeat(epochs)
    return ds


def demo_data_dir() -> str:
    """Where the demo writes its generated data (a fresh temporary folder)."""
    return tempfile.mkdtemp(prefix="plumbkit-demo-")
