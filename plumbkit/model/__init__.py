"""The pipeline model: plumbkit's own vocabulary, pure Python.

Holds the operator tree (:class:`Pipeline`, :class:`Operator`), what the tracer records
(snapshots), the plan's vocabulary (:class:`Change`, :class:`CacheDecision`), units and the
one error type users see for a bad pipeline. Imports nothing of plumbkit: every other room
builds on it, and tests build these records by hand.
"""

from .errors import PipelineError
from .pipeline import AUTOTUNE, Operator, Pipeline
from .plan import CacheDecision, Change, Option
from .samples import NodeSample, RawTrace, Snapshot
from .units import human_bytes

__all__ = ["AUTOTUNE", "CacheDecision", "Change", "NodeSample", "Operator", "Option", "Pipeline",
           "PipelineError", "RawTrace", "Snapshot", "human_bytes"]
