"""Session 35 (docs/reliability-5.md #315), as a user runs it: a single run into a folder holding a
``.hydra/config.yaml`` the user made (no record, no plan beside it) replaced it with the run's own config
(exit 0). Now one line, exit 2, before Hydra's files or a worker: the file stays as it was."""

from __future__ import annotations

from pathlib import Path

from helpers import run_py

from flopsweep.free_folder import another  # the folder a fix names (#725)


def test_a_single_run_over_a_users_hydra_folder_is_refused_and_keeps_it(tmp_path: Path) -> None:
    mine = tmp_path / "ud" / ".hydra" / "config.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine: 1\n")
    run = run_py("device=cpu", "model=llama-tiny", "steps.measure=1", f"hydra.run.dir={tmp_path / 'ud'}")
    assert run.returncode == 2, (run.stdout + run.stderr)[-3000:]
    assert run.stderr == (
        f"flopsweep: hydra.run.dir={tmp_path / 'ud'}: {mine} is already there (no metrics.json or plan.csv "
        "of a flopsweep run beside it); a run never replaces a file it did not make. Fix: "
        f"{another(tmp_path / 'ud')}, or remove {mine} if it is yours\n"
    )
    assert mine.read_text() == "mine: 1\n"
    assert sorted(p.name for p in (tmp_path / "ud").rglob("*")) == [".hydra", "config.yaml"]
