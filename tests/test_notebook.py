"""The notebook layer through a real IPython InteractiveShell, real ipywidgets and real TF.

Displays are captured from the shell's display publisher (as memray's IPython tests do), so a
test sees exactly the mimebundles a front end would get: the widget view, its static HTML and
its text. Thread and scheduler assertions read ``threading.enumerate()`` and the engine's
:data:`~plumbkit.engine.scheduler.SCHEDULER`.
"""

import _thread
import threading
import time

import numpy as np
import psutil
import pytest
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.interactiveshell import InteractiveShell

from plumbkit.engine.scheduler import SCHEDULER
from plumbkit.widgets import OPTIMIZE_TAB, STEP_TAB

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
MEASURING_THREADS = ("plumbkit-consumer", "plumbkit-pull")


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.display_pub = CapturingDisplayPublisher()
    shell.run_line_magic("load_ext", "plumbkit")
    return shell


@pytest.fixture
def shown(ip):
    """The displays published during the test (a fresh list each test)."""
    ip.display_pub.outputs.clear()
    return ip.display_pub.outputs


def magics(ip):
    return ip.magics_manager.registry["PlumbMagics"]


def measuring_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name in MEASURING_THREADS]


def plumbkit_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("plumbkit")]


def settle(timeout: float = 10.0) -> None:
    """Wait until no plumbkit operation runs and its threads are gone."""
    assert SCHEDULER.wait_idle(timeout), SCHEDULER.state()
    end = time.monotonic() + timeout
    while plumbkit_threads() and time.monotonic() < end:
        time.sleep(0.05)
    assert not plumbkit_threads(), plumbkit_threads()


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
    ip.run_cell_magic("plumb", "-s 0.5 --var other", CELL + "\nother = ds.take(100000).map(lambda x: x + 1)\nNone")
    widget = magics(ip).last_widget
    widget.wait(30)
    labels = [lab for lab in widget.live.row_labels if lab != "prefetch (injected)"]
    assert labels[:2] == ["map(lambda)", "take(100000)"]
    ip.run_cell_magic("plumb", "-s 0.5", "import tensorflow as tf\ndef make():\n    return tf.data.Dataset.range(10**6).batch(4)\n")
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


def test_terminal_ipython_gets_text_and_kernels_get_the_widget(ip):
    from plumbkit.magics import has_widget_frontend
    terminal = type("TerminalInteractiveShell", (InteractiveShell,), {})
    assert has_widget_frontend(ip) and not has_widget_frontend(terminal.__new__(terminal))


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
    ip.run_cell_magic("plumb", "-s 1", cell)
    widget = magics(ip).last_widget
    widget.wait(30)
    assert widget.live.error is None
    assert "run in this process" in widget.live.notes.value  # rebuilt here, with its live state


def test_stepping_widget_steps_and_stores_the_new_pipeline(ip):
    ip.run_cell_magic("plumb", "-s 0.5", CELL)  # its steps trace 1 s each whatever the live trace's length
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
    ip.run_cell_magic("plumb", "-s 0.5 --protocol brief", DET)
    widget = magics(ip).last_widget
    widget.wait(30)
    panel = widget.optimize
    # the plan against yours alone: the baselines' rows are the one-shot test's (the same panel view)
    panel.options.update(seconds=0.5, compare=False)
    panel.button.click()
    plan = panel.wait(240)
    assert plan is not None, panel.message.value
    assert "measured" in panel.result.value
    code = panel.export()
    before, after = {}, {}
    exec(DET, before)
    exec(code, after)
    a, b = list(before["ds"].as_numpy_iterator()), list(after["ds"].as_numpy_iterator())
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert ".cache()" in code or "num_parallel_calls" in code


