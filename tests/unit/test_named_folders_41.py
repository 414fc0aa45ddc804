"""A refusal's "choose another directory" names one (reliability row #845, docs/reliability-12.md; as
``free_folder`` does for ``hydra.run.dir``, row #725): the refusals of ``files``, ``hydrafiles``, ``locks``
and ``command_line_checks``, and ``metrics``' profile warning, which names the folder its traces go to. Each
folder named is free, and the check that refused the first accepts it. Real files in ``tmp_path``."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from flopsweep.hydrafiles import output_folder_problem


def _named(line: str, key: str) -> str:
    """The folder ``line``'s fix names for ``key`` (``e.g. KEY=PATH``)."""
    found = re.search(rf"e\.g\. {re.escape(key)}=(\S+?)[,.)]?(?: |$)", line)
    assert found is not None, line
    return found.group(1)


@pytest.mark.parametrize("key", ["hydra.run.dir", "hydra.sweep.dir"])
def test_an_output_folder_refused_names_a_free_one_that_passes(tmp_path: Path, key: str) -> None:
    """A file where the folder goes, and a folder inside a run's own ``.hydra``: was ``choose another
    directory``; now ``choose another KEY, e.g. KEY=PATH`` (beside it, or beside the run's folder that holds
    the ``.hydra``), and that PATH passes the same check."""
    a_file = tmp_path / "afile"
    a_file.write_text("")
    inside = tmp_path / "R" / ".hydra" / "x"
    inside.mkdir(parents=True)
    for value, beside in ((a_file, f"{a_file}-2"), (inside, f"{tmp_path / 'R'}-2")):
        line = output_folder_problem(key, str(value))
        assert line is not None and f"choose another {key}, e.g. {key}={beside}" in line, line
        assert "choose another directory" not in line
        assert output_folder_problem(key, _named(line, key)) is None


def test_a_folder_flopsweep_makes_names_a_free_one_beside_it(tmp_path: Path) -> None:
    """``safe_folders.own_folder``/``private_folder`` on a file, and a folder where a record goes: the fix
    names a free folder, which ``own_folder`` then makes."""
    from flopsweep.files import RecordUnwritable
    from flopsweep.safe_folders import own_folder, private_folder

    taken = tmp_path / "run"
    taken.write_text("")
    for make in (own_folder, private_folder):
        with pytest.raises(RecordUnwritable) as refused:
            make(taken)
        assert refused.value.fix.endswith(f"or choose another folder, e.g. {taken}-2"), refused.value.fix
    assert own_folder(Path(f"{taken}-2")).is_dir()
    record = tmp_path / "r" / "metrics.json"
    record.mkdir(parents=True)
    unwritable = RecordUnwritable(record, IsADirectoryError(errno.EISDIR, "Is a directory"))
    assert unwritable.fix.endswith(f"or choose another folder, e.g. {tmp_path / 'r'}-2"), unwritable.fix


def test_a_lock_file_in_the_way_names_a_free_folder(tmp_path: Path) -> None:
    from flopsweep.locks import SweepBusy, _open_one

    run_dir = tmp_path / "sweep"
    run_dir.mkdir()
    lock = run_dir / ".flopsweep.lock"
    os.mkfifo(lock)
    with pytest.raises(SweepBusy) as refused:
        _open_one(lock, run_dir)
    line = str(refused.value)
    assert f"choose another hydra.run.dir, e.g. hydra.run.dir={run_dir}-2" in line  # pytest's argv: no -m
    assert "choose another directory" not in line and not Path(f"{run_dir}-2").exists()


def test_the_profile_warning_names_the_traces_folder_and_a_free_run_folder(tmp_path: Path) -> None:
    from flopsweep.metrics import TRACE_DIR, profile_warnings

    (line,) = profile_warnings([{"rank": 1, "profile_problem": "a file is in the way"}], tmp_path / "run")
    assert line == (
        "profile_failed: rank 1: a file is in the way; the measured figures stand, metrics.breakdown is null "
        f"(fix: move the file or directory in the way of {tmp_path / 'run' / TRACE_DIR}, or choose another "
        f"hydra.run.dir, e.g. hydra.run.dir={tmp_path / 'run'}-2, and run again)"
    )
    assert profile_warnings([{"rank": 0}], tmp_path) == []
