"""A tf.data pipeline materialized once on a local disk and read back every epoch, safely.

tf.data's own ``cache(filename)`` is keyed by the filename alone (a changed pipeline reads the
old elements), leaves a lock file and partial shards when an epoch is interrupted, and raises
when a second iterator meets an unfinished cache. Here a cache is named by :func:`fingerprint`
(the graph below plus the source files' names, sizes and mtimes), filled through a guard that
writes under a temporary name and renames when complete, and removed on Cancel, Ctrl-C, an
error or a full disk (the bookkeeping, pure: :mod:`plumbkit.model.disk_tier`).

The form: ``Dataset.save`` / ``Dataset.load`` without compression, in 2 shards read back
interleaved one record from each in turn (record ``i`` in shard ``i % 2``: the order is kept by
construction, not by the default reader's core count), elements under 64 KB batched ~1 MB to a
record. Measured on TF 2.21, the dev VM (2 cores), nice'd on a shared machine at load average
4-8: figures good to a factor, rounds spread up to 3x. Page cache evicted (``posix_fadvise``)
before every read; read back by ``Dataset.reduce``; medians of 7 interleaved rounds, us/element:

    element   cache(file)   save/load default   this layout (one to a record)
    1 KB           32              41                 42 (78)
    27 KB          89             137                104 (184)
    192 KB        302             653                553

``snapshot`` read no faster than save/load at any size in two runs (27 KB: 271 against 444 MB/s).
Why save/load although ``cache(file)`` read faster here: this VM's disk answers evicted reads
from the host's cache (1.6 GB/s), so these reads were CPU-bound. Where the disk binds, the case
a disk tier is for, the issue's run read the same 340 MB of resized images at 300 minibatches/s
through save/load's parallel shards against 150 through ``cache(file)``'s one sequential
stream. And safety: ``load`` reads only its own complete files, never the pipeline, while a
``cache(file)`` reader *is* the pipeline and silently refills (writes) when its files are
gone; ``snapshot`` fills inside the training epoch with nothing atomic to guard. The plan
measures the read-back cost per element of this form in the user's process, not these figures.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import types
from pathlib import Path
from typing import Callable

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, graph_pb2

from ..model.disk_tier import (META_FILE, CacheEntry, DiskTierError, FillInProgressError,
                               FillInterrupted, FillLock, NotCacheableError, SpaceError, clear_caches, complete_path,
                               default_cache_dir, list_caches, partial_path, publish, read_meta,
                               remove_stale, remove_tree, resolve_cache_dir, tree_bytes)
from ..model.units import human_bytes
from ..tunables import TIER_ALONE_BYTES, TIER_KEEP_FREE_BYTES, TIER_RECORD_BYTES, TIER_SHARDS
from .graph import _arg_names as arg_names, pipeline_from_graph_def
from .graph_walk import node_ref, pruned
from .held_constants import HELD_ATTR
from .python_ops import PYTHON_OPS, callable_of, user_callables
from .unrebuildable import serialize

__all__ = ["on_disk", "fingerprint", "find_cache", "static_bytes", "write_tier", "read_tier", "open_tier",
           "tier_paths", "default_cache_dir", "list_caches", "clear_caches",
           "CacheEntry", "DiskTierError", "NotCacheableError", "SpaceError",
           "FillInProgressError", "FillInterrupted"]


#: The form every cache is written in (see the module docstring for the measurement).
FORM = "save"
#: Bump when the on-disk layout changes: older caches then get new fingerprints and are refilled.
_LAYOUT_VERSION = "1"


def fingerprint(ds: tf.data.Dataset) -> str:
    """A hex digest of ``ds``'s graph (names that change per build and settings of speed alone
    stripped: parallelism values, prefetches, threading options) and of every source file's
    name, size and mtime: a changed operator below or a touched file gives a new one; the same
    pipeline rebuilt in a fresh process, or tuned for speed, the same one.

    What it cannot see: data a Python function (``py_function``, ``from_generator``) reads by
    itself; the digest covers that function's code, not the files it opens.
    """
    graph_def = serialize(ds)
    return _digest(graph_def, _files_read(graph_def), repr(ds.element_spec))


def _digest(graph_def: graph_pb2.GraphDef, files: list[str], spec: str) -> str:
    h = hashlib.sha256()
    for part in (_LAYOUT_VERSION, FORM, spec):
        h.update(part.encode() + b"\0")
    h.update(canonical_graph(graph_def))
    for path in files:
        try:
            st = os.stat(path)
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        except OSError:
            h.update(f"{path}\0missing\0".encode())
    return h.hexdigest()[:24]


def _files_read(graph_def: graph_pb2.GraphDef) -> list[str]:
    """The files the pipeline reads: those its operators name (graph constants, globs expanded)."""
    pipeline = pipeline_from_graph_def(graph_def)
    return sorted({os.path.abspath(f) for op in pipeline for f in op.files})


def canonical_graph(graph_def: graph_pb2.GraphDef) -> bytes:
    """``graph_def`` in a form that is the same for the same pipeline built again: the per-build
    ``metadata`` attributes (``MapDataset:5``) dropped, nodes renamed by their place in the graph
    (``FileIdentity/1`` -> ``n3``), functions renamed by the order in which
    the graph first calls them (``__inference_..._32`` -> ``f0``), Python ops' tokens
    (``pyfunc_3``) replaced by a digest of the Python code behind them."""
    g = graph_pb2.GraphDef.FromString(graph_def.SerializeToString())
    functions = {f.signature.name: f for f in g.library.function}
    order: dict[str, str] = {}

    def visit(node_defs) -> None:
        for node in node_defs:
            for value in node.attr.values():
                for name in _func_names(value):
                    if name in functions and name not in order:
                        order[name] = f"f{len(order)}"
                        visit(functions[name].node_def)

    _without_throughput_settings(g)
    visit(g.node)
    _renumber_nodes(g)
    for node_defs in [g.node, *(f.node_def for f in functions.values())]:
        for node in node_defs:
            _canonical_node(node, order)
    for fdef in functions.values():
        fdef.signature.name = order.get(fdef.signature.name, "unused")
        for key in [k for k in fdef.attr if k.startswith("_")]:
            del fdef.attr[key]
    kept = sorted((f for f in functions.values() if f.signature.name != "unused"),
                  key=lambda f: int(f.signature.name[1:]))
    del g.library.function[:]
    g.library.function.extend(kept)
    return g.SerializeToString(deterministic=True)


#: Operators that never change the elements, only when they are made: dropped from the digest.
_THROUGHPUT_OPS = frozenset({
    "PrefetchDataset", "OptionsDataset", "ModelDataset", "MaxIntraOpParallelismDataset",
    "PrivateThreadPoolDataset", "ExperimentalMaxIntraOpParallelismDataset",
    "ExperimentalPrivateThreadPoolDataset"})
#: Inputs and attributes that set how many elements are made at once, never which or in what
#: order (``deterministic``, which may change the order, is kept).
_THROUGHPUT_ARGS = frozenset({"num_parallel_calls", "buffer_output_elements", "prefetch_input_elements"})
_THROUGHPUT_ATTRS = ("use_inter_op_parallelism",)


def _without_throughput_settings(g: graph_pb2.GraphDef) -> None:
    """Drop what sets only the speed (prefetches, options, parallelism values), so a pipeline
    and the same pipeline as a plan tuned it share a cache: the same elements in the same order.
    A sequential ``map`` and a parallel one stay apart (different ops): a tuned pipeline whose
    form changed fills its own cache."""
    nodes = {n.name: n for n in g.node}

    def through(name: str) -> str:
        while name in nodes and nodes[name].op in _THROUGHPUT_OPS and nodes[name].input:
            name = node_ref(nodes[name].input[0])
        return name

    for node in g.node:
        names = arg_names(node.op, node)
        inputs = []
        for k, ref in enumerate(node.input):
            if k < len(names) and names[k] in _THROUGHPUT_ARGS:
                inputs.append(names[k])  # the value dropped, the argument's place kept
            elif not ref.startswith("^") and node_ref(ref) in nodes:
                inputs.append(through(node_ref(ref)))
            else:
                inputs.append(ref)
        node.input[:] = inputs
        for key in _THROUGHPUT_ATTRS:
            if key in node.attr:
                del node.attr[key]
    pruned(g)
    kept = [n for n in g.node if n.op not in _THROUGHPUT_OPS]
    del g.node[:]
    g.node.extend(kept)


def _renumber_nodes(g: graph_pb2.GraphDef) -> None:
    """Name the graph's nodes by their place in it; inputs (``x``, ``x:1``, ``^x``) follow."""
    names = {node.name: f"n{k}" for k, node in enumerate(g.node)}

    def renamed(ref: str) -> str:
        control = ref.startswith("^")
        base, colon, port = ref.lstrip("^").partition(":")
        return ("^" if control else "") + names.get(base, base) + colon + port

    for node in g.node:
        node.name = names[node.name]
        node.input[:] = [renamed(ref) for ref in node.input]


