"""Cores that are really there: the CPU affinity and the cgroup quota, not the host's count."""

import os
import subprocess
import sys
import textwrap

import pytest

from plumbkit.host import machine


def _cgroup(tmp_path, monkeypatch, files):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setattr(machine, "_CGROUP", tmp_path)


def test_cgroup_v2_quota_caps_the_affinity(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1, 2, 3})
    _cgroup(tmp_path, monkeypatch, {"cpu.max": "150000 100000\n"})
    assert machine.available_cores() == 1  # 1.5 cores of quota: one whole core


def test_no_quota_means_the_affinity_set(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 2, 5})
    _cgroup(tmp_path, monkeypatch, {"cpu.max": "max 100000\n"})
    assert machine.available_cores() == 3


def test_cgroup_v1_quota(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(8)))
    _cgroup(tmp_path, monkeypatch, {"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"})
    assert machine.available_cores() == 2


def test_a_quota_below_one_core_still_leaves_one(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1})
    _cgroup(tmp_path, monkeypatch, {"cpu.max": "20000 100000\n"})
    assert machine.available_cores() == 1


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_trace_pinned_to_one_cpu_plans_for_one_core():
    """A process limited to one CPU (as ``taskset`` or a container would) sees one core in its
    trace and its LP, whatever the host has (about 4 s)."""
    script = textwrap.dedent("""
        import os
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
        import tensorflow as tf
        import plumbkit
        t = plumbkit.trace(tf.data.Dataset.range(10**6).map(lambda x: x * 2).batch(64), seconds=1,
                           converge=False, calibrate=False)
        print("cores", t.cores, t.analysis.cores)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert "cores 1 1" in out.stdout, out.stdout + out.stderr


_NEIGHBOURS_SEEN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    if sys.argv[1] == "outweigh":
        Path("/proc/self/autogroup").write_text("-20")
    from plumbkit.host import machine
    start = machine.read_machine()
    time.sleep(1.0)
    print(machine.neighbour_cores(start, machine.read_machine()))
""")


def _autogroup_writable() -> bool:
    try:
        return (open("/proc/sys/kernel/sched_autogroup_enabled").read().strip() == "1"
                and os.access("/proc/self/autogroup", os.W_OK))
    except OSError:
        return False


@pytest.mark.skipif(not _autogroup_writable(), reason="needs autogroups on and /proc/self/autogroup writable")
def test_a_session_that_outweighs_the_others_counts_no_neighbour():
    """A spinner in a session of its own takes a core from a nice-0 session, which counts it as a
    neighbour; from a session at autogroup nice -20 it only fills idle cycles, and counts none."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        seen = {}
        for mode in ("plain", "outweigh"):
            out = subprocess.run([sys.executable, "-c", _NEIGHBOURS_SEEN, mode], capture_output=True,
                                 text=True, check=True, start_new_session=True).stdout
            seen[mode] = float(out.strip().splitlines()[-1])
    finally:
        spinner.kill()
        spinner.wait()
    assert seen["outweigh"] == 0.0
    assert seen["plain"] > 0.5, seen  # the spinner's core (and whatever else runs here)
