"""A sweep of plans after the new-user trial of ``@PRICE`` (session 26), each a real ``run.py -m`` on this
CPU machine: an interrupted one prints what its finished jobs planned, a finished one its price lines."""

from __future__ import annotations

import csv
import signal
from pathlib import Path

from helpers import ROOT, run_py, run_py_signalled
from unit.test_plan_prices import SMALL_SPACE


def test_an_interrupted_plan_sweep_prints_what_it_kept(tmp_path: Path) -> None:
    """Was: ``no run had been recorded yet`` with job 0's rows in the sweep's ``plan.csv``."""
    code, out = run_py_signalled(
        "-m",
        *SMALL_SPACE[1:],
        "plan=true",
        "model=llama3.1-8b,gpt-tiny,llama3.1-70b",
        "plan_clusters=[H100:8@2.5]",
        f"hydra.sweep.dir={tmp_path}",
        when="1 of 3 jobs done (job 0)",
        sig=signal.SIGINT,
    )
    rows = list(csv.DictReader(open(tmp_path / "plan.csv")))
    assert code == 130 and rows
    assert f"interrupted (KeyboardInterrupt); kept {len(rows)} rows of planned set-ups in {tmp_path}" in out
    assert "best of each cluster over every job, the command that runs it:" in out


def test_a_sweep_of_plans_prints_its_prices(tmp_path: Path) -> None:
    done = run_py(
        "-m",
        *SMALL_SPACE,
        "plan=true",
        "plan_clusters=[H100:8@2.5],[H200:8@3.5,A100-80GB:8]",
        "cost.usd_per_gpu_hour=1.5",
        f"hydra.sweep.dir={tmp_path}",
        cwd=ROOT,
    )
    lines = done.stdout.splitlines()
    assert "price: 2.5 USD per GPU-hour for H100:1x8:ib400 (@2.5 in plan_clusters)" in lines, done.stderr
    assert "price: 3.5 USD per GPU-hour for H200:1x8:ib400 (@3.5 in plan_clusters)" in lines
    assert "price: 1.5 USD per GPU-hour for A100-80GB:1x8:ib200 (cost.usd_per_gpu_hour)" in lines
