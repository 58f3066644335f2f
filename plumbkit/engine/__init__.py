"""The engine: tracing, stepping, walks, the full optimization, the baselines, and their results.

Result objects (:class:`Trace` with ``allocation_bound()``, :class:`Step`, :class:`Walk`,
:class:`Plan`) and the operations that produce them. Reaches TensorFlow only through
``plumbkit.tfdata``; may import ``model``, ``host``, ``tfdata``, ``analysis``, ``planning``, ``export``,
``service`` and ``tunables``.
A result's ``__str__`` / ``_repr_html_`` import its renderer inside the method. Every operation
runs through the :mod:`~plumbkit.engine.scheduler`: one measurement at a time, each stoppable.
"""

from . import baselines
from .offload import OffloadPlan, ServiceCluster, offload
from .optimization import Plan, optimize, pick_best
from .scheduler import SCHEDULER, Cancelled
from .stepping import Step, Walk, step, walk
from .trace_result import Trace
from .tracing import PipelineLike, trace

__all__ = ["Cancelled", "OffloadPlan", "Plan", "PipelineLike", "SCHEDULER", "ServiceCluster", "Step", "Trace",
           "Walk", "baselines", "offload", "optimize", "pick_best", "step", "trace", "walk"]
