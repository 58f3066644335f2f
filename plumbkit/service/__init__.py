"""tf.data service processes on this machine: the dispatcher, the workers, the measuring client.

``processes`` starts each as a Python process pinned to its cores before TensorFlow loads;
``cluster`` runs a dispatcher and workers (:class:`ServiceCluster`, ``plumbkit service up``);
``server`` is what a dispatcher or worker process runs; ``client`` is plumbkit's measuring
client, which runs offload measurements (:mod:`plumbkit.tfdata.offload_requests`) and never
hangs on a lost worker; ``errors`` holds what a user can catch. Standard library only here:
TensorFlow is imported inside the processes started, after pinning. What the feature decides
(where to cut, how many workers) lives under the name *offload*: ``plumbkit.offload``.
"""

from .cluster import ServiceCluster
from .errors import LostWorker, ServiceError, ServiceStall

__all__ = ["LostWorker", "ServiceCluster", "ServiceError", "ServiceStall"]
