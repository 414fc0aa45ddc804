"""Session 39 (docs/reliability-10.md #671): ``run.py --version`` (what ``flopsweep --version`` runs)
prints flopsweep's version line, not Hydra's ``Hydra 1.3.8``, exit 0, nothing written, even beside an
override that would be refused. The subprocess is the point: the entry point's order of checks."""

from __future__ import annotations

from pathlib import Path

from helpers import run_py

from flopsweep.start_checks import version_line


def test_version_prints_flopsweeps_line_and_exits_0(tmp_path: Path) -> None:
    proc = run_py("--version", "backend=bogus", f"hydra.run.dir={tmp_path / 'r'}", timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == version_line() and proc.stderr == ""
    assert not (tmp_path / "r").exists()
