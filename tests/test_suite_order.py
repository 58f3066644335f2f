"""The suite's own schedule (tests/run, conftest.py): phase 1 hands its files to three workers
longest first, so no long file starts last. Pure: file reading and pytest items' paths."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import LONGEST_FILES, longest_first

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

ROOT = Path(__file__).resolve().parents[1]


def items(*paths: str) -> list:
    """Stand-ins for pytest items: what :func:`longest_first` reads (a path and the rootpath)."""
    config = SimpleNamespace(rootpath=ROOT)
    return [SimpleNamespace(path=ROOT / p, config=config, name=f"{p}#{i}") for i, p in enumerate(paths)]


def test_every_listed_file_exists_and_runs_in_phase_1() -> None:
    """A renamed or moved file would leave its entry doing nothing; a file with no phase-1 test
    gains nothing."""
    concurrent_notebooks = __import__("conftest").CONCURRENT_NOTEBOOKS
    for name in LONGEST_FILES:
        path = ROOT / name
        assert path.is_file(), name
        if path.suffix == ".ipynb":
            assert path.name in concurrent_notebooks, name
        else:
            assert "pytest.mark.concurrent" in path.read_text(encoding="utf-8"), name


def test_phase_1_keeps_the_collection_order() -> None:
    """pytest-xdist otherwise orders files by their number of tests (most first), which sent
    the longest, two-test files last."""
    run = (ROOT / "tests" / "run").read_text(encoding="utf-8")
    phase_1 = next(line for line in run.splitlines() if line.startswith("run_phase \"1"))
    assert "--dist loadfile" in phase_1 and "--no-loadscope-reorder" in phase_1, phase_1


def test_the_longest_files_come_first_and_every_files_tests_keep_their_order() -> None:
    longest = max(LONGEST_FILES, key=LONGEST_FILES.get)
    second = max((f for f in LONGEST_FILES if LONGEST_FILES[f] < LONGEST_FILES[longest]), key=LONGEST_FILES.get)
    unlisted = "tests/test_rewrite.py"
    assert unlisted not in LONGEST_FILES
    given = items(unlisted, second, unlisted, longest, second, "tests/test_lp.py")
    ordered = [item.name for item in longest_first(given)]
    assert ordered == [f"{longest}#3", f"{second}#1", f"{second}#4",
                       f"{unlisted}#0", f"{unlisted}#2", "tests/test_lp.py#5"], ordered
