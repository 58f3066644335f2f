"""One measurement at a time: the room for scheduling, cancelling and reporting progress.

Two measurements that overlap on the same cores measure each other. Every engine operation
that runs a pipeline takes the process-wide :data:`MEASURING` lock for as long as it measures,
so a second one (a widget button clicked during a live trace) waits for the first instead of
running beside it. :class:`Cancelled` is what an operation raises when it was asked to stop.
"""

from __future__ import annotations

import threading


class Cancelled(Exception):
    """The operation was cancelled (Cancel button, Ctrl-C); what was measured so far is kept."""


#: Held while any plumbkit measurement runs in this process (re-entrant: an optimization's own
#: traces run inside it).
MEASURING = threading.RLock()
