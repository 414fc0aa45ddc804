"""The step-time model (``flopsweep.predict``), the interconnect probe, ``metrics.predicted``,
``plan=true``'s predicted columns and ``python -m analysis --predict``."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest
from helpers import calibration_record as _record
from helpers import run_py
from unit.test_predict import _bad_calibrations, _write  # shared with the unit tier

from flopsweep import predict as pr


@pytest.mark.slow
def test_a_two_rank_gloo_run_is_predicted_from_its_one_rank_run_and_the_probe(tmp_path: Path) -> None:
    """The acceptance on the CPU: a one-rank FSDP run, then a two-rank one calibrated from it. The
    two-rank record has the probe (three collectives at two sizes over 2 ranks) and a prediction
    made from the one-rank record; its error is recorded whatever it is; the analysis shows it and
    ``plan=true`` predicts 8 nodes of 8 from the same calibration."""
    common = ["device=cpu", "backend=fsdp", "steps.warmup=1", "steps.measure=3"]
    one, two = tmp_path / "one", tmp_path / "two"
    env = {"OMP_NUM_THREADS": "1"}  # one thread per rank in both runs: the same compute per rank
    proc = run_py(*common, "nproc_per_node=1", f"hydra.run.dir={one}", timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run_py(
        *common,
        "nproc_per_node=2",
        f"predict.calibration={one}",
        f"hydra.run.dir={two}",
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    r1 = json.loads((one / "metrics.json").read_text())
    r2 = json.loads((two / "metrics.json").read_text())
    assert r1["system"]["interconnect"] == []
    probe = r2["system"]["interconnect"]
    assert sorted({(e["collective"], e["ranks"]) for e in probe}) == [(c, 2) for c in sorted(pr.COLLECTIVES)]
    assert len({e["bytes"] for e in probe}) == 2 and all(e["busbw_gbps"] > 0 for e in probe)
    predicted = r2["metrics"]["predicted"]
    assert predicted["source"].startswith(f"calibrated: {one / 'metrics.json'}")
    assert predicted["bandwidth_source"] == "this run's probe" and predicted["iteration_time_s"] > 0
    assert predicted["tokens_per_s"] == pytest.approx(
        r2["metrics"]["tokens_per_step"] / predicted["iteration_time_s"]
    )
    assert r1["metrics"]["predicted"]["source"].startswith("cpu probe: ")  # no calibration: the CPU's probe

    out = run_py_analysis(tmp_path)
    by_world = {row["world_size"]: row for row in out}
    measured = r2["metrics"]["iteration_time_s"]["mean"]
    error = by_world[2]["prediction_error"]
    assert error == pytest.approx((predicted["iteration_time_s"] - measured) / measured)
    print(f"two-rank gloo prediction error: {error:+.1%}")  # recorded, whatever it is

    sweep = tmp_path / "plan"
    proc = run_py(
        "-m", *common, "nproc_per_node=2", "plan=true", f"predict.calibration={one}",
        "predict.gpus_per_node=8", "predict.nnodes=8", "predict.intra_node_gbps=300",
        "predict.inter_node_gbps=40", f"hydra.sweep.dir={sweep}", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = list(csv.DictReader((sweep / "plan.csv").open()))
    assert (row["predicted_world_size"], row["predicted_nnodes"]) == ("64", "8")
    assert (
        row["prediction_source"].startswith("calibrated: ") and float(row["predicted_iteration_time_s"]) > 0
    )
    assert math.isfinite(float(row["predicted_tokens_per_s_per_device"]))
    assert "tokens/s/GPU" in proc.stdout  # the plan table's header for predicted_tokens_per_s_per_device


def run_py_analysis(path: Path) -> list[dict]:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "analysis", str(path), "--predict", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


LLAMA8B_ONE_GPU = Path(__file__).resolve().parents[2] / "benchmarks/results/h200/fp8/llama3.1-8b"
"""Committed one-GPU H200 records of Llama 3.1 8B (bf16 and fp8, micro batch 2, compiled, full
checkpointing): the set-up of sweep/layouts-8gpu-llama8b.yaml."""


def _plan_rows(sweep: Path, *extra: str) -> list[dict]:
    proc = run_py(
        "-m", "+sweep=layouts-8gpu-llama8b", "plan=true", *extra, f"hydra.sweep.dir={sweep}", timeout=600
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    hidden = re.search(
        r"hidden to fit \d+ columns: [^\n]*\bsource\b", proc.stdout
    )  # #670: footnotes go first
    assert "| source " in proc.stdout or hidden  # the table shows prediction_source or names it as hidden
    return list(csv.DictReader((sweep / "plan.csv").open()))


@pytest.fixture(scope="module")
def plain_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """``plan=true`` over the layout sweep with no other key: its folder and its ``plan.csv`` rows (one
    plan for two tests: CI time)."""
    sweep = tmp_path_factory.mktemp("plain") / "plan"
    return sweep, _plan_rows(sweep)


@pytest.mark.slow
def test_plan_true_lists_every_layout_before_any_run(plain_plan: tuple) -> None:
    """``plan=true`` over the layout sweep: one row per layout, each estimated with its layout label,
    or refused in one line with its reason (the degrees not built yet on this branch); no record.
    (Issue 23, item 11; moved here from ``test_layout_analysis.py``, which ran the same plan.)"""
    sweep, rows = plain_plan
    assert len(rows) == 11 and not list(sweep.rglob("metrics.json"))
    for row in rows:
        assert row["model"] == "llama3.1-8b" and row["overrides"].startswith("parallel={")
        if row["status"] == "ok":
            assert row["layout"] and float(row["est_peak_gib_per_rank"]) > 0
        else:
            assert row["status"] == "invalid" and "Fix:" in row["reason"] and "\n" not in row["reason"]
    assert rows[0]["status"] == "ok" and rows[0]["layout"] == "dp8"


@pytest.mark.slow
def test_plan_predicts_every_layout_of_the_8gpu_sweep(tmp_path: Path, plain_plan: tuple) -> None:
    """Issue 27's acceptance on a laptop: ``plan=true`` on the 8-GPU layout sweep prints a predicted tokens/s
    and its source on every ok row, calibrated from the committed one-GPU record, without it from the
    records flopsweep ships, and with ``predict.measured=false`` from the H100 datasheet, said so. TP 8 is
    slower than FSDP 8 (its activations travel on the critical path); a pipeline of 2 over 4 micro batches
    pays its bubble."""
    rows = _plan_rows(tmp_path / "cal", f"predict.calibration={LLAMA8B_ONE_GPU}")
    ok = {row["layout"]: row for row in rows if row["status"] == "ok"}
    assert len(ok) >= 10 and "dp8" in ok
    cal = str(LLAMA8B_ONE_GPU / "0" / "metrics.json")  # the bf16 record, not the fp8 one
    for row in ok.values():
        assert float(row["predicted_tokens_per_s_per_device"]) > 0, row
        # a backend=single record: no calibration of the FSDP2 layouts since session 21, the nearest set-up
        assert row["prediction_source"].startswith(
            f"nearest: {cal} (1 of its set-up; differs in backend.name"
        ), row
        assert "bandwidth assumed: 0.7 x H200 SXM NVLink" in row["prediction_source"]
    time = {layout: float(row["predicted_iteration_time_s"]) for layout, row in ok.items()}
    assert time["tp8"] > time["dp4 tp2"] > time["dp8"]
    # 1F1B and GPipe: (p-1)/(m+p-1) = 1/5 of the step idles; interleaved (2 stages a rank) 1/9
    assert time["pp2/1F1B dp4"] == pytest.approx(time["pp2/GPipe dp4"])
    assert time["pp2/Interleaved1F1B dp4"] < time["pp2/1F1B dp4"]
    assert time["pp4/1F1B dp2"] > time["pp2/1F1B dp4"] > time["dp8"]

    # without predict.calibration: the records flopsweep ships (predict.measured), for the H200s the
    # sweep is written for (it sets plan_gpu=H200), their GPU kind; predict.measured=false: the flat one
    plain = [row for row in plain_plan[1] if row["status"] == "ok"]
    assert len(plain) >= 10
    for row in plain:
        assert row["prediction_source"].startswith(
            ("nearest (shipped records): h200", "calibrated (shipped")
        ), row
        assert (
            "scaled by" not in row["prediction_source"]
            and float(row["predicted_tokens_per_s_per_device"]) > 0
        )

    rows = _plan_rows(tmp_path / "h100", "plan_gpu=H100", "predict.measured=false")
    ok = [row for row in rows if row["status"] == "ok"]
    assert len(ok) >= 10
    for row in ok:
        assert float(row["predicted_tokens_per_s_per_device"]) > 0, row
        assert row["prediction_source"].startswith(
            "uncalibrated: executed FLOPs at 0.45 x the H100 datasheet GEMM rate (989.4 TFLOP/s)"
        ), row
        assert "bandwidth assumed: 0.7 x H100 SXM NVLink" in row["prediction_source"]


@pytest.mark.slow
def test_plan_at_another_micro_batch_carries_the_rate_over(tmp_path: Path) -> None:
    """The record of micro batch 2 (another backend) stands for micro batch 4 as the nearest set-up: its
    rate on hardware FLOPs carried over, so the compute doubles with the tokens, the source says so."""
    rows = _plan_rows(tmp_path, f"predict.calibration={LLAMA8B_ONE_GPU}", "batch.micro_batch_size=4")
    ok = [row for row in rows if row["status"] == "ok"]
    assert ok and all("batch.micro_batch_size 4 vs 2" in r["prediction_source"] for r in ok)
    assert all("TFLOP/s on hardware FLOPs per rank" in r["prediction_source"] for r in ok)


@pytest.mark.slow
def test_a_bad_calibration_path_is_the_same_error_in_a_run_and_in_a_plan(tmp_path: Path) -> None:
    """A run and its ``plan=true`` are refused with the same line before Hydra starts (exit 2, no folder
    made; session 30: the run's record and the plan's row were ``invalid`` with it), the line naming the
    path and what is wrong with it. (A path that does not exist: ``ref[calibration_missing_tuner]``,
    ``tests/unit/test_plan_command_line.py``.)"""
    cases = _bad_calibrations(tmp_path)
    cases.pop("missing")
    for path, what in cases.values():
        lines = []
        for plan in ([], ["plan=true"]):
            where = tmp_path / f"out-{len(lines)}-{path.name}"
            args = ["device=cpu", "backend=single", f"predict.calibration={path}", *plan]
            proc = run_py(*args, f"hydra.run.dir={where}", timeout=600)
            assert proc.returncode == 2 and not where.exists(), proc.stderr[-2000:]
            line = proc.stderr.strip().splitlines()[-1]
            assert what in line and str(path) in line, line
            lines.append(line)
        assert lines[0] == lines[1]


@pytest.mark.slow
def test_a_calibration_matching_nothing_is_the_same_warning_in_a_run_and_in_a_plan(tmp_path: Path) -> None:
    """A two-rank gloo run and its ``plan=true`` row, calibrated by a folder whose one record is of
    another model and compiled: both warn on stderr naming it and what differs, and both predict
    uncalibrated (the plan on the CPU, with no GEMM rate, predicts nothing), the source saying so
    (the log line on the console: stdout or stderr)."""
    cal = tmp_path / "cal"
    other = _record(1)  # model m
    other["config"]["compile"] = True
    _write(cal / "0", other)
    args = ["device=cpu", "backend=fsdp", "nproc_per_node=2", "steps.warmup=1", "steps.measure=2"]
    args.append(f"predict.calibration={cal}")
    run = run_py(*args, f"hydra.run.dir={tmp_path / 'run'}", timeout=600, env={"OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    plan = run_py("-m", *args, "plan=true", f"hydra.sweep.dir={tmp_path / 'plan'}", timeout=600)
    assert plan.returncode == 0, plan.stderr[-3000:]
    made = json.loads((tmp_path / "run" / "metrics.json").read_text())["metrics"]["predicted"]
    (row,) = csv.DictReader((tmp_path / "plan" / "plan.csv").open())
    nearest = (
        f"predict.calibration={cal} matches nothing: the nearest, {cal / '0' / 'metrics.json'}, differs in"
    )
    for source, proc in ((made["source"], run), (row["prediction_source"], plan)):
        assert "uncalibrated" in source and nearest in source, source  # the CPU plan: no GEMM rate
        assert "compile False vs True" in source and "model " in source, source
        assert (
            f"{nearest} " in proc.stdout + proc.stderr
            and "predicted uncalibrated" in proc.stdout + proc.stderr
        )
