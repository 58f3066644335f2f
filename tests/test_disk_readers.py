"""The disk's read bandwidth is measured with the reader the files need (Plumber §4.3, "Disk").

GZIP TFRecords written with ``TFRecordWriter(path, options="GZIP")`` and read with
``TFRecordDataset(files, compression_type="GZIP", num_parallel_reads=2)`` crashed every plan:
the bandwidth probe read them as plain records ("corrupted record at 0"; found trying user
shapes, session 58). The probe now asks each file how it is compressed, and a file that reads
as nothing it knows leaves the disk out of the plan instead of failing it.

CIFAR-10's binary files read with ``FixedLengthRecordDataset`` (tensorflow/models' ResNet input)
crashed every plan too, with a bare StopIteration: the probe had no reader for them (user shapes,
session 61). Their record size sits inside the reader's function, where the graph does not say
which captured number it is; the probe reads them in chunks every file divides into.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import plumbkit
from plumbkit.engine.measuring import disk_bound
from plumbkit.tfdata.disk import compression_of, measure_read_bandwidth

from conftest import BRIEF

pytestmark = pytest.mark.concurrent  # checks what is read and planned, not a speed (tests/run)


def records(path, compression: str, n: int = 400) -> str:
    with tf.io.TFRecordWriter(str(path), options=compression or None) as writer:
        for i in range(n):
            writer.write(np.full(256, i % 251, np.uint8).tobytes())
    return str(path)


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_each_compression_is_recognized_and_read(tmp_path, compression):
    files = [records(tmp_path / f"r{k}.tfrecord", compression) for k in range(2)]
    assert compression_of(files[0], "tfrecord") == compression
    curve = measure_read_bandwidth(files, "tfrecord", parallelisms=(1, 2), seconds=0.05)
    assert curve is not None and all(bw > 0 for _, bw in curve.points), curve


def test_a_file_that_is_no_record_leaves_the_disk_out(tmp_path):
    """Negative control: bytes that read as no TFRecord give no curve, and no error."""
    junk = tmp_path / "junk.tfrecord"
    junk.write_bytes(b"not a record at all" * 100)
    assert measure_read_bandwidth([str(junk)], "tfrecord", parallelisms=(1,), seconds=0.05) is None


def test_a_pipeline_of_gzip_records_is_planned(tmp_path):
    files = [records(tmp_path / f"g{k}.tfrecord.gz", "GZIP", n=1500) for k in range(2)]

    def make():
        ds = tf.data.TFRecordDataset(files, compression_type="GZIP", num_parallel_reads=2)
        return ds.map(lambda s: tf.reduce_sum(tf.cast(tf.io.decode_raw(s, tf.uint8), tf.int64))).batch(50)
    plan = plumbkit.optimize(make, seconds=0.5, compare=False, protocol=BRIEF)
    assert plan.prediction.throughput > 0
    yours = sorted(v for b in make() for v in b.numpy().tolist())  # two readers interleaved
    assert sorted(v for b in plan.dataset for v in b.numpy().tolist()) == yours


def cifar_files(tmp_path, n_files: int = 2, records_per_file: int = 400) -> list[str]:
    """CIFAR-10's binary format: a label byte, then 3,072 pixel bytes, per record."""
    rng = np.random.default_rng(0)
    paths = []
    for k in range(n_files):
        path = tmp_path / f"data_batch_{k}.bin"
        rng.integers(0, 256, (records_per_file, 3073), dtype=np.uint8).tofile(path)
        paths.append(str(path))
    return paths


def test_fixed_length_records_are_read_in_chunks_every_file_divides_into(tmp_path):
    files = cifar_files(tmp_path)
    curve = measure_read_bandwidth(files, "fixed_length_record", parallelisms=(1, 2), seconds=0.05)
    assert curve is not None and all(bw > 0 for _, bw in curve.points), curve
    # negative control: files whose sizes share no chunk of 4 KB or more are not read byte by byte
    odd = [tmp_path / "a.bin", tmp_path / "b.bin"]
    odd[0].write_bytes(b"x" * 100_003), odd[1].write_bytes(b"x" * 100_019)
    assert measure_read_bandwidth([str(p) for p in odd], "fixed_length_record", parallelisms=(1,), seconds=0.05) is None


def test_a_pipeline_of_fixed_length_records_is_planned_with_its_disk(tmp_path):
    files = cifar_files(tmp_path)

    def make():
        def parse(raw):
            record = tf.io.decode_raw(raw, tf.uint8)
            image = tf.transpose(tf.reshape(record[1:], [3, 32, 32]), [1, 2, 0])
            return tf.reduce_mean(tf.cast(image, tf.float32)), tf.cast(record[0], tf.int32)
        return tf.data.FixedLengthRecordDataset(files, record_bytes=3073).map(parse).batch(40)
    trace = plumbkit.trace(make(), seconds=1.0, max_batches=30, converge=False, calibrate=False)
    bound = disk_bound(trace, parallelism=2)
    assert bound is not None and bound > 0  # minibatches/s the disk allows: before the fix, StopIteration
    plan = plumbkit.optimize(make, seconds=0.5, compare=False, protocol=BRIEF)
    assert plan.prediction.throughput > 0
    assert [b[1].numpy().tolist() for b in plan.dataset] == [b[1].numpy().tolist() for b in make()]
