"""The repository documents itself: project files speak of the product, and their references to the format
point at sections of ``docs/format.md`` that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCOPE = ("src", "tests", "docs", "README.md", "bench", "scripts")
FORMAT = ROOT / "docs" / "format.md"

#: What project files must not say (case-insensitive), each written so that it does not match itself: section
#: signs and names of notes kept outside the repository, a build machine's paths, issue numbers, and the task
#: descriptions the product was built from.
FORBIDDEN = {
    "\u00a7": "a section sign (of notes outside the repository)",
    r"hive-acid-forma[t]|pyspark-note[s]|/work/share[d]": "notes outside the repository",
    r"issue [0-9]": "an issue number",
    r"the se[e]d|se[e]d's": "the task description instead of the product",
}
#: A reference to a section: ``docs/format.md, Directory selection`` (or ``docs/format.md: ...``), wherever the
#: line breaks, in prose, docstrings and comments.
REFERENCE = re.compile(r"docs/format\.md[,:] ([A-Z][a-z]+(?: [a-zA-Z]+)*)")


def tracked_matches(pattern: str) -> list[str]:
    """``git grep`` of the tracked files in scope (their working-tree contents): ``path:line:text`` per hit."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git work tree")
    done = subprocess.run(
        ["git", "grep", "-n", "-I", "-i", "-E", pattern, "--", *SCOPE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: no match
    return done.stdout.splitlines()


@pytest.mark.parametrize("pattern", FORBIDDEN, ids=list(FORBIDDEN.values()))
def test_project_files_speak_of_the_product(pattern: str) -> None:
    assert tracked_matches(pattern) == [], f"{FORBIDDEN[pattern]} in tracked files"


def test_references_to_the_format_name_its_sections() -> None:
    sections = re.findall(r"^## (.+)$", FORMAT.read_text(), re.M)
    wrong = []
    for hit in tracked_matches(r"docs/format\.md[,:]( |$)"):
        path = hit.split(":", 1)[0]
        text = re.sub(r"\s*\n\s*(?:#\s*)?", " ", (ROOT / path).read_text())
        for match in REFERENCE.finditer(text):
            if not any(match.group(1).startswith(section) for section in sections):
                wrong.append(f"{path}: {match.group(0)}")
    assert sections
    assert sorted(set(wrong)) == []
