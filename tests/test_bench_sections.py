"""The bench's issue sections' own parts, without running the bench: the independent input-bound
share their goal is checked against, the evaluation records sized as asked, a failed row said in
one line while the others stand."""

import os
import time
from pathlib import Path

import pytest
import tensorflow as tf

from plumbkit.bench import disk_tier, model_loop
from plumbkit.bench.alike import attempt

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)


def _sleeping(seconds: float):
    def wait(x):
        time.sleep(seconds)
        return x
    return wait


def test_the_independent_input_bound_share_is_the_wait_over_the_step():
    """A pipeline taking 48 ms a minibatch (nothing in flight) and a 16 ms step: each step on the
    pipeline takes 48-64 ms (64 one after the other; 48 where the prefetch tf.data injects at the
    root overlaps the pipeline's wait with the step), 16 on one replayed minibatch, so the
    pipeline adds 67-75% of a step. With 12 and 4 ms sleeps, each wake-up coming a few ms late on
    a busy machine weighed against 16 (CI once read 0.5999); at these lengths three spinning
    processes on two cores moved it to 0.64-0.66. A share of the wrong quantity (the step over
    the wait: 0.33, or nothing replayed: 0) falls outside the band."""
    make = lambda: tf.data.Dataset.range(10**6).map(  # noqa: E731
        lambda i: tf.py_function(_sleeping(0.048), [i], tf.int64))
    share = model_loop.independent_input_bound(make, model_loop.sleeping_step(0.016), rounds=3, steps=8)
    assert 0.55 <= share <= 0.85, share


def test_evaluation_records_reach_the_size_asked_from_copies_of_one_file(tmp_path: Path):
    paths = disk_tier.evaluation_records(tmp_path, gigabytes=0.0004, size=32, per_file=16)
    sizes = {Path(p).stat().st_size for p in paths}
    assert len(sizes) == 1 and len(paths) * sizes.pop() >= 0.0004e9
    assert not (tmp_path / "distinct").exists()
    assert sum(1 for _ in tf.data.TFRecordDataset(paths)) == 16 * len(paths)


def test_a_failed_row_is_said_in_one_line_and_the_others_stand():
    rows, said = {}, []

    def fails():
        raise ValueError("the disk at /x is full\nsecond line")
    attempt(rows, "image", said.append, fails)
    attempt(rows, "evaluation", said.append, lambda: {"pipeline": "evaluation", "failed": {}})
    assert rows["image"]["failed"] == "ValueError: the disk at /x is full" and "evaluation" in rows
    lines = disk_tier.markdown({"rows": {"image": rows["image"]}, "bytes_written": None, "bytes_removed": 0,
                                "fill_rounds": 3, "eval_gb": 3.0})
    assert "- **image**: failed — ValueError: the disk at /x is full" in lines


def test_a_tier_whose_epoch_outlasts_a_window_is_measured_over_an_epoch():
    """The evaluation tier's read rate moves within its epoch: its windows span one epoch at the
    plan's predicted rate (every contender alike), at most two to settle; a short epoch keeps the
    protocol as it is."""
    from plumbkit.model.protocol import FULL
    long = disk_tier.epoch_windows(FULL, epoch_batches=5088, predicted=623.0)
    assert abs(long.window - 5088 / 623.0) < 1e-9 and long.max_windows == 2 and long.rounds == FULL.rounds
    assert disk_tier.epoch_windows(FULL, epoch_batches=384, predicted=623.0) is FULL
    assert disk_tier.epoch_windows(FULL, epoch_batches=384, predicted=0.0) is FULL


def _resident(path: Path) -> float:
    """The share of ``path``'s pages in the page cache (``mincore`` on a map of it)."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size, page = path.stat().st_size, mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        pages = (size + page - 1) // page
        vec = ctypes.create_string_buffer(pages)
        assert libc.mincore(ctypes.c_void_p(addr), size, vec) == 0, ctypes.get_errno()
        libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)
    return sum(b & 1 for b in vec.raw) / pages


def test_data_read_again_while_the_contenders_run_is_read_from_the_disk(tmp_path: Path):
    """A window longer than the tier's epoch read its second pass from memory: while the
    contenders run, the page cache is kept empty of the data and the tier (data larger than
    memory is read from the disk every epoch), and the evictor stops with the block."""
    data, tier = tmp_path / "data.bin", tmp_path / "tier" / "shard"
    tier.parent.mkdir()
    for f in (data, tier):
        f.write_bytes(os.urandom(8 * 2**20))
    evict = disk_tier.evictor([str(data)], tmp_path / "tier")
    passes = []

    def counted(name: str) -> None:
        passes.append(name)
        evict(name)
    for f in (data, tier):
        f.read_bytes()  # read into the page cache
    assert min(_resident(data), _resident(tier)) > 0.9  # control: a file just read is in memory
    with disk_tier.kept_evicted(counted, every=0.02):
        # two whole passes done (a pass is counted as it starts): each fsyncs the fresh files
        # first, which beside another test writing to the disk outlasted a fixed 0.2 s (CI: the
        # tier's shard still resident at the check, the data evicted)
        deadline = time.monotonic() + 10
        while len(passes) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert max(_resident(data), _resident(tier)) < 0.1, (len(passes), _resident(data), _resident(tier))
    # counted once the block has ended (it joins the evictor): a pass may start between the check
    # above and the block's end (CI: four passes counted, three read inside the block)
    during = len(passes)
    time.sleep(0.1)
    assert during >= 3 and len(passes) == during  # it ran, and stopped with the block
