"""Session 41 (docs/reliability-12.md #883): ``+sweep=mine steps.measure=3`` beside a file's ``steps:
{measure: 3.0}`` (the command line's fix typed back) was Hydra's ``In 'sweep/mine': ValidationError ...
Value '3.0' of type 'float' could not be converted to Integer``, exit 1. Now one line naming the file with
the fix in its form, exit 2, before Hydra: nothing made. One process, no training; the file is planted in
one copy of ``run.py``, ``conf/`` and the packages (tests/unit/test_sweep_file_fix_41.py: each fix passes)."""

from __future__ import annotations

from pathlib import Path

from helpers import checkout_copy, run_copy


def test_the_command_lines_value_beside_a_files_bad_value_is_one_line_exit_2(tmp_path: Path) -> None:
    src, work = checkout_copy(tmp_path)
    (src / "conf" / "sweep" / "mine.yaml").write_text("# @package _global_\nsteps: {measure: 3.0}\n")
    swept = tmp_path / "x"
    proc = run_copy(src, work, "+sweep=mine", "steps.measure=3", "plan=true", f"hydra.run.dir={swept}")
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert proc.stderr == (
        "flopsweep: Invalid config: conf/sweep/mine.yaml: steps.measure=3.0: is a whole number written as a "
        "float (Hydra reads the file's value before the command line's steps.measure=3, which replaces it). "
        "Fix: write it without a point or exponent: steps: {measure: 3} in conf/sweep/mine.yaml, or drop "
        "steps.measure there.\n"
    )
    assert "ValidationError" not in proc.stdout + proc.stderr and not proc.stdout
    assert not swept.exists() and list(work.iterdir()) == []
