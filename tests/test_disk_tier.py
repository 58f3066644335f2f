"""The disk tier: a cache that never goes stale (fingerprint) or half-written (the guarded fill).

Every test writes under ``tmp_path``, never the user's cache folder. Sizes are kept small: a
fill of a few MB takes well under a second; the one subprocess (a second process meeting a
fill in progress, then Ctrl-C) is shared by three checks.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from plumbkit import cli
from plumbkit.model.disk_tier import tree_bytes
from plumbkit.tunables import TIER_KEEP_FREE_BYTES
from plumbkit.tfdata.disk_probe import probe_directory, read_back
from plumbkit.tfdata.disk_tier import (FillInProgressError, FillInterrupted,
                                       NotCacheableError, SpaceError, clear_caches, default_cache_dir,
                                       find_cache, fingerprint, list_caches, on_disk, open_tier, read_tier,
                                       tier_paths, write_tier)

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

ROOT = Path(__file__).resolve().parents[1]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert text and "\n" not in text, text
    return text


def same_elements(got: tf.data.Dataset, want: tf.data.Dataset) -> bool:
    """The same elements in the same order (compared as one batch of all: fast)."""
    a, b = next(iter(got.batch(100_000))), next(iter(want.batch(100_000)))
    flat_a, flat_b = tf.nest.flatten(a), tf.nest.flatten(b)
    return len(flat_a) == len(flat_b) and all(
        x.shape == y.shape and np.array_equal(x.numpy(), y.numpy()) for x, y in zip(flat_a, flat_b))


def records(path: Path, n: int) -> Path:
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(n):
            w.write(f"record {i}".encode())
    return path


def test_default_folder_is_the_users_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "plumbkit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "plumbkit"


def test_reads_back_the_same_elements_in_order_and_fills_once(tmp_path):
    ds = tf.data.Dataset.range(1003).map(
        lambda i: {"id": i, "pixels": tf.fill([3, 2], tf.cast(i % 7, tf.uint8)),
                   "name": tf.strings.as_string(i)})
    cached = on_disk(ds, tmp_path)
    assert cached.element_spec == ds.element_spec
    assert same_elements(cached, ds)
    assert not same_elements(cached, ds.skip(1).concatenate(ds.take(1)))  # the order counts
    [entry] = list_caches(tmp_path)
    assert entry.complete and entry.elements == 1003 and entry.bytes == tree_bytes(entry.path)
    assert find_cache(ds, tmp_path) == entry and find_cache(ds.take(5), tmp_path) is None
    assert write_tier(ds, tmp_path / "probe") == 1003  # the same form, unguarded, for a probe
    assert same_elements(read_tier(tmp_path / "probe", ds.element_spec), ds)
    again = on_disk(ds, tmp_path)  # found, not filled again
    assert list_caches(tmp_path) == [entry]
    assert same_elements(again, ds)


def test_a_filled_tier_is_found_in_its_pipeline_and_its_own_read_replaces_the_probes(tmp_path):
    """After the fill the plan is predicted on a stretch of the tier itself, read back evicted
    (a probe of a few MB reads what the host still holds): the reader is found in the rebuilt
    pipeline's graph, opened from its files alone, and its read timed."""
    ds = tf.data.Dataset.range(3000).map(lambda x: tf.fill([1024], tf.cast(x, tf.float32)))  # 12 MB
    above = on_disk(ds, tmp_path).map(lambda x: x * 2)
    [path] = tier_paths(above)
    assert path == find_cache(ds, tmp_path).path and tier_paths(ds) == []
    assert same_elements(open_tier(path), ds)
    probed = probe_directory(tmp_path, 4096)
    read = read_back(path, probed)
    assert read is not None and read.read_back_bytes == pytest.approx(tree_bytes(path), rel=0.01)
    assert read.read_bandwidth > 0 and read.read_cpu_per_element > 0
    assert 0 < read.read_thread_cpu_per_element <= read.read_cpu_per_element  # the rest: the reader's threads
    assert (read.write_bandwidth, read.free_bytes) == (probed.write_bandwidth, probed.free_bytes)  # the probe's
    assert "read back from" in read.read_source() and "probe" in probed.read_source()
    partly = read_back(path, probed, max_bytes=4 * 2**20)  # a stretch: the first 4 MB
    assert partly is not None and partly.read_back_bytes == pytest.approx(4 * 2**20, rel=0.01)
    small = on_disk(tf.data.Dataset.range(10).map(lambda x: tf.fill([1024], x)), tmp_path)
    assert read_back(tier_paths(small)[0], probed) is None  # too small to time apart from its opening
    minibatches = on_disk(tf.data.Dataset.range(600).map(lambda x: tf.fill([256], x)).batch(16), tmp_path)
    read = read_back(tier_paths(minibatches)[0], probed)  # 38 minibatches, the last of 8: shapes vary
    assert read is not None and read.read_back_bytes == pytest.approx(600 * 256 * 8, rel=0.05)


