"""Everything that touches TensorFlow: the only room that imports it at import time.

Reading a pipeline's graph into the model (``graph``), the tracer that samples tf.data's own
runtime counters (``tracer``), editing a serialized graph and rebuilding a Dataset from a plan
(``graph_edits``, ``rebuild``), the disk probe (``disk``), ``tf.data.Options`` helpers
(``options``) and running a dataset for a measurement (``run``). May import ``plumbkit.model``,
``plumbkit.host`` and ``plumbkit.tunables``; nothing above them.
"""
