"""Reading the user's cell: which of its names hold or build a tf.data pipeline, by reading the
code (``ast``), never by calling it.

A cell may define functions that train a model, write files or take minutes; plumbkit must not
call one just to see whether it returns a Dataset. A function counts as a pipeline factory only
when its own code visibly returns a tf.data chain: ``return tf.data.Dataset.range(9).map(f)``,
``ds = tf.data.TFRecordDataset(files); ...; return ds.batch(8)``, or ``return make_base().batch(8)``
where ``make_base`` is such a factory. Pure Python.
"""

from __future__ import annotations

import ast
from typing import Iterable

from .source import _mask_magics


def _dotted(node: ast.AST) -> list[str]:
    """``tf.data.Dataset.range`` -> ["tf", "data", "Dataset", "range"] (empty if not a plain chain)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return []


class _Reader:
    """Decides, for one cell, which names are datasets and which functions are factories."""

    def __init__(self, tree: ast.Module):
        self.functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.lambdas = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
                        and isinstance(n.value, ast.Lambda) for t in n.targets if isinstance(t, ast.Name)}
        self.module_datasets = self._bound_datasets(tree.body, set())
        self._factory: dict[str, bool] = {}

    def is_dataset_expr(self, node: ast.AST, datasets: set[str]) -> bool:
        """Does ``node`` visibly evaluate to a tf.data Dataset?"""
        if isinstance(node, ast.Name):
            return node.id in datasets
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        dotted = _dotted(func)
        if dotted and (any("Dataset" in part for part in dotted) or "dataset" in dotted[-1].lower()):
            # tf.data.Dataset.range(...), TFRecordDataset(...), make_csv_dataset(...),
            # keras.utils.text_dataset_from_directory(...)
            return True
        if isinstance(func, ast.Attribute) and self.is_dataset_expr(func.value, datasets):
            return True  # a method of a dataset: .map(...), .batch(...), .with_options(...)
        if isinstance(func, ast.Name) and self.is_factory(func.id):
            return True  # make_base()
        return False

    def _bound_datasets(self, body: Iterable[ast.stmt], datasets: set[str]) -> set[str]:
        """Names the statements bind to a dataset, in order (``ds = ...; ds = ds.map(f)``)."""
        datasets = set(datasets)
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                if self.is_dataset_expr(stmt.value, datasets):
                    datasets.add(name)
                else:
                    datasets.discard(name)
            elif isinstance(stmt, (ast.For, ast.While, ast.If, ast.With)):
                datasets |= self._bound_datasets(stmt.body, datasets)  # a loop of ds = ds.map(fn)
        return datasets

    def is_factory(self, name: str) -> bool:
        """Is ``name`` a function of this cell whose every return visibly gives a dataset?"""
        if name in self._factory:
            return self._factory[name]
        self._factory[name] = False  # recursion guard
        result = False
        if name in self.lambdas:
            lam = self.lambdas[name]
            result = _zero_arg(lam.args) and self.is_dataset_expr(lam.body, self.module_datasets)
        elif name in self.functions:
            fn = self.functions[name]
            returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
            local = self._bound_datasets(fn.body, self.module_datasets)
            result = (_zero_arg(fn.args) and bool(returns)
                      and all(r.value is not None and self.is_dataset_expr(r.value, local) for r in returns))
        self._factory[name] = result
        return result


def _zero_arg(args: ast.arguments) -> bool:
    """Callable with no arguments: every parameter has a default (or is *args / **kwargs)."""
    positional = args.posonlyargs + args.args
    required = len(positional) - len(args.defaults)
    kw_required = [d for d in args.kw_defaults if d is None]
    return required <= 0 and not kw_required


def dataset_factories(cell: str) -> list[str]:
    """Zero-argument functions (``def`` or ``name = lambda: ...``) the cell defines whose code
    visibly returns a tf.data Dataset, in the order they appear (empty when it is not Python)."""
    try:
        tree = ast.parse(_mask_magics(cell))
    except SyntaxError:
        return []
    reader = _Reader(tree)
    names = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names += [t.id for t in stmt.targets if isinstance(t, ast.Name) and t.id in reader.lambdas]
    return [n for n in names if reader.is_factory(n)]
