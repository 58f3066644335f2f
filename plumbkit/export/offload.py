"""An offload plan -> the user's own cell with ``distribute()`` written in at the cut.

The same minimal-edit approach as :mod:`plumbkit.export.source`: ``.apply(tf.data.experimental.
service.distribute(...))`` goes right after the call that built the cut operator (everything
up to it runs on the workers), a ``.prefetch(tf.data.AUTOTUNE)`` after the last call (the
client-side prefetch), and the dispatcher's address becomes a parameter: a keyword argument of
the function that builds the pipeline, or a variable at the top of the cell when the pipeline
is built at top level. Idempotent: a cell that already distributes at the cut is left alone.
"""

from __future__ import annotations

import ast
import io
import tokenize

from ..model.offload import Distribute
from .source import CodegenError, _offsets, find_site, parse_cell, restore_magics


def distribute_call(plan: Distribute, *, tf_alias: str = "tf", service: str = "dispatcher") -> str:
    """The ``.apply(...)`` text that serves everything before it from the dispatcher ``service``."""
    svc = f"{tf_alias}.data.experimental.service"
    compression = "None" if plan.compression is None else repr(plan.compression)
    job = f", job_name={plan.job_name!r}" if plan.job_name else ""
    return (f".apply({svc}.distribute(processing_mode={svc}.ShardingPolicy.{plan.sharding}, "
            f"service={service}{job}, compression={compression}))")


def _enclosing_function(tree: ast.AST, call: ast.Call) -> ast.FunctionDef | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= call.lineno \
                and (node.end_lineno or 0) >= (call.end_lineno or 0):
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def _signature_close(source: str, starts: list[int], fn: ast.FunctionDef) -> int:
    """Absolute offset of the ``)`` that closes ``fn``'s parameter list."""
    text = source[starts[fn.lineno]:]
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.OP and tok.string == "(":
            depth += 1
        elif tok.type == tokenize.OP and tok.string == ")":
            depth -= 1
            if depth == 0:
                line, col = tok.start
                return starts[fn.lineno + line - 1] + col
    raise CodegenError(f"cannot find the parameter list of {fn.name}()")


def _top_insert_offset(tree: ast.Module, starts: list[int]) -> int:
    """After the cell's leading imports (or at its start)."""
    last = None
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last = node
        elif not (isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)):
            break
    return starts[last.end_lineno + 1] if last is not None else 0


def rewrite_source(source: str, plan: Distribute, *, root_label: str, address: str,
                   parameter: str = "dispatcher") -> str:
    """``source`` with the pipeline served from the dispatcher at ``address`` (a parameter named
    ``parameter``) as ``plan`` says; raises CodegenError when a call site is not in the cell."""
    masked, tree, alias, parents = parse_cell(source)
    starts = _offsets(masked)
    cut = find_site(tree, masked, plan.cut_label)
    above = parents.get(id(cut.call))
    if above is not None and above.func.attr == "apply" and "distribute" in ast.unparse(above):
        return source  # already served at this cut
    edits: list[tuple[int, str]] = [(cut.end, distribute_call(plan, tf_alias=alias, service=parameter))]
    try:
        root = find_site(tree, masked, root_label)
    except CodegenError:
        root = None  # the last call is not in this cell: no client-side prefetch written
    root_parent = parents.get(id(root.call)) if root is not None else None
    if plan.prefetch is not None and root is not None and root.call.func.attr != "prefetch" and not (
            root_parent is not None and root_parent.func.attr == "prefetch"):
        value = f"{alias}.data.AUTOTUNE" if plan.prefetch == -1 else str(int(plan.prefetch))
        edits.append((root.end, f".prefetch({value})"))
    fn = _enclosing_function(tree, cut.call)
    names = {a.arg for a in (fn.args.args + fn.args.kwonlyargs)} if fn is not None else set()
    if fn is not None and fn.args.kwarg is None and parameter not in names:
        close = _signature_close(masked, starts, fn)
        has_params = bool(fn.args.args or fn.args.kwonlyargs or fn.args.vararg or fn.args.posonlyargs)
        edits.append((close, f"{', ' if has_params else ''}{parameter}={address!r}"))
    elif fn is None or parameter not in names:
        if not any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == parameter for t in n.targets)
                   for n in tree.body):
            edits.append((_top_insert_offset(tree, starts),
                          f"{parameter} = {address!r}  # the tf.data service dispatcher "
                          f"(`plumbkit service up` prints it)\n"))
    order = {id(e): i for i, e in enumerate(edits)}
    out = masked
    for offset, text in sorted(edits, key=lambda e: (e[0], order[id(e)]), reverse=True):
        out = out[:offset] + text + out[offset:]
    ast.parse(out)
    return restore_magics(source, masked, out)


__all__ = ["distribute_call", "rewrite_source"]
