"""The notebook layer through a real IPython InteractiveShell, real ipywidgets and real TF."""

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "plumbkit")
    return shell


def magics(ip):
    return ip.magics_manager.registry["PlumbMagics"]


CELL = """
import tensorflow as tf
def decode(x):
    return tf.reduce_sum(tf.linalg.matmul(tf.fill([32, 32], tf.cast(x, tf.float32)), tf.ones([32, 32])))
ds = tf.data.Dataset.range(10**7).map(decode).batch(8)
ds
"""


def test_last_expression_pipeline_shows_a_live_widget_whose_rows_are_the_operators(ip):
    ip.run_cell_magic("plumb", "-s 1.5", CELL)
    widget = magics(ip).last_widget
    trace = widget.wait(30)
    labels = widget.live.row_labels
    assert "map(decode)" in labels and "batch(8)" in labels and "range" in labels
    assert labels == [o.label for o in trace.ops]
    assert "plumbkit-bottleneck" in widget.live.table.value
    assert "ds" in ip.user_ns and "decode" in ip.user_ns  # the cell's variables stay defined
    assert len(trace.raw.snapshots) >= 3  # updated while it ran


def test_named_variable_and_zero_arg_function(ip):
    ip.run_cell_magic("plumb", "-s 1 --var other", CELL + "\nother = ds.take(100000).map(lambda x: x + 1)\nNone")
    widget = magics(ip).last_widget
    widget.wait(30)
    labels = [lab for lab in widget.live.row_labels if lab != "prefetch (injected)"]
    assert labels[:2] == ["map(lambda)", "take(100000)"]
    ip.run_cell_magic("plumb", "-s 1", "import tensorflow as tf\ndef make():\n    return tf.data.Dataset.range(10**6).batch(4)\n")
    widget = magics(ip).last_widget
    widget.wait(30)
    assert [lab for lab in widget.live.row_labels if lab != "prefetch (injected)"] == ["batch(4)", "range"]


def test_stop_button_ends_a_long_trace(ip):
    ip.run_cell_magic("plumb", "-s 60", CELL)
    widget = magics(ip).last_widget
    import time
    time.sleep(1.0)
    widget.live.stop_button.click()
    trace = widget.wait(20)
    assert trace.ended == "stopped" and trace.elapsed < 10


def test_cell_that_raises_and_cell_without_pipeline(ip, capsys):
    ip.run_cell_magic("plumb", "-s 1", "x = 1\nraise ValueError('boom from the user')")
    out = capsys.readouterr()
    assert "boom from the user" in out.out + out.err
    assert "plumbkit: the cell raised" in out.out
    assert "Traceback" not in out.out.split("plumbkit:")[-1]
    ip.run_cell_magic("plumb", "-s 1", "y = 41 + 1")
    assert "no tf.data pipeline in this cell" in capsys.readouterr().out
    assert ip.user_ns["y"] == 42


def test_py_function_pipeline_is_traced_with_a_note(ip):
    cell = ("import tensorflow as tf\n"
            "ds = tf.data.Dataset.range(10**6).map(lambda x: tf.py_function(lambda v: v + 1, [x], tf.int64)).batch(4)\n")
    ip.run_cell_magic("plumb", "-s 1.5", cell)
    widget = magics(ip).last_widget
    widget.wait(30)
    assert "run in this process" in widget.live.notes.value  # rebuilt here, with its live state


def test_stepping_widget_steps_and_stores_the_new_pipeline(ip):
    ip.run_cell_magic("plumb", "-s 3", CELL)
    widget = magics(ip).last_widget
    widget.wait(30)
    stepping = widget.stepping
    stepping.bottleneck_button.click()
    stepping.wait(60)
    walk = stepping.walks["bottleneck"]
    assert len(walk.throughputs) == 2 and walk.operators == ["map(decode)"]
    assert "plumbed_ds" in ip.user_ns and "<polyline" in stepping.chart.value


DET = """
import tensorflow as tf
def decode(x):
    m = tf.cast(x, tf.float32)
    for _ in range(30):
        m = tf.sqrt(m * m + 1.0)
    return m
ds = tf.data.Dataset.range(3000).map(decode).batch(10)
ds
"""


def test_optimize_panel_and_export_yield_the_same_elements(ip):
    ip.run_cell_magic("plumb", "-s 2", DET)
    widget = magics(ip).last_widget
    widget.wait(30)
    panel = widget.optimize
    panel.options["seconds"] = 1.5
    panel.button.click()
    plan = panel.wait(240)
    assert plan is not None, panel.message.value
    assert "autotune" in panel.result.value and "measured" in panel.result.value
    code = panel.export()
    before, after = {}, {}
    exec(DET, before)
    exec(code, after)
    a, b = list(before["ds"].as_numpy_iterator()), list(after["ds"].as_numpy_iterator())
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert ".cache()" in code or "num_parallel_calls" in code


def test_blocking_optimize_export_proposes_the_next_cell(ip, capsys):
    proposed = []
    ip.set_next_input = lambda text, replace=False: proposed.append(text)
    ip.run_cell_magic("plumb", "-s 1.5 --optimize --export --memory-budget 100MB", DET)
    assert proposed and "ds = tf.data.Dataset.range(3000)" in proposed[0]
    out = capsys.readouterr().out
    assert "plumbkit plan" in out


def test_keyboard_interrupt_keeps_the_trace(ip, capsys):
    import _thread
    import threading
    timer = threading.Timer(1.0, _thread.interrupt_main)
    timer.start()
    ip.run_cell_magic("plumb", "-s 30 --no-widget", CELL)
    timer.cancel()
    out = capsys.readouterr().out
    assert "interrupted" in out and "map(decode)" in out
    assert magics(ip).last_trace.ended == "interrupted"
