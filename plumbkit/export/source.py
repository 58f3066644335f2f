"""Plan -> the user's own cell, rewritten: ``num_parallel_calls``, ``cache()`` and ``prefetch()``
placed at the right call sites, with the user's functions, names, comments and layout kept.

Pure Python (``ast`` for finding call sites, then minimal text edits at their exact offsets, in
the spirit of line_profiler's AST transformer), so a person reads code they would have written.
Edits are idempotent: applying a plan twice gives the same text as once.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from typing import Sequence

from ..model.pipeline import Pipeline
from ..model.plan import Change, Option
from .placement import dataset_binding, label_total, place_outside

#: Operator kinds whose Dataset method has a different name in Python.
_METHOD_OF_KIND = {"tfrecord": "TFRecordDataset", "text_line": "TextLineDataset",
                   "fixed_length_record": "FixedLengthRecordDataset", "csv": "CsvDataset", "sql": "SqlDataset"}
_LABEL = re.compile(r"^(?P<kind>[A-Za-z_]+)(?:\((?P<arg>[^)]*)\))?(?:#(?P<n>\d+))?$")


class CodegenError(ValueError):
    """The change's call site could not be found in the source (message names it)."""


@dataclass(frozen=True)
class _Site:
    call: ast.Call
    start: int  # absolute offsets of the call expression in the source
    end: int
    receiver_end: int  # end of the expression the method is called on


def _offsets(source: str) -> list[int]:
    """Absolute character offset of each line start (1-based line numbers)."""
    starts, total = [0, 0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def _abs(source_lines: list[str], starts: list[int], lineno: int, col: int) -> int:
    # ast columns are UTF-8 byte offsets
    line = source_lines[lineno - 1]
    return starts[lineno] + len(line.encode("utf-8")[:col].decode("utf-8", "replace"))


def _mask_magics(source: str) -> str:
    """IPython magics and shell escapes are not Python: blank them out (keeping offsets)."""
    return "\n".join(("#" + line[1:]) if line.lstrip().startswith(("%", "!")) else line
                     for line in source.split("\n"))


def parse_cell(source: str) -> tuple[str, ast.Module, str, dict[int, ast.Call]]:
    """What every rewrite of a cell starts from: the cell with its magics masked (offsets kept),
    its syntax tree, the name TensorFlow is imported as, and each call's parent call
    (:func:`_parent_calls`). Raises CodegenError when the cell is not valid Python."""
    masked = _mask_magics(source)
    try:
        tree = ast.parse(masked)
    except SyntaxError as err:
        raise CodegenError(f"the cell is not valid Python: {err}") from err
    return masked, tree, _tf_alias(tree), _parent_calls(tree)


def restore_magics(source: str, masked: str, out: str) -> str:
    """``out`` (an edit of ``masked``, the masked ``source``) with the magics masked in it back."""
    magic = {m: o for o, m in zip(source.split("\n"), masked.split("\n")) if o != m}
    return "\n".join(magic.get(line, line) for line in out.split("\n"))


def _callee_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Lambda):
        return "lambda"
    return None


def _site_of(call: ast.Call, receiver: ast.AST, lines: list[str], starts: list[int]) -> _Site:
    """``call``'s offsets in the cell, ``receiver`` the expression a change after it is written on."""
    return _Site(call=call, start=_abs(lines, starts, call.lineno, call.col_offset),
                 end=_abs(lines, starts, call.end_lineno, call.end_col_offset),
                 receiver_end=_abs(lines, starts, receiver.end_lineno, receiver.end_col_offset))


def _sites(tree: ast.AST, source: str) -> list[_Site]:
    lines, starts = source.splitlines(keepends=True), _offsets(source)
    out = [_site_of(node, node.func.value, lines, starts) for node in ast.walk(tree)
           if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)]
    return sorted(out, key=lambda s: (s.start, s.end))


def _matches(site: _Site, method: str, arg: str | None) -> bool:
    call = site.call
    if call.func.attr != method:
        return False
    if not arg or arg in ("-1",):
        return True
    first = call.args[0] if call.args else None
    if first is None:
        return not call.keywords or all(k.arg not in ("map_func", "batch_size") for k in call.keywords)
    if isinstance(first, ast.Constant):
        return str(first.value) == arg
    name = _callee_name(first)
    return name is None or name == arg or arg in ("AUTOTUNE",)


