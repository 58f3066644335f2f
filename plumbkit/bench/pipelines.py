"""Pipelines for the benchmarks, on data generated on the spot (real JPEG codecs, text, audio).

Shared by ``benchmarks/`` scripts, ``plumbkit bench`` and the tests that keep them from rotting.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Callable

import tensorflow as tf

from . import examples
from ..tfdata.options import sequential_options

Factory = Callable[[], tf.data.Dataset]


@functools.lru_cache(maxsize=None)
def _written_image_records(data_dir: str, files: int, per_file: int) -> tuple[str, ...]:
    return tuple(examples.write_image_records(Path(data_dir) / f"images-{files}x{per_file}", files=files,
                                              per_file=per_file, size=128))


def image_records(data_dir: str | Path, *, files: int, per_file: int) -> list[str]:
    """JPEG TFRecords under ``data_dir/images-<files>x<per_file>``, written once per process
    (every image pipeline of a bench run reads the same files; the writer is deterministic)."""
    return list(_written_image_records(str(data_dir), files, per_file))


def image_cacheable(data_dir: str | Path, *, files: int = 8, per_file: int = 128) -> Factory:
    """Misconfigured image pipeline with an expensive deterministic decode (cacheable)."""
    paths = image_records(data_dir, files=files, per_file=per_file)
    return lambda: examples.image_pipeline(paths, batch_size=32, epochs=None)


def image_random(data_dir: str | Path, *, files: int = 8, per_file: int = 128) -> Factory:
    """The same with a random augmentation after decode: the cache must go below it."""
    paths = image_records(data_dir, files=files, per_file=per_file)
    return lambda: examples.image_pipeline(paths, batch_size=32, augment=True, epochs=None)


def image_larger_than_memory(data_dir: str | Path, *, files: int = 24, per_file: int = 512) -> Factory:
    """The misconfigured image pipeline over a data set whose decoded size (128x128x3 bytes an
    image: 600 MB for 12,288 images) is several times the memory budget the bench gives it; its
    JPEG records (~63 MB) are read from disk (the bench evicts them from the page cache before
    every measured run)."""
    paths = image_records(data_dir, files=files, per_file=per_file)
    return lambda: examples.image_pipeline(paths, batch_size=32, epochs=None)


def decoded_bytes(files: int, per_file: int, size: int = 128) -> int:
    """Bytes of the decoded images of :func:`image_records` (uint8, 3 channels)."""
    return files * per_file * size * size * 3


def crop_and_flip(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """ResNet-style random augmentation: a random 112x112 crop, resized back, a random flip."""
    image = tf.image.random_crop(image, [112, 112, 3])
    image = tf.image.resize(image, [96, 96])
    return tf.image.random_flip_left_right(image), label


def to_unit_range(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.cast(image, tf.float32) / 255.0, label


def shuffled_training(data_dir: str | Path, *, files: int = 16, per_file: int = 256) -> Factory:
    """A training pipeline as the tutorials write it: files shuffled, records interleaved and
    shuffled, random crop and flip. Everything is random from the source up: nothing can be
    cached, so only parallelism and prefetch can help."""
    paths = image_records(data_dir, files=files, per_file=per_file)

    def make() -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices(paths).shuffle(len(paths))
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4)
        ds = ds.shuffle(1024)
        ds = ds.map(examples.parse_example).map(examples.decode_image).map(crop_and_flip).map(to_unit_range)
        return ds.batch(32).repeat()
    return make


def decode_and_resize(example: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
    image = tf.io.decode_jpeg(example["image"], channels=3)
    return tf.cast(tf.image.resize(image, [96, 96]), tf.uint8), example["label"]


def expert_tuned(data_dir: str | Path, *, files: int = 16, per_file: int = 256) -> Factory:
    """A pipeline an expert already tuned (the tf.data performance guide's advice): AUTOTUNE
    everywhere, a cache after the deterministic decode, shuffle and random flip above it,
    ``prefetch(AUTOTUNE)`` last. The right answer is "no change"."""
    paths = image_records(data_dir, files=files, per_file=per_file)
    auto = tf.data.AUTOTUNE

    def make() -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices(paths)
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=auto)
        ds = ds.map(examples.parse_example, num_parallel_calls=auto)
        ds = ds.map(decode_and_resize, num_parallel_calls=auto).cache()
        ds = ds.shuffle(1024).map(examples.random_flip, num_parallel_calls=auto)
        ds = ds.map(to_unit_range, num_parallel_calls=auto)
        return ds.batch(32).prefetch(auto)
    return make


def decode_only(data_dir: str | Path, *, files: int = 8, per_file: int = 128) -> Factory:
    """Image-like, decode-heavy, nothing else (the tracing-overhead benchmark)."""
    paths = image_records(data_dir, files=files, per_file=per_file)

    def make() -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices(paths).repeat()
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=2, num_parallel_calls=2)
        ds = ds.map(examples.parse_example, num_parallel_calls=2)
        ds = ds.map(examples.decode_image, num_parallel_calls=2)
        ds = ds.map(examples.resize_image, num_parallel_calls=2)
        return ds.batch(32).prefetch(2)
    return make


def random_crop(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.image.random_crop(image, [96, 96, 3]), label


def decode_and_crop(example: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
    """Fused decode + crop: decodes only the window (cheaper, but nothing left to cache)."""
    offset = tf.random.uniform([2], 0, 32, dtype=tf.int32)
    image = tf.io.decode_and_crop_jpeg(example["image"], tf.concat([offset, [96, 96]], 0), channels=3)
    return tf.ensure_shape(image, [96, 96, 3]), example["label"]


def classification_candidates(data_dir: str | Path, *, files: int = 8, per_file: int = 128) -> dict[str, Factory]:
    """ResNet-style: parse -> decode -> random crop -> flip -> normalize -> batch, unfused vs fused."""
    paths = image_records(data_dir, files=files, per_file=per_file)

    def head() -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=1)
        return ds.map(examples.parse_example)

    def tail(ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.map(examples.random_flip).map(examples.normalize).batch(32).repeat()

    return {"unfused": lambda: tail(head().map(examples.decode_image).map(random_crop)),
            "fused": lambda: tail(head().map(decode_and_crop))}


def box_crop(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Box-aware random crop: a synthetic box per image, kept only if it survives the crop."""
    box = tf.stack([0.1, 0.1, 0.2 + 0.05 * tf.cast(label, tf.float32), 0.6])
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.shape(image), bounding_boxes=box[None, None], min_object_covered=0.1,
        use_image_if_no_bounding_boxes=True)
    crop = tf.slice(image, begin, size)
    boxes = tf.reshape(box, [1, 4]) * tf.cast(label % 3 != 0, tf.float32)
    return tf.image.resize(crop, [96, 96]), boxes, label


