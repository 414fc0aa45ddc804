"""``python run.py plan=true plan_clusters=[...]`` as a user runs it (issue 42): one ranked table of at
most 160 columns, ``plan.csv`` with rank, dollars and days, ``plan_format=json`` on stdout, a bad
cluster name refused in one line, and no torch imported for a space without DeepSpeed."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from helpers import ROOT

ARGS = [
    "plan=true",
    "model=llama3.1-8b",
    "cost.usd_per_gpu_hour=2.5",
    "budget.tokens=15e12",
    "plan_clusters=[H100:8,H200:16]",
    "space.backends=[fsdp,ddp]",
    "space.layouts=[dp,hsdp,tp2]",
    "space.micro_batches=[2,4]",
]

_MAIN = """
import atexit, runpy, sys
atexit.register(lambda: print("torch imported:", "torch" in sys.modules, file=sys.stderr))
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""


def _run(tmp_path: Path, *extra: str):
    import subprocess

    return subprocess.run(
        [sys.executable, "-c", _MAIN, *ARGS, *extra, f"hydra.run.dir={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_plan_that_decides_end_to_end(tmp_path: Path) -> None:
    proc = _run(tmp_path / "table", "objective=usd_per_million_tokens")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch imported: False" in proc.stderr
    table = proc.stdout.split("\n\n")[0].splitlines()
    assert max(map(len, table)) <= 160 and table[0].split()[:4] == ["#", "all", "cluster", "set-up"]
    assert sum("*" in line.split()[0] for line in table[1:]) == 2  # the best of each cluster
    assert "H200:2x8:ib400: flopsweep " in proc.stdout and "plan: H200:2x8:ib400 done (2/2" in proc.stderr
    rows = list(csv.DictReader((tmp_path / "table" / "plan.csv").open()))
    first = rows[0]
    assert first["rank"] == "1" and first["best"] == "True" and float(first["budget_usd"]) > 0
    assert float(first["budget_days"]) == pytest.approx(
        15e12 / float(first["predicted_tokens_per_s"]) / 86400
    )

    as_json = _run(tmp_path / "json", "plan_format=json")
    assert as_json.returncode == 0, as_json.stderr[-3000:]
    out = json.loads(as_json.stdout)
    assert out["rows"][0]["rank"] == 1 and {b["cluster"] for b in out["best"]} == {
        "H100:1x8:ib400",
        "H200:2x8:ib400",
    }

    bad = _run(tmp_path / "bad", "plan_clusters=[H100:8,B300:8]")
    assert bad.returncode == 2 and not bad.stdout
    (line,) = [x for x in bad.stderr.splitlines() if x.startswith("flopsweep:")]
    assert line.startswith("flopsweep: Invalid config: plan_clusters='B300:8': ")
