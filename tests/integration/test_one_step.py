"""A real run of one measured step, not warmed up (``device=cpu steps.warmup=0 steps.measure=1``): ``ok``,
``iteration_time_s.std`` and ``cv`` null (no spread from one value), the ``one_step`` warning naming the cold
step, and the analysis reads the record (ranked, not flagged ``noisy``). The functions' own cases are
``tests/unit/test_one_step.py``."""

from __future__ import annotations

from helpers import read_record, run_py

from analysis.load import load, rankable


def test_one_cold_measured_step_has_no_spread_and_says_so(tmp_path):
    out = tmp_path / "run"
    done = run_py("device=cpu", "steps.warmup=0", "steps.measure=1", f"hydra.run.dir={out}", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = read_record(out / "metrics.json")
    steps = record["metrics"]["iteration_time_s"]
    assert record["status"] == "ok" and len(steps["values"]) == 1
    assert steps["std"] is None and steps["cv"] is None
    assert steps["mean"] == steps["median"] == steps["min"] == steps["max"] == steps["values"][0]
    (line,) = [w for w in record["warnings"] if w.startswith("one_step: ")]
    assert "not warmed up (steps.warmup=0)" in line and line.endswith(
        "(fix: steps.measure=3 steps.warmup=1 or more)"
    )
    assert not any(w.startswith("noisy_steps: ") for w in record["warnings"])
    df = load(out)
    assert len(df) == 1 and df["implausible"].isna().all() and bool(rankable(df).iloc[0])
    assert "noisy" not in str(df["noise"].iloc[0])  # load may flag it (a shared host), never noisy
