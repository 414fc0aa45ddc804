"""Session 38: fixes that name a folder as a file (docs/reliability-8.md #441-#442): ``resume=true`` onto a
sweep whose ``multirun.yaml`` is a folder said ``rm`` (which fails on a folder), and
``flopsweep-analysis DIR --output dir/`` wrote a file named ``dir``. Each fix is now one that works."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.__main__ import main
from flopsweep.folders import other_sweep_problem, remove_command
from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)


def test_resume_onto_a_folder_named_multirun_yaml_says_rm_r_and_that_works(tmp_path: Path) -> None:
    """#441: was ``Fix: ... remove it (rm S/multirun.yaml)``: ``rm: cannot remove ...: Is a directory``."""
    path = tmp_path / "sw" / "multirun.yaml"
    (path / "inner").mkdir(parents=True)
    line = other_sweep_problem(tmp_path / "sw", {})
    assert line == (
        f"{path} is unreadable (a directory, not a regular file); resume=true continues only the sweep "
        f"that wrote it. Fix: to keep the jobs' records, restore the file or remove it (rm -r {path}) and "
        "resume with the command line that started this sweep (a job whose record holds another config is "
        f"refused), or {another(tmp_path / 'sw', 'hydra.sweep.dir')}"
    )
    command = shlex.split(line.split("remove it (", 1)[1].split(")", 1)[0])
    assert command == ["rm", "-r", str(path)]  # rm -r's removal, done here without a process:
    shutil.rmtree(path)
    assert other_sweep_problem(tmp_path / "sw", {}) is None


def test_remove_command_by_kind(tmp_path: Path) -> None:
    """#441: ``rm`` for a file or a link (even one to a folder: never followed), ``rm -r`` for a folder."""
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    (tmp_path / "l").symlink_to(tmp_path / "d")
    assert remove_command(tmp_path / "d") == f"rm -r {tmp_path}/d"
    assert remove_command(tmp_path / "f") == f"rm {tmp_path}/f"
    assert remove_command(tmp_path / "l") == f"rm {tmp_path}/l"
    assert remove_command(Path("a b")) == "rm 'a b'"


@pytest.mark.parametrize(("given", "fix"), [("out/", "out/report.md"), ("out/.", "out/report.md")])
def test_an_output_that_names_a_folder_is_refused_and_its_fix_writes_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, given: str, fix: str
) -> None:
    """#442: ``--output out/`` (``out`` absent) wrote a file named ``out``; now argparse's one line (exit 2),
    nothing written, and its fix writes ``out/report.md``."""
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    put(runs / "0", fixture_record())
    with pytest.raises(SystemExit) as stop:
        main([str(runs), "--output", given])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(
        f"python -m analysis: error: argument --output: {given}: names a folder (a trailing / or a last . "
        f"or ..), but --output writes one file. Fix: --output {fix}"
    )
    assert not (tmp_path / "out").exists()
    assert main([str(runs), "--output", fix]) == 0  # the fix is accepted: the table written there
    assert (tmp_path / "out" / "report.md").is_file()


def test_a_notebook_named_as_a_folder_is_refused(tmp_path: Path, capsys) -> None:
    """#442: the same class for ``--notebook x.ipynb/`` (a file named ``x.ipynb`` was written)."""
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path), "--notebook", "x.ipynb/"])
    assert stop.value.code == 2
    assert "Fix: --notebook x.ipynb/results.ipynb" in capsys.readouterr().err
