"""The CPU allocation LP on hand-made rates with known optima (no TensorFlow)."""

import math

import pytest

from plumbkit.planning.lp import LPError, solve_cpu_lp

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)


def test_balances_two_parallel_operators():
    sol = solve_cpu_lp({"a": 10.0, "b": 20.0}, cores=2)
    # X = theta_a*10 = theta_b*20, theta_a + theta_b = 2
    assert sol.throughput == pytest.approx(2 / (1 / 10 + 1 / 20), rel=1e-4)
    assert sol.theta["a"] == pytest.approx(4 / 3, rel=1e-3)
    assert sol.theta["b"] == pytest.approx(2 / 3, rel=1e-3)


def test_sequential_operator_caps_throughput():
    sol = solve_cpu_lp({"seq": 10.0, "par": 20.0}, cores=8, sequential={"seq"})
    assert sol.throughput == pytest.approx(10.0, rel=1e-4)
    assert sol.theta["seq"] <= 1 + 1e-6


def test_tfdata_paper_worked_example_sequential_is_71ms():
    # read 5 ms, map 2 ms per element, batch of 10 costs 1 ms: 71 ms per batch on one core
    rates = {"read": 1 / (10 * 0.005), "map": 1 / (10 * 0.002), "batch": 1 / 0.001}
    sol = solve_cpu_lp(rates, cores=1)
    assert 1 / sol.throughput == pytest.approx(0.071, rel=1e-3)


def test_extra_bound_binds_and_free_operators_are_ignored():
    sol = solve_cpu_lp({"a": 10.0, "free": math.inf}, cores=4, extra_bounds={"disk": 25.0})
    assert sol.throughput == pytest.approx(25.0, rel=1e-4)
    assert sol.binding == "disk" and "free" not in sol.theta


def test_hedge_keeps_cheap_operators_fed():
    sol = solve_cpu_lp({"heavy": 1.0, "cheap": 1000.0}, cores=2, min_theta={"heavy": 0.1, "cheap": 0.1})
    assert sol.theta["cheap"] >= 0.1 - 1e-6


def test_infeasible_hedge_is_a_clear_error():
    with pytest.raises(LPError, match="hedge"):
        solve_cpu_lp({"a": 1.0, "b": 1.0}, cores=1, min_theta={"a": 0.8, "b": 0.8})


def test_bad_cores():
    with pytest.raises(LPError, match="cores"):
        solve_cpu_lp({"a": 1.0}, cores=0)


# -- the resource LP: cores, calls in flight, the GIL ----------------------------------------------

from plumbkit.analysis.costs import capacity, classify  # noqa: E402
from plumbkit.planning.lp import GIL, Demand, solve_resource_lp  # noqa: E402


def test_tfdata_paper_worked_example_with_concurrency_is_25ms():
    # reading 5 ms an element (it waits), the map 2 ms, batching 10 elements 1 ms; interleave
    # parallelism 2, map parallelism 10: max(10*5/2, 10*2/10, 1) = 25 ms a batch
    demands = [Demand("read", cpu=0.0, latency=10 * 0.005, max_threads=2),
               Demand("map", cpu=10 * 0.002, max_threads=10), Demand("batch", cpu=0.001, max_threads=1)]
    sol = solve_resource_lp(demands, cores=100)
    assert 1 / sol.throughput == pytest.approx(0.025, rel=1e-3)
    assert sol.binding == "read" and sol.threads["read"] == pytest.approx(2, rel=1e-3)


def test_a_waiting_operator_gets_calls_in_flight_above_the_cores_and_charges_only_its_cpu():
    fetch = Demand("fetch", cpu=8 * 100e-6, latency=8 * 8e-3, max_threads=64)  # 8 elements a batch
    sol = solve_resource_lp([fetch, Demand("parse", cpu=8 * 50e-6)], cores=2)
    assert sol.throughput == pytest.approx(64 / (8 * 8e-3), rel=1e-4)  # 1000 batches/s, 64 calls
    assert sol.binding == "fetch" and sol.threads["fetch"] == pytest.approx(64, rel=1e-3)
    assert sum(sol.theta.values()) <= 2 + 1e-6 and sol.theta["fetch"] >= 8 * 100e-6 * sol.throughput - 1e-6


