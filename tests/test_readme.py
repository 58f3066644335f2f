"""The README and docs a user reads first: links that lead somewhere, a README short enough to
read, and a test command that is the one CI runs (so what the README promises is what CI checks).

Pure file reading: no TensorFlow, no plumbkit import.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"
MAX_README_LINES = 200

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto: ...


def documents() -> list[Path]:
    """The README and every page under docs/."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a page: lower case, punctuation dropped, spaces to '-'."""
    anchors = set()
    for line in FENCE.sub("", markdown).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            text = m.group(1).strip().lower()
            anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text)))
    return anchors


def broken_links(page: Path) -> list[str]:
    """Relative links on ``page`` (outside code) whose file, or heading anchor, does not exist."""
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    broken = []
    for target in LINK.findall(text):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no file {resolved})")
        elif anchor and resolved.suffix == ".md" and anchor not in heading_anchors(resolved.read_text(encoding="utf-8")):
            broken.append(f"{target} (no heading #{anchor} in {resolved.name})")
    return broken


def first_bash_block(markdown: str) -> list[str]:
    """The non-empty lines of the first ```bash block."""
    m = re.search(r"^```bash[ \t]*\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL)
    assert m, "no ```bash block"
    return [line for line in m.group(1).splitlines() if line.strip()]


#: The suite's runner (two pytest phases, see its header) and a plain pytest run: the test commands.
RUNNER = "tests/run"


def suite_command(line: str) -> list[str]:
    """The test command on a shell line (the last of an `&&` chain), comment dropped: the
    suite's runner or a ``python -m pytest`` run."""
    command = shlex.split(line.split("&&")[-1], comments=True)
    assert command[:1] == [RUNNER] or command[1:3] == ["-m", "pytest"], f"not a test run: {line!r}"
    return command


def arguments(command: list[str]) -> list[str]:
    """What a test command passes on: after the runner, or after ``python -m pytest``."""
    return command[1:] if command[0] == RUNNER else command[3:]


def ci_suite_command(script: str) -> list[str]:
    """The line of .ci/run that runs the whole suite: the test command with no path given."""
    runs = [suite_command(line) for line in script.splitlines()
            if re.match(rf"^\s*(python3?\s+-m\s+pytest|{re.escape(RUNNER)})\b", line)]
    suite = [cmd for cmd in runs if all(arg.startswith("-") for arg in arguments(cmd))]
    assert len(suite) == 1, f"expected one whole-suite test run in .ci/run, found {suite}"
    return suite[0]


def same_command(readme: list[str], ci: list[str]) -> bool:
    """The same test run, whichever name the interpreter goes by (python in a venv, python3 in CI)."""
    if readme[0] == RUNNER or ci[0] == RUNNER:
        return readme == ci
    return readme[0] in {"python", "python3"} and ci[0] in {"python", "python3"} and readme[1:] == ci[1:]


@pytest.mark.parametrize("page", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    assert broken_links(page) == []


def test_the_readme_is_under_200_lines() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines < MAX_README_LINES, f"README.md has {lines} lines"


def test_the_readmes_test_command_is_the_one_ci_runs() -> None:
    lines = first_bash_block(README.read_text(encoding="utf-8"))
    assert len(lines) >= 2, "the README's first bash block should hold the install and the test commands"
    readme = suite_command(lines[1])
    ci = ci_suite_command(CI_RUN.read_text(encoding="utf-8"))
    assert same_command(readme, ci), f"README runs {readme}, .ci/run runs {ci}"


# Negative controls: the checks above catch what they claim to.

def test_a_link_to_a_missing_file_or_heading_is_reported(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading: here\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a-heading-here) [gone](missing.md) [bad anchor](there.md#nowhere)\n"
                    "`[in code](also-missing.md)` [web](https://example.org/x)\n"
                    "```\n[in a fence](fenced-missing.md)\n```\n", encoding="utf-8")
    broken = broken_links(page)
    assert len(broken) == 2
    assert broken[0].startswith("missing.md") and broken[1].startswith("there.md#nowhere")


def test_a_different_test_command_is_not_taken_for_cis() -> None:
    ci = ci_suite_command("set -e\npython3 -m pytest -q\n\"$venv/bin/python\" -m pytest -q --nbval-lax notebooks\n")
    assert ci == ["python3", "-m", "pytest", "-q"]
    assert same_command(suite_command("pip install -e . && python -m pytest -q   # all"), ci)
    assert not same_command(suite_command("python -m pytest -q -x tests/test_cli.py"), ci)
    assert not same_command(suite_command("python -m pytest"), ci)
    runner = ci_suite_command("set -e\ntests/run -q   # both phases\ntests/run -q tests/test_cli.py\n")
    assert runner == ["tests/run", "-q"]
    assert same_command(suite_command("pip install -e . && tests/run -q"), runner)
    assert not same_command(suite_command("pip install -e . && python -m pytest -q"), runner)
    assert not same_command(suite_command("tests/run"), runner)
