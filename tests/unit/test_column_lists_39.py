"""Session 39 (docs/reliability-10.md #553): ``--best-by 'model precision'`` (a space where the list takes a
comma) said ``did you mean 'precision'?``, one of the two columns meant. Now the list with commas, which
runs (``analysis.query.check_columns``, ``LIST_OPTIONS``); ``--sort`` (one column) as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.__main__ import main


@pytest.mark.parametrize("option", ["--best-by", "--columns"])
def test_columns_split_by_a_space_get_the_comma_list(
    tmp_path: Path, capsys: pytest.CaptureFixture, option: str
) -> None:
    put(tmp_path / "runs" / "0", fixture_record())
    runs = str(tmp_path / "runs")
    with pytest.raises(SystemExit) as stop:
        main([runs, option, "model precision"])
    assert stop.value.code == 2
    line = capsys.readouterr().err
    said = f"unknown column 'model precision' in {option}; did you mean 'model,precision'? (a comma"
    assert said in line
    assert main([runs, option, "model,precision", "--format", "csv"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([runs, "--sort", "model precision"])
    assert "in --sort; did you mean 'precision'" in capsys.readouterr().err
