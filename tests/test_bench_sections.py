"""The bench's issue sections' own parts, without running the bench: the independent input-bound
share their goal is checked against, the evaluation records sized as asked, a failed row said in
one line while the others stand."""

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
    """A pipeline taking 12 ms a minibatch (nothing in flight) and a 4 ms step: each step on the
    pipeline takes ~16 ms, 4 on one replayed minibatch, so the pipeline adds ~75% of a step."""
    make = lambda: tf.data.Dataset.range(10**6).map(  # noqa: E731
        lambda i: tf.py_function(_sleeping(0.012), [i], tf.int64))
    share = model_loop.independent_input_bound(make, model_loop.sleeping_step(0.004), rounds=3, steps=8)
    assert 0.6 <= share <= 0.9, share


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
