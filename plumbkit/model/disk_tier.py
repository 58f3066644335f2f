"""The disk tier's bookkeeping, pure standard library: where caches live, what one is, its lock.

A disk cache is one directory ``<cache_dir>/<fingerprint>.<form>`` (complete) written through
``<cache_dir>/.<fingerprint>.<form>.partial-<pid>`` (being filled) and guarded by
``<cache_dir>/<fingerprint>.lock`` (the filling process's pid). A directory without the
``.partial`` suffix is complete by construction: it only gets that name by an atomic rename
after the last element and the metadata file were written and synced. The TensorFlow side
(fingerprint, fill, read) is :mod:`plumbkit.tfdata.disk_tier`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
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


#: The metadata file a complete cache holds (written last, before the rename).
META_FILE = "plumbkit-cache.json"
#: A cache's file names: ``<fingerprint>.<form>``, ``.<fingerprint>.<form>.partial-<pid>``, ``<fingerprint>.lock``.
_PARTIAL = ".partial-"
_LOCK = ".lock"


def resolve_cache_dir(cache_dir: "str | Path | None") -> Path:
    """``cache_dir`` as an absolute path (default :func:`default_cache_dir`), ``~`` expanded."""
    return (Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()).absolute()


def complete_path(cache_dir: Path, fingerprint: str, form: str) -> Path:
    return cache_dir / f"{fingerprint}.{form}"


def partial_path(cache_dir: Path, fingerprint: str, form: str, pid: int | None = None) -> Path:
    return cache_dir / f".{fingerprint}.{form}{_PARTIAL}{pid if pid is not None else os.getpid()}"


def lock_path(cache_dir: Path, fingerprint: str) -> Path:
    return cache_dir / f"{fingerprint}{_LOCK}"


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (files that vanish meanwhile count 0)."""
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists on this machine (one we may not signal counts too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_owner(lock: Path) -> int | None:
    """The pid written in ``lock`` (None: gone, or unreadable)."""
    try:
        return int(lock.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class FillLock:
    """``<fingerprint>.lock``, created exclusively with the filling process's pid in it.

    Why a lock file and not ``flock``: a second process must be able to say *who* fills (the
    pid) and a lock left by a process that died (kill -9, a crash) must be recognized as stale
    and cleaned, with its partial files, by the next one. A pid that is alive holds the lock.
    """

    def __init__(self, cache_dir: Path, fingerprint: str):
        self.cache_dir, self.fingerprint = cache_dir, fingerprint
        self.path = lock_path(cache_dir, fingerprint)
        self.held = False

    def acquire(self) -> None:
        """Take the lock, cleaning a stale one; :class:`FillInProgressError` when a live process holds it."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = _lock_owner(self.path)
                if _held_by_another(self.path, owner):
                    who = f"process {owner}" if owner is not None else "another process"
                    raise FillInProgressError(
                        f"cache {self.fingerprint[:12]} is being filled by {who} "
                        f"(lock {self.path}); wait for it to finish, then run again") from None
                _unlink(self.path)  # its process is gone, or it is this process's own leftover
                remove_stale(self.cache_dir, self.fingerprint)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()}\n")
            self.held = True
            return
        raise FillInProgressError(f"cache {self.fingerprint[:12]}: could not take the lock {self.path}")

    def release(self) -> None:
        if self.held:
            self.held = False
            if _lock_owner(self.path) == os.getpid():
                _unlink(self.path)


#: Seconds a lock file may stay empty (its process writes its pid right after creating it).
_LOCK_WRITE_SECONDS = 5.0


def _held_by_another(lock: Path, owner: int | None) -> bool:
    if owner is None:  # just created, pid not written yet; or left empty by a crash long ago
        try:
            return time.time() - lock.stat().st_mtime < _LOCK_WRITE_SECONDS
        except OSError:
            return False
    return owner != os.getpid() and pid_alive(owner)


def remove_stale(cache_dir: Path, fingerprint: str | None = None) -> int:
    """Remove the partial fills and locks of processes that no longer run; returns bytes freed."""
    freed = 0
    if not cache_dir.is_dir():
        return 0
    for entry in cache_dir.iterdir():
        name = entry.name
        if fingerprint is not None and not name.lstrip(".").startswith(fingerprint):
            continue
        if name.endswith(_LOCK):
            owner = _lock_owner(entry)
            if (owner is None and not _held_by_another(entry, None)) or (owner is not None and not pid_alive(owner)):
                _unlink(entry)
        elif name.startswith(".") and _PARTIAL in name:
            pid = _pid_of_partial(name)
            if pid is None or not pid_alive(pid):
                freed += remove_tree(entry)
    return freed


def _pid_of_partial(name: str) -> int | None:
    try:
        return int(name.rsplit(_PARTIAL, 1)[1])
    except (IndexError, ValueError):
        return None


def remove_tree(path: Path) -> int:
    """Remove ``path`` (a file or a directory), returning the bytes it held; errors ignored."""
    size = tree_bytes(path) if path.is_dir() else (path.stat().st_size if path.exists() else 0)
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        _unlink(path)
    return size


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def fsync_tree(path: Path) -> None:
    """Flush every file under ``path`` and the directories themselves to the disk, so the rename
    that follows never publishes a cache whose bytes a crash could still lose."""
    for root, _, names in os.walk(path):
        for name in names:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def publish(partial: Path, final: Path, meta: dict) -> None:
    """Write the metadata, flush, and rename ``partial`` to ``final`` in one atomic step."""
    (partial / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True))
    fsync_tree(partial)
    os.rename(partial, final)
    fd = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_meta(path: Path) -> dict | None:
    try:
        return json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        return None


def list_caches(cache_dir: "str | Path | None" = None) -> list[CacheEntry]:
    """Every cache under ``cache_dir`` (default :func:`default_cache_dir`), complete or not,
    oldest first. A partial one is a fill in progress (or one a dead process left: the next
    fill or :func:`clear_caches` removes it)."""
    where = resolve_cache_dir(cache_dir)
    if not where.is_dir():
        return []
    entries = []
    for entry in where.iterdir():
        if not entry.is_dir():
            continue
        complete = not entry.name.startswith(".")
        stem = entry.name.lstrip(".").split(_PARTIAL)[0]
        if "." not in stem:
            continue
        fp, form = stem.rsplit(".", 1)
        meta = read_meta(entry) if complete else None
        if complete and meta is None:
            continue  # not one of plumbkit's
        entries.append(CacheEntry(
            fingerprint=fp, form=form, path=entry, bytes=tree_bytes(entry),
            elements=meta.get("elements") if meta else None,
            created=float(meta.get("created", 0.0)) if meta else entry.stat().st_mtime,
            complete=complete))
    return sorted(entries, key=lambda e: e.created)


def clear_caches(cache_dir: "str | Path | None" = None, fingerprint: str | None = None) -> int:
    """Remove the caches (all, or those whose fingerprint starts with ``fingerprint``) and the
    partial fills of processes that no longer run; a fill in progress is left alone. Returns
    the bytes freed."""
    where = resolve_cache_dir(cache_dir)
    freed = remove_stale(where, fingerprint)
    for entry in list_caches(where):
        if fingerprint is not None and not entry.fingerprint.startswith(fingerprint):
            continue
        if entry.complete:
            freed += remove_tree(entry.path)
    return freed