def find_site(tree: ast.AST, source: str, label: str, total: int | None = None) -> _Site:
    """The call that built the operator labelled ``label`` (e.g. ``map(decode)``, ``batch(32)#2``).

    ``total``: how many operators of the pipeline share the label (None: unknown). Where the
    cell has fewer calls than that and none builds several (a loop, a helper called twice), the
    rest are built inside a library call it makes (``image_dataset_from_directory``'s map), below
    the cell's own: its calls are the top ones, and a label below them is not in the cell."""
    m = _LABEL.match(label.strip())
    if not m:
        raise CodegenError(f"cannot read the operator label {label!r}")
    kind, arg, n = m.group("kind"), m.group("arg"), int(m.group("n") or 1)
    method = _METHOD_OF_KIND.get(kind, kind)
    sites = _sites(tree, source)
    hits = [s for s in sites if _matches(s, method, arg)]
    if not hits:
        hits = [s for s in sites if s.call.func.attr == method]
        if len(hits) != 1:
            raise CodegenError(f"no call .{method}(...) for {label!r} in the cell")
    if (total is not None and total > len(hits)
            and not (len(hits) == 1 and builds_several(hits[0], tree, _parents(tree)))):
        n -= total - len(hits)  # the library's come first
        if n < 1:
            raise CodegenError(f"{label!r} is built inside a call the cell makes, "
                               f"not by a call of its own")
    if n > len(hits) and len(hits) == 1:
        return hits[0]  # one call site builds them all (a loop, a helper called twice)
    if n > len(hits):
        raise CodegenError(f"{label!r}: only {len(hits)} call(s) .{method}(...) in the cell")
    return hits[n - 1]


def _call_text(change: Change, tf_alias: str) -> str:
    """The call a cache or prefetch change adds: ``.cache()``, ``.cache('<file>')``, ``.prefetch(n)``."""
    if change.what == "cache":
        return f".cache({change.value!r})" if change.value else ".cache()"
    return f".prefetch({_value_text(change.value, tf_alias)})"


def _value_text(value, tf_alias: str) -> str:
    return f"{tf_alias}.data.AUTOTUNE" if value in (-1, "AUTOTUNE") else str(int(value))


def _tf_alias(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tensorflow":
                    return alias.asname or "tensorflow"
    return "tf"


def _parent_calls(tree: ast.AST) -> dict[int, ast.Call]:
    """For each call, the method call made directly on its result (``x.map(f)`` -> ``.cache()``)."""
    parents = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call):
            parents[id(node.func.value)] = node
    return parents


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosing(node: ast.AST, parents: dict[int, ast.AST], kinds: tuple[type, ...]) -> ast.AST | None:
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, kinds):
            return node
    return None


_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.comprehension, ast.ListComp, ast.SetComp,
          ast.DictComp, ast.GeneratorExp)


