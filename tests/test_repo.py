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


def anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_readme_and_the_guides_resolve() -> None:
    """Every relative link of README.md and docs/*.md names a file that exists and, after ``#``, one of its
    headings (the README's sections moved into guides: links must follow them)."""
    wrong = []
    for page in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # an absolute URL
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            headings = re.findall(r"^#+ (.+)$", linked.read_text(), re.M) if linked.is_file() else []
            if not linked.is_file() or (fragment and fragment not in map(anchor, headings)):
                wrong.append(f"{page.relative_to(ROOT)}: {target}")
    assert wrong == []


def test_test_modules_have_unique_names() -> None:
    """pytest imports test modules by basename (``rootdir``-relative packages are not used here), so two
    ``test_x.py`` in different folders stop the whole run at collection."""
    seen: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        assert path.name not in seen, (
            f"{path.relative_to(ROOT)} and {seen[path.name].relative_to(ROOT)} share a name"
        )
        seen[path.name] = path


def test_missing_dependencies_fail_under_ci() -> None:
    """A test needing a module of the dev extra goes through ``support.deps.import_or_skip``, which fails under
    CI instead of skipping: ``pytest.importorskip`` would let a broken install pass as skips."""
    hits = [
        hit
        for hit in tracked_matches(r"pytest\.importorskip\(")
        if not hit.startswith("tests/support/deps.py:")
    ]
    assert hits == []


def test_each_class_name_is_defined_once() -> None:
    """One name per class in the package, private ones too: a reader who finds a name finds the one class."""
    where: dict[str, list[str]] = {}
    for path in sorted((ROOT / "src" / "acidstream").rglob("*.py")):
        for match in re.finditer(r"^class (\w+)", path.read_text(), re.MULTILINE):
            where.setdefault(match.group(1), []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
