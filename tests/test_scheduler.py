"""One measurement at a time, every one stoppable: the scheduler on its own (plain threads, fast),
then on real pipelines (a GetNext blocked in TensorFlow, Ctrl-C through the public API)."""

from __future__ import annotations

import _thread
import logging
import signal
import threading
import time
import warnings

import pytest
import tensorflow as tf

import plumbkit
from plumbkit.engine.scheduler import (INTERRUPTED, SCHEDULER, Cancelled, Handle, checkpoint, current,
                                       operation)
from plumbkit.host.quiet import quiet, solver_verbose
from plumbkit.tfdata.consumer import Puller, Stopped, pull_for


@operation("sleeper")
def sleeper(seconds: float, *, on_progress=None, log: list | None = None) -> str:
    """A stand-in measurement: sleeps in small checkpointed steps, records when it runs."""
    me = current()
    if log is not None:
        log.append(("start", me.name, time.monotonic()))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        checkpoint()
        time.sleep(0.01)
    if log is not None:
        log.append(("end", me.name, time.monotonic()))
    return "done"


def _partial_live(op, error, _):
    return f"live view stopped: {error.reason}"


@operation("live", preemptible=True, partial=_partial_live)
def live_view(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        checkpoint()
        time.sleep(0.01)
    return "ran to the end"


def until(condition, timeout: float = 10.0) -> None:
    """Wait for ``condition()`` (threads start late on a busy machine: no fixed sleeps)."""
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.005)


def in_thread(fn, *args, **kwargs):
    box = {}

    def run():
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001 - the test reads it
            box["error"] = err
    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def test_a_second_measurement_waits_for_the_first_and_says_so():
    log, told = [], []
    first, box1 = in_thread(sleeper, 0.4, log=log)
    until(lambda: SCHEDULER.state().active == "sleeper")
    second, box2 = in_thread(sleeper, 0.1, log=log, on_progress=lambda m, f: told.append(m))
    first.join(5)
    second.join(5)
    assert box1["result"] == box2["result"] == "done"
    (_, _, s1), (_, _, e1), (_, _, s2), (_, _, e2) = log
    assert e1 <= s2, "the second started before the first ended"
    assert any(m.startswith("waiting for sleeper") for m in told)
    assert SCHEDULER.wait_idle(1)


def test_starting_a_measurement_stops_a_live_view_which_keeps_its_result():
    told = []
    live, live_box = in_thread(live_view, 30)
    until(lambda: SCHEDULER.state().active == "live")
    assert not SCHEDULER.state().busy
    began = time.monotonic()
    assert sleeper(0.05, on_progress=lambda m, f: told.append(m)) == "done"
    live.join(5)
    assert time.monotonic() - began < 2
    assert live_box["result"] == "live view stopped: stopped: sleeper started"
    assert any("stopped the live to run sleeper" in m for m in told)


def test_a_live_view_waits_behind_a_measurement_and_a_newer_one_supersedes_it():
    busy, busy_box = in_thread(sleeper, 0.5)
    until(lambda: SCHEDULER.state().busy)
    older, older_box = in_thread(live_view, 0.1)
    until(lambda: SCHEDULER.state().waiting == 1)
    newer, newer_box = in_thread(live_view, 0.1)
    for t in (busy, older, newer):
        t.join(5)
    assert older_box["result"] == "live view stopped: superseded"  # it never ran
    assert newer_box["result"] == "ran to the end"


def test_cancel_through_a_handle_reaches_a_waiting_and_a_running_operation():
    handle_running, handle_waiting = Handle(), Handle()

    def run(handle, seconds):
        with handle.bound():
            return sleeper(seconds)
    running, running_box = in_thread(run, handle_running, 30)
    until(lambda: handle_running.active)
    waiting, waiting_box = in_thread(run, handle_waiting, 30)
    until(lambda: SCHEDULER.state().waiting == 1)
    began = time.monotonic()
    handle_waiting.cancel()
    handle_running.cancel()
    running.join(5)
    waiting.join(5)
    assert time.monotonic() - began < 1
    assert isinstance(running_box["error"], Cancelled) and isinstance(waiting_box["error"], Cancelled)
    assert SCHEDULER.wait_idle(1) and SCHEDULER.state().active is None