def builds_several(site: _Site, tree: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Does this call site run more than once per pipeline? Inside a loop or comprehension
    (``for fn in fns: ds = ds.map(fn)``), or in a function the cell calls more than once, or
    calls in a loop (a helper used for two branches)."""
    node: ast.AST = site.call
    seen: set[str] = set()
    while True:
        if _enclosing(node, parents, _LOOPS) is not None and not _loop_is_outside(node, parents):
            return True
        fn = _enclosing(node, parents, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if fn is None or isinstance(fn, ast.Lambda) or fn.name in seen:
            return False
        seen.add(fn.name)
        calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                 and c.func.id == fn.name]
        if len(calls) > 1:
            return True
        if not calls:
            return False
        node = calls[0]  # the single call: is *it* in a loop or a helper called twice?


def _loop_is_outside(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """True when the nearest loop lies outside the function holding ``node`` (that function is
    only *defined* in the loop's scope, so the loop says nothing about how often it runs)."""
    loop = _enclosing(node, parents, _LOOPS)
    fn = _enclosing(node, parents, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    if loop is None or fn is None:
        return False
    inner = node
    while id(inner) in parents:
        inner = parents[id(inner)]
        if inner is fn:
            return True
        if inner is loop:
            return False
    return False


def _int_arg(call: ast.Call, name: str, position: int) -> int | None:
    """A literal integer argument of ``call`` (by keyword or position), else None."""
    node = next((k.value for k in call.keywords if k.arg == name), None)
    if node is None and len(call.args) > position:
        node = call.args[position]
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def _merged_parallelism(values: list, call: ast.Call) -> int:
    """One value for a call site that builds several operators: the largest asked for (AUTOTUNE
    if any asked for it), and never above an interleave's literal cycle_length (TensorFlow
    refuses num_parallel_calls > cycle_length)."""
    ints = [int(v) for v in values if v not in (-1, "AUTOTUNE")]
    value = -1 if len(ints) < len(values) else max(ints)
    if call.func.attr == "interleave":
        cycle = _int_arg(call, "cycle_length", 1)
        if cycle is not None and cycle > 0:
            value = cycle if value == -1 else min(value, cycle)
    return value


def _above(site: _Site, parents: dict[int, ast.AST], lines: list[str], starts: list[int]) -> tuple[int, str]:
    """Where a line above the statement holding ``site`` goes, and that statement's indent."""
    stmt = _enclosing(site.call, parents, (ast.stmt,))
    lineno = stmt.lineno if stmt is not None else site.call.lineno
    line = lines[lineno - 1]
    return starts[lineno], line[: len(line) - len(line.lstrip())]


def _comment_above(site: _Site, parents: dict[int, ast.AST], lines: list[str], starts: list[int],
                   text: str) -> tuple[int, int, str]:
    """An edit inserting ``# text`` on its own line above the statement holding ``site``."""
    at, indent = _above(site, parents, lines, starts)
    return at, at, f"{indent}# plumbkit: {text}\n"


def _appended(call: ast.Call, text: str, lines: list[str], starts: list[int]) -> tuple[int, str]:
    """Where and how ``text`` (``.cache()``, ``.prefetch(n)``) follows ``call``: on a line of its
    own, indented like ``call``, where the cell writes its chain one call per line inside brackets
    (keras-io's style: a comment on the call's line stays there); else right after the call."""
    end = _abs(lines, starts, call.end_lineno, call.end_col_offset)
    func = call.func
    if not isinstance(func, ast.Attribute) or func.value.end_lineno >= func.end_lineno:
        return end, text  # not written one call per line
    own, before = lines[func.end_lineno - 1], lines[func.end_lineno - 2]
    last = lines[call.end_lineno - 1]
    rest = last[end - starts[call.end_lineno]:].strip()
    if before.rstrip().endswith("\\") or rest.endswith("\\"):
        return end, text  # a backslash's continuation: a line break would end the statement
    indented = "\n" + own[: len(own) - len(own.lstrip())] + text
    if rest.startswith((")", "]")):
        return end, indented  # the bracket closes after it, on the new line
    if not rest or rest.startswith("#"):
        return starts[call.end_lineno] + len(last.rstrip("\r\n")), indented
    return end, text


#: The variable an exported cell builds tf.data's options in (for the thread pool).
OPTIONS_NAME = "_plumbkit_options"
_POOL_LINE = re.compile(rf"^(?P<indent>[ \t]*){OPTIONS_NAME}\.threading\.private_threadpool_size = (?P<value>\d+)$",
                        re.MULTILINE)


def _threadpool_edits(tree: ast.AST, source: str, site: _Site, parents: dict[int, ast.Call], size: int,
                      alias: str) -> list[tuple[int, int, str]]:
    """``private_threadpool_size = size`` in an options object built just before the statement
    that builds the pipeline's last operator, and ``.with_options(...)`` after that operator
    (or the size changed in place when the cell already has them: idempotent)."""
    existing = _POOL_LINE.search(source)
    if existing is not None:
        return [(existing.start("value"), existing.end("value"), str(size))]
    statement = min((n for n in ast.walk(tree) if isinstance(n, ast.stmt)
                     and n.lineno <= site.call.lineno and n.end_lineno >= site.call.end_lineno),
                    key=lambda n: n.end_lineno - n.lineno, default=None)
    if statement is None:
        raise CodegenError("no statement builds the pipeline in the cell")
    line_start = _offsets(source)[statement.lineno]
    indent = re.match(r"[ \t]*", source[line_start:]).group(0)
    setup = (f"{indent}{OPTIONS_NAME} = {alias}.data.Options()\n"
             f"{indent}{OPTIONS_NAME}.threading.private_threadpool_size = {size}\n")
    parent = parents.get(id(site.call))
    edits = [(line_start, line_start, setup)]
    if parent is None or parent.func.attr != "with_options":
        edits.append((site.end, site.end, f".with_options({OPTIONS_NAME})"))
    return edits


def rewrite_source(source: str, changes: Sequence[Change], *, pipeline: Pipeline | None = None) -> str:
    """``source`` with ``changes`` applied at their call sites; raises CodegenError if one is missing.

    ``pipeline``: the model of the pipeline the cell builds. With it, a change at an operator a
    library call builds (not the cell's own code) goes where :mod:`.placement` says, or is said in
    a ``# plumbkit:`` comment at the end of the cell; without it, such a change raises.

    A call site that builds several operators (in a loop, or a helper called more than once)
    gets one ``num_parallel_calls`` serving all of them (the largest the plan asks for); a cache
    or prefetch the plan places after only one of them cannot be written there, so it becomes a
    ``# plumbkit:`` comment above that statement saying what to add by hand. Interleave
    parallelism never exceeds a literal ``cycle_length``.
    """
    masked, tree, alias, parents = parse_cell(source)
    up = _parents(tree)
    lines, starts = masked.splitlines(keepends=True), _offsets(masked)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement)
    parallelism: dict[int, tuple[_Site, list]] = {}  # call site -> every value asked for there
    outside: list[Change] = []  # built inside a library call the cell makes (with ``pipeline``)
    for change in changes:
        try:
            site = find_site(tree, masked, change.where, label_total(pipeline, change.where))
        except CodegenError:
            if pipeline is None:
                raise
            outside.append(change)
            continue
        if change.what != "parallelism":  # its parallelism is the transformation's own argument
            site = _applied(site, up, lines, starts)
        if change.what == "remove":
            edits.append((site.receiver_end, site.end, ""))
            continue
        call = site.call
        if change.what == "parallelism":
            parallelism.setdefault(id(call), (site, []))[1].append(change.value)
        elif change.what in ("cache", "prefetch"):
            edits.extend(_cache_or_prefetch_edits(change, site, tree, up, parents, alias, lines, starts))
        elif change.what == "disk_tier":
            edits.extend(_disk_tier_edits(site, change, tree, up, lines, starts))
        elif change.what == "threadpool":
            edits.extend(_threadpool_edits(tree, masked, site, parents, int(change.value), alias))
        else:
            raise CodegenError(f"unknown change {change.what!r}")
    for site, values in parallelism.values():
        edits.append(_parallelism_edit(site, _merged_parallelism(values, site.call), alias, lines, starts))
    if outside:
        edits.extend(_outside_edits(outside, pipeline, tree, masked, alias, lines, starts))
    out = masked
    # same position: keep the order the edits were made in (a cache before its prefetch)
    order = {id(e): i for i, e in enumerate(edits)}
    for start, end, text in sorted(edits, key=lambda e: (e[0], order[id(e)]), reverse=True):
        out = out[:start] + text + out[end:]
    try:
        ast.parse(out)
    except SyntaxError as err:  # a defect of plumbkit's, never the user's: say so plainly
        raise CodegenError(f"plumbkit could not write this plan into the cell (the result would "
                           f"not be valid Python: {err.msg}, line {err.lineno})") from err
    return restore_magics(source, masked, out)


def _cache_or_prefetch_edits(change: Change, site: _Site, tree: ast.Module, up: dict[int, ast.AST],
                             parents: dict[int, ast.Call], alias: str,
                             lines: list[str], starts: list[int]) -> list[tuple[int, int, str]]:
    """The edit that puts ``change`` (a cache or a prefetch) after its call: nothing where the
    cell already has it, the value replaced where a prefetch is there, a comment where the call
    builds several operators. Insertions at one spot keep plan order (a cache before its prefetch)."""
    site = _tier_around(site, up, lines, starts)  # after a disk tier: after its on_disk(...)
    call = site.call
    if builds_several(site, tree, up):
        what = "cache()" if change.what == "cache" else f"prefetch({_value_text(change.value, alias)})"
        return [_comment_above(site, up, lines, starts,
                               f"the plan puts .{what} after {change.where}, but this .{call.func.attr}(...) "
                               f"builds several operators (a loop or a helper called more than once); add it "
                               f"after the last of them by hand")]
    parent = parents.get(id(call))
    text = _call_text(change, alias)
    if change.what == "cache" and parent is not None and parent.func.attr == "cache":
        return []  # already there
    if change.what == "prefetch" and parent is not None and parent.func.attr == "cache":
        grand = parents.get(id(parent))
        if grand is not None and grand.func.attr == "prefetch":
            return []
        at, text = _appended(parent, text, lines, starts)
        return [(at, at, text)]
    if change.what == "prefetch" and parent is not None and parent.func.attr == "prefetch":
        arg = parent.args[0] if parent.args else None
        if arg is None:
            return []
        return [(_abs(lines, starts, arg.lineno, arg.col_offset),
                 _abs(lines, starts, arg.end_lineno, arg.end_col_offset), _value_text(change.value, alias))]
    at, text = _appended(call, text, lines, starts)
    return [(at, at, text)]


def _outside_edits(changes: list[Change], pipeline: Pipeline, tree: ast.Module, masked: str, alias: str,
                   lines: list[str], starts: list[int]) -> list[tuple[int, int, str]]:
    """Edits for changes at operators a library call builds: a cache or prefetch before the
    cell's first operator above it, or after the statement binding the cell's dataset; the rest
    (and where neither exists) a comment at the end of the cell."""
    def in_cell(label: str) -> bool:
        try:
            find_site(tree, masked, label, label_total(pipeline, label))
        except CodegenError:
            return False
        return True
    binding = dataset_binding(tree)
    edits, unwritten = [], []
    for change in changes:
        place = place_outside(pipeline, change.where, in_cell) if change.what in ("cache", "prefetch") else None
        text = _call_text(change, alias) if place is not None else ""
        if place is not None and place.before is not None:
            site = find_site(tree, masked, place.before, label_total(pipeline, place.before))
            receiver = site.call.func.value
            if not (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
                    and receiver.func.attr == change.what):  # written already
                edits.append((site.receiver_end, site.receiver_end, text))
        elif place is not None and binding is not None:
            name, statement = binding
            line = f"{name} = {name}{text}"
            if not any(ast.get_source_segment(masked, s) == line for s in tree.body):  # written already
                end = starts[statement.end_lineno] + len(lines[statement.end_lineno - 1].rstrip("\r\n"))
                edits.append((end, end, f"\n{line}"))
        else:
            unwritten.append(change)
    said = [f"# plumbkit: {_unwritten_text(c)}" for c in unwritten]
    said = [line for line in said if line not in masked.splitlines()]  # written already
    if said:
        end = len(masked.rstrip("\n"))
        edits.append((end, end, "".join(f"\n{line}" for line in said)))
    return edits


def _unwritten_text(change: Change) -> str:
    what = {"parallelism": f"{change.value} parallel calls for {change.where}",
            "cache": f"a cache after {change.where}", "prefetch": f"a prefetch of {change.value} after {change.where}",
            }.get(change.what, f"{change.what} {change.value} at {change.where}")
    return f"{what}: not written, a call this cell makes builds it inside (not the cell's own code)"


def _option_comment(option: Option, tree: ast.Module, masked: str, lines: list[str],
                    starts: list[int]) -> list[tuple[int, int, str]]:
    """An option that is not a rewrite of one call (a disk tier offered, a shuffle moved above a
    cache) as a ``# plumbkit option:`` comment above the statement building the operator it
    concerns: its title, predicted gain and what it changes, in its own words."""
    text = (f"option: {option.title} (not applied), predicted {option.predicted_throughput:,.1f} minibatches/s "
            f"({option.gain:.1f}x the plan's {option.plan_throughput:,.1f}); {option.note}")
    at, indent = 0, ""
    for change in option.changes:
        try:
            at, indent = _above(find_site(tree, masked, change.where), _parents(tree), lines, starts)
            break
        except CodegenError:
            continue
    said = textwrap.wrap(text, 88)
    return [(at, at, f"{indent}# plumbkit {said[0]}\n" + "".join(f"{indent}#   {t}\n" for t in said[1:]))]


def _applied(site: _Site, up: dict[int, ast.AST], lines: list[str], starts: list[int]) -> _Site:
    """The ``.apply(...)`` call ``site`` is handed to (``ds.apply(tf.data.experimental.map_and_batch(f, 32))``:
    what follows the operator follows the ``apply``, not the transformation function), or ``site``."""
    parent = up.get(id(site.call))
    if not (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr == "apply"
            and site.call in parent.args):
        return site
    return _site_of(parent, parent.func.value, lines, starts)


def _tier_around(site: _Site, up: dict[int, ast.AST], lines: list[str], starts: list[int]) -> _Site:
    """The ``plumbkit.on_disk(...)`` call wrapping ``site`` (what follows the operator now follows
    the tier), or ``site`` itself."""
    parent = up.get(id(site.call))
    if not (isinstance(parent, ast.Call) and _callee_name(parent.func) == "on_disk"):
        return site
    return _site_of(parent, parent.func, lines, starts)


def _disk_tier_edits(site: _Site, change: Change, tree: ast.Module, up: dict[int, ast.AST],
                     lines: list[str], starts: list[int]) -> list[tuple[int, int, str]]:
    """Wrap the dataset built up to ``site`` in ``plumbkit.on_disk(..., cache_dir="<path>")``: the
    tier's directory stays a parameter the user sees and can change (and ``import plumbkit``
    above the cell's first statement when the cell has none). Already wrapped: nothing."""
    parent = up.get(id(site.call))
    if isinstance(parent, ast.Call) and _callee_name(parent.func) == "on_disk":
        return []
    if builds_several(site, tree, up):
        return [_comment_above(site, up, lines, starts,
                               f"the plan reads {change.where} back from a disk tier, but this "
                               f".{site.call.func.attr}(...) builds several operators; wrap the last of "
                               f"them by hand: plumbkit.on_disk(<dataset>, cache_dir={str(change.value)!r})")]
    edits = [(site.start, site.start, "plumbkit.on_disk("),
             (site.end, site.end, f", cache_dir={str(change.value)!r})")]
    imported = any(isinstance(n, ast.Import) and any(a.name == "plumbkit" and not a.asname for a in n.names)
                   for n in ast.walk(tree))
    if not imported and tree.body:
        first = tree.body[0]
        at = _abs(lines, starts, first.lineno, 0)
        edits.insert(0, (at, at, "import plumbkit\n"))
    return edits


def _parallelism_edit(site: _Site, value, alias: str, lines: list[str], starts: list[int]) -> tuple[int, int, str]:
    """Set ``num_parallel_calls`` at ``site``: replace the user's value, or add the keyword."""
    call = site.call
    text = _value_text(value, alias)
    keyword = next((k for k in call.keywords if k.arg == "num_parallel_calls"), None)
    positional = call.func.attr == "map" and len(call.args) >= 2
    if keyword is not None or positional:
        node = keyword.value if keyword is not None else call.args[1]
        return (_abs(lines, starts, node.lineno, node.col_offset),
                _abs(lines, starts, node.end_lineno, node.end_col_offset), text)
    arguments = [*call.args, *(k.value for k in call.keywords)]
    if not arguments:
        return site.end - 1, site.end - 1, f"num_parallel_calls={text}"
    last = max(arguments, key=lambda a: (a.end_lineno, a.end_col_offset))
    after = _abs(lines, starts, last.end_lineno, last.end_col_offset)
    between = "".join(lines)[after:site.end - 1]
    if "," in between:  # a trailing comma: ``map(\n    f,\n)``
        return site.end - 1, site.end - 1, f"num_parallel_calls={text}, "
    return after, after, f", num_parallel_calls={text}"


def note_options(source: str, options: Sequence[Option]) -> str:
    """``source`` with each option the plan offers but does not apply written in as a
    ``# plumbkit option:`` comment saying how to turn it on, above the statement that builds the
    operator it concerns (at the top of the cell when that operator is built elsewhere).

    Why a comment and not code: interleaving copies of a source changes the order of elements,
    and each copy must read its own share of the data (a generator's shard argument, a file
    list's slice) -- only the user can write that; plumbkit shows the shape and the gain.
    """
    if not options:
        return source
    masked, tree, alias, _ = parse_cell(source)
    lines, starts = masked.splitlines(keepends=True), _offsets(masked)
    edits: list[tuple[int, int, str]] = []
    for option in options:
        if not any(c.what == "interleave_sources" for c in option.changes):
            edits.extend(_option_comment(option, tree, masked, lines, starts))
            continue
        for change in option.changes:
            if change.what != "interleave_sources":
                continue
            k = int(change.value)
            text = [f"option: {option.title} (not applied), predicted {option.predicted_throughput:,.1f} "
                    f"minibatches/s ({option.gain:.1f}x the plan's {option.plan_throughput:,.1f}); it "
                    f"changes the order of elements. To turn it on, build each copy from its own share of "
                    f"the data and interleave them:",
                    f"ds = {alias}.data.Dataset.range({k}).interleave(",
                    f"    lambda shard: <{change.where}, reading shard `shard` of {k}>,",
                    f"    cycle_length={k}, num_parallel_calls={k}, deterministic=False)"]
            try:
                site = find_site(tree, masked, change.where)
                at, indent = _above(site, _parents(tree), lines, starts)
            except CodegenError:
                at, indent = 0, ""
            said = textwrap.wrap(text[0], 88)
            block = (f"{indent}# plumbkit {said[0]}\n" + "".join(f"{indent}#   {t}\n" for t in said[1:])
                     + "".join(f"{indent}#     {t}\n" for t in text[1:]))
            edits.append((at, at, block))
    out = masked
    for start, end, text in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[:start] + text + out[end:]
    return restore_magics(source, masked, out)
