"""The CPU allocation linear program (Plumber §4.3), solved with cvxpy.

    maximize X  s.t.  X <= theta_i * R_i,  sum(theta) <= cores,  0 <= theta_i,
                      theta_i <= 1 for sequential operators,  X <= extra bounds (disk).

``R_i`` is operator ``i``'s resource-accounted rate (minibatches per second per core). The
optimum ``X*`` is an upper bound on throughput with this many cores; ``theta`` says how many
cores each operator should get.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import cvxpy as cp
import numpy as np


class LPError(RuntimeError):
    """The solver failed; the message names the status and what to check."""


@dataclass(frozen=True)
class LPSolution:
    throughput: float  # X*, minibatches per second (a prediction, an upper bound)
    theta: dict[str, float]  # cores given to each operator
    binding: str | None  # the bound that limits X* ("cpu", or the name of an extra bound)


def solve_cpu_lp(rates: Mapping[str, float], *, cores: float, sequential: set[str] = frozenset(),
                 extra_bounds: Mapping[str, float] | None = None,
                 min_theta: Mapping[str, float] | None = None,
                 max_theta: Mapping[str, float] | None = None) -> LPSolution:
    """Solve the LP for ``rates`` (operator -> minibatches/s/core); infinite rates cost nothing.

    ``min_theta`` is the optimizer's hedge (never starve a cheap operator); ``max_theta`` caps
    what TensorFlow lets an operator use (an interleave's cycle length); ``extra_bounds`` are
    throughput ceilings from other resources (e.g. disk bandwidth / bytes per minibatch).
    """
    if cores <= 0:
        raise LPError(f"cores must be positive, got {cores}")
    finite = {k: float(r) for k, r in rates.items() if r is not None and math.isfinite(r) and r > 0}
    bounds = {k: float(v) for k, v in (extra_bounds or {}).items() if v is not None and math.isfinite(v)}
    if not finite:
        best = min(bounds.values()) if bounds else math.inf
        binding = min(bounds, key=bounds.get) if bounds else None
        return LPSolution(throughput=best, theta={}, binding=binding)
    names = list(finite)
    r = np.array([finite[n] for n in names])
    theta = cp.Variable(len(names), nonneg=True)
    x = cp.Variable()
    constraints = [x <= cp.multiply(theta, r), cp.sum(theta) <= cores]
    seq = [i for i, n in enumerate(names) if n in sequential]
    if seq:
        constraints.append(theta[seq] <= 1)
    for i, n in enumerate(names):
        if n in (max_theta or {}):
            constraints.append(theta[i] <= float(max_theta[n]))
    floors = min_theta or {}
    for i, n in enumerate(names):
        if n in floors:
            constraints.append(theta[i] >= min(floors[n], 1.0 if n in sequential else floors[n]))
    for value in bounds.values():
        constraints.append(x <= value)
    problem = cp.Problem(cp.Maximize(x), constraints)
    try:
        problem.solve(solver=cp.HIGHS) if cp.HIGHS in cp.installed_solvers() else problem.solve()
    except cp.error.SolverError:
        problem.solve(solver=cp.CLARABEL)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise LPError(f"CPU allocation LP is {problem.status}: check that the hedge "
                      f"({sum(floors.values()):.1f} cores) fits in {cores} cores")
    xs = float(x.value)
    binding = "cpu"
    if bounds:
        name, value = min(bounds.items(), key=lambda kv: kv[1])
        if value <= xs * (1 + 1e-6):
            binding = name
    return LPSolution(throughput=xs, theta={n: float(t) for n, t in zip(names, theta.value)},
                      binding=binding)
