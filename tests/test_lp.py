"""The CPU allocation LP on hand-made rates with known optima (no TensorFlow)."""

import math

import pytest

from plumbkit.planning.lp import LPError, solve_cpu_lp


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
