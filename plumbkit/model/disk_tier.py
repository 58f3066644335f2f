"""The disk tier's bookkeeping, pure standard library: where caches live, what one is, its lock.

A disk cache is one directory ``<cache_dir>/<fingerprint>.<form>`` (complete) written through
``<cache_dir>/.<fingerprint>.<form>.partial-<pid>`` (being filled) and guarded by
``<cache_dir>/<fingerprint>.lock`` (the filling process's pid). A directory without the
``.partial`` suffix is complete by construction: it only gets that name by an atomic rename
after the last element and the metadata file were written and synced. The TensorFlow side
(fingerprint, fill, read) is :mod:`plumbkit.tfdata.disk_tier`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import PipelineError


class DiskTierError(PipelineError):
    """The disk tier could not be used or filled; the message (one line) says why and what to do."""


class NotCacheableError(DiskTierError):
    """The pipeline cannot be cached on disk: it is infinite or not deterministic."""


class SpaceError(DiskTierError):
    """The disk budget or the disk ran out before the cache was complete (what was written is removed)."""


class FillInProgressError(DiskTierError):
    """Another live process is filling the same cache; it is never read half-written."""


class FillInterrupted(DiskTierError):
    """The fill was stopped (Cancel); what was written is removed."""


@dataclass(frozen=True)
class CacheEntry:
    """One cache on disk, as listed by :func:`list_caches`."""

    fingerprint: str
    form: str  # "save" (Dataset.save / load)
    path: Path
    bytes: int
    elements: int | None  # None when the metadata is missing (a partial fill)
    created: float  # POSIX time the fill completed (or the partial directory's mtime)
    complete: bool


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/plumbkit`` or ``~/.cache/plumbkit``: the user's cache folder, never the
    working directory (a notebook's folder is often synced or versioned)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "plumbkit"


def list_caches(cache_dir: "str | Path | None" = None) -> list[CacheEntry]:
    """Every cache under ``cache_dir`` (default :func:`default_cache_dir`), complete or not."""
    raise NotImplementedError


def clear_caches(cache_dir: "str | Path | None" = None, fingerprint: str | None = None) -> int:
    """Remove the caches (all, or those whose fingerprint starts with ``fingerprint``) that no
    live process is filling; returns the bytes freed."""
    raise NotImplementedError
