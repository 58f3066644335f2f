"""Dropping a pipeline's iterator off the measuring thread.

Destroying a tf.data iterator whose pipeline has AUTOTUNE's model thread waits until that
thread's current sleep ends: it sleeps its optimization period, which doubles after each
optimization (10 ms up to 60 s), and cancellation does not wake it. Measured on TF 2.21 on the
2-core VM: 0-2,100 ms after runs of 0.5-5 s, with ~1-4 ms of CPU (a 1 GB cache freed included);
py-spy put 4.2 s of the demo's 58 s in the drop of the trace's iterator alone. plumbkit drops
dozens of iterators per plan, so it hands the last references to one thread, which waits there
(TensorFlow releases the GIL meanwhile) while measuring goes on.

:func:`settle` waits for everything handed over so far: before a measured window (the drop's few
ms of CPU never land in one), before a pipeline is built whose cache must not sit beside the
last one's in memory, and when an operation ends (no thread or iterator outlives it).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import deque
from typing import Any

_lock = threading.Lock()
_pending: deque[tuple[Any, ...]] = deque()
_thread: threading.Thread | None = None


def release(*objects: Any) -> None:
    """Take over the references to ``objects`` (the caller drops its own) and destroy them on
    the reaper thread, started when there is work and gone when there is none."""
    global _thread
    with _lock:
        _pending.append(objects)
        if _thread is None:
            _thread = threading.Thread(target=_drop_pending, daemon=True, name="plumbkit-reaper")
            _thread.start()


def settle() -> None:
    """Wait until everything released before this call is destroyed."""
    while True:
        with _lock:
            thread = _thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join()


def _drop_pending() -> None:
    global _thread
    while True:
        with _lock:
            if not _pending:
                _thread = None
                return
            objects = _pending.popleft()
        del objects  # the last references: the iterators' destructors run (and wait) here


def _forget_in_child() -> None:
    """A forked child has no reaper thread (and nothing of the parent's to drop)."""
    global _thread, _lock
    _lock = threading.Lock()
    _pending.clear()
    _thread = None


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(settle)  # before the interpreter finalizes: no destructor runs in a frozen thread
