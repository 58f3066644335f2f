"""Analysis: from runtime counters to per-operator statistics (operational analysis), pure Python.

``runtime_map`` joins tf.data's runtime iterator nodes to the user's operators (after tf.data's
own rewrites); ``operational`` derives visit ratios, rates, CPU shares, sizes, cacheability and
the bottleneck. May import ``plumbkit.model`` and ``plumbkit.tunables`` only.
"""

from .operational import Analysis, OpStats, analyze, bottleneck

__all__ = ["Analysis", "OpStats", "analyze", "bottleneck"]
