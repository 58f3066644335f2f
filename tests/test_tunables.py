"""The constants measured on one machine live in one module, each with where it came from.

Reads the sources with ``ast`` and ``tokenize``, imports nothing of plumbkit: a constant typed
again somewhere else (a retyped twin), or one without its provenance, fails here.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

PACKAGE = Path(__file__).resolve().parents[1] / "plumbkit"
TUNABLES = PACKAGE / "tunables.py"
#: What each tunable's comment must say: the measurement (with the commit that made it), the
#: machine, and what moves it.
LABELS = ("From:", "Machine:", "Sensitive to:")
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
#: Every module is parsed once (the checks below walk each several times).
parse = functools.lru_cache(maxsize=None)(ast.parse)
#: Names the twins had before they were folded into one (WAITS_RATIO is LATENCY_RATIO,
#: QUEUED_CALLS is MAX_CONCURRENCY): defining them again is a twin too.
RETIRED = {"WAITS_RATIO", "QUEUED_CALLS"}


def assigned_names(source: str) -> dict[str, int]:
    """Module-level names assigned in ``source`` (tuple targets included) -> line."""
    names: dict[str, int] = {}
    for node in parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    names[name.id] = node.lineno
    return names


def comment_blocks(source: str) -> dict[int, str]:
    """Line of a statement -> the ``#:`` comment lines right above it, joined."""
    comments = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT and tok.start[1] == 0}
    blocks = {}
    for line in range(1, source.count("\n") + 2):
        above, row = [], line - 1
        while row in comments and comments[row].startswith("#:"):
            above.insert(0, comments[row][2:].strip())
            row -= 1
        blocks[line] = " ".join(above)
    return blocks


def missing_provenance(source: str) -> dict[str, list[str]]:
    """Tunable -> what its comment fails to say (empty: nothing missing)."""
    blocks = comment_blocks(source)
    out = {}
    for name, line in assigned_names(source).items():
        text = blocks.get(line, "")
        problems = [label for label in LABELS if label not in text]
        source_part = text.split("From:", 1)[1].split("Machine:", 1)[0] if "From:" in text else ""
        if not COMMIT.search(source_part):
            problems.append("a commit in From:")
        if problems:
            out[name] = problems
    return out


def stored_names(source: str) -> set[str]:
    """Every name ``source`` assigns anywhere (module, class or function; tuple targets too)."""
    return {node.id for node in ast.walk(parse(source))
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


def imported_from_elsewhere(source: str, names: set[str]) -> set[str]:
    """Tunables that ``source`` imports from a module other than plumbkit.tunables."""
    out = set()
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] != "tunables":
            out |= {a.name for a in node.names if a.name in names}
    return out


def read_names(source: str) -> set[str]:
    return {node.id for node in ast.walk(parse(source)) if isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)}


TUNABLE_NAMES = set(assigned_names(TUNABLES.read_text()))
OTHER_MODULES = {p.relative_to(PACKAGE.parent).as_posix(): p.read_text()
                 for p in sorted(PACKAGE.rglob("*.py")) if p != TUNABLES}


def test_the_module_holds_the_tunables_named_in_issue_25():
    assert {"LATENCY_RATIO", "PROBE_CANDIDATE_RATIO", "MAX_CONCURRENCY", "SPARE_THREADS", "SPARE_CALLS",
            "PARALLEL_BATCH_GAIN", "PREFETCH_LOSS", "HEDGE_THETA", "DEDICATED", "HEDGE_PARALLELISM",
            "ESTIMATE_MARGIN", "STRING_HEADER_BYTES", "MAX_SOURCE_COPIES"} <= TUNABLE_NAMES


def test_every_tunable_says_where_it_came_from_on_what_machine_and_what_moves_it():
    assert missing_provenance(TUNABLES.read_text()) == {}


def test_the_provenance_check_catches_a_bare_constant():
    planted = ("#: From: measured (abc1234).\n#: Machine: the dev VM.\n#: Sensitive to: cores.\nGOOD = 1\n"
               "#: A ratio.\n#: From: a guess.\n#: Machine: the dev VM.\nBARE = 2\nUNCOMMENTED = 3\n")
    assert missing_provenance(planted) == {"BARE": ["Sensitive to:", "a commit in From:"],
                                           "UNCOMMENTED": [*LABELS, "a commit in From:"]}


def test_no_other_module_defines_a_tunable_again():
    twins = {path: sorted(stored_names(source) & (TUNABLE_NAMES | RETIRED))
             for path, source in OTHER_MODULES.items()}
    assert {path: names for path, names in twins.items() if names} == {}


def test_the_twin_check_catches_a_retyped_constant():
    planted = "WAITS_RATIO = 3.0\nROUNDS, SETTLED_SPREAD = 3, 0.15\nclass C:\n    DEDICATED = 0.8\n"
    assert stored_names(planted) & (TUNABLE_NAMES | RETIRED) == {"WAITS_RATIO", "SETTLED_SPREAD", "DEDICATED"}


def test_modules_import_tunables_from_the_tunables_module():
    elsewhere = {path: sorted(imported_from_elsewhere(source, TUNABLE_NAMES)) for path, source in OTHER_MODULES.items()}
    assert {path: names for path, names in elsewhere.items() if names} == {}
    assert imported_from_elsewhere("from .budget import ESTIMATE_MARGIN, fits\nfrom ..tunables import DEDICATED\n",
                                   TUNABLE_NAMES) == {"ESTIMATE_MARGIN"}


def test_every_tunable_is_read_somewhere():
    read = set().union(*(read_names(source) for source in OTHER_MODULES.values()))
    assert TUNABLE_NAMES - read == set()