def test_a_changed_map_or_a_touched_file_never_reads_the_old_cache(tmp_path):
    source = records(tmp_path / "data.tfrecord", 50)

    def build(plus: int) -> tf.data.Dataset:
        return tf.data.TFRecordDataset(str(source)).map(lambda r: tf.strings.length(r) + plus)

    before = fingerprint(build(0))
    assert fingerprint(build(0)) == before  # the same pipeline built again
    assert fingerprint(build(100)) != before
    assert [int(x) for x in on_disk(build(0), tmp_path / "c")][:2] == [8, 8]
    assert [int(x) for x in on_disk(build(100), tmp_path / "c")][:2] == [108, 108]
    st = os.stat(source)
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert fingerprint(build(0)) != before
    assert len(list_caches(tmp_path / "c")) == 2


def test_settings_of_speed_alone_keep_the_fingerprint():
    """Parallelism values, prefetches and threading options change when elements are made,
    never which or in what order: the plan's tuned pipeline reads the cache the user's filled."""
    def f(x):
        return x * 3

    def build(calls, *, deterministic=None, batch=4, fn=f):
        return tf.data.Dataset.range(100).map(fn, num_parallel_calls=calls, deterministic=deterministic).batch(batch)

    options = tf.data.Options()
    options.threading.private_threadpool_size = 3
    tuned = build(tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE).with_options(options)
    assert fingerprint(build(2)) == fingerprint(tuned)
    others = [build(2, deterministic=False), build(2, batch=5), build(2, fn=lambda x: x * 4), build(None)]
    assert len({fingerprint(build(2)), *map(fingerprint, others)}) == 5


def test_infinite_or_random_pipelines_are_refused_in_one_line(tmp_path):
    with pytest.raises(NotCacheableError) as err:
        on_disk(tf.data.Dataset.range(3).repeat(), tmp_path)
    assert "infinite" in one_line(err)
    with pytest.raises(NotCacheableError, match="infinite"):  # TensorFlow says "unknown" here
        on_disk(tf.data.Dataset.range(3).repeat().filter(lambda x: x > 0), tmp_path)
    bounded = tf.data.Dataset.range(3).repeat().take(7).filter(lambda x: x > 0)
    assert [int(x) for x in on_disk(bounded, tmp_path / "ok")] == [1, 2, 1, 2]
    with pytest.raises(NotCacheableError) as err:
        on_disk(tf.data.Dataset.range(3).map(lambda x: x + tf.random.uniform([], 0, 9, tf.int64)), tmp_path)
    assert "random" in one_line(err)
    scale = tf.Variable(2, dtype=tf.int64)
    with pytest.raises(NotCacheableError) as err:
        on_disk(tf.data.Dataset.range(3).map(lambda x: x * scale), tmp_path)
    assert "variable" in one_line(err)
    assert leftovers(tmp_path) == ["ok"]


def pause(i):
    time.sleep(0.001)  # a slow source, deterministic
    return i


def slow(n: int) -> tf.data.Dataset:
    return tf.data.Dataset.range(n).map(lambda i: tf.fill([256], tf.py_function(pause, [i], tf.int64)))


def test_cancel_leaves_no_partial_files_and_no_lock(tmp_path):
    started = time.monotonic()
    progress = []
    with pytest.raises(FillInterrupted) as err:
        on_disk(slow(100_000), tmp_path, on_progress=lambda n, b: progress.append((n, b)),
                should_stop=lambda: time.monotonic() - started > 1.0)
    one_line(err)
    assert max(b for _, b in progress) > 0  # it had written, and reported it
    assert leftovers(tmp_path) == []


def test_an_error_mid_epoch_leaves_no_partial_files_and_no_lock(tmp_path):
    def check(x):
        tf.debugging.assert_less(x[0], tf.constant(3000, tf.int64), message="bad record")
        return x

    ds = tf.data.Dataset.range(5000).map(lambda i: tf.fill([512], i)).map(check)
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad record"):
        on_disk(ds, tmp_path)
    assert leftovers(tmp_path) == []


def test_a_budget_smaller_than_the_data_is_refused_in_one_line(tmp_path):
    known = tf.data.Dataset.range(1000).map(lambda i: tf.fill([1024], tf.cast(i, tf.uint8)))  # 1 MB
    with pytest.raises(SpaceError) as err:
        on_disk(known, tmp_path, budget_bytes=200_000)
    assert "refused before writing" in one_line(err) and "budget" in str(err.value)
    assert leftovers(tmp_path) == []
    unknown = known.filter(lambda x: True)  # the size is found out while writing
    with pytest.raises(SpaceError) as err:
        on_disk(unknown, tmp_path, budget_bytes=300_000)
    assert "stopped after" in one_line(err) and "budget" in str(err.value)
    assert leftovers(tmp_path) == []