@pytest.mark.usefixtures("ctrl_c_raises")  # SIGINT raises, however pytest was started
def test_ctrl_c_ends_an_operation_with_its_partial_result():
    threading.Timer(0.3, _thread.interrupt_main).start()
    began = time.monotonic()
    assert live_view(30) == f"live view stopped: {INTERRUPTED}"
    assert time.monotonic() - began < 2
    assert SCHEDULER.state().active is None


@pytest.mark.usefixtures("ctrl_c_raises")  # SIGINT raises, however pytest was started
def test_a_ctrl_c_that_python_drops_still_stops_the_operation():
    """A KeyboardInterrupt raised inside a garbage-collector callback is printed and dropped by
    Python ("Exception ignored in ..."); the operation must stop all the same."""
    @operation("dropped", partial=lambda op, error, _: f"stopped: {op.reason}")
    def run() -> str:
        try:
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # what Ctrl-C runs
        except KeyboardInterrupt:
            pass  # dropped, as Python drops it inside a weakref callback
        end = time.monotonic() + 5
        while time.monotonic() < end:
            checkpoint()
            time.sleep(0.01)
        return "ran to the end"
    assert run() == f"stopped: {INTERRUPTED}"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nested_operations_join_the_running_one():
    @operation("outer")
    def outer():
        return current().name, sleeper(0.01), current().name
    assert outer() == ("outer", "done", "outer")


def test_verbose_is_a_keyword_of_every_operation_and_quiet_restores_everything():
    import inspect
    assert "verbose" in inspect.signature(plumbkit.optimize).parameters
    assert "verbose" in inspect.signature(plumbkit.trace).parameters
    tf_logger, absl_logger = logging.getLogger("tensorflow"), logging.getLogger("absl")
    tf_logger.setLevel(logging.INFO)
    absl_logger.setLevel(logging.DEBUG)
    from tensorflow.python.autograph.utils import ag_logging
    ag_before = (ag_logging.verbosity_level, ag_logging.echo_log_to_stdout)
    filters_before = list(warnings.filters)
    with quiet():
        assert tf_logger.level == absl_logger.level == logging.ERROR
        assert ag_logging.get_verbosity() == 0 and not ag_logging.echo_log_to_stdout
        with warnings.catch_warnings(record=True) as caught:  # (records with the filters in force)
            warnings.warn_explicit("from TensorFlow", UserWarning, "ops.py", 1, module="tensorflow.python.ops")
            warnings.warn_explicit("from the user", UserWarning, "cell.py", 1, module="__main__")
        assert [str(w.message) for w in caught] == ["from the user"]
        assert not solver_verbose()
    assert tf_logger.level == logging.INFO and absl_logger.level == logging.DEBUG
    assert (ag_logging.verbosity_level, ag_logging.echo_log_to_stdout) == ag_before
    assert warnings.filters == filters_before
    with quiet(verbose=True):
        assert solver_verbose() and tf_logger.level == logging.INFO
    assert not solver_verbose()
    # blocks that overlap across threads (a background live trace, a one-shot cell) do not nest:
    # the levels come back only when the last one ends
    first, second = quiet(), quiet()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert tf_logger.level == logging.ERROR
    second.__exit__(None, None, None)
    assert tf_logger.level == logging.INFO and warnings.filters == filters_before


# -- real pipelines ---------------------------------------------------------------------------

def rejects_everything():
    return tf.data.Dataset.range(10**12).filter(lambda x: x < 0).batch(4)


def test_a_getnext_blocked_in_tensorflow_is_cancelled_and_its_threads_stop():
    puller = Puller(rejects_everything())
    box = {}

    def pull():
        try:
            puller.pull()
        except Stopped:
            box["stopped"] = time.monotonic()
    thread = threading.Thread(target=pull)
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive()  # blocked inside TensorFlow, where Python cannot interrupt it
    cancelled = time.monotonic()
    puller.cancel()
    thread.join(5)
    assert not thread.is_alive() and box["stopped"] - cancelled < 1
    cpu = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - cpu < 0.2, "the pipeline's threads kept filtering"


