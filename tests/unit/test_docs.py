"""The docs stay a door (issue 46): a README of at most 200 lines, none over 200 characters, pages under
``docs/`` of at most 400 lines each, and CI running the commands the README gives."""

from __future__ import annotations

import re

from helpers import ROOT

README_LINES = 200
README_WIDTH = 200
PAGE_LINES = 400


def test_the_readme_is_at_most_200_lines_of_at_most_200_characters() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
    long = [(number, len(line)) for number, line in enumerate(lines, 1) if len(line) > README_WIDTH]
    assert not long, f"README.md lines over {README_WIDTH} characters (line, length): {long}"


def test_every_page_under_docs_is_at_most_400_lines() -> None:
    pages = sorted((ROOT / "docs").rglob("*.md"))
    assert pages, "no pages under docs/"
    long = {str(p.relative_to(ROOT)): n for p in pages if (n := len(p.read_text().splitlines())) > PAGE_LINES}
    assert not long, f"pages over {PAGE_LINES} lines (split them by topic): {long}"


def test_ci_installs_and_tests_as_the_readme_says() -> None:
    """``.ci/run`` runs the README's install and test commands (the fast tier is part of the whole suite)."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [
        "pip install torch==2.13.0",
        'pip install -e ".[dev]"',
        "python -m pytest -n 2 --dist loadfile",
        "mkdocs build --strict",
        "bash .ci/slurm-up.sh",
        "python -m pytest -m slurm",
    ]
    for command in commands:
        assert command in readme, f"the README does not give {command!r}"
        assert command in ci, f".ci/run does not run {command!r}"
    fast = re.search(r"^python -m pytest tests/unit\b", readme, re.MULTILINE)
    assert fast, "the README gives the fast tier, python -m pytest tests/unit"


def test_every_test_file_the_docs_name_exists() -> None:
    """A ``tests/<tier>/test_x.py`` (or ``tests/*/test_x.py``, both tiers) named in the README or a page
    exists, with the test it names after ``::``; docs that still say ``tests/test_x.py`` (before the
    tiers) or name a removed test fail."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    stale = []
    for page in pages:
        for path, name in re.findall(r"(tests/(?:[\w*]+/)?test_\w+\.py)(?:::(\w+))?", page.read_text()):
            if path.endswith("/test_x.py"):  # the placeholder of docs/testing.md
                continue
            files = sorted(ROOT.glob(path))
            if not files or (name and not any(re.search(rf"\b{name}\b", f.read_text()) for f in files)):
                stale.append(f"{page.relative_to(ROOT)}: {path}{'::' + name if name else ''}")
    assert not stale, f"docs name tests that do not exist: {stale}"
