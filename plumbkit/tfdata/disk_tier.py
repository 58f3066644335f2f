"""A tf.data pipeline materialized once on a local disk and read back every epoch, safely.

tf.data's own ``cache(filename)`` is keyed by the filename alone (a changed pipeline reads the
old elements), leaves a lock file and partial shards when an epoch is interrupted, and raises
when a second iterator meets an unfinished cache. Here a cache is named by :func:`fingerprint`
(the graph below plus the source files' names, sizes and mtimes), filled through a guard that
writes under a temporary name and renames when complete, and removed on Cancel, Ctrl-C, an
error or a full disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import tensorflow as tf

from ..model.disk_tier import (CacheEntry, DiskTierError, FillInProgressError, FillInterrupted,
                               NotCacheableError, SpaceError, clear_caches, default_cache_dir,
                               list_caches)

__all__ = ["on_disk", "fingerprint", "default_cache_dir", "list_caches", "clear_caches",
           "CacheEntry", "DiskTierError", "NotCacheableError", "SpaceError",
           "FillInProgressError", "FillInterrupted"]


def fingerprint(ds: tf.data.Dataset) -> str:
    """A hex digest of ``ds``'s graph (names that change per build stripped) and of every source
    file's name, size and mtime: a changed operator below or a touched file gives a new one, the
    same pipeline rebuilt in a fresh process the same one."""
    raise NotImplementedError


def on_disk(ds: tf.data.Dataset, cache_dir: "str | Path | None" = None, *,
            budget_bytes: float | None = None,
            on_progress: Callable[[int, int], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> tf.data.Dataset:
    """``ds`` read back from a complete disk cache under ``cache_dir`` (same elements, same
    order, same element_spec), filled first when there is none with its fingerprint.

    ``budget_bytes``: the most the fill may write (None: the free space on that disk).
    ``on_progress(elements, bytes)``: called while filling. ``should_stop()``: True stops the
    fill (raises :class:`FillInterrupted`, nothing left behind). Raises
    :class:`NotCacheableError`, :class:`SpaceError`, :class:`FillInProgressError` with one line.
    """
    raise NotImplementedError
