"""Session 39 (docs/reliability-10.md #624-#627): the analysis' leftovers of the trial. ``--force`` without
``--output`` was accepted in silence (#624); ``scale_eff is blank ...`` was said under
``--prediction-errors``, whose output shows no such column (#625); ``--best-by model`` over H100 and H200
records hid ``device`` to fit the width, each row's figure then of an unnamed GPU (#626); ``--filter
repeat=1`` on a ``repeats=`` sweep said ``repeat has: none (every cell blank)`` (#627). Real records
written by the test helpers; the analysis' own ``main``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers import round_records, write_rounds

from analysis.__main__ import DERIVED, main, shown_blanks
from analysis.cli import build_parser
from analysis.display import render


def _err(capsys: pytest.CaptureFixture) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_force_without_an_output_file_is_refused_and_the_fix_runs(tmp_path: Path, capsys) -> None:
    write_rounds(tmp_path / "s", round_records([1000.0]))
    for extra in ([], ["--output", "-"]):
        with pytest.raises(SystemExit) as stop:
            main([str(tmp_path / "s"), "--force", *extra])
        assert stop.value.code == 2
        line = _err(capsys)
        assert "argument --force: it lets --output replace a file already there, and no --output file" in line
        assert "Fix: drop --force, or add --output report.md" in line
    assert main([str(tmp_path / "s")]) == 0
    assert main([str(tmp_path / "s"), "--force", "--output", str(tmp_path / "report.md")]) == 0


def test_a_derived_columns_blank_line_is_said_only_where_its_column_is_shown() -> None:
    args = build_parser().parse_args(["x"])
    blanks = ["scale_eff is blank for 2 of 3 ok runs: ...", "speedup is blank for 1 of 3 ok runs: ...", "x"]
    assert set(DERIVED) == {"scaling_efficiency", "speedup"}
    assert shown_blanks(blanks, "model  status  TFLOPs\n a ok 1", args) == ["x"]  # the error summary's
    assert shown_blanks(blanks, "model  scale_eff  speedup\n", args) == blanks
    asked = build_parser().parse_args(["x", "--sort", "scaling_efficiency"])
    assert shown_blanks(blanks, "model\n", asked) == blanks[:1] + ["x"]


def test_a_device_that_differs_between_rows_is_never_hidden_to_fit() -> None:
    runs = pd.DataFrame(
        {
            "model": ["a" * 30, "b" * 30],
            "device_name": ["NVIDIA H200", "NVIDIA H100 80GB HBM3"],
            "backend": ["single", "fsdp"],
            "model_tflops_per_device": [701.6, 633.5],
        }
    )
    text = render(runs, "table", width=60)
    assert "device" in text.splitlines()[0], text


def test_a_round_filter_on_a_pooled_sweep_names_a_rounds_folder_and_that_fix_runs(tmp_path: Path, capsys):
    folders = write_rounds(tmp_path / "s", round_records([1000.0, 1100.0]))
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "s"), "--filter", "repeat=1"])
    assert stop.value.code == 2
    line = _err(capsys)
    assert (
        "--filter repeat=1 matches no record: the rounds of a repeats= sweep are pooled into one row" in line
    )
    assert "repeat has: none" not in line
    fix = line.split("Fix: python -m analysis ")[1].split(";")[0]
    assert fix == str(folders[1])
    assert main([fix, "--format", "csv", "--columns", "repeat,tokens_per_s_per_device"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("1,1100")