def has_boxes(image: tf.Tensor, boxes: tf.Tensor, label: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(boxes) > 0


def detection(data_dir: str | Path, *, files: int = 8, per_file: int = 128) -> Factory:
    """Object detection-like: decode -> box-aware crop -> filter empty examples -> padded batch."""
    paths = image_records(data_dir, files=files, per_file=per_file)

    def make() -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=1)
        ds = ds.map(examples.parse_example).map(examples.decode_image).map(box_crop).filter(has_boxes)
        return ds.padded_batch(16, padded_shapes=([96, 96, 3], [None, 4], [])).repeat()
    return make


def tokenize(line: tf.Tensor) -> tf.Tensor:
    words = tf.strings.split(line)
    return tf.strings.to_hash_bucket_fast(words, 30000)


def truncate(ids: tf.Tensor) -> tf.Tensor:
    return ids[:32]


def add_bos(ids: tf.Tensor) -> tf.Tensor:
    return tf.concat([[1], ids], axis=0)


def text(data_dir: str | Path, *, files: int = 4, lines: int = 4000, tuned: bool = False) -> Factory:
    """Text lines -> tokenize -> truncate -> add BOS -> padded batch: many tiny operations."""
    paths = examples.write_text_files(Path(data_dir) / "text", files=files, lines=lines)
    p = 2 if tuned else None

    def make() -> tf.data.Dataset:
        ds = tf.data.TextLineDataset(paths)
        ds = ds.map(tokenize, num_parallel_calls=p).map(truncate, num_parallel_calls=p)
        ds = ds.map(add_bos, num_parallel_calls=p)
        ds = ds.padded_batch(64, padded_shapes=[33]).repeat()
        return ds.prefetch(2) if tuned else ds
    return make


