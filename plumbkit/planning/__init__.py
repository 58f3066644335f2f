"""Planning: the CPU allocation LP and the decisions built on it (parallelism, cache, prefetch).

``lp`` is the only module in plumbkit that imports cvxpy; ``decisions`` turns a traced pipeline
into :class:`~plumbkit.model.Change` records. Pure Python besides the solver. May import
``plumbkit.model``, ``plumbkit.analysis`` and ``plumbkit.host``.
"""

from .decisions import Decisions, bottleneck_choice, decide, decide_cache
from .lp import LPError, LPSolution, solve_cpu_lp

__all__ = ["Decisions", "LPError", "LPSolution", "bottleneck_choice", "decide", "decide_cache",
           "solve_cpu_lp"]
