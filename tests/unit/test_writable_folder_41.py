"""A folder that cannot be made names one that can (docs/reliability-12.md #900)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from flopsweep.command_line_checks import output_dir_problem
from flopsweep.locks import _unmade


def _named(line: str, key: str) -> str:
    return re.search(rf"e\.g\. {re.escape(key)}=(\S+?)[.)]?(?:\s|$)", line).group(1)


def test_a_folder_that_cannot_be_made_names_one_that_passes(tmp_path):
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("x")
    line = output_dir_problem([f"hydra.run.dir={in_the_way}/run"])
    assert line.startswith(f"Invalid config: hydra.run.dir={in_the_way}/run: cannot make the directory")
    named = _named(line, "hydra.run.dir")
    assert named == str(tmp_path / "run-2")
    assert output_dir_problem([f"hydra.run.dir={named}"]) is None
    assert not Path(named).exists()


@pytest.mark.parametrize(
    ("argv", "key"), [(["run.py", "-m"], "hydra.sweep.dir"), (["run.py"], "hydra.run.dir")]
)
def test_a_lock_no_place_takes_names_a_folder_that_passes(tmp_path, monkeypatch, argv, key):
    """The key is the command's (#940: ``hydra.sweep.dir`` under ``-m``, else ``hydra.run.dir``), read from
    the command line outside a Hydra job."""
    from flopsweep import free_folder

    monkeypatch.setattr(free_folder, "COMMAND", [tuple(argv[1:])])  # run.py's command_started
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("x")
    run_dir = in_the_way / "sweep"
    line = _unmade(run_dir, [(run_dir / "x.lock", NotADirectoryError(20, "Not a directory"))])
    assert "choose a directory you can write to" not in line
    named = _named(line, key)
    assert named == str(tmp_path / "sweep-2")
    assert output_dir_problem([f"{key}={named}"]) is None


def test_a_folder_where_none_can_be_made_names_one_in_the_temporary_folder():
    """``/proc`` takes no folder, whatever ``os.access`` tells root."""
    import tempfile

    import pytest

    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here")
    line = output_dir_problem(["hydra.run.dir=/proc/flopsweep-41"])
    named = _named(line, "hydra.run.dir")
    assert Path(named).parent == Path(tempfile.gettempdir())
    assert output_dir_problem([f"hydra.run.dir={named}"]) is None
