"""Another user's symbolic link in the middle of the run's or sweep's folder, end to end: ``python run.py``
exits 2 with one line and writes nothing, whether the folder is named on the command line
(``hydra.sweep.dir=/tmp/x/link/sub``) or is Hydra's default under an ``outputs/`` or ``multirun/`` that
another user planted. A link of another user is made as root does (``os.lchown``); skipped without root.
Each run is refused before Hydra runs a job (under a second each)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import run_py

OTHER_UID = 65534


def _link(path: Path, target: Path) -> Path:
    path.symlink_to(target, target_is_directory=True)
    try:
        os.lchown(path, OTHER_UID, -1)
    except PermissionError:
        pytest.skip("needs root: only root can make a symbolic link owned by another user (os.lchown)")
    return path


@pytest.mark.parametrize(
    ("args", "key", "link_name"),
    [
        (["-m", "hydra.sweep.dir=shared/link/sub"], "hydra.sweep.dir", "shared/link"),
        (["hydra.run.dir=shared/link/run"], "hydra.run.dir", "shared/link"),
        (["-m"], "hydra.sweep.dir", "multirun"),  # Hydra's default folder, no key on the command line
        ([], "hydra.run.dir", "outputs"),
    ],
)
def test_run_py_refuses_a_folder_through_another_user_s_link(
    tmp_path: Path, args: list[str], key: str, link_name: str
) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (tmp_path / "shared").mkdir()
    link = _link(tmp_path / link_name, theirs)
    proc = run_py(*args, "steps.measure=1", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"flopsweep: Invalid config: {key}="), proc.stderr
    assert f"{link} is a symbolic link of another user (uid {OTHER_UID}" in lines[0]
    assert "Fix: choose another folder" in lines[0]
    assert list(theirs.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"theirs", "shared", link_name.split("/")[0]})
