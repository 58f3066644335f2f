"""The benchmark suite, its pipelines, and the bundled examples and data (``plumbkit bench``,
``plumbkit demo``, the notebooks and the tests use them from any install).

``examples``: generated data (JPEG TFRecords, text) and the demo's misconfigured pipeline, plus
planted operators of known cost; ``pipelines``: the bench's pipelines; ``overhead``: tracing
overhead, measured; ``offload``: offloading to tf.data service (its pipelines and the report's
section); ``disk_tier``, ``model_loop``, ``busy_core``: issues 26 and 27's sections (``alike``: what
they share); ``suite``: the report. User-level code: it builds tf.data pipelines as a
user would, so it imports TensorFlow, and it may import anything in plumbkit.
"""

from .suite import add_arguments, markdown, run

__all__ = ["add_arguments", "markdown", "run"]
