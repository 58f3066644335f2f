"""The disk's read bandwidth is measured with the reader the files need (Plumber §4.3, "Disk").

GZIP TFRecords written with ``TFRecordWriter(path, options="GZIP")`` and read with
``TFRecordDataset(files, compression_type="GZIP", num_parallel_reads=2)`` crashed every plan:
the bandwidth probe read them as plain records ("corrupted record at 0"; found trying user
shapes, session 58). The probe now asks each file how it is compressed, and a file that reads
as nothing it knows leaves the disk out of the plan instead of failing it.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import plumbkit
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
