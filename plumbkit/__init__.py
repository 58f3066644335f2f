"""plumbkit: find and remove bottlenecks in tf.data input pipelines (the Plumber method).

Data flows one way, one sub-package a room: ``model`` (the pipeline model, pure) ->
``tfdata`` (reading, tracing and rebuilding pipelines: the only TensorFlow importer) ->
``analysis`` (operational analysis, pure) -> ``planning`` (the LP and the decisions, the only
cvxpy importer) -> ``engine`` (trace, step, walk, optimize and their results) -> ``export``
(the plan in the user's source) and ``render`` (text, HTML, figures) -> ``widgets``, ``magics``,
``cli`` and ``bench``. ``%load_ext plumbkit`` registers the notebook magics.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .engine import (OffloadPlan, Plan, ServiceCluster, Step, Trace, Walk, baselines, offload, optimize,  # noqa: E402
                     pick_best, step, trace, walk)
from .model.errors import PipelineError  # noqa: E402

__all__ = ["trace", "Trace", "PipelineError", "step", "walk", "optimize", "pick_best", "Plan",
           "Step", "Walk", "baselines", "offload", "OffloadPlan", "ServiceCluster", "__version__",
           "load_ipython_extension"]


def load_ipython_extension(ipython) -> None:  # pragma: no cover - exercised via IPython tests
    """``%load_ext plumbkit``: register ``%%plumb`` and ``%plumb`` (IPython imported lazily)."""
    from .magics import register
    register(ipython)
