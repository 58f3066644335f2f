"""Facts about this machine and process, and keeping other libraries quiet.

Cores and memory as the process can really use them (CPU affinity, cgroup quotas and limits,
not the host's totals), and the helpers that silence TensorFlow, absl and AutoGraph chatter
while plumbkit runs. Imports nothing of plumbkit, and never imports TensorFlow itself.
"""

from .machine import available_cores, available_memory

__all__ = ["available_cores", "available_memory"]
