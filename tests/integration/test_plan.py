"""``plan=true``: every job validated and estimated, no worker started, no record written."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import run_py
from unit.test_plan import P  # shared with the unit tier

from flopsweep.job.planfit import unwrapped


@pytest.mark.slow
def test_plan_on_a_gpu_sweep_starts_nothing(tmp_path: Path) -> None:
    proc = run_py("-m", "+sweep=backends", "plan=true", f"hydra.sweep.dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert [r["status"] for r in rows] == ["ok"] * 6
    assert {r["n_params"] for r in rows} == {str(P)}
    assert "launching" not in proc.stdout + proc.stderr and not list(tmp_path.rglob("metrics.json"))
    assert proc.stdout.count("| backend=") == 6  # one table, a row per job


@pytest.mark.slow
def test_plan_on_the_cpu_says_whether_the_host_memory_holds_it(tmp_path: Path) -> None:
    """``plan=true device=cpu``: ``fits`` compares the estimate with the host's available memory;
    a model whose states exceed the machine is an ``invalid`` row, not a crash."""
    import psutil

    big = "gpt-13b" if 16 * 13e9 > psutil.virtual_memory().total else None
    models = "gpt-tiny" + (f",{big}" if big else "")
    proc = run_py(
        "-m", f"model={models}", "device=cpu", "plan=true", f"hydra.sweep.dir={tmp_path}", timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert (rows[0]["status"], rows[0]["fits"]) == ("ok", "True")
    if big:
        assert rows[1]["status"] == "invalid" and "this machine lets a process use" in rows[1]["reason"]


def test_a_plan_with_invalid_rows_says_so_last_and_exits_0(tmp_path: Path) -> None:
    """``plan=true`` over a sweep is a report (exit 0), but its last lines, on stderr, count the invalid
    rows (each one's reason is the table's footnote, said once; where it was placed is the table's note) and
    the rows that do not fit; the table's hint names the plan's GPU. A plan whose rows are all ``ok`` and fit
    prints no such line. A single plan whose one row is invalid is a refused config: its reason alone,
    once (not in a table's footnote and again below it), exit 2 (``planprint.plan_refused_line``)."""
    reason = (
        "Invalid config: batch.global_batch_size=4: is not a positive multiple of batch.micro_batch_size=3. "
    )
    reason += "Fix: set batch.global_batch_size to a multiple of 3, e.g. batch.global_batch_size=3."
    proc = run_py(
        "-m",
        "model=gpt-tiny,llama3.1-70b",  # 70B: ok, but no fit on one H200
        "plan_gpu=H200",
        "nproc_per_node=1",
        "batch.global_batch_size=4",
        "batch.micro_batch_size=1,3",  # 3: refused in the job (a whole-config check), an invalid row
        "plan=true",
        f"hydra.sweep.dir={tmp_path / 'S'}",  # beside the single plan's folder: never one inside the other
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "S" / "plan.csv").open()))
    assert [r["status"] for r in rows] == ["ok", "invalid", "ok", "invalid"]
    assert [r["fits"] for r in rows] == ["True", "", "False", ""]
    invalid, unfit = proc.stderr.strip().splitlines()[-2:]
    assert invalid == (
        "flopsweep: 2 of 4 jobs are invalid (the status and reason columns); each one's reason is "
        "printed with the table"
    )
    shown = "\n".join(unwrapped(proc.stdout + proc.stderr))  # its notes wrapped at 160 columns (#723)
    assert shown.count(reason) == 1  # its footnote, once (session 25: was twice)
    first = "flopsweep: 1 of 4 jobs does not fit; job 2: model=llama3.1-70b: estimated "
    assert unfit.startswith(first), unfit
    assert unfit.endswith("; plan_clusters=[H200:1x8,H200:8x8] ranks the set-ups that fit."), unfit
    out = "\n".join(unwrapped(proc.stdout)) + "\n"
    assert out.count(f"] {reason}\n") == 1 and "placed as an H200 SXM" in out
    assert "plan_clusters=[H200:1x8,H200:8x8] ranks set-ups on clusters: docs/plan.md)" in out
    one = run_py(
        "batch.global_batch_size=4",
        "batch.micro_batch_size=3",
        "plan_gpu=A100-80GB",
        "plan=true",
        f"hydra.run.dir={tmp_path / 'one'}",
    )
    assert one.returncode == 2, one.stderr[-2000:]
    assert one.stderr.strip().splitlines()[-1] == f"flopsweep: {reason}".strip()
    assert (one.stdout + one.stderr).count("is not a positive multiple") == 1

    from flopsweep.job import plan_invalid_line

    ok = tmp_path / "ok.csv"
    ok.write_text("job,status\n0,ok\n1,ok\n")
    assert plan_invalid_line(str(ok)) is None


def test_plan_json_of_a_real_sweep_holds_numbers_and_null_for_blank_and_nan(tmp_path: Path) -> None:
    """Session 26: ``plan_format=json`` read ``plan.csv`` back as text: a column with a blank cell (an invalid
    job's row) gave its numbers as strings (``"0.172"``), and a ``nan`` cell the string ``"nan"``. Each is
    now a number, or null (a ``nan``: null, its row's ``nulls`` says why)."""
    import json

    from flopsweep.job.planprint import plan_output

    sweep = tmp_path / "S"
    proc = run_py(
        "-m", "plan=true", "plan_format=json", "plan_gpu=H100", "parallel.tp=1,2", f"hydra.sweep.dir={sweep}"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    ok, invalid = json.loads(proc.stdout, parse_constant=float)  # stdout is the JSON alone (#533)
    assert (ok["status"], invalid["status"]) == ("ok", "invalid")
    assert isinstance(ok["n_params"], int) and isinstance(ok["predicted_mfu"], float) and ok["fits"] is True
    assert invalid["n_params"] is None and invalid["predicted_mfu"] is None and invalid["fits"] is None
    assert ok["reason"] is None and invalid["reason"].startswith("Invalid config: parallel.tp=2")
    # the same file with the ok row's MFU a NaN, as the CSV writer writes a float NaN
    text = (sweep / "plan.csv").read_text().replace(f",{ok['predicted_mfu']:g},", ",nan,", 1)
    again = json.loads(plan_output(str(sweep / "plan.csv"), "json", text=text))
    assert '"nan"' not in json.dumps(again) and again[0]["predicted_mfu"] is None
    assert again[0]["nulls"] == {"predicted_mfu": "nan: not a finite number (JSON has none)"}
    assert again[0]["n_params"] == ok["n_params"] and again[1] == invalid
