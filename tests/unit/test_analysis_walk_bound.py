"""The analysis' walk is bounded (docs/reliability-5.md #305): ``python -m analysis /`` printed nothing for
120 s (a walk of every folder of the machine for metrics.json); now ``/`` (and ``/proc``, ``/sys``,
``/dev``) is refused in one line with the fix, a walk lists at most :data:`analysis.discover.MAX_FOLDERS`
folders over the call and names the folder it stopped at, and a long walk says how far it is on stderr."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from helpers import fixture_record as ok_record
from helpers import put

from analysis import discover as dv
from analysis.display import summary
from flopsweep import tree
from tests.unit.test_analysis_trial import cli as _cli  # main's exit code, stdout, stderr


def _tree(root: Path) -> Path:
    """``root/a/0`` and ``root/z/0`` each with a record, and ``root/m/0..9`` empty folders between them
    (a walk lists, in name order: root, a, a/0, m, m/0 ... m/9, z, z/0: 16 folders)."""
    put(root / "a" / "0", ok_record())
    for i in range(10):
        (root / "m" / str(i)).mkdir(parents=True)
    put(root / "z" / "0", ok_record())
    return root


@pytest.mark.parametrize("root", ["/", "/proc", "/sys", "/dev"])
def test_the_file_systems_root_is_refused_in_one_line_with_the_fix(capsys, root: str) -> None:
    code, out, err = _cli(capsys, root)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"python -m analysis: error: {root}: not searched for metrics.json: "), line
    assert "Fix: name a sweep folder (its hydra.sweep.dir, e.g. multirun/smoke)" in line
    with pytest.raises(FileNotFoundError, match="the root of the file system"):
        dv.discover(["/"])


def test_a_walk_lists_at_most_max_folders_and_names_where_it_stopped(tmp_path: Path) -> None:
    assert dv.MAX_FOLDERS == 100_000
    root = _tree(tmp_path / "runs")
    found, skipped = dv.discover([root])
    assert found == [root / "a" / "0" / "metrics.json", root / "z" / "0" / "metrics.json"] and skipped == {}
    found, skipped = dv.discover([root], max_folders=15)  # the 16th, z/0, not listed
    assert found == [root / "a" / "0" / "metrics.json"]
    assert skipped == {str(root / "z" / "0"): tree.STOPPED.format(root=root, folders=15)}
    assert tree.folder_skipped(skipped[str(root / "z" / "0")])
    why = skipped[str(root / "z" / "0")]
    assert why.startswith("folders after it not searched: the walk of ") and "stopped after 15 folders" in why
    assert why.endswith(
        "Fix: name the sweep's folder (its hydra.sweep.dir, e.g. multirun/smoke), not a folder above it"
    )


def test_the_bound_is_over_every_path_of_the_call_and_globs(tmp_path: Path) -> None:
    root = _tree(tmp_path / "runs")
    found, skipped = dv.discover([root / "a", root / "z"], max_folders=3)  # a, a/0, z: z/0 not listed
    assert found == [root / "a" / "0" / "metrics.json"] and list(skipped) == [str(root / "z" / "0")]
    found, skipped = dv.discover([f"{root}/**/metrics.json"], max_folders=5)
    assert found == [root / "a" / "0" / "metrics.json"] and len(skipped) == 1
    with pytest.raises(
        FileNotFoundError, match=r"no glob match in the 1 folder searched \(the limit of a walk\)"
    ):
        dv.discover([f"{root}/z/**/metrics.json"], max_folders=1)


def test_a_long_walk_says_how_far_it_is(tmp_path: Path, caplog, monkeypatch) -> None:
    root = _tree(tmp_path / "runs")
    monkeypatch.setattr(dv, "PROGRESS_S", 0.0)  # a line at every folder, as a slow file system gets
    with caplog.at_level(logging.WARNING, logger="analysis"):
        dv.discover([root])
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("still searching")]
    assert len(said) == 16
    assert said[-1] == (
        f"still searching {root} for metrics.json: 16 folders listed, 2 records found (the walk stops at "
        "100,000 folders; name the sweep's folder to read only it)"
    )


def test_the_footer_says_the_search_stopped(tmp_path: Path) -> None:
    import pandas as pd

    root = _tree(tmp_path / "runs")
    _, skipped = dv.discover([root], max_folders=15)
    df = pd.DataFrame({"status": ["ok"]})
    df.attrs["unreadable"] = skipped
    assert (
        summary(df)
        == "1 run (1 ok); the search stopped at its limit of 100,000 folders (name the sweep's folder)"
    )
