"""Session 39 (docs/reliability-10.md #545): ``--filter run_id=ID`` (or ``run_dir=``) of one round of a
``repeats=`` sweep said ``matches no record; run_id has: ID, ...``, the ID it refused listed: the rounds
are one row whose ``run_id`` is every round's, joined (``round-0, round-1``), and the filter compared
the whole text. A pooled row now matches each of its rounds' ids and folders, and the hint lists them
one by one (``analysis.query.cell_values``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import round_records, write_rounds

from analysis.__main__ import main
from analysis.filter_hints import present
from analysis.load import load
from analysis.query import select


def test_a_rounds_run_id_or_folder_selects_its_pooled_row(tmp_path: Path) -> None:
    """Either round's id or folder gives the one pooled row; the joined text as shown still does."""
    write_rounds(tmp_path / "sweep", round_records([1000.0, 1100.0]))
    df = load(tmp_path / "sweep")
    (joined,) = df["run_id"].tolist()
    assert joined == "round-0, round-1" and df["repeats"].tolist() == [2]
    for filters in (
        {"run_id": "round-1"},
        {"run_id": "round-0"},
        {"run_id": joined},
        {"run_dir": str(tmp_path / "sweep" / "1")},
    ):
        assert len(select(df, filters)) == 1, filters
    assert select(df, {"run_id": "round-2"}).empty
    assert present(df, "run_id") == "round-0, round-1"


def test_the_hint_lists_values_that_match(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The line of a value that matches nothing lists each round's id, and each one given passes."""
    write_rounds(tmp_path / "sweep", round_records([1000.0, 1100.0]))
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "sweep"), "--filter", "run_id=round-9"])
    assert stop.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--filter run_id=round-9 matches no record; run_id has: round-0, round-1;" in line
    for listed in ("round-0", "round-1"):
        assert main([str(tmp_path / "sweep"), "--filter", f"run_id={listed}", "--format", "csv"]) == 0
        captured = capsys.readouterr()
        assert len(captured.out.splitlines()) == 2 and f"{listed}" in captured.out  # the header and the row
