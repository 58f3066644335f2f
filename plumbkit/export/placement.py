"""Where a change goes when the cell does not build its operator itself.

A plan is decided on the pipeline; the export writes it at the cell's call sites, found by label
(:mod:`.source`). Some operators are built inside a library call the cell makes (keras'
``image_dataset_from_directory`` builds a map, a batch and a prefetch): the cell has no call to
write them at. A cache or prefetch after one of them is written where the same elements pass in
the cell: before the first operator above it that the cell builds (``ds.cache().map(...)``),
through the library's prefetches in between (a buffer: the same elements, in order), or, where
nothing above it is the cell's, on a line of its own after the cell binds its dataset
(``ds = ds.cache()``). What cannot be written there (the parallelism of a map inside the library
call) is said in a comment. Pure Python: the pipeline model and the cell's ``ast``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..model.pipeline import Pipeline

#: Operators whose call is not a method on their input (``tf.data.Dataset.zip((a, b))``):
#: nothing can be written between them and their input.
_STATIC_KINDS = frozenset({"zip", "sample_from_datasets", "choose_from_datasets"})


def label_total(pipeline: Pipeline | None, label: str) -> int | None:
    """How many operators of ``pipeline`` share ``label``'s base (``map(f)#2`` -> ``map(f)``)."""
    if pipeline is None:
        return None
    base = label.split("#")[0]
    return sum(1 for op in pipeline if op.label.split("#")[0] == base)


@dataclass(frozen=True)
class Place:
    """Where a cache or prefetch after an operator the cell does not build goes:
    ``before`` the call of the operator labelled so (on its input), or (``before`` None) after
    the statement that binds the cell's dataset."""

    before: str | None


def place_outside(pipeline: Pipeline, label: str, in_cell) -> Place | None:
    """Where the elements leaving the operator ``label`` pass in the cell, walking up through
    prefetches the cell does not build; None where an operator of another kind is in between.
    ``in_cell(label)``: is that operator built by a call in the cell?"""
    try:
        op = pipeline.by_label(label)
    except KeyError:
        return None
    parent = pipeline.parent(op.name)
    while parent is not None and not in_cell(parent.label):
        if parent.kind != "prefetch":
            return None
        op, parent = parent, pipeline.parent(parent.name)
    if parent is None:  # the root, through the library's prefetches: after the cell's dataset
        return Place(before=None)
    if parent.kind in _STATIC_KINDS or parent.inputs[:1] != (op.name,):
        return None
    return Place(before=parent.label)


def dataset_binding(tree: ast.Module) -> tuple[str, ast.stmt] | None:
    """The name the cell's dataset is bound to and the last top-level statement binding it: the
    name a final bare expression shows, else the last name a top-level statement assigns."""
    body = tree.body
    name = body[-1].value.id if body and isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, ast.Name) \
        else None
    bindings = [(target.id, stmt) for stmt in body if isinstance(stmt, ast.Assign)
                for target in stmt.targets if isinstance(target, ast.Name)]
    if name is None and bindings:
        name = bindings[-1][0]
    statement = next((stmt for bound, stmt in reversed(bindings) if bound == name), None)
    return (name, statement) if statement is not None else None


__all__ = ["Place", "dataset_binding", "label_total", "place_outside"]
