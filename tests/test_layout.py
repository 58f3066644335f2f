"""The package's folders are its architecture: imports flow one way, with no cycle.

Reads every module's imports with ``ast`` (imports inside functions included; the conventional
exception is a result's ``__str__`` / ``__repr__`` / ``_repr_html_`` / ``_repr_pretty_``
importing its renderer, and ``if TYPE_CHECKING:`` blocks, which never run).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

PACKAGE = Path(__file__).resolve().parents[1] / "plumbkit"
REPR_METHODS = {"__str__", "__repr__", "_repr_html_", "_repr_pretty_"}
ALL_ROOMS = {"model", "host", "tfdata", "analysis", "export", "planning", "engine", "render",
             "widgets", "magics", "cli", "bench", "__init__", "__main__", "tunables", "service"}
#: room -> rooms it may import at runtime (besides itself).
ALLOWED = {
    "model": set(),
    "host": set(),
    # constants measured on one machine, with their provenance: imports nothing
    "tunables": set(),
    "tfdata": {"model", "host", "tunables"},
    # tf.data service processes; the measuring client runs tfdata's offload requests (lazily,
    # inside the process it starts, after pinning)
    "service": {"model", "tfdata"},
    "analysis": {"model", "tunables"},
    "export": {"model"},
    "planning": {"model", "analysis", "host", "tunables"},
    "engine": {"model", "host", "tfdata", "service", "analysis", "planning", "export", "tunables"},
    "render": {"model", "analysis"},
    "widgets": ALL_ROOMS - {"widgets", "magics", "cli", "bench", "__init__", "__main__"},
    "magics": ALL_ROOMS - {"magics", "cli", "bench", "__main__"},
    # the bench measures the live widget's own cost beside the bare tracer's (issue 14)
    "bench": ALL_ROOMS - {"bench", "magics", "cli", "__main__"},
    "cli": ALL_ROOMS - {"cli", "__main__"},
    "__init__": {"engine", "model", "magics"},
    "__main__": {"cli"},
}
#: third-party package -> rooms that may import it (anywhere in the module).
EXCLUSIVE = {
    "cvxpy": {"planning"},
    "IPython": {"widgets", "magics"},
    "ipywidgets": {"widgets", "magics"},
    "ipylab": {"widgets"},
}
#: rooms that may import TensorFlow at import time (bench builds pipelines as a user does).
TF_AT_IMPORT = {"tfdata", "bench"}
#: rooms that may import TensorFlow inside a function (lazily).
TF_LAZY = TF_AT_IMPORT | {"cli", "magics", "host", "service"}


@dataclass(frozen=True)
class Import:
    module: str  # absolute dotted name of what is imported
    lazy: bool  # inside a function


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def _resolve(node: ast.ImportFrom, current: str, is_package: bool) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        package = current.split(".") if is_package else current.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    out = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        out.append(candidate if _is_module(candidate) else base)
    return out


def _is_module(dotted: str) -> bool:
    if not dotted.startswith("plumbkit"):
        return False
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


class _Collector(ast.NodeVisitor):
    def __init__(self, current: str, is_package: bool):
        self.current, self.is_package = current, is_package
        self.depth = 0
        self.imports: list[Import] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in REPR_METHODS:
            return
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.imports += [Import(a.name, self.depth > 0) for a in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.imports += [Import(m, self.depth > 0) for m in _resolve(node, self.current, self.is_package)]


def imports_of(path: Path) -> list[Import]:
    collector = _Collector(module_name(path), path.name == "__init__.py")
    collector.visit(ast.parse(path.read_text()))
    return collector.imports


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {m: imports_of(p) for m, p in MODULES.items()}


def test_every_module_lives_in_a_known_room():
    assert {room_of(m) for m in MODULES} <= ALL_ROOMS, {room_of(m) for m in MODULES} - ALL_ROOMS


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_rooms(module):
    room = room_of(module)
    for imp in GRAPH[module]:
        top = imp.module.split(".")[0]
        if top == "plumbkit":
            target = room_of(imp.module)
            if target in (room, "__init__") and imp.module in ("plumbkit",) and room != "__init__":
                pytest.fail(f"{module} imports the top-level package (import from its room instead)")
            if target != room:
                assert target in ALLOWED[room], f"{module} ({room}) imports {imp.module} ({target})"
        elif top == "tensorflow":
            allowed = TF_LAZY if imp.lazy else TF_AT_IMPORT
            assert room in allowed, f"{module} imports TensorFlow {'lazily' if imp.lazy else 'at import time'}"
        elif top in EXCLUSIVE:
            assert room in EXCLUSIVE[top], f"{module} imports {top}, which only {EXCLUSIVE[top]} may"


def test_no_import_cycle():
    edges = {m: {i.module for i in GRAPH[m] if i.module in MODULES and not m.startswith(i.module + ".")}
             for m in MODULES}
    # Importing a module runs its package's __init__ first: that is not a cycle of ours.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)


def test_the_checker_sees_violations(tmp_path):
    """The rules above are not vacuous: a planted bad import is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("import cvxpy\nfrom plumbkit.engine import trace\n"
                   "def f():\n    import tensorflow as tf\n"
                   "class R:\n    def __str__(self):\n        from plumbkit.render import text\n")
    collector = _Collector("plumbkit.model.bad", False)
    collector.visit(ast.parse(bad.read_text()))
    found = {(i.module, i.lazy) for i in collector.imports}
    assert ("cvxpy", False) in found and ("tensorflow", True) in found
    assert any(m.startswith("plumbkit.engine") for m, _ in found)
    assert not any(m.startswith("plumbkit.render") for m, _ in found)  # repr methods excepted
    assert "plumbkit.engine" not in {f"plumbkit.{r}" for r in ALLOWED["model"]}