def test_one_shot_optimize_export_shows_the_widget_ending_with_predicted_and_measured(ip, shown):
    """``%%plumb --optimize --export``: the same widget as a live trace, its optimize tab ends with
    predicted beside measured, the next cell is proposed, and the display carries static HTML."""
    ip.rl_next_input = None
    ip.run_cell_magic("plumb", "-s 0.5 --optimize --export --memory-budget 100MB --protocol brief", DET)
    widget = magics(ip).last_widget
    views = [o for o in shown if WIDGET_VIEW in o["data"]]
    assert views and views[0]["data"][WIDGET_VIEW]["model_id"] == widget.model_id
    assert widget.trace is not None and not widget.trace.partial and widget.trace.throughput > 0
    assert widget.selected_index == OPTIMIZE_TAB
    panel = widget.optimize
    assert panel.plan is not None and not panel.plan.partial, panel.message.value
    assert panel.progress.value == 1.0 and panel.progress.bar_style == "success"
    assert "measured" in panel.message.value and "predicted" in panel.message.value
    assert "<th>configuration</th><th>measured</th><th>predicted</th>" in panel.result.value
    assert "autotune" in panel.result.value and "measured" in panel.result.value  # the baselines' rows
    plumbkit_row = panel.result.value.split("<td>plumbkit</td>")[1].split("</tr>")[0]
    assert len([c for c in plumbkit_row.split("<td>") if c[:1].isdigit()]) == 2  # measured, predicted
    proposed = ip.rl_next_input
    assert proposed and "ds = tf.data.Dataset.range(3000)" in proposed and "%%plumb" not in proposed
    assert panel.code.value == proposed and ip.user_ns["plumbed_ds"] is panel.plan.dataset
    final = [o for o in shown if o["update"]][-1]["data"]  # the display refreshed at the end
    assert final[WIDGET_VIEW]["model_id"] == widget.model_id
    assert "plumbkit-plan" in final["text/html"] and "plumbkit plan" in final["text/plain"]
    settle()


def test_one_shot_step_shows_the_step_tab(ip, shown):
    ip.user_ns.pop("plumbed_ds", None)
    ip.run_cell_magic("plumb", "-s 1 --step", CELL)
    widget = magics(ip).last_widget
    assert widget.selected_index == STEP_TAB
    walk = widget.stepping.walks["bottleneck"]
    assert walk.start is widget.trace  # the live trace is the step's starting point
    assert walk.operators == ["map(decode)"] and len(walk.throughputs) == 2
    assert ip.user_ns["plumbed_ds"] is walk.steps[0].dataset
    assert "<polyline" in widget.stepping.chart.value
    settle()


def test_optimize_during_a_live_trace_stops_it_and_cancel_ends_promptly(ip, shown):
    """Clicking Optimize while the live trace runs: the trace is stopped first (and says so),
    never two measurements at once; Cancel ends the optimization and changes nothing."""
    ip.user_ns.pop("plumbed_ds", None)
    ip.run_cell_magic("plumb", "-s 60", CELL)
    widget = magics(ip).last_widget
    user_ds = ip.user_ns["ds"]
    seen, running = [], threading.Event()
    running.set()

    def sample() -> None:
        while running.is_set():
            state = SCHEDULER.state()
            seen.append((len(measuring_threads()), state.active, state.waiting))
            time.sleep(0.01)
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        for _ in range(400):  # the live trace measures (threads start late on a busy machine)
            if SCHEDULER.state().active == "trace" and widget.live.renders:
                break
            time.sleep(0.05)
        assert widget.live.running and SCHEDULER.state().active == "trace"
        widget.optimize.button.click()
        widget.optimize.button.click()  # a second click while it runs starts nothing
        trace = widget.wait(10)
        assert trace.ended == "stopped: optimize started" and not trace.partial
        assert "stopped: optimize started" in widget.live.status.value
        for _ in range(200):
            if SCHEDULER.state().active == "optimize" and measuring_threads():
                break
            time.sleep(0.05)
        assert SCHEDULER.state().active == "optimize"
        assert widget.stepping.bottleneck_button.disabled and widget.optimize.button.disabled
        time.sleep(0.5)
        cancelled_at = time.monotonic()
        widget.optimize.cancel_button.click()
        plan = widget.optimize.wait(10)
        took = time.monotonic() - cancelled_at
    finally:
        running.clear()
        sampler.join()
    assert took < 10, took
    assert plan is not None and plan.partial and plan.changes == []
    assert plan.dataset is user_ds and ip.user_ns["ds"] is user_ds and "plumbed_ds" not in ip.user_ns
    assert "cancelled while" in widget.optimize.message.value
    assert max(n for n, _, _ in seen) == 1, "two measurements ran at once"
    assert {a for _, a, _ in seen} <= {"trace", "optimize", None}
    fresh: dict = {}
    exec(CELL, fresh)  # the user's pipeline still yields what the cell defines
    assert all(np.array_equal(a, b) for a, b in zip(user_ds.take(3).as_numpy_iterator(),
                                                    fresh["ds"].take(3).as_numpy_iterator()))
    settle()
    assert not widget.optimize.button.disabled and not widget.stepping.bottleneck_button.disabled


