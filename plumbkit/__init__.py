"""plumbkit: find and remove bottlenecks in tf.data input pipelines (the Plumber method).

Data flows one way, one sub-package a room: ``model`` (the pipeline model, pure) ->
``tfdata`` (reading, tracing and rebuilding pipelines: the only TensorFlow importer) ->
``analysis`` (operational analysis, pure) -> ``planning`` (the LP and the decisions, the only
cvxpy importer) -> ``engine`` (trace, step, walk, optimize and their results) -> ``export``
(the plan in the user's source) and ``render`` (text, HTML, figures) -> ``widgets``, ``magics``,
``cli`` and ``bench``. ``%load_ext plumbkit`` registers the notebook magics.

``import plumbkit`` imports no TensorFlow: the API is loaded on first use, so the command line
can set TensorFlow's log level before TensorFlow starts, and ``%load_ext plumbkit`` costs
nothing. plumbkit runs on the TensorFlow you have (``tensorflow``, ``tensorflow-cpu``, ...)
and installs none itself unless asked (``pip install "plumbkit[cpu]"`` or ``"[gpu]"``).
"""

from __future__ import annotations

import importlib
import importlib.util

__version__ = "0.1.0"


def _tensorflow_present() -> bool:
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


if not _tensorflow_present():
    raise ImportError(
        "plumbkit needs TensorFlow (2.21), and none is installed in this environment. Install the "
        "one for your machine, e.g. pip install \"plumbkit[cpu]\" (tensorflow-cpu) or "
        "pip install \"plumbkit[gpu]\" (tensorflow with CUDA), or your own TensorFlow build.")

#: The public API, loaded from the engine on first use (``plumbkit.trace``, ``from plumbkit import Plan``).
_API = {"trace": "engine", "Trace": "engine", "step": "engine", "walk": "engine",
        "optimize": "engine", "pick_best": "engine", "Plan": "engine", "Step": "engine",
        "Walk": "engine", "baselines": "engine", "Cancelled": "engine",
        "offload": "engine", "OffloadPlan": "engine", "ServiceCluster": "engine",
        "PipelineError": "model.errors", "on_disk": "tfdata.disk_tier"}

__all__ = ["trace", "Trace", "PipelineError", "ModelError", "step", "walk", "optimize", "pick_best", "Plan",
           "Step", "Walk", "baselines", "Cancelled", "offload", "OffloadPlan", "ServiceCluster",
           "on_disk", "__version__", "load_ipython_extension"]


def __getattr__(name: str):
    if name in _API:
        value = getattr(importlib.import_module(f".{_API[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'plumbkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython) -> None:  # pragma: no cover - exercised via IPython tests
    """``%load_ext plumbkit``: register ``%%plumb`` and ``%plumb`` (IPython imported lazily)."""
    from .magics import register
    register(ipython)
