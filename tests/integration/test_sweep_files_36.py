"""Session 36 (docs/reliability-5.md #331), as a user runs it: a sweep file whose defaults list misspells a
group (``- override /modle: gpt-tiny``) stopped in Hydra's three lines ("Could not override 'modle'. No
match in the defaults list.", exit 1). Now one line naming the file and ``/model``, exit 2, before Hydra:
no folder is made. (The other defects of #331-#339 are refused by checks that read the checkout's own
``conf/``, and are the unit tier's: tests/unit/test_sweep_files_36.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import checkout_copy, run_copy

HEAD = "# @package _global_\n"


@pytest.mark.slow
def test_a_misspelt_group_in_a_sweep_file_is_one_line_and_makes_no_folder(tmp_path: Path) -> None:
    """The file is planted in a copy of ``run.py`` and ``conf/`` (never in the checkout's ``sweep/``), run
    as a user types it, from an empty folder."""
    src, work = checkout_copy(tmp_path)
    (src / "conf" / "sweep" / "mine.yaml").write_text(HEAD + "defaults:\n  - override /modle: gpt-tiny\n")
    swept = tmp_path / "x"
    argv = ["-m", "+sweep=mine", "device=cpu", "model=gpt-tiny", "steps.warmup=1", "steps.measure=1"]
    proc = run_copy(src, work, *argv, f"hydra.sweep.dir={swept}")
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert proc.stderr == (
        "flopsweep: Invalid config: conf/sweep/mine.yaml (defaults: override /modle: gpt-tiny): modle is no "
        "config group (no folder modle/ in conf/ or Hydra's). Fix: did you mean - override /model: "
        "gpt-tiny?\n"
    )
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not proc.stdout and not swept.exists() and list(work.iterdir()) == []
