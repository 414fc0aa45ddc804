"""The tuner never replaces a ``tune.json`` or ``tune.md`` it did not make (docs/reliability-9.md #526):
``-m hydra/sweeper=tune ... hydra.sweep.dir=S`` with a link ``S/tune.json`` (or a user's ``S/tune.md``)
ran every job, then replaced it, exit 0; a plan's ``plan.csv`` was refused so since session 33."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


def _tune(folder: Path) -> list[str]:
    return ["-m", "hydra/sweeper=tune", "device=cpu", "model=gpt-tiny", "space.backends=[ddp,fsdp]"] + [
        f"hydra.sweep.dir={folder}"
    ]


@pytest.mark.parametrize(("name", "kind"), [("tune.json", "a symbolic link"), ("tune.md", "a regular file")])
def test_a_report_file_not_the_tuners_is_refused_before_hydra(tmp_path: Path, name: str, kind: str) -> None:
    folder, target = tmp_path / "S", tmp_path / "precious"
    folder.mkdir()
    target.write_text("mine")
    if kind == "a symbolic link":
        os.symlink(target, folder / name)
    else:
        (folder / name).write_text("mine")
    line = refusal(_tune(folder))
    assert line == (
        f"Invalid config: hydra.sweep.dir={folder}: {folder / name} is already there ({kind}, no sweep's "
        "multirun.yaml beside it); a tuner never replaces or writes through a file it did not make. Fix: "
        f"{another(folder, 'hydra.sweep.dir')}, or remove {folder / name} if it is yours."
    )
    assert target.read_text() == "mine" and not (folder / "multirun.yaml").exists()
    (folder / name).unlink()
    assert refusal(_tune(folder)) is None  # the fix, typed


def test_a_tuners_own_folder_and_a_plain_sweep_pass(tmp_path: Path) -> None:
    folder = tmp_path / "S"
    folder.mkdir()
    (folder / "multirun.yaml").write_text("hydra: {}\n")
    (folder / "tune.json").write_text("{}")
    assert refusal(_tune(folder)) is None  # its own earlier report, beside its multirun.yaml
    other = tmp_path / "T"
    other.mkdir()
    (other / "tune.json").write_text("{}")
    assert refusal(["-m", "device=cpu", "model=gpt-tiny", "seed=0,1", f"hydra.sweep.dir={other}"]) is None