def test_python_operators_and_the_consumer_share_one_core_whatever_the_threads():
    tokenize = Demand("tokenize", cpu=16 * 300e-6, gil=True)  # 4.8 ms of Python a batch
    sol = solve_resource_lp([tokenize, Demand("pad", cpu=16 * 10e-6)], cores=8, consumer_gil=0.2e-3)
    assert sol.throughput == pytest.approx(1 / (16 * 300e-6 + 0.2e-3), rel=1e-4)
    assert sol.binding == GIL
    more_cores = solve_resource_lp([tokenize], cores=64, consumer_gil=0.2e-3)
    assert more_cores.throughput == pytest.approx(sol.throughput, rel=1e-6)


def test_one_call_at_a_time_waits_most_of_its_time_is_latency_bound():
    assert classify(100e-6, probed_latency=8e-3, probe_cpu=110e-6) == "latency"
    assert classify(900e-6, probed_latency=1.1e-3, probe_cpu=950e-6) == "cpu"  # a busy core, not waiting
    assert classify(900e-6, probed_latency=None, probe_cpu=None) == "cpu"
    assert classify(0.0, probed_latency=None, probe_cpu=None) is None


def test_capacity_counts_cores_the_thread_pool_and_the_gil():
    common = dict(visit_ratio=8, sequential=False, cores=2, threadpool=2)
    cpu_op = capacity(cpu=1e-3, latency=1e-3, bound="cpu", holds_gil=False, parallelism=4, **common)
    assert cpu_op == pytest.approx(2 / (8 * 1e-3))  # 4 threads, 2 cores
    waiting = capacity(cpu=1e-4, latency=8e-3, bound="latency", holds_gil=False, parallelism=16, **common)
    assert waiting == pytest.approx(2 / (8 * 8e-3))  # 16 calls asked, the pool runs 2
    raised = capacity(cpu=1e-4, latency=8e-3, bound="latency", holds_gil=False, parallelism=16,
                      visit_ratio=8, sequential=False, cores=2, threadpool=32)
    assert raised == pytest.approx(16 / (8 * 8e-3))
    python = capacity(cpu=1e-3, latency=1e-3, bound="cpu", holds_gil=True, parallelism=4, **common)
    assert python == pytest.approx(1 / (8 * 1e-3))


def test_only_the_time_a_python_operator_holds_the_gil_counts_against_its_one_core():
    # A waiting py_function: 0.4 ms of CPU per element, of which it holds the GIL 0.1 ms. 64
    # calls in flight: 1000 batches/s.
    fetch = Demand("fetch", cpu=8 * 0.4e-3, latency=8 * 8e-3, gil=True, max_threads=64, python=8 * 0.1e-3)
    sol = solve_resource_lp([fetch], cores=4)
    assert sol.binding == "fetch" and sol.throughput == pytest.approx(1000, rel=1e-4)
    all_of_it = solve_resource_lp([Demand("fetch", cpu=8 * 0.4e-3, latency=8 * 8e-3, gil=True, max_threads=64)],
                                  cores=4)
    assert all_of_it.binding == GIL and all_of_it.throughput == pytest.approx(1 / (8 * 0.4e-3), rel=1e-4)
    common = dict(visit_ratio=8, sequential=False, cores=4, threadpool=66, bound="latency", holds_gil=True,
                  parallelism=64, cpu=0.4e-3, latency=8e-3)
    assert capacity(python=0.1e-3, **common) == pytest.approx(1000)
    assert capacity(**common) == pytest.approx(1 / (8 * 0.4e-3))
    # its calls queued for the GIL: held 0.5 ms per element as they see it (hand-offs between
    # waiting threads included), more than its CPU; the GIL binds there, not at its CPU
    queued = Demand("fetch", cpu=8 * 0.4e-3, latency=8 * 8e-3, gil=True, max_threads=64, python=8 * 0.5e-3)
    assert queued.gil_seconds == pytest.approx(8 * 0.5e-3)
    sol = solve_resource_lp([queued], cores=4)
    assert sol.binding == GIL and sol.throughput == pytest.approx(1 / (8 * 0.5e-3), rel=1e-4)