def test_pull_loops_end_on_stop_and_on_deadline():
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    began = time.monotonic()
    assert pull_for(rejects_everything(), seconds=30, first=1, stop=stop) == (0, 0.0)
    assert time.monotonic() - began < 2
    began = time.monotonic()
    assert pull_for(rejects_everything(), seconds=30, deadline=0.5)[0] == 0
    assert time.monotonic() - began < 2
    assert not [t for t in threading.enumerate() if t.name == "plumbkit-pull"]


@pytest.mark.usefixtures("ctrl_c_raises")  # SIGINT raises, however pytest was started
def test_ctrl_c_in_the_api_returns_a_partial_plan_promptly():
    def make():
        return tf.data.Dataset.range(10**9).map(lambda x: x * 2).batch(64)
    done = threading.Event()

    def press_when_measuring():  # Ctrl-C once the optimization measures (again if Python drops it)
        while not done.wait(0.05):
            op = SCHEDULER.active
            if op is not None and op.measurements and not op.cancelled:
                _thread.interrupt_main()
                time.sleep(1.0)
    presser = threading.Thread(target=press_when_measuring)
    presser.start()
    began = time.monotonic()
    try:
        plan = plumbkit.optimize(make, seconds=1.0)
    finally:
        done.set()
        presser.join()
    assert time.monotonic() - began < 1.0 + 10
    assert plan.partial and plan.changes == [] and plan.trace is not None
    assert plan.notes[0].startswith("interrupted (Ctrl-C) while") and "minibatches/s (measured" in plan.notes[1]
    assert "plumbkit plan (partial)" in str(plan) and "plumbkit-plan-partial" in plan._repr_html_()
    assert not [t for t in threading.enumerate() if t.name.startswith("plumbkit")]


def test_a_cancel_while_the_plans_cache_fills_ends_the_fill_promptly():
    """The plan caches an epoch too long to fill in the guard's 60 s. Ctrl-C sets the operation's
    cancel flag before it raises, and Python drops a KeyboardInterrupt that lands in a
    garbage-collector callback: the flag alone must end the fill (it checks the operation's stop
    event between minibatches; it ran its 60 s out, seen once in CI). Set here as the dropped
    Ctrl-C leaves it: the flag, no exception."""
    def make():
        return tf.data.Dataset.range(10**9).map(lambda x: x * 2).batch(64)
    cancelled = []

    def progress(message: str, _: float) -> None:
        if message.startswith("filling the plan's cache") and not cancelled:
            cancelled.append(time.monotonic())
            threading.Timer(0.5, lambda: SCHEDULER.active.cancel(INTERRUPTED)).start()
    plan = plumbkit.optimize(make, seconds=1.0, on_progress=progress)
    assert cancelled, "the plan filled no cache: this test no longer reaches the fill"
    assert time.monotonic() - cancelled[0] < 10
    assert plan.partial and plan.changes == []
    assert plan.notes[0].startswith("interrupted (Ctrl-C) while")


def test_a_walk_cut_short_keeps_its_completed_steps():
    def make():
        return tf.data.Dataset.range(10**9).map(lambda x: x * 2).batch(64)
    handle = Handle()
    thread, box = in_thread(lambda: _walk_with(handle, make))
    for _ in range(400):
        op = handle.op
        if op is not None and len(op.measurements) >= 2:
            break
        time.sleep(0.05)
    handle.cancel()
    thread.join(20)
    walked = box["result"]
    assert walked.partial and walked.start is not None and len(walked.steps) >= 1


def _walk_with(handle, make):
    with handle.bound():
        return plumbkit.walk(make, steps=50, seconds=0.5)


@pytest.fixture(autouse=True)
def idle_after():
    yield
    assert SCHEDULER.wait_idle(10), SCHEDULER.state()