def test_a_disk_that_fills_up_mid_fill_stops_in_one_line(tmp_path):
    """The disk's free space shrinks as the fill writes (the free-space function is the one
    thing replaced: 2 MB past what plumbkit keeps free, less what is under tmp_path)."""
    ds = tf.data.Dataset.range(20_000).map(lambda i: tf.fill([128], i)).filter(lambda x: True)  # ~20 MB
    with pytest.raises(SpaceError) as err:
        on_disk(ds, tmp_path, free_space=lambda d: TIER_KEEP_FREE_BYTES + 2_000_000 - tree_bytes(tmp_path))
    assert "free" in one_line(err)
    assert leftovers(tmp_path) == []


def test_a_stale_lock_of_a_dead_process_is_cleaned(tmp_path):
    ds = tf.data.Dataset.range(10)
    fp = fingerprint(ds)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"{fp}.lock").write_text(f"{dead.pid}\n")
    (tmp_path / f".{fp}.save.partial-{dead.pid}").mkdir()
    (tmp_path / f".{fp}.save.partial-{dead.pid}" / "junk").write_bytes(b"x" * 100)
    assert [int(x) for x in on_disk(ds, tmp_path)] == list(range(10))
    assert leftovers(tmp_path) == [f"{fp}.save"]
    other = tf.data.Dataset.range(20)  # this process's own leftovers (a fill it did not finish)
    theirs = fingerprint(other)
    (tmp_path / f"{theirs}.lock").write_text(f"{os.getpid()}\n")
    (tmp_path / f".{theirs}.save.partial-{os.getpid()}").mkdir()
    (tmp_path / f".{theirs}.save.partial-{os.getpid()}" / "junk").write_bytes(b"x" * 100)
    assert [int(x) for x in on_disk(other, tmp_path)] == list(range(20))
    assert leftovers(tmp_path) == sorted([f"{fp}.save", f"{theirs}.save"])


def test_two_threads_of_one_process_fill_once(tmp_path):
    ds = tf.data.Dataset.range(3000).map(lambda i: tf.fill([64], i))
    results = []
    threads = [threading.Thread(target=lambda: results.append(on_disk(ds, tmp_path))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2 and len(list_caches(tmp_path)) == 1
    for cached in results:
        assert same_elements(cached, ds)


FILLER = """
import sys, time, tensorflow as tf
from plumbkit.tfdata.disk_tier import fingerprint, on_disk


def pause(i):
    time.sleep(0.001)  # a slow source, deterministic
    return i


def slow(n: int) -> tf.data.Dataset:
    return tf.data.Dataset.range(n).map(lambda i: tf.fill([256], tf.py_function(pause, [i], tf.int64)))


ds = slow(100_000)
print(fingerprint(ds), flush=True)
on_disk(ds, sys.argv[1])
"""


def test_a_second_process_meets_a_fill_in_progress_and_ctrl_c_cleans_up(tmp_path):
    """One child process: it prints its fingerprint (the same as this process's: a fresh
    process builds the same one), starts a fill that would take 100 s; this process then meets
    the fill in progress (one line, never a partial epoch); Ctrl-C ends the child's fill and
    leaves no partial files and no lock."""
    code = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            f"exec(compile({FILLER!r}, 'filler', 'exec'))")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        theirs = child.stdout.readline().strip()
        ds = slow(100_000)
        assert theirs == fingerprint(ds)
        deadline = time.monotonic() + 60
        while not any(n.startswith(".") for n in leftovers(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(FillInProgressError) as err:
            on_disk(ds, tmp_path)
        assert str(child.pid) in one_line(err)
        assert list_caches(tmp_path)[0].complete is False
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode != 0 and "KeyboardInterrupt" in stderr
    assert leftovers(tmp_path) == [], stderr


def test_list_and_clear_also_on_the_command_line(tmp_path, capsys):
    on_disk(tf.data.Dataset.range(100), tmp_path)
    on_disk(tf.data.Dataset.range(200), tmp_path)
    entries = list_caches(tmp_path)
    assert sorted(e.elements for e in entries) == [100, 200]
    assert cli.main(["cache", "list", "--dir", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert all(e.fingerprint in shown for e in entries) and "2 cache(s)" in shown
    first = entries[0]
    assert cli.main(["cache", "clear", "--dir", str(tmp_path), "--fingerprint", first.fingerprint[:8]]) == 0
    assert "freed" in capsys.readouterr().out
    assert [e.fingerprint for e in list_caches(tmp_path)] == [entries[1].fingerprint]
    assert clear_caches(tmp_path) == entries[1].bytes
    assert list_caches(tmp_path) == [] and leftovers(tmp_path) == []
