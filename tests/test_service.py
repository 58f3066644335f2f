"""tf.data service for real, what it yields and how it fails: a dispatcher and workers as
separate processes on loopback (``conftest.cluster``, one per module). Measurements run in
plumbkit's measuring client, pinned to core 0 when there are two, so a stuck job can never hang
the test process. Tests run in file order: the tests that add a second worker come after those
that need one; the worker-loss test is last. The offload plans, which decide from what they
measure, are ``test_offload_measured.py`` (run alone).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import tensorflow as tf

import plumbkit
from plumbkit.bench.examples import planted_work
from plumbkit.planning.offload import invalid_cuts
from plumbkit.service.client import InProcessClient, Watch, shared_client
from plumbkit.service.errors import ServiceStall
from plumbkit.service.processes import can_pin, usable_cores
from plumbkit.tfdata.graph import pipeline_of
from plumbkit.tfdata.offload_graph import graph_of, python_nodes
from plumbkit.tfdata.offload_requests import pipeline_request

from conftest import SERVICE_CLIENT_CORES as CLIENT, python_module_with_ctrl_c

pytestmark = pytest.mark.concurrent  # what is served, named or printed, not a speed (tests/run)


def _node(ds, label):
    return pipeline_of(ds).by_label(label).name


def served(cluster, ds, cut_label, sharding, watch=None, on_progress=None, client=None):
    """Every element of one pass of ``ds`` cut after ``cut_label`` and served, collected by the
    measuring client (never in this process, so nothing here can hang)."""
    request = {"kind": "collect", "pipeline": {**pipeline_request(ds), "what": "served", "cut": _node(ds, cut_label),
                                               "service": {"address": cluster.address, "sharding": sharding}}}
    return (client or shared_client(cluster)).call(request, watch or Watch(stall_after=10), on_progress=on_progress)


def pairs():
    ds = tf.data.Dataset.range(200).map(lambda x: (x * 3, tf.strings.as_string(x)))
    return ds.batch(16)


def test_servers_are_separate_pinned_processes_on_loopback(cluster):
    assert cluster.address.startswith("grpc://127.0.0.1:")
    pids = {cluster.dispatcher.pid, *cluster.worker_pids}
    assert os.getpid() not in pids and len(pids) == 2
    assert all(w.address.startswith("127.0.0.1:") for w in cluster.workers)
    if can_pin() and CLIENT:
        assert os.sched_getaffinity(cluster.workers[0].pid) == {usable_cores()[1]}
        client = shared_client(cluster)
        client.call({"kind": "collect", "pipeline": {**pipeline_request(tf.data.Dataset.range(1)), "what": "full"}})
        assert os.sched_getaffinity(client.pid) == set(CLIENT)
    assert Path(cluster.work_dir).is_dir() and any(Path(cluster.work_dir).iterdir())  # the journal


def test_offloaded_pipeline_yields_the_same_elements_sharding_off_one_worker(cluster):
    ds = pairs()
    local = list(ds.as_numpy_iterator())
    got = served(cluster, ds, "map(lambda)", "OFF")  # map on the worker, batch on the client
    assert len(got) == len(local)
    for (a_nums, a_strs), (b_nums, b_strs) in zip(got, local):
        assert a_nums.tolist() == b_nums.tolist() and a_strs.tolist() == b_strs.tolist()


def test_measuring_uses_its_own_job_names():
    from plumbkit.engine.offload import _job_name
    from plumbkit.tfdata.offload_requests import served_plan
    request = {**pipeline_request(pairs()), "what": "served", "cut": "x",
               "service": {"address": "grpc://127.0.0.1:1", "sharding": "OFF"}}
    names = {served_plan(request).job_name for _ in range(3)}  # what plumbkit's measurements use
    assert len(names) == 3 and all(n.startswith("plumbkit-measure-") for n in names)
    users = _job_name(request["graph"])  # what a plan hands the user
    assert users.startswith("plumbkit-") and users not in names


def test_a_generator_source_cannot_be_offloaded_and_the_plan_says_why(cluster):
    def gen():
        for i in range(10**6):
            yield i
    make = lambda: tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.int64)).batch(8)  # noqa: E731
    plan = plumbkit.offload(make, dispatcher=cluster, target=1e9, seconds=0.3)
    assert plan.decision == "cannot offload" and plan.distribute is None
    assert "runs Python" in plan.reason and "Could not find callback" in plan.reason


def test_dynamic_sharding_two_workers_each_element_once(cluster):
    cluster.add_worker()
    assert len(cluster.live_workers) == 2
    ds = tf.data.Dataset.range(1000).map(lambda x: x + 1).batch(10)
    got = served(cluster, ds, "map(lambda)", "DYNAMIC")
    values = sorted(v for batch in got for v in batch.tolist())
    assert values == list(range(1, 1001))


def test_python_functions_stay_on_the_client(cluster):
    def make():
        ds = tf.data.Dataset.range(48).map(lambda x: x * 2)
        ds = ds.map(lambda x: tf.py_function(lambda v: v + 1, [x], tf.int64))
        return ds.batch(8)
    ds = make()
    pipe, python = pipeline_of(ds), python_nodes(graph_of(ds))
    assert list(python.values()) == ["EagerPyFunc"]
    bad = invalid_cuts(pipe, python)
    assert set(bad) == {"batch(8)", "map(lambda)#2"}
    here = InProcessClient(cluster=cluster)  # the Python function only exists in this process
    got = served(cluster, ds, "map(lambda)", "DYNAMIC", client=here)
    assert sorted(v for b in got for v in b.tolist()) == [2 * i + 1 for i in range(48)]
    with pytest.raises(plumbkit.PipelineError, match=r"Could not find callback with key=pyfunc_\d+"):
        served(cluster, ds, "batch(8)", "OFF", client=here)  # what the cut rule prevents


def test_a_lost_worker_is_named_and_never_hangs(cluster):
    while len(cluster.live_workers) < 2:
        cluster.add_worker()
    victim = cluster.live_workers[-1]
    ds = tf.data.Dataset.range(4000).map(lambda x: x + tf.cast(tf.reduce_sum(planted_work(x, 4)) * 0, tf.int64))
    killed = threading.Event()

    def kill_midway(elements: int) -> None:
        if elements >= 400 and not killed.is_set():
            killed.set()
            threading.Thread(target=cluster.kill_worker, args=(victim.index,)).start()
    start = time.monotonic()
    with pytest.raises(ServiceStall) as caught:
        served(cluster, ds, "map(lambda)", "DYNAMIC", on_progress=kill_midway,
               watch=Watch(stall_after=4, expected=4000, sharding="DYNAMIC"))
    stall = caught.value
    assert killed.is_set() and time.monotonic() - start < 60
    assert [w.index for w in stall.lost] == [victim.index]
    # At most once: the other worker may deliver everything the lost one had not taken, and the
    # client still waits at the end of the epoch for the lost worker's task.
    assert 400 <= stall.elements <= 4000
    message = str(stall)
    assert f"worker {victim.index} (pid {victim.pid}" in message and "killed by SIGKILL" in message
    assert re.search(r"after [\d,]+ of 4,000 arrived", message) and "DYNAMIC" in message


def test_service_up_prints_the_address_reports_a_lost_worker_and_stops_on_ctrl_c(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(plumbkit.__file__).parents[1])}
    # SIGINT raising in the child, as in a terminal (a background job's child inherits it ignored)
    proc = subprocess.Popen(python_module_with_ctrl_c("plumbkit", "service", "up", "--workers", "1",
                                                      "--work-dir", str(tmp_path / "journal")),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 120
        while not any(line.startswith("serving") for line in lines) and time.monotonic() < deadline:
            assert proc.poll() is None, "".join(lines)
            time.sleep(0.2)
        text = "".join(lines)
        address = re.search(r"dispatcher: (grpc://127\.0\.0\.1:\d+)", text).group(1)
        pids = [int(p) for p in re.findall(r"pid (\d+)", text)]
        worker_pid = int(re.search(r"worker 0: pid (\d+)", text).group(1))
        from plumbkit.service.cluster import reachable
        assert reachable(address) and len(pids) == 2
        os.kill(worker_pid, signal.SIGKILL)
        while not any(line.startswith("LOST worker 0") for line in lines) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert any(f"LOST worker 0 (pid {worker_pid}" in line and "killed by SIGKILL" in line for line in lines)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert "stopped" in "".join(lines)
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        assert (tmp_path / "journal").is_dir()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_slow_part_is_pulled_in_chunks_of_about_50_ms_and_measured_for_the_seconds_asked():
    """A measuring pull of a part whose elements take 10 ms each (a wait, so a neighbour does not
    move it): the chunk stops growing once one takes over 50 ms, the cached sample's 64 elements
    are pulled in the warm-up, and the window measured is the 0.3 s asked. Grown on to 64 elements
    a chunk, as before, one chunk took 0.64 s and the window measured was that."""
    from plumbkit.tfdata.offload_requests import Counter, graph_rate

    def wait(x):
        time.sleep(0.01)
        return x
    ds = tf.data.Dataset.range(10**6).map(lambda x: tf.py_function(wait, [x], tf.int64))
    counter = Counter()
    began = time.perf_counter()
    out = graph_rate(ds, seconds=0.3, warmup=0.0, counter=counter, warmup_elements=64)
    assert 0.3 <= out["wall"] < 0.45, out
    assert counter.n >= 64 + out["elements"] and time.perf_counter() - began < 1.8, (counter.n, out)


def test_the_looped_planted_work_computes_what_the_unrolled_chain_does_from_a_small_function():
    from plumbkit.bench.examples import looped_work
    x = tf.constant(5, tf.int64)
    for units, unrolled in ((7, 3), (6, 3), (2, 3)):  # a remainder, none, no loop at all
        assert float(looped_work(x, units, unrolled)) == pytest.approx(float(planted_work(x, units)), rel=1e-6)
    nodes = {name: len(tf.function(lambda v, f=f: f(v, 3200)).get_concrete_function(x).graph.as_graph_def().node)
             for name, f in (("looped", looped_work), ("unrolled", planted_work))}
    assert nodes["looped"] < 50 and nodes["unrolled"] > 3200, nodes
