"""Planning: the CPU allocation LP, the decisions built on it (parallelism, cache, prefetch) and
the before-the-fact prediction of a configuration's throughput.

``lp`` is the only module in plumbkit that imports cvxpy; ``decisions`` turns a traced pipeline
into :class:`~plumbkit.model.Change` records; ``predict`` models a configuration from what was
measured before any rewrite. Pure Python besides the solver. May import ``plumbkit.model``,
``plumbkit.analysis``, ``plumbkit.host`` and ``plumbkit.tunables``.
"""

from .decisions import Decisions, bottleneck_choice, decide, decide_cache
from .lp import LPError, LPSolution, solve_cpu_lp
from .predict import (
           Evidence,
           Layout,
           Prediction,
           RuntimeCosts,
           best_allocation,
           evidence_from_trace,
           predict,
)

__all__ = ["Decisions", "Evidence", "LPError", "LPSolution", "Layout", "Prediction", "RuntimeCosts",
           "best_allocation", "bottleneck_choice", "decide", "decide_cache", "evidence_from_trace", "predict",
           "solve_cpu_lp"]