def planted_skewed(elements: int = 8000) -> Factory:
    """One map two orders of magnitude costlier than another (the RCNN case), epochs repeated."""
    def cheap(x):
        return examples.planted_work(x, 1)

    def costly(x):
        return examples.planted_work(x, 100)
    return lambda: (tf.data.Dataset.range(elements).map(cheap).map(costly).batch(8).repeat()
                    .with_options(sequential_options()))


def planted_three_maps(defaults: bool = False, random_source: bool = False) -> Factory:
    """Three tunable maps of cost 4 : 2 : 1 (planted TF work), run as written, one thread each
    (``defaults``: under TensorFlow's default options instead, maps parallelized by tf.data;
    ``random_source``: over ``Dataset.random``, so nothing can be cached and only threads matter)."""
    def heavy(x):
        return examples.planted_work(x, 64)

    def medium(x):
        return examples.planted_work(x, 32)

    def light(x):
        return examples.planted_work(x, 16)

    def make() -> tf.data.Dataset:
        source = tf.data.Dataset.random(seed=1) if random_source else tf.data.Dataset.range(10**9)
        ds = source.map(heavy).map(medium).map(light).batch(16)
        return ds if defaults else ds.with_options(sequential_options())
    return make


def planted_chain(maps: int = 6) -> Factory:
    """``range`` -> ``maps`` planted maps of growing cost -> ``batch``: ``maps + 2`` operators
    under TensorFlow's defaults (what the calibration's cost is measured on)."""
    def stage(units: int):
        def work(x):
            return examples.planted_work(tf.cast(x, tf.int64), units)
        work.__name__ = f"work{units}"
        return work

    def make() -> tf.data.Dataset:
        ds = tf.data.Dataset.range(10**9)
        for k in range(maps):
            ds = ds.map(stage(4 * (k + 1)))
        return ds.batch(16)
    return make


def waveform(i: tf.Tensor) -> tf.Tensor:
    t = tf.range(16000, dtype=tf.float32) / 16000.0
    f = 200.0 + tf.cast(i % 50, tf.float32) * 20.0
    return tf.sin(2 * math.pi * f * t) + 0.01 * tf.cos(7.0 * t * tf.cast(i % 13, tf.float32))


def spectrogram(x: tf.Tensor) -> tf.Tensor:
    return tf.abs(tf.signal.stft(x, frame_length=400, frame_step=160))


def mel(spec: tf.Tensor) -> tf.Tensor:
    matrix = tf.signal.linear_to_mel_weight_matrix(64, 257, 16000, 20.0, 8000.0)
    return tf.math.log(tf.matmul(spec, matrix) + 1e-6)


def _band(size: int, width: int) -> tf.Tensor:
    """1.0 everywhere except a random band of ``width`` zeros (SpecAugment-style masking)."""
    start = tf.random.uniform([], 0, size - width, dtype=tf.int32)
    return tf.cast(tf.logical_or(tf.range(size) < start, tf.range(size) >= start + width), tf.float32)


def mask(m: tf.Tensor) -> tf.Tensor:
    """A random time mask and a random frequency mask on a (98 frames x 64 mel) spectrogram."""
    return m * _band(98, 10)[:, None] * _band(64, 8)[None, :]


def speech() -> Factory:
    """Synthetic waveforms -> STFT -> mel -> random time mask -> batch."""
    return lambda: (tf.data.Dataset.range(2000).map(waveform).map(spectrogram).map(mel)
                    .map(mask).batch(16).repeat())



#: The bench's two sets. *tuning*: the pipelines above, on which the model's costs, constants and
#: rules are made and checked. *held-out*: public pipelines restated in
#: :mod:`plumbkit.bench.public_pipelines`, read only to report the error; no model change is
#: ever tuned on them.
TUNING = "tuning"
HELD_OUT = "held-out"
SPLITS = (TUNING, HELD_OUT)