@pytest.mark.usefixtures("ctrl_c_raises")  # SIGINT raises, however pytest was started
def test_ctrl_c_ends_a_one_shot_optimization_and_changes_nothing(ip, shown):
    ip.user_ns.pop("plumbed_ds", None)
    ip.rl_next_input = None
    ip.run_cell(DET)
    before = dict(ip.user_ns)
    returned, labels = threading.Event(), []

    def press_ctrl_c() -> None:  # once the optimization runs; again if Python dropped it
        while not returned.wait(0.1):
            op = SCHEDULER.active
            if op is not None and op.name == "optimize" and op.measurements:
                if op.cancelled:
                    return
                labels.append(magics(ip).last_widget.optimize.cancel_button.description)
                _thread.interrupt_main()
                time.sleep(1.0)
    presser = threading.Thread(target=press_ctrl_c)
    began = time.monotonic()
    presser.start()
    try:
        ip.run_cell_magic("plumb", "-s 0.5 --optimize --export", DET)
    finally:
        returned.set()
        presser.join()
    took = time.monotonic() - began
    widget = magics(ip).last_widget
    plan = widget.optimize.plan
    assert took < 0.5 + 2 + 10, took
    assert plan is not None and plan.partial and "interrupted (Ctrl-C) while" in plan.notes[0]
    assert "interrupt" in widget.optimize.message.value
    assert labels[0] == "interrupt ■ to stop"  # clicks wait for the cell: the button says so
    assert widget.optimize.cancel_button.description == "Cancel"
    assert "plumbed_ds" not in ip.user_ns and ip.rl_next_input in (None, "")
    assert {k for k in ip.user_ns if k not in before} <= {"plumb_widget", "_", "__", "___"}
    settle()


def test_filter_that_rejects_everything_ends_on_time(ip, shown):
    cell = "import tensorflow as tf\nds = tf.data.Dataset.range(10**12).filter(lambda x: x < 0).batch(4)\nds"
    began = time.monotonic()
    ip.run_cell_magic("plumb", "-s 2", cell)
    trace = magics(ip).last_widget.wait(20)
    took = time.monotonic() - began
    assert took < 8, took
    widget = magics(ip).last_widget
    assert (trace is None or trace.throughput == 0) and "produced no element" in widget.live.error, widget.live.error
    assert "filter" in widget.live.error  # where the elements stop
    settle(5)


def test_the_live_view_costs_one_analysis_and_one_lp_per_redraw(ip, shown, monkeypatch):
    from plumbkit.engine import trace_result
    from plumbkit.planning import lp
    counts = {"analyses": 0, "lp": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        return wrapper
    monkeypatch.setattr(trace_result, "analyze", counted("analyses", trace_result.analyze))
    monkeypatch.setattr(lp, "_solve", counted("lp", lp._solve))  # every cvxpy solve goes through it
    started = time.monotonic()
    ip.run_cell_magic("plumb", "-s 2.5", CELL)
    widget = magics(ip).last_widget
    trace = widget.wait(30)
    live_seconds = time.monotonic() - started  # the trace, then its calibration: redrawn throughout
    snapshots = len(trace.raw.snapshots)
    assert widget.live.renders >= 3  # it was live
    assert counts["analyses"] <= snapshots + 1  # at most one per snapshot (+ the final trace)
    assert counts["analyses"] <= widget.live.renders + 1  # none built that no redraw used
    assert counts["lp"] <= counts["analyses"]
    assert counts["lp"] <= live_seconds / 1.0 + 2  # the bound under the table: once a second, and the last
    settle()


def test_repeated_runs_leave_no_threads_and_bounded_memory(ip, shown):
    """Every run ends its threads and iterators; memory does not creep (resident memory is flat
    from the run after the first: +0.6 MB a run, 13 runs measured on 2026-11-26)."""
    process = psutil.Process()
    ip.run_cell_magic("plumb", "-s 0.5", CELL)
    magics(ip).last_widget.wait(30)
    settle()
    base_threads, base_os = threading.active_count(), process.num_threads()
    rss = []
    for _ in range(8):
        ip.run_cell_magic("plumb", "-s 0.5", CELL)
        magics(ip).last_widget.wait(30)
        settle()
        assert threading.active_count() == base_threads, [t.name for t in threading.enumerate()]
        assert process.num_threads() <= base_os + 2
        rss.append(process.memory_info().rss)
    growth = rss[-1] - rss[0]
    assert growth < 40 * 2**20, f"resident memory grew {growth / 2**20:.0f} MB over 7 runs"


@pytest.mark.usefixtures("ctrl_c_raises")  # SIGINT raises, however pytest was started
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
