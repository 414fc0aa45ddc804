"""Session 39 (docs/reliability-10.md #550): ``--output runs.csv`` without ``--format`` wrote the terminal
table into ``runs.csv`` (``wrote runs.csv``, exit 0; a spreadsheet opened one column of padded text). The
format now follows the name's suffix where ``--format`` is not given (``analysis.cli_paths.output_format``),
and the ``wrote`` line says so; a ``--format`` given wins, as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.__main__ import main
from analysis.cli import build_parser


@pytest.mark.parametrize(
    ("name", "fmt", "starts"),
    [
        ("runs.csv", "csv", '"model",'),
        ("runs.JSON", "json", "["),
        ("r.md", "markdown", "| model"),
        ("r.html", "html", "<"),
    ],
)
def test_an_outputs_suffix_sets_the_format_when_none_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture, name: str, fmt: str, starts: str
) -> None:
    """#550: the file holds its suffix's format, and the line says where the format came from."""
    put(tmp_path / "runs" / "0", fixture_record())
    out = tmp_path / name
    assert main([str(tmp_path / "runs"), "--output", str(out)]) == 0
    assert out.read_text().lstrip().startswith(starts)
    assert f"wrote {out} (--format {fmt}, by its name)" in capsys.readouterr().err
    if fmt == "json":
        assert json.loads(out.read_text())[0]["model"]


def test_a_given_format_wins_and_other_names_keep_the_table() -> None:
    """``--format csv --output report.md`` writes CSV (as asked); ``.txt``, ``-`` and no suffix: the table."""
    parse = build_parser().parse_args
    assert parse(["d", "--format", "csv", "--output", "report.md"]).format == "csv"
    assert parse(["d", "--output", "report.md", "--format", "table"]).format == "table"
    assert parse(["d", "--output", "t.txt"]).format == "table"
    assert parse(["d", "--output", "-"]).format == "table"
    assert parse(["d", "--output", "notes"]).format == "table"
    assert parse(["d", "--output", "x.csv"]).format == "csv"