def _func_names(value: attr_value_pb2.AttrValue) -> list[str]:
    if value.HasField("func"):
        return [value.func.name]
    if value.HasField("list"):
        return [f.name for f in value.list.func]
    return []


def _canonical_node(node, order: dict[str, str]) -> None:
    for key in [k for k in node.attr if k == "metadata" or (k.startswith("_") and k != HELD_ATTR)]:
        del node.attr[key]  # the digest of held in-memory data stays: it is what the node holds
    for value in node.attr.values():
        if value.HasField("func"):
            value.func.name = order.get(value.func.name, value.func.name)
        elif value.HasField("list"):
            for f in value.list.func:
                f.name = order.get(f.name, f.name)
    if node.op in PYTHON_OPS and "token" in node.attr:
        node.attr["token"].s = _python_code_digest(node.attr["token"].s.decode()).encode()


def _python_code_digest(token: str) -> str:
    """A digest of the user's code behind a Python op (its token changes with every build)."""
    fn = callable_of(token)
    if fn is None:
        return "python"
    h = hashlib.sha256()
    for f in user_callables(fn) or [fn]:
        code = getattr(f, "__code__", None)
        if code is not None:
            h.update(f.__qualname__.encode())
            _hash_code(h, code)
    return h.hexdigest()[:16]


