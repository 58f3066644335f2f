"""A reader over repeated file names never ends: it is never a place for a cache.

The TPU ResNet input (tensorflow/tpu, models/official/resnet/imagenet_input.py) and the
tensorflow/models input reader repeat the *file names* below the interleave that reads them.
TensorFlow cannot count such a reader, and plumbkit once sized it from its bytes on disk: the
plan cached it in memory ("deterministic and finite, 5.2 MB"), and that cache never finished its
first pass, so it filled forever and never served.
"""

import pytest
import tensorflow as tf

import plumbkit
from plumbkit.planning.decisions import decide

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)


def _records(tmp_path, files=4, per_file=64):
    paths = []
    for i in range(files):
        path = str(tmp_path / f"part-{i}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for j in range(per_file):
                writer.write(tf.io.serialize_tensor(tf.fill([32], float(i * per_file + j))).numpy())
        paths.append(path)
    return paths


def test_a_reader_over_repeated_file_names_is_infinite_and_not_cached(tmp_path):
    paths = _records(tmp_path)

    def make(repeat_names: bool):
        names = tf.data.Dataset.from_tensor_slices(paths)
        names = names.repeat() if repeat_names else names
        ds = names.interleave(tf.data.TFRecordDataset, cycle_length=2)
        return ds.map(lambda r: tf.io.parse_tensor(r, tf.float32)).batch(8)

    endless = plumbkit.trace(lambda: make(True), seconds=1.0, min_seconds=0.5, converge=False, calibrate=False)
    reader = next(o for o in endless.ops if o.kind == "interleave")
    assert not reader.cacheable and "infinite" in reader.cache_note, (reader.cacheable, reader.cache_note)
    cache = decide(endless, memory_budget=2**30).cache
    endless_ops = {o.name for o in endless.ops if o.kind in ("interleave", "map", "batch", "repeat")}
    assert cache.node not in endless_ops, cache  # at most the file names below the repeat

    # the same reader over one pass of the names is finite, sized from its files, and cacheable
    finite = plumbkit.trace(lambda: make(False), seconds=1.0, min_seconds=0.5, converge=False, calibrate=False)
    reader = next(o for o in finite.ops if o.kind == "interleave")
    assert reader.cacheable, reader.cache_note
    assert decide(finite, memory_budget=2**30).cache.label in ("batch(8)", "map(lambda)")
