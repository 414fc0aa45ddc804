"""repeats=: rounds interleaved across set-ups, 95% intervals, and the best-two verdict."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys

import pytest
from helpers import ROOT as REPO  # the repository root (tests/helpers.py)


@pytest.mark.slow
def test_repeats_sweep_writes_every_round_interleaved_and_pools_them(tmp_path):
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "run.py"),
            "-m",
            "repeats=3",
            "backend=single,ddp",
            "device=cpu",
            "nproc_per_node=1",
            "model=gpt-tiny",
            "steps.warmup=1",
            "steps.measure=3",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads((sweep / str(n) / "metrics.json").read_text()) for n in range(6)]
    order = [(r["config"]["backend"]["name"], r["run"]["repeat"]) for r in records]
    assert order == [("single", 0), ("ddp", 0), ("single", 1), ("ddp", 1), ("single", 2), ("ddp", 2)]
    starts = [r["run"]["started_at"] for r in records]
    assert starts == sorted(starts)
    assert len({r["run"]["repeat_group"] for r in records}) == 1 and records[0]["run"]["repeats"] == 3
    out = subprocess.run(
        [sys.executable, "-m", "analysis", str(sweep), "--format", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    rows = json.loads(out.stdout)
    assert sorted(r["backend"] for r in rows) == ["ddp", "single"]
    for r in rows:
        assert r["repeats"] == 3 and r["ci_over"] == "repeats"
        rounds = [x["metrics"] for x in records if x["config"]["backend"]["name"] == r["backend"]]
        step = statistics.fmean(m["iteration_time_s"]["mean"] for m in rounds)  # the mean of three
        assert r["iteration_time_s_mean"] == pytest.approx(step)
        assert r["tokens_per_s"] == pytest.approx(rounds[0]["tokens_per_step"] / step)
        high = r["tokens_per_s_ci_high"]  # finite however far the rounds are apart (log scale)
        assert 0 < r["tokens_per_s_ci_low"] <= r["tokens_per_s"] <= high < math.inf
    table = subprocess.run(
        [sys.executable, "-m", "analysis", str(sweep)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert "CPU timings are indicative only" in table.stdout
    assert "ignificant" in table.stdout