def _hash_code(h, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _hash_code(h, const)
        else:
            h.update(repr(const).encode())


def on_disk(ds: tf.data.Dataset, cache_dir: "str | Path | None" = None, *,
            budget_bytes: float | None = None,
            on_progress: Callable[[int, int], None] | None = None,
            should_stop: Callable[[], bool] | None = None,
            free_space: Callable[[Path], int] | None = None) -> tf.data.Dataset:
    """``ds`` read back from a complete disk cache under ``cache_dir`` (same elements, same
    order, same element_spec), filled first when there is none with its fingerprint.

    ``budget_bytes``: the most the fill may write (None: what the disk has, less
    :data:`TIER_KEEP_FREE_BYTES`). ``on_progress(elements, bytes)``: called from this thread while
    filling. ``should_stop()``: True stops the fill. ``free_space(directory)``: free bytes on
    that disk (default ``shutil.disk_usage``; another for filesystems that report it
    differently). Raises, in one line and with nothing left behind:
    :class:`NotCacheableError` (infinite, or random below), :class:`SpaceError` (the budget or
    the disk ran out), :class:`FillInProgressError` (another process fills it now),
    :class:`FillInterrupted` (``should_stop``); Ctrl-C and the pipeline's own errors propagate
    after the same cleanup.
    """
    where = resolve_cache_dir(cache_dir)
    graph_def = serialize(ds)
    refuse_if_not_cacheable(ds, graph_def)
    fp = _digest(graph_def, _files_read(graph_def), repr(ds.element_spec))
    final = complete_path(where, fp, FORM)
    if read_meta(final) is None:
        with _thread_lock(final):  # another thread of this process filling it: wait, then read
            if read_meta(final) is None:
                _fill_guarded(ds, where, fp, _Limits.of(where, budget_bytes, free_space),
                              on_progress, should_stop)
    return _reader(final, ds.element_spec)


_THREAD_LOCKS: dict[Path, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(final: Path) -> threading.Lock:
    """One lock per cache in this process: the lock file tells processes apart by pid, not threads."""
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(final, threading.Lock())


def find_cache(ds: tf.data.Dataset, cache_dir: "str | Path | None" = None) -> CacheEntry | None:
    """The complete cache of ``ds`` under ``cache_dir`` (its fingerprint's), or None: what a plan
    shows as "already on disk" (no fill to pay) and where."""
    fp = fingerprint(ds)
    return next((e for e in list_caches(cache_dir) if e.fingerprint == fp and e.complete), None)


def refuse_if_not_cacheable(ds: tf.data.Dataset, graph_def: graph_pb2.GraphDef) -> None:
    """One line when ``ds`` cannot be written once and replayed: it never ends, or some
    operator in it draws random numbers (the cache would freeze one draw for every epoch)."""
    pipeline = pipeline_from_graph_def(graph_def)
    bounded = {d.name for op in pipeline if op.kind in ("take", "take_while")
               for d in pipeline.descendants(op.name)}
    forever = any(op.kind == "repeat" and op.tunables.get("count", 0) < 0 and op.name not in bounded
                  for op in pipeline)  # TensorFlow says "unknown" for a filter() above one
    if forever or int(ds.cardinality()) == tf.data.INFINITE_CARDINALITY:
        raise NotCacheableError("cannot cache on disk: the pipeline is infinite (a repeat() without "
                                "a count); cache the pipeline before the repeat()")
    random = [op.label for op in pipeline if op.random]
    if random:
        raise NotCacheableError(f"cannot cache on disk: {random[-1]} draws random numbers every "
                                f"epoch, and a cache would replay one draw; cache the pipeline below it")
    stateful = _reading_state(graph_def)
    readers = [op.label for op in pipeline if stateful & set(op.functions)]
    if readers:
        raise NotCacheableError(f"cannot cache on disk: {readers[-1]} reads a variable or a lookup "
                                f"table, whose contents the cache's fingerprint cannot see (a change "
                                f"would replay stale elements); cache the pipeline below it")


#: Ops that read state living outside the graph (its value is not in the fingerprint).
_STATE_OPS = frozenset({"ReadVariableOp", "ResourceGather", "ResourceGatherNd", "LookupTableFindV2",
                        "LookupTableFind", "LookupTableExportV2", "LookupTableSizeV2"})


def _reading_state(graph_def: graph_pb2.GraphDef) -> set[str]:
    """Names of the library's functions that read a variable or a table, themselves or through a callee."""
    functions = {f.signature.name: f for f in graph_def.library.function}
    calls = {name: {n for node in f.node_def for v in node.attr.values() for n in _func_names(v)}
             | {node.op for node in f.node_def if node.op in functions}
             for name, f in functions.items()}
    reading = {name for name, f in functions.items() if any(n.op in _STATE_OPS for n in f.node_def)}
    grew = True
    while grew:
        more = {name for name, callees in calls.items() if callees & reading} - reading
        reading |= more
        grew = bool(more)
    return reading


class _Limits:
    """What the fill may write: the budget, and the disk's free space less what it leaves."""

    def __init__(self, where: Path, budget: float | None, free_space: Callable[[Path], int]):
        self.where, self.budget, self.free_space = where, budget, free_space

    @classmethod
    def of(cls, where: Path, budget: float | None, free_space: Callable[[Path], int] | None) -> "_Limits":
        if budget is not None and budget <= 0:
            raise SpaceError(f"the disk budget is {budget:g} bytes: give a positive one, or no "
                             f"budget to leave the tier off")
        where.mkdir(parents=True, exist_ok=True)
        return cls(where, budget, free_space or (lambda d: shutil.disk_usage(d).free))

    def refusal(self, need: float, written: float) -> str | None:
        """Why writing ``need`` bytes in all (``written`` of them already on disk) is refused."""
        if self.budget is not None and need > self.budget:
            return (f"the disk cache needs more than its budget of {human_bytes(self.budget)} "
                    f"({human_bytes(need)} at least); raise the disk budget or cache a smaller node")
        free = self.free_space(self.where) - TIER_KEEP_FREE_BYTES
        if need - written > free:
            return (f"the disk at {self.where} has {human_bytes(max(free, 0))} free (past the "
                    f"{human_bytes(TIER_KEEP_FREE_BYTES)} kept free) and the cache needs "
                    f"{human_bytes(need - written)} more; free some space or choose another cache_dir")
        return None


def _fill_guarded(ds, where: Path, fp: str, limits: _Limits, on_progress, should_stop) -> None:
    """Fill ``fp``'s cache under its lock, through a partial directory renamed when complete;
    on any way out but success, nothing of it stays (no partial directory, no lock)."""
    lock = FillLock(where, fp)
    lock.acquire()
    partial = partial_path(where, fp, FORM)
    try:
        if read_meta(complete_path(where, fp, FORM)) is not None:
            return  # filled by another process while this one waited for the lock
        remove_stale(where, fp)
        remove_tree(partial)  # this process's own, left by an earlier fill it did not finish
        estimate = static_bytes(ds)
        if estimate is not None:
            said = limits.refusal(estimate, 0)
            if said:
                raise SpaceError(f"refused before writing: {said}")
        elements = _Filler(ds, partial, limits, on_progress, should_stop).run()
        publish(partial, complete_path(where, fp, FORM),
                {"fingerprint": fp, "form": FORM, "shards": TIER_SHARDS, "elements": elements,
                 "record_elements": record_elements(ds.element_spec),
                 "bytes": tree_bytes(partial), "created": time.time(),
                 "element_spec": repr(ds.element_spec)})
    finally:
        remove_tree(partial)  # gone after the rename; what a failed fill wrote otherwise
        lock.release()


def static_bytes(ds: tf.data.Dataset) -> float | None:
    """The epoch's bytes when TensorFlow knows its length and every component's shape and type
    (no strings, ragged or unknown dimensions); None otherwise."""
    n = int(ds.cardinality())
    if n < 0:
        return None
    per = 0
    for spec in tf.nest.flatten(ds.element_spec):
        shape, dtype = getattr(spec, "shape", None), getattr(spec, "dtype", None)
        if not isinstance(spec, tf.TensorSpec) or not shape.is_fully_defined() or dtype == tf.string:
            return None
        per += shape.num_elements() * dtype.size
    return float(n * per)


class _Filler:
    """``Dataset.save`` of the user's records handed over one by one by a Python generator, the
    save running in a worker thread while this thread reports progress, polls ``should_stop``
    and takes Ctrl-C.

    Why the generator: on TF 2.21 ``Dataset.save`` never returns when its input raises after
    the first element (its shard writers' threads wait for an end that never comes; measured:
    a map's failed assert, a ``py_function``'s exception, ``check_numerics``, all hang). So no
    error may reach it: the generator iterates the user's pipeline itself, keeps the error it
    raises, and ends the input cleanly; so does a stop (Cancel, Ctrl-C, the budget, the disk).
    Then the partial directory is removed and the error or the stop is raised here. It costs a
    Python call per record (records of ~1 MB: a few us per MB).
    """

    def __init__(self, ds, partial: Path, limits: _Limits, on_progress, should_stop):
        self.ds, self.partial, self.limits = ds, partial, limits
        self.on_progress, self.should_stop = on_progress, should_stop
        self.stop: BaseException | None = None  # why the fill stopped: raised once the save ends
        self.elements = 0  # handed to the writer
        self.written = 0  # bytes handed to the writer
        self.per_record = record_elements(ds.element_spec)

    def run(self) -> int:
        """Write the cache; returns its elements, or raises (the caller removes what was written).

        Waits on an Event the worker sets, not on ``Thread.join``: a join that Ctrl-C
        interrupts can leave the thread marked finished while it still runs (CPython
        gh-90882), and the partial directory must not be removed while the save writes to it."""
        outcome: list[BaseException] = []
        done = threading.Event()
        worker = threading.Thread(target=self._save, args=(outcome, done), name="plumbkit-disk-fill",
                                  daemon=True)
        worker.start()
        try:
            while not done.wait(0.1):
                self._report()
                if self.should_stop is not None and self.stop is None and self.should_stop():
                    self.stop = FillInterrupted("filling the disk cache was cancelled; what it "
                                                "had written was removed")
        except BaseException as err:  # Ctrl-C: end the input, wait for the save, then go on
            self.stop = self.stop or err
            done.wait()
            raise
        for why in (self.stop, *outcome):
            if why is not None:
                raise why
        self._report()
        return self.elements

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.elements, tree_bytes(self.partial))

    def _save(self, outcome: list[BaseException], done: threading.Event) -> None:
        shards = TIER_SHARDS
        signature = (tf.TensorSpec([], tf.int64), _record_spec(self.ds.element_spec, self.per_record))
        try:
            numbered = tf.data.Dataset.from_generator(self._records, output_signature=signature)
            numbered = numbered.with_options(_UNTUNED)
            numbered.save(str(self.partial), compression=None, shard_func=lambda i, r: i % shards)
        except BaseException as err:  # reported by run(), in the caller's thread
            outcome.append(_space_error(err, self.limits.where) if _disk_full(err) else err)
        finally:
            done.set()

    def _records(self):
        """The user's records, numbered; ends early (and keeps why) on an error or a stop."""
        records = self.ds.batch(self.per_record) if self.per_record > 1 else self.ds
        spent = [iter(records)]
        try:
            for i, record in enumerate(spent[0]):
                size = _nbytes(record)
                said = self.limits.refusal(self.written + size, self.written)
                if said:
                    self.stop = self.stop or SpaceError(
                        f"stopped after {self.elements} elements: {said}; what it had written was removed")
                if self.stop is not None:
                    return
                yield i, record
                self.written += size
                self.elements += _leading(record) if self.per_record > 1 else 1
        except GeneratorExit:  # the save ended first (its writer failed): it reports why
            raise
        except BaseException as err:  # the user's pipeline failed: the save must still end cleanly
            self.stop = self.stop or err
        finally:
            _drop_elsewhere(spent)


def _drop_elsewhere(holder: list) -> None:
    """Delete the iterator in ``holder`` on a thread of its own, not the fill's. Why: deleting a
    spent tf.data iterator joins tf.data's autotuning thread, which may be asleep in its wait
    (TF's ``RootDataset::Iterator`` destructor): 0.2 s usually, 0.7-2.6 s in 6 of 26 deletes of
    the image row's pipeline below its tier on the dev VM (autotuning on), none of 8 with it off.
    Your pipeline keeps its autotuning; the wait is moved off the fill's path."""
    threading.Thread(target=holder.clear, name="plumbkit-drop-iterator", daemon=True).start()


#: The save's own input (the generator handing your records over) has nothing to tune: without
#: autotuning it has no thread to join when the save ends. With it, 5 of 10 fills of the image
#: row's tier ended ~2 s idle after the last record was written (py-spy: the save's
#: ``RootDataset::Iterator`` destructor joining that thread), ~5.5 s against ~3.5.
_UNTUNED = tf.data.Options()
_UNTUNED.autotune.enabled = False


def _nbytes(record) -> int:
    """Bytes of a record's tensors (string components: their lengths)."""
    total = 0
    for t in tf.nest.flatten(record, expand_composites=True):
        total += int(tf.reduce_sum(tf.strings.length(t))) if t.dtype == tf.string else t.shape.num_elements() * t.dtype.size
    return total


def _leading(record) -> int:
    return int(tf.nest.flatten(record)[0].shape[0])


def _space_error(err: BaseException, where: Path) -> SpaceError:
    return SpaceError(f"the disk at {where} is full; what the cache had written was removed")


def _record_spec(element_spec, per_record: int):
    """A record's spec: the element's, or a batch of ``per_record`` of them."""
    if per_record == 1:
        return element_spec
    return tf.nest.map_structure(lambda s: tf.TensorSpec([None, *s.shape], s.dtype), element_spec)


def record_elements(element_spec) -> int:
    """Elements written as one record: as many as make ~1 MB when they are small (under 64 KB)
    and every component is a tensor of fully known shape (``batch`` then ``unbatch`` give back
    the same elements), else 1.

    Why: reading costs per record, and a Python call per record fills (measured, see the module
    docstring: 1 KB elements filled at 2 MB/s one to a record, 22 MB/s in records of 1024, and
    read 78 us/element against 42). Large elements gain nothing and pay ``unbatch``'s copy
    (192 KB elements read 553 us/element one to a record, 1332 in records of 5)."""
    components = tf.nest.flatten(element_spec)
    if not components or not all(isinstance(c, tf.TensorSpec) and c.shape.is_fully_defined()
                                 for c in components):
        return 1
    per = sum(c.shape.num_elements() * (64 if c.dtype == tf.string else c.dtype.size) for c in components)
    if per >= TIER_ALONE_BYTES:
        return 1
    return int(min(1024, max(1, TIER_RECORD_BYTES // max(per, 1))))


def _disk_full(err: BaseException) -> bool:
    text = str(err)
    return "No space left" in text or "ENOSPC" in text or "Disk quota exceeded" in text


def write_tier(ds: tf.data.Dataset, path: "str | Path") -> int:
    """Write ``ds`` at ``path`` exactly as a fill does (records, shards, the generator, the
    metadata) but without the guard (no fingerprint, lock, rename or sync): for a probe that
    measures this form's write and read speed. Returns the elements written."""
    path = Path(path)
    limits = _Limits(path.parent, None, lambda d: shutil.disk_usage(d).free)
    elements = _Filler(ds, path, limits, None, None).run()
    (path / META_FILE).write_text(json.dumps({"shards": TIER_SHARDS, "elements": elements,
                                              "record_elements": record_elements(ds.element_spec)}))
    return elements


def read_tier(path: "str | Path", element_spec) -> tf.data.Dataset:
    """The tier at ``path`` (written by a fill or :func:`write_tier`) as a Dataset of ``element_spec``."""
    return _reader(Path(path), element_spec)


def open_tier(path: "str | Path") -> tf.data.Dataset:
    """The complete tier at ``path`` as its pipeline reads it, its element spec read from the
    files (``Dataset.save`` keeps the records'; a record of several elements is their batch)."""
    path = Path(path)
    meta = read_meta(path) or {}
    per_record = int(meta.get("record_elements", 1))
    _, record = tf.data.Dataset.load(str(path)).element_spec
    spec = record if per_record == 1 else tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape[1:], s.dtype), record)
    return _read(path, spec, per_record, int(meta.get("shards", TIER_SHARDS)))


def tier_paths(ds: tf.data.Dataset) -> list[Path]:
    """The tiers ``ds`` reads back (a rebuilt pipeline's :func:`on_disk` readers): the paths its
    graph's ``LoadDataset`` nodes load."""
    graph_def = serialize(ds)
    consts = {n.name: n for n in graph_def.node if n.op == "Const"}
    paths = []
    for node in graph_def.node:
        if node.op == "LoadDataset" and node.input and node_ref(node.input[0]) in consts:
            value = consts[node_ref(node.input[0])].attr["value"].tensor
            paths += [Path(s.decode()) for s in value.string_val]
    return paths


def _reader(path: Path, element_spec) -> tf.data.Dataset:
    """The complete cache at ``path`` as a Dataset, laid out as its metadata says."""
    meta = read_meta(path) or {}
    return _read(path, element_spec, int(meta.get("record_elements", 1)), int(meta.get("shards", TIER_SHARDS)))


def _read(path: Path, element_spec, per_record: int, shards: int) -> tf.data.Dataset:
    """The cache at ``path``: its shards interleaved one record at a time, in order (record
    ``i`` lives in shard ``i % shards``), the numbering dropped, records unbatched."""
    numbered = tf.data.Dataset.load(
        str(path), element_spec=(tf.TensorSpec([], tf.int64), _record_spec(element_spec, per_record)),
        reader_func=lambda datasets: datasets.interleave(
            lambda d: d, cycle_length=shards, block_length=1, num_parallel_calls=shards,
            deterministic=True))
    records = numbered.map(lambda i, record: record)
    return records.unbatch() if per_record > 1 else records
