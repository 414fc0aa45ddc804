"""Every option that takes a list of columns reads each name without the spaces around it
(docs/reliability-10.md #601, session 39's re-trial of #553): ``--columns 'model, precision'`` ran, while
``--best-by 'model, precision'`` and ``--pivot 'model, backend:precision:tokens_per_s'`` refused ``unknown
column ' precision' ...; did you mean 'precision'?``, a fix that dropped ``model``
(``analysis.query.column_list``)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.__main__ import main


@pytest.mark.parametrize(
    ("option", "spaced", "plain"),
    [
        ("--best-by", "model, precision", "model,precision"),
        ("--best-by", "backend , precision", "backend,precision"),
        ("--columns", "model, precision", "model,precision"),
        ("--pivot", "model, backend:precision:tokens/s", "model,backend:precision:tokens/s"),
        ("--pivot", "model:backend, precision: tokens_per_s", "model:backend,precision:tokens_per_s"),
    ],
)
def test_a_list_of_columns_with_spaces_after_its_commas_reads_as_without(
    tmp_path: Path, capsys: pytest.CaptureFixture, option: str, spaced: str, plain: str
) -> None:
    put(tmp_path / "runs" / "0", fixture_record())
    runs = str(tmp_path / "runs")
    assert main([runs, option, plain, "--format", "csv"]) == 0
    want = capsys.readouterr().out
    assert main([runs, option, spaced, "--format", "csv"]) == 0
    got = capsys.readouterr().out
    assert got == want
    assert len(list(csv.reader(io.StringIO(got)))) >= 2
