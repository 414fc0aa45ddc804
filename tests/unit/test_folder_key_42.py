"""A folder fix names the key of the command it is for, read from that command, never from another
program's command line (docs/reliability-13.md #971): ``free_folder.folder_key`` read ``sys.argv``, so under
``pytest -m slow`` (or any caller outside a Hydra app) a single run's fix named ``hydra.sweep.dir``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flopsweep import free_folder
from flopsweep.free_folder import another, folder_key


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (["device=cpu"], "hydra.run.dir"),
        (["-m", "backend=ddp,fsdp"], "hydra.sweep.dir"),
        (["--multi", "backend=ddp,fsdp"], "hydra.sweep.dir"),  # argparse's prefix of --multirun
        ([], "hydra.run.dir"),
    ],
)
def test_the_key_is_the_given_command_s(argv: list[str], key: str) -> None:
    assert folder_key(argv) == key


def test_another_program_s_m_flag_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pytest -m slow``: no flopsweep command in this process, so a single run's key."""
    monkeypatch.setattr(sys, "argv", ["pytest", "-m", "slow"])
    monkeypatch.setattr(free_folder, "COMMAND", [])
    assert folder_key() == "hydra.run.dir"
    assert (
        another(tmp_path / "x", either=True)
        == f"choose another hydra.run.dir, e.g. hydra.run.dir={tmp_path}/x-2"
    )
    free_folder.command_started(["-m", "device=cpu"])  # run.py's own command, recorded before its checks
    assert folder_key() == "hydra.sweep.dir"


def test_a_sweep_s_fix_given_its_command_is_accepted_typed_back(tmp_path: Path) -> None:
    """The fix for a sweep's folder, given the sweep's words, names ``hydra.sweep.dir=...-2``: the
    command with it passes run.py's checks."""
    from run import refusal

    (tmp_path / "x").mkdir()
    fix = another(tmp_path / "x", either=True, argv=["-m", "backend=ddp,fsdp"])
    typed = fix.rpartition("e.g. ")[2]
    assert typed == f"hydra.sweep.dir={tmp_path}/x-2"
    assert refusal(["-m", "backend=ddp,fsdp", "device=cpu", typed]) is None
