"""benchmarks/tune_vs_grid.py reads issue 42's acceptance off records: the grid's best, the tuner's
winner matched to its grid set-up by its overrides, the gap and the GPU-seconds of each."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from helpers import fixture_record, put, rescaled

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "tune_vs_grid.py"
_spec = importlib.util.spec_from_file_location("tune_vs_grid", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules["tune_vs_grid"] = bench
_spec.loader.exec_module(bench)


def _job(folder: Path, policy: str, rate: float, seconds: int) -> None:
    """One job: a record of ``activation_checkpointing=policy`` at ``rate`` tokens/s per device that ran
    ``seconds`` on its 2 ranks, with the overrides Hydra writes beside it."""
    rec = rescaled(fixture_record(), world=2, tokens_per_device=rate)
    rec["config"]["activation_checkpointing"] = {"name": policy}
    rec["run"].update(id=f"{folder.name}-{policy}", started_at="2026-12-05T10:00:00+00:00")
    rec["run"]["finished_at"] = f"2026-12-05T10:{seconds // 60:02d}:{seconds % 60:02d}+00:00"
    put(folder, rec)
    lines = ["- model=gpt-tiny", f"- activation_checkpointing={policy}", "- repeats=3", "- repeat=0"]
    put(folder / ".hydra", "\n".join(lines) + "\n", "overrides.yaml")


def test_the_winner_is_matched_to_its_grid_set_up(tmp_path: Path) -> None:
    grid, tune = tmp_path / "grid", tmp_path / "tune"
    for n, (policy, rate) in enumerate([("none", 1000.0), ("full", 800.0), ("selective", 990.0)]):
        _job(grid / str(n), policy, rate, 60)
    _job(tune / "0", "selective", 1010.0, 30)  # the tuner picks the second best of the grid
    _job(tune / "1", "full", 700.0, 20)
    winner = {"label": "selective", "overrides": ["activation_checkpointing=selective"]}
    put(tune, json.dumps({"winner": winner}), "tune.json")
    out = bench.compare(grid, tune, "tokens_per_s_per_device")
    assert out["grid_setups"] == 3 and out["grid_best"] == 1000.0
    assert out["winner_on_grid"] == 990.0 and out["winner_tuned"] == 1010.0
    assert abs(out["gap"] - 0.01) < 1e-12  # the grid's own figures: 1 - 990 / 1000
    assert out["grid_gpu_s"] == 3 * 60 * 2 and out["tune_gpu_s"] == (30 + 20) * 2
    assert abs(out["gpu_s_share"] - 100 / 360) < 1e-12
    assert bench.main([str(grid), str(tune), "--objective", "tokens_per_s_per_device"]) == 0


def test_no_winner_is_one_line_and_exit_1(tmp_path: Path, capsys) -> None:
    grid, tune = tmp_path / "grid", tmp_path / "tune"
    _job(grid / "0", "none", 1000.0, 60)
    _job(tune / "0", "none", 1000.0, 60)
    put(tune, json.dumps({"winner": None}), "tune.json")
    assert bench.main([str(grid), str(tune)]) == 1
    assert capsys.readouterr().err.strip().endswith("names no winner")
