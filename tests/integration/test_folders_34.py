"""Session 34's new-user trial of folders (docs/reliability-5.md #302, #303), as a user runs them: a ``~``
in a sweep file's output folder made a folder named ``~`` (exit 0); a plan with ``resume=true`` into a run's
folder of another config replaced that run's ``.hydra/`` files, and a sweep replaced a ``.hydra/config.yaml``
the user had made in a job folder. Each is now one line, exit 2, and the files stay as they were."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, RUN_PY, run_py

from flopsweep.free_folder import another  # the folder a fix names (#725)


def test_a_tilde_in_a_sweep_files_folder_is_refused_and_makes_no_folder(tmp_path: Path) -> None:
    """The file is planted in a copy of ``run.py`` and ``conf/`` (never in the checkout's ``sweep/``), run
    from an empty folder, where the ``~`` folder was made."""
    src, work = tmp_path / "src", tmp_path / "work"
    work.mkdir()
    src.mkdir()
    shutil.copy(RUN_PY, src / "run.py")
    shutil.copytree(ROOT / "conf", src / "conf", symlinks=False)  # conf/sweep: a link to sweep/
    (src / "conf" / "sweep" / "t_tilde.yaml").write_text("# @package _global_\nhydra: {sweep: {dir: ~/z}}\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(src / "run.py"),
            "-m",
            "+sweep=t_tilde",
            "model=llama-tiny",
            "device=cpu",
            "seed=0",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
    )
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert proc.stderr == (
        "flopsweep: Invalid config: conf/sweep/t_tilde.yaml: hydra.sweep.dir=~/z: a leading ~ is not "
        "expanded (Hydra takes a file's value as written, and would make a folder named ~ here). Fix: write "
        f'the path out, e.g. dir: "${{oc.env:HOME}}/z" in the file ({os.path.expanduser("~/z")})\n'
    )
    assert not proc.stdout and list(work.iterdir()) == []


def test_hydra_files_in_an_existing_folder_are_never_replaced(tmp_path: Path) -> None:
    """(a) a real run in ``other/``, then a plan of another config with ``resume=true`` there; (b) a sweep
    into ``ud2/`` whose ``0/.hydra/config.yaml`` the user made (no record)."""
    other = tmp_path / "other"
    run = run_py(
        "model=llama-tiny", "device=cpu", "steps.warmup=1", "steps.measure=1", f"hydra.run.dir={other}"
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    before = {p.name: p.read_text() for p in (other / ".hydra").iterdir()}
    assert sorted(before) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    plan = run_py("device=cpu", "plan=true", f"hydra.run.dir={other}", "resume=true")
    assert plan.returncode == 2, (plan.stdout + plan.stderr)[-3000:]
    assert plan.stderr == (
        f"flopsweep: hydra.run.dir={other}: {other / 'metrics.json'} is the record of another run "
        "(device=cpu model=llama-tiny steps.measure=1 steps.warmup=1; this plan: device=cpu); the plan would "
        f"replace that run's .hydra/ files with its own config. Fix: {another(other)}\n"
    )
    assert {p.name: p.read_text() for p in (other / ".hydra").iterdir()} == before
    assert not (other / "plan.csv").exists()

    mine = tmp_path / "ud2" / "0" / ".hydra" / "config.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine: 1\n")
    sweep = run_py(
        "-m", "seed=0,1", "device=cpu", "model=gpt-tiny", "steps.warmup=1", "steps.measure=1",
        f"hydra.sweep.dir={tmp_path / 'ud2'}",
    )  # fmt: skip
    assert sweep.returncode == 2, (sweep.stdout + sweep.stderr)[-3000:]
    assert sweep.stderr.endswith(
        f"{mine} is already there (no record beside it, no sweep's multirun.yaml in {tmp_path / 'ud2'}); "
        "a sweep never replaces a file it did not make. Fix: "
        f"{another(tmp_path / 'ud2', 'hydra.sweep.dir')}, or remove {mine} if it is yours\n"
    ), sweep.stderr
    assert mine.read_text() == "mine: 1\n"
    assert sorted(p.name for p in (tmp_path / "ud2").rglob("*")) == [".hydra", "0", "config.yaml"]
