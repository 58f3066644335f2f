"""Bad input, nothing lost: one clear line, and the user's pipeline and namespace untouched.

An empty dataset, a filter that rejects everything, a pipeline that raises mid-trace (a corrupt
record), files that vanish, a memory budget above what the machine has, a budget below every
cache, a cell whose functions have default arguments, what plumbkit cannot rebuild (the
README's table) — through ``trace``, ``step``, ``optimize``, the magics and the widget. Real
TensorFlow and a real IPython shell. ~40 s.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from IPython.core.interactiveshell import InteractiveShell

import plumbkit
from plumbkit.magics import PlumbUsageError, find_pipeline, parse_bytes
from plumbkit.tunables import ESTIMATE_MARGIN, MAX_BUDGET_SHARE
from plumbkit.planning.decisions import decide
from plumbkit.host.machine import available_memory
from plumbkit.tfdata import unrebuildable

from conftest import BRIEF

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)


def values(ds) -> list:
    return [np.asarray(e).tolist() for e in ds.as_numpy_iterator()]


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "plumbkit")
    return shell


def run_magic(ip, capsys, line: str, cell: str) -> str:
    ip.run_cell_magic("plumb", line, cell)
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return out.out


# -- an empty dataset -----------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: tf.data.Dataset.range(0).batch(4),
                                  lambda: tf.data.Dataset.range(50).filter(lambda x: x < 0).batch(4)],
                         ids=["cardinality 0", "filtered to nothing"])
def test_an_empty_dataset_is_one_clear_line_everywhere(make):
    ds = make()
    spec = ds.element_spec
    for run in (lambda: plumbkit.trace(ds, seconds=1), lambda: plumbkit.step(ds, seconds=1),
                lambda: plumbkit.optimize(ds, seconds=1, compare=False)):
        with pytest.raises(plumbkit.PipelineError, match=r"^the pipeline is empty"):
            run()
    assert ds.element_spec == spec and values(ds) == []  # the user's dataset, untouched


def test_an_empty_dataset_in_the_magic_keeps_the_namespace(ip, capsys):
    out = run_magic(ip, capsys, "--no-widget -s 1", "import tensorflow as tf\nempty = tf.data.Dataset.range(0)\nempty")
    assert out.strip().splitlines()[-1].startswith("plumbkit: the pipeline is empty")
    assert isinstance(ip.user_ns["empty"], tf.data.Dataset)


# -- a filter that rejects everything ------------------------------------------------------------

def test_a_filter_that_rejects_everything_ends_on_time_and_says_where():
    stop = threading.Event()

    def endless():
        i = 0
        while not stop.is_set():
            i += 1
            yield i

    def make():
        source = tf.data.Dataset.from_generator(endless, output_signature=tf.TensorSpec((), tf.int64))
        return source.filter(lambda x: x < 0).batch(4)
    try:
        t0 = time.perf_counter()
        with pytest.raises(plumbkit.PipelineError, match=r"produced no element in \d+\.\d s: "
                                                        r"filter\(lambda\) passed none of the [\d,]+ elements"):
            plumbkit.trace(make, seconds=2)
        assert time.perf_counter() - t0 < 6  # the deadline plus a second's grace, not 30 s more
        t0 = time.perf_counter()
        with pytest.raises(plumbkit.PipelineError, match="produced no element"):
            plumbkit.optimize(make, seconds=1, compare=False)
        assert time.perf_counter() - t0 < 6
    finally:
        stop.set()  # the generator ends, so the consumers stuck in next() return
    deadline = time.perf_counter() + 10
    while any(t.name == "plumbkit-consumer" for t in threading.enumerate()) and time.perf_counter() < deadline:
        time.sleep(0.1)
    assert not any(t.name == "plumbkit-consumer" for t in threading.enumerate())


# -- a pipeline that raises mid-trace: a corrupt record --------------------------------------------

def write_records(path, n: int) -> str:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(n):
            writer.write(str(i).encode() * 40)
    return str(path)


def test_a_corrupt_record_mid_trace_is_one_line_and_what_ran_is_kept(tmp_path):
    path = write_records(tmp_path / "part.tfrecord", 400)
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) * 3 // 4] + b"\x00garbage")  # the last quarter is corrupt

    def make():
        return tf.data.TFRecordDataset(path).map(tf.strings.length).batch(10)
    t = plumbkit.trace(make, seconds=2)
    assert t.ended == "error" and t.throughput > 0
    note = next(n for n in t.notes if n.startswith("the pipeline raised after"))
    assert "DataLossError" in note and "\n" not in note
    with pytest.raises(plumbkit.PipelineError, match=r"raised while being measured, after [\d,]+ minibatches: "
                                                    r"DataLossError"):
        plumbkit.optimize(make, seconds=1, compare=False)


# -- files that vanish -----------------------------------------------------------------------------

def test_files_that_vanish_are_named(tmp_path):
    files = [write_records(tmp_path / f"p{i}.tfrecord", 20) for i in range(2)]
    ds = tf.data.TFRecordDataset(files).map(tf.strings.length).batch(4)
    for f in files:
        (tmp_path / f.split("/")[-1]).unlink()
    for run in (lambda: plumbkit.trace(ds, seconds=1), lambda: plumbkit.step(ds, seconds=1)):
        with pytest.raises(plumbkit.PipelineError, match=r"failed before producing anything: NotFoundError: "
                                                        r".*p0\.tfrecord; No such file or directory$"):
            run()


# -- memory budgets --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_trace():
    def decode(x):
        return tf.cast(tf.fill([16, 16, 3], x % 200), tf.uint8)
    return plumbkit.trace(lambda: tf.data.Dataset.range(2000).map(decode).batch(10), seconds=1)


def test_a_budget_above_the_machine_is_capped_with_the_reason(small_trace):
    free, source = available_memory()
    d = decide(small_trace, memory_budget=1e15)  # 1 PB
    assert d.cache.budget <= MAX_BUDGET_SHARE * free * 1.05
    note = d.notes[0]
    assert "1000.0 TB is more than this machine can give: capped at" in note and source in note
    assert parse_bytes("1PB") == 1e15


def test_a_budget_below_every_cache_caches_nothing_and_says_why(small_trace):
    d = decide(small_trace, memory_budget=100)
    assert d.cache.node is None and not [c for c in d.changes if c.what == "cache"]
    assert d.cache.why.startswith("nothing fits: every deterministic candidate") and "100 B budget" in d.cache.why


def test_the_estimate_keeps_a_margin(small_trace):
    size = small_trace.op("batch(10)").materialized_bytes
    just_enough = decide(small_trace, memory_budget=size * (1 + ESTIMATE_MARGIN) * 1.01)
    too_tight = decide(small_trace, memory_budget=size * 1.05)
    assert just_enough.cache.label == "batch(10)" and too_tight.cache.label != "batch(10)"


def test_a_plan_below_every_cache_keeps_the_elements():
    def make():
        return tf.data.Dataset.range(300).map(lambda x: x * 3).batch(7)
    plan = plumbkit.optimize(make, seconds=1, rounds=1, compare=False, memory_budget=10,
                             protocol=BRIEF)  # what the plan yields, not its speed: a brief comparison
    assert plan.cache.node is None and "nothing fits" in plan.cache.why
    assert values(plan.dataset) == values(make())


# -- a cell whose functions have default arguments -------------------------------------------------

def test_find_pipeline_never_calls_a_function_it_cannot_see_returns_a_dataset(ip):
    calls = []
    ns = {"tf": tf, "calls": calls}
    cell = ("def train(epochs=3):\n    calls.append(epochs)\n    return epochs\n"
            "def report(path='out.txt'):\n    calls.append(path)\n")
    exec(cell, ns)  # noqa: S102
    with pytest.raises(PlumbUsageError, match="no tf.data pipeline in this cell"):
        find_pipeline(cell, ns, None, None)
    assert calls == []  # neither was called to find out
    factory = ("def make(batch=8):\n    ds = tf.data.Dataset.range(30)\n    ds = ds.map(lambda x: x + 1)\n"
               "    return ds.batch(batch)\n")
    exec(factory, ns)  # noqa: S102
    found, how = find_pipeline(cell + factory, ns, None, None)
    assert found is ns["make"] and how == "function make()" and calls == []
    assert find_pipeline(cell, ns, None, "train")[0] is ns["train"]  # --var names it: the user's choice


def test_a_cell_of_functions_with_defaults_in_the_magic(ip, capsys):
    cell = "calls = []\ndef side_effect(n=1):\n    calls.append(n)\n    return n\n"
    out = run_magic(ip, capsys, "--no-widget -s 1", cell)
    assert out.strip().splitlines()[-1].startswith("plumbkit: no tf.data pipeline in this cell")
    assert ip.user_ns["calls"] == []


# -- what cannot be rebuilt (the README's table) --------------------------------------------------

def device_copy():
    return tf.data.Dataset.range(100).map(lambda x: x * 2).apply(tf.data.experimental.copy_to_device("/cpu:0"))


def device_prefetch():
    return tf.data.Dataset.range(100).batch(5).apply(tf.data.experimental.prefetch_to_device("/cpu:0"))


@pytest.mark.parametrize("make", [device_copy, device_prefetch], ids=["copy_to_device", "prefetch_to_device"])
def test_device_copies_are_refused_naming_the_op_and_what_to_do(make):
    for run in (lambda: plumbkit.trace(make, seconds=1), lambda: plumbkit.step(make, seconds=1),
                lambda: plumbkit.optimize(make, seconds=1, compare=False)):
        with pytest.raises(plumbkit.PipelineError,
                           match=r"cannot rebuild a pipeline with prefetch_to_device / copy_to_device.*"
                                 r"What to do: trace and optimize the pipeline without it"):
            run()


def test_more_in_memory_data_than_a_graph_can_hold_is_refused_before_serializing(monkeypatch):
    # TensorFlow's own limit is 2 GiB (it then returns an empty graph after tens of seconds and
    # several GiB); the check reads the in-memory tensors first. Lowered here to keep the test small.
    monkeypatch.setattr(unrebuildable, "GRAPH_LIMIT_BYTES", 4 * 2**20)
    data = np.zeros([8, 2**20], np.uint8)
    table = tf.Variable(data)
    for make in (lambda: tf.data.Dataset.from_tensor_slices(data).batch(2),
                 lambda: tf.data.Dataset.range(8).map(lambda i: tf.gather(tf.constant(data), i)),
                 lambda: tf.data.Dataset.range(8).map(lambda i: tf.gather(table, i))):
        with pytest.raises(plumbkit.PipelineError, match=r"holds 0\.0 GiB of in-memory data.*cannot exceed 2 GiB.*"
                                                        r"write the data to files"):
            plumbkit.trace(make, seconds=1)


def test_tf_data_debug_mode_is_refused_at_once_before_any_user_code_runs(monkeypatch):
    """A notebook's leftover ``tf.data.experimental.enable_debug_mode()`` runs every function in
    Python one call at a time and drops parallelism and prefetch; a trace under it hung (120 s
    for a 1.5 s trace, session 59). Set here through TF's own switch (the public call cannot be
    undone, and would change every later test)."""
    from tensorflow.python.data.ops import debug_mode
    built = []

    def make():
        built.append(1)
        return tf.data.Dataset.range(3)
    monkeypatch.setattr(debug_mode, "DEBUG_MODE", True)
    for run in (lambda: plumbkit.trace(make, seconds=1), lambda: plumbkit.optimize(make, seconds=1)):
        with pytest.raises(plumbkit.PipelineError, match=r"debug mode is on \(tf\.data\.experimental\.enable_debug_mode"
                                                         r"\(\)\).*restart the kernel without it"):
            run()
    assert built == []  # refused before your function ran
    monkeypatch.setattr(debug_mode, "DEBUG_MODE", False)  # negative control: the same call runs
    assert plumbkit.trace(make, seconds=0.3, calibrate=False).throughput > 0


def test_an_iterator_is_refused_naming_what_to_pass():
    with pytest.raises(plumbkit.PipelineError, match=r"OwnedIterator \(an iterator: pass the Dataset itself"):
        plumbkit.trace(iter(tf.data.Dataset.range(3)), seconds=1)


def test_refusals_in_the_magic_and_the_widget_are_one_line(ip, capsys):
    cell = ("import tensorflow as tf\nbad = tf.data.Dataset.range(100).apply("
            "tf.data.experimental.prefetch_to_device('/cpu:0'))\nbad")
    out = run_magic(ip, capsys, "--no-widget -s 1", cell)
    assert out.strip().splitlines()[-1].startswith("plumbkit: plumbkit cannot rebuild a pipeline with prefetch_to_device")
    ip.run_cell_magic("plumb", "-s 1", cell)
    widget = ip.magics_manager.registry["PlumbMagics"].last_widget
    widget.wait(30)
    assert "UnrebuildableError: plumbkit cannot rebuild a pipeline with prefetch_to_device" in widget.live.error
    assert "\n" not in widget.live.error
    assert isinstance(ip.user_ns["bad"], tf.data.Dataset)
