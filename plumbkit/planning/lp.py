"""The resource allocation linear program (Plumber §4.3, with latency and the GIL), via cvxpy.

Plumber's CPU program:

    maximize X  s.t.  X <= theta_i * R_i,  sum(theta) <= cores,  0 <= theta_i,
                      theta_i <= 1 for sequential operators,  X <= extra bounds (disk).

``R_i`` is operator ``i``'s resource-accounted rate (minibatches per second per core). The
optimum ``X*`` is an upper bound on throughput with this many cores; ``theta`` says how many
cores each operator should get.

:func:`solve_resource_lp` is the general form every plan uses. Per operator, its CPU
``cpu_i = V_i c_i`` and its latency ``lat_i = V_i l_i`` (seconds per minibatch), a thread count
``k_i`` and cores ``theta_i``:

    theta_i >= cpu_i X         (its CPU, whatever bounds it)
    theta_i <= k_i             (one thread runs on one core at a time)
    lat_i X <= k_i <= kmax_i   (k_i calls in flight, each lat_i long: Little's law)
    sum theta_i <= cores
    sum_{GIL holders} py_i X + consumer X <= 1   (Python runs on one core at a time)

where ``py_i`` is the part of ``cpu_i`` spent holding the GIL (its Python calls' own CPU).

A CPU-bound operator has ``lat_i = cpu_i``; a latency-bound one waits, so ``lat_i >> cpu_i``
and its ``k_i`` may go far above the cores while charging them only its CPU.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import cvxpy as cp
import numpy as np

from ..host.quiet import solver_verbose


class LPError(RuntimeError):
    """The solver failed; the message names the status and what to check."""


@dataclass(frozen=True)
class LPSolution:
    throughput: float  # X*, minibatches per second (a prediction, an upper bound)
    theta: dict[str, float]  # cores given to each operator
    binding: str | None  # the bound that limits X* ("cpu", "gil", an operator's name, or an extra bound)
    threads: dict[str, float] = field(default_factory=dict)  # concurrency each operator needs at X*


@dataclass(frozen=True)
class Demand:
    """What one operator needs per minibatch, in seconds (the LP's input for it)."""

    name: str
    cpu: float  # core-seconds per minibatch: V_i c_i
    latency: float = 0.0  # seconds per minibatch of one call at a time, V_i l_i (<= cpu: CPU-bound)
    gil: bool = False  # holds the GIL while it computes
    max_threads: float = math.inf  # concurrency it may have: 1 for sequential operators
    #: seconds per minibatch holding the GIL (None: all its CPU); may exceed its CPU, as the GIL's
    #: hand-offs between many waiting calls keep it from other threads without using a core
    python: float | None = None

    @property
    def wait(self) -> float:
        return max(self.latency, self.cpu)

    @property
    def gil_seconds(self) -> float:
        """Seconds per minibatch it holds the GIL (0 for an operator running no Python)."""
        if not self.gil:
            return 0.0
        return self.cpu if self.python is None else self.python


#: Name of the GIL constraint when it binds.
GIL = "gil (one core for all Python)"


def solve_resource_lp(demands: Sequence[Demand], *, cores: float, consumer_gil: float = 0.0,
                      extra_bounds: Mapping[str, float] | None = None,
                      min_theta: Mapping[str, float] | None = None) -> LPSolution:
    """Maximize throughput under cores, concurrency and the GIL (see the module docstring).

    ``consumer_gil`` is the Python consumer loop's own seconds per minibatch (it holds the GIL);
    ``min_theta`` is the optimizer's hedge; ``extra_bounds`` are ceilings from other resources.
    """
    if cores <= 0:
        raise LPError(f"cores must be positive, got {cores}")
    bounds = {k: float(v) for k, v in (extra_bounds or {}).items() if v is not None and math.isfinite(v)}
    costly = [d for d in demands if d.wait > 0 and math.isfinite(d.wait)]
    if not costly:
        best = min(bounds.values()) if bounds else math.inf
        gil_cap = 1.0 / consumer_gil if consumer_gil > 0 else math.inf
        if gil_cap < best:
            return LPSolution(throughput=gil_cap, theta={}, binding=GIL)
        return LPSolution(throughput=best, theta={}, binding=min(bounds, key=bounds.get) if bounds else None)
    n = len(costly)
    cpu = np.array([d.cpu for d in costly])
    wait = np.array([d.wait for d in costly])
    x = cp.Variable()
    theta = cp.Variable(n, nonneg=True)
    threads = cp.Variable(n, nonneg=True)
    constraints = [theta >= cpu * x, theta <= threads, threads >= wait * x, cp.sum(theta) <= cores]
    capped = [i for i, d in enumerate(costly) if math.isfinite(d.max_threads)]
    if capped:
        constraints.append(threads[capped] <= np.array([costly[i].max_threads for i in capped]))
    gil = sum(d.gil_seconds for d in costly)
    if gil > 0 or consumer_gil > 0:
        constraints.append(gil * x + consumer_gil * x <= 1)
    floors = min_theta or {}
    for i, d in enumerate(costly):
        if d.name in floors:
            cap = min(floors[d.name], d.max_threads)
            constraints.append(theta[i] >= cap)
    for value in bounds.values():
        constraints.append(x <= value)
    problem = cp.Problem(cp.Maximize(x), constraints)
    try:
        _solve(problem)
    except cp.error.SolverError:
        problem.solve(solver=cp.CLARABEL)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise LPError(f"resource LP is {problem.status}: check that the hedge "
                      f"({sum(floors.values()):.1f} cores) fits in {cores} cores")
    xs = float(x.value)
    return LPSolution(throughput=xs, theta={d.name: float(t) for d, t in zip(costly, theta.value)},
                      binding=_binding(costly, xs, cores=cores, consumer_gil=consumer_gil, bounds=bounds),
                      threads={d.name: d.wait * xs for d in costly})


def _binding(costly: Sequence[Demand], x: float, *, cores: float, consumer_gil: float,
             bounds: Mapping[str, float]) -> str:
    """Which constraint holds X* down: an extra bound, the GIL, an operator's concurrency, or the cores."""
    tight = 1 + 1e-6
    if bounds:
        name, value = min(bounds.items(), key=lambda kv: kv[1])
        if value <= x * tight:
            return name
    gil = sum(d.gil_seconds for d in costly) + consumer_gil
    if gil > 0 and gil * x >= 1 / tight:
        return GIL
    for d in costly:
        if math.isfinite(d.max_threads) and d.wait * x >= d.max_threads / tight:
            return d.name
    return "cpu"


@functools.lru_cache(maxsize=1)
def _installed_solvers() -> tuple[str, ...]:
    """cvxpy looks for every solver package on each call (~10 ms): once per process is enough."""
    return tuple(cp.installed_solvers())


def _solve(problem: cp.Problem) -> None:
    """HiGHS, silently: through SciPy's build of it (``cp.SCIPY``: ``linprog(method="highs")``),
    which prints nothing; ``highspy`` prints its banner to file descriptor 1 the first time it is
    constructed in a process, before any option can switch it off. ``verbose`` shows the log."""
    installed = _installed_solvers()
    if solver_verbose():
        problem.solve(solver=cp.HIGHS if cp.HIGHS in installed else None, verbose=True)
    elif cp.SCIPY in installed:
        problem.solve(solver=cp.SCIPY, scipy_options={"method": "highs"})
    else:
        problem.solve(solver=cp.CLARABEL)


def solve_cpu_lp(rates: Mapping[str, float], *, cores: float, sequential: set[str] = frozenset(),
                 extra_bounds: Mapping[str, float] | None = None,
                 min_theta: Mapping[str, float] | None = None,
                 max_theta: Mapping[str, float] | None = None) -> LPSolution:
    """Solve the LP for ``rates`` (operator -> minibatches/s/core); infinite rates cost nothing.

    ``min_theta`` is the optimizer's hedge (never starve a cheap operator); ``max_theta`` caps
    what TensorFlow lets an operator use (an interleave's cycle length); ``extra_bounds`` are
    throughput ceilings from other resources (e.g. disk bandwidth / bytes per minibatch).
    """
    finite = {k: float(r) for k, r in rates.items() if r is not None and math.isfinite(r) and r > 0}
    demands = [Demand(name, cpu=1.0 / r,
                      max_threads=min(1.0 if name in sequential else math.inf, float((max_theta or {}).get(name, math.inf))))
               for name, r in finite.items()]
    return solve_resource_lp(demands, cores=cores, extra_bounds=extra_bounds, min_theta=min_theta)
