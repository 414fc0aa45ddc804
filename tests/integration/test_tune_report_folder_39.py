"""A tuner never replaces a ``tune.json`` it did not make, whatever names its folder (docs/reliability-10.md
#605, session 39's re-trial of #526): ``hydra.sweep.dir=${oc.env:DIR}``, the folder holding a link to a
user's file, ran every job, then replaced the link by the report, exit 0 (#526's check reads the command
line's folder before Hydra, and passes an interpolation to Hydra). Now the sweeper checks the folder Hydra
resolved before any job: one line, exit 2, the link kept. A subprocess is the point: the sweeper runs inside
Hydra; refused before any job (about 3 s of CPU)."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import run_py

from flopsweep.free_folder import another  # the folder a fix names (#725)

SPACE = ("space.backends=[single]", "space.layouts=[dp]", "space.checkpointing=[none]")
SMALL = ("space.precisions=[fp32]", "space.micro_batches=[1,2]", "model=gpt-tiny")


def test_an_interpolated_sweep_folder_holding_a_users_tune_json_is_refused_before_any_job(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "mine.json"
    mine.write_text('{"mine": 1}')
    folder = tmp_path / "s"
    folder.mkdir()
    os.symlink(mine, folder / "tune.json")
    done = run_py(
        "-m",
        "hydra/sweeper=tune",
        "device=cpu",
        "nproc_per_node=1",
        *SPACE,
        *SMALL,
        "hydra.sweep.dir=${oc.env:FLOPSWEEP_TEST_DIR}",
        env={"FLOPSWEEP_TEST_DIR": str(folder)},
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [x for x in done.stderr.splitlines() if x.startswith("flopsweep")]
    assert lines == [
        f"flopsweep: Invalid config: hydra.sweep.dir={folder}: {folder}/tune.json is already there (a "
        "symbolic link, no sweep's multirun.yaml beside it); a tuner never replaces or writes through a file "
        f"it did not make. Fix: {another(folder, 'hydra.sweep.dir')}, or remove {folder}/tune.json if it is "
        "yours."
    ]
    assert os.path.islink(folder / "tune.json") and mine.read_text() == '{"mine": 1}'
    assert sorted(p.name for p in folder.iterdir()) == ["tune.json"]  # no job ran, no multirun.yaml
