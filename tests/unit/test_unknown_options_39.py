"""Session 39 (docs/reliability-10.md #543-#544): the command lines of ``flopsweep.text.OneLineParser``
(``python -m analysis``, ``benchmarks/*.py``). A path after an option (``DIR --predict DIR2``) was
``unrecognized arguments: DIR2``, exit 2; an unknown option (``--colums``, ``--html``) was the same
line with no fix. Every fix printed is parsed back and run."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.__main__ import main
from analysis.cli import build_parser
from flopsweep.text import OneLineParser


def _runs(tmp_path: Path, name: str) -> str:
    put(tmp_path / name / "0", fixture_record())
    return str(tmp_path / name)


def _refused(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    return line


def test_paths_after_options_are_read(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """#543: ``DIR --format csv DIR2`` refused ``DIR2``; now both are read, in the order given."""
    one, two = _runs(tmp_path, "one"), _runs(tmp_path, "two")
    assert main([one, "--format", "csv", two, "--output", "-"]) == 0
    captured = capsys.readouterr()
    assert "2 runs (2 ok)" in captured.err
    assert build_parser().parse_args([one, "--predict", two, "--width", "80"]).paths == [one, two]


@pytest.mark.parametrize(
    ("typed", "meant", "given"),
    [
        (["--colums", "model"], "--columns", ["--columns", "model"]),
        (["--colums=model"], "--columns", ["--columns=model"]),
        (["--bestby", "model"], "--best-by", ["--best-by", "model"]),
        (["--html"], "--format html", ["--format", "html"]),
        (["--htm"], "--format html", ["--format", "html"]),
        (["--md"], "--format markdown", ["--format", "markdown"]),
        (["--prdict"], "--predict", ["--predict"]),
    ],
)
def test_an_unknown_option_gets_the_nearest_and_that_fix_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture, typed: list[str], meant: str, given: list[str]
) -> None:
    """#544: the line names the option meant and the whole command with it, which runs (exit 0)."""
    runs = _runs(tmp_path, "runs")
    line = _refused(capsys, [runs, *typed])
    option = typed[0].split("=")[0]
    assert (
        f"unrecognized arguments: {' '.join(typed)}: {option} is no option; did you mean {meant}? Fix: "
        in line
    )
    fix = line.split(" Fix: python -m analysis ")[1].split("; see ")[0]
    argv = shlex.split(fix)
    assert argv == [runs, *given]
    out = tmp_path / "out"
    assert main([*argv, "--output", str(out)]) == 0 and out.stat().st_size > 0


def test_an_option_with_no_near_name_is_named_without_a_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """No option is near ``--xyzzy``: the line says it is none, and gives no fix that would fail."""
    line = _refused(capsys, [_runs(tmp_path, "runs"), "--xyzzy"])
    assert "unrecognized arguments: --xyzzy: --xyzzy is no option; see python -m analysis --help" in line
    assert "Fix:" not in line


def test_every_one_line_parser_gets_it_and_a_fix_that_fails_is_not_given(
    capsys: pytest.CaptureFixture,
) -> None:
    """A benchmark's parser (no aliases) too; where the nearest option would itself be refused (its
    value missing), no fix is printed."""
    parser = OneLineParser(prog="bench")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("name")
    with pytest.raises(SystemExit):
        parser.parse_args(["x", "--stesp", "3", "--stpes"])
    line = capsys.readouterr().err.strip()
    assert line.startswith("bench: error: unrecognized arguments: --stesp 3 --stpes: --stesp is no option; ")
    assert "Fix:" not in line  # --steps 3 --steps: the second --steps has no value
    with pytest.raises(SystemExit):
        parser.parse_args(["x", "--stesp", "3"])
    line = capsys.readouterr().err.strip()
    assert line.endswith("did you mean --steps? Fix: bench x --steps 3; see bench --help")
    assert parser.parse_args(["x", "--steps", "3"]).steps == 3
