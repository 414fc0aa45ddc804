"""The error of the step time predicted before each run (``analysis.prediction_error``,
``python -m analysis --prediction-errors``, and the summary that ``--predict`` ends with)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.__main__ import main
from analysis.prediction_error import COLUMNS, error_summary, render_summary

ROOT = Path(__file__).resolve().parents[2]
PROBE_RECORDS = ROOT / "benchmarks" / "results" / "h200" / "session16" / "probe-1"


def runs(*rows: tuple) -> pd.DataFrame:
    names = ["backend", "zero_stage", "status", "prediction_error"]
    names += ["predicted_compute_source", "predicted_source"]
    return pd.DataFrame([dict(zip(names, r, strict=True)) for r in rows])


def test_one_row_per_backend_and_source_then_all_per_source() -> None:
    got = error_summary(
        runs(
            ("single", None, "ok", 0.02, "probe", "probe: 16 x block"),
            ("single", None, "ok", -0.10, "probe", "probe: 16 x block"),
            ("single", None, "ok", 0.04, "probe", "probe: 16 x block"),
            ("deepspeed", 3, "ok", -0.30, "probe", "probe: ..."),
            ("fsdp", None, "ok", 0.50, None, "calibrated from a/metrics.json"),
            ("fsdp", None, "ok", 0.20, None, "uncalibrated: 0.6 x the GEMM rate"),
            ("fsdp", None, "ok", 0.01, "calibration", "analysis --predict: calibrated from b"),
            ("fsdp", None, "oom", 9.0, "probe", "probe: ..."),  # not ok: left out
            ("fsdp", None, "ok", math.nan, "probe", "probe: ..."),  # no error: left out
        )
    )
    assert list(got.columns) == COLUMNS
    rows = {(r.backend, r.source): r for r in got.itertuples()}
    single = rows[("single", "probe")]
    assert single.runs == 3 and single.median_abs_error == pytest.approx(0.04)
    assert single.worst_error == pytest.approx(-0.10)  # signed, largest magnitude
    assert single.p90_abs_error == pytest.approx(pd.Series([0.02, 0.10, 0.04]).quantile(0.9))
    assert rows[("ZeRO-3", "probe")].worst_error == pytest.approx(-0.30)
    assert rows[("fsdp", "calibration")].runs == 1  # old record: its source names a calibration
    assert rows[("fsdp", "flops")].runs == 1  # "uncalibrated" is not a calibration
    assert rows[("fsdp", "calibration (by the analysis)")].runs == 1  # made after the run: apart
    assert rows[("all", "probe")].runs == 4 and ("fsdp", "probe") not in rows


def test_each_group_shows_its_measured_steps_own_spread() -> None:
    """``median_step_cv``: the median of the group's ``iteration_time_s_cv`` (the noise an error is read
    beside), NaN where no run of the group has one; shown in percent, ``—`` for none."""
    frame = runs(
        ("deepspeed", 3, "ok", 0.12, "layers", "layer probe"),
        ("deepspeed", 3, "ok", -0.13, "layers", "layer probe"),
        ("deepspeed", 3, "ok", 0.30, "layers", "layer probe"),
        ("fsdp", None, "ok", 0.01, "layers", "layer probe"),
    )
    frame["iteration_time_s_cv"] = [0.05, 0.17, 0.09, math.nan]
    rows = {(r.backend, r.source): r for r in error_summary(frame).itertuples()}
    assert rows[("ZeRO-3", "layers")].median_step_cv == pytest.approx(0.09)
    assert math.isnan(rows[("fsdp", "layers")].median_step_cv)
    assert rows[("all", "layers")].median_step_cv == pytest.approx(0.09)
    text = render_summary(error_summary(frame), "table")
    assert "step cv (median)" in text and "9.0%" in text and "—" in text
    assert math.isnan(error_summary(runs(("single", None, "ok", 0.1, "layers", ""))).median_step_cv[0])


def test_nothing_to_summarise_says_so_in_one_line() -> None:
    empty = error_summary(runs(("single", None, "error", math.nan, None, "")))
    assert empty.empty and list(empty.columns) == COLUMNS
    assert render_summary(empty, "table") == (
        "prediction error: no ok record has both a prediction and a measured step"
    )
    assert json.loads(render_summary(empty, "json")) == []


def test_the_committed_probe_records_summarise_from_the_command_line(capsys) -> None:
    """``--prediction-errors`` over session 16's first H200 probe records: one row per backend
    (the three ZeRO stages apart), every source ``probe``, the errors the records hold."""
    assert main([str(PROBE_RECORDS), "--prediction-errors", "--format", "json"]) == 0
    got = pd.DataFrame(json.loads(capsys.readouterr().out))
    assert set(got["source"]) == {"probe"}
    assert set(got["backend"]) == {"single", "ddp", "fsdp", "ZeRO-1", "ZeRO-2", "ZeRO-3", "all"}
    records = [json.loads(p.read_text()) for p in PROBE_RECORDS.rglob("metrics.json")]
    errors = [
        (r["metrics"]["predicted"]["iteration_time_s"] - r["metrics"]["iteration_time_s"]["mean"])
        / r["metrics"]["iteration_time_s"]["mean"]
        for r in records
        if r["status"] == "ok"
    ]
    everything = got[got["backend"] == "all"].iloc[0]
    assert everything["runs"] == len(errors) == 17
    assert everything["median_abs_error"] == pytest.approx(pd.Series(errors).abs().median())
    assert everything["worst_error"] == pytest.approx(max(errors, key=abs))


def test_predict_ends_its_table_with_the_summary(capsys) -> None:
    assert main([str(PROBE_RECORDS / "bk"), "--predict", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    table, _, summary = out.partition("Step time predicted before each run")
    assert "| backend" in table and "ZeRO-3" in summary and "median abs. error" in summary
