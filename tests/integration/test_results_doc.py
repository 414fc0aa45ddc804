"""benchmarks/RESULTS.md is what benchmarks/make_results.py makes of its template and the records."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "make_results.py"


def _make_results(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_results_doc_is_current():
    done = _make_results("--check")
    assert done.returncode == 0, (
        "benchmarks/RESULTS.md is stale or a table failed; run python benchmarks/make_results.py\n"
        + done.stderr[-3000:]
    )


@pytest.mark.slow
def test_check_reports_a_stale_file(tmp_path):
    # A template without markers renders without reading any record, so this costs an import, not a render.
    template = tmp_path / "RESULTS.in.md"
    template.write_text("# Results\n\nNo tables here.\n", encoding="utf-8")
    stale = tmp_path / "RESULTS.md"
    assert _make_results("--template", str(template), "--output", str(stale)).returncode == 0
    assert _make_results("--check", "--template", str(template), "--output", str(stale)).returncode == 0
    stale.write_text(stale.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    done = _make_results("--check", "--template", str(template), "--output", str(stale))
    assert done.returncode == 1
    assert "stale" in done.stderr
    assert stale.read_text(encoding="utf-8").endswith("edited\n")  # --check writes nothing


@pytest.mark.slow
def test_the_memory_edge_counts_are_the_records():
    """``memory_edge.RETRIED`` (the plan's edge flag quotes it) is what ``benchmarks/memory_edge.py`` counts
    over the committed records; it went stale once, as no test ran the script's ``--check``."""
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "memory_edge.py"), "--check"],  # its records by default
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
