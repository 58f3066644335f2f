"""The code stays readable: no function in the package longer than 80 lines (issue 25's bound,
first for ``planning/``, ``engine/`` and ``analysis/``, now for every folder: a longer function
has seams to split along).

Reads the sources with ``ast``, imports nothing of plumbkit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.concurrent  # checks the sources, not a speed (tests/run)

PACKAGE = Path(__file__).resolve().parents[1] / "plumbkit"
MAX_LINES = 80


def long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in ``source`` over ``limit`` lines, decorators
    and docstring included."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > limit]


def test_no_function_in_the_package_is_over_80_lines():
    found = {f"{path.relative_to(PACKAGE)}:{name}": lines for path in sorted(PACKAGE.rglob("*.py"))
             for name, lines in long_functions(path.read_text(), MAX_LINES)}
    assert not found, f"split these along their seams: {found}"


def test_the_check_sees_a_long_function():
    """Negative control: a planted 81-line function is found, an 80-line one is not."""
    def planted(lines: int) -> str:
        return "def f():\n" + "    x = 1\n" * (lines - 1)
    assert long_functions(planted(81), MAX_LINES) == [("f", 81)]
    assert long_functions(planted(80), MAX_LINES) == []
