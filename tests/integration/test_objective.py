"""The sweep objective (flopsweep.objective): the float a job returns to Hydra, its direction from
MetricSpec.better, a one-line refusal of a key that is no figure of merit, and a real Optuna study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_py
from omegaconf import OmegaConf


@pytest.mark.slow
def test_an_optuna_study_runs_to_its_end_and_a_failed_trial_is_nan(tmp_path: Path) -> None:
    """Two trials on the CPU, one per value of fault.kind (the random sampler with seed 0 draws
    raise, then none; the grid sampler would stop the study from inside the failed trial's tell,
    a plugin bug of its own): the ok one returns its model TFLOPs, the failed one NaN, which fails
    its trial, not the study."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the optuna extra is not installed")
    proc = run_py(
        "-m",
        "hydra/sweeper=optuna_objective",
        "hydra/sweeper/sampler=random",
        "hydra.sweeper.sampler.seed=0",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.n_jobs=1",
        "fault.kind=choice(none,raise)",
        "batch.micro_batch_size=1",
        "device=cpu",
        "precision=fp32",
        "steps.warmup=0",
        "steps.measure=1",
        f"hydra.sweep.dir={tmp_path}",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    records = {r["config"]["fault"]["kind"]: r for r in map(_read, tmp_path.glob("*/metrics.json"))}
    assert records["none"]["status"] == "ok" and records["raise"]["status"] == "error"
    result = OmegaConf.load(tmp_path / "optimization_results.yaml")
    assert result.best_params["fault.kind"] == "none"
    assert result.best_value == pytest.approx(records["none"]["metrics"]["model_tflops_per_device"])
    assert "Failed experiment" in proc.stdout + proc.stderr  # the NaN trial, logged by the plugin


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.slow
def test_an_optuna_study_without_an_ok_trial_ends_in_one_line(tmp_path: Path) -> None:
    """``plan=true`` under the Optuna sweeper measures nothing, so no trial completes: the study says
    so in one line (not Optuna's ``No trials are completed yet`` traceback), and the plan table is
    printed as for any sweep."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the optuna extra is not installed")
    proc = run_py(
        "-m",
        "hydra/sweeper=optuna_objective",
        "hydra.sweeper.n_trials=2",
        "batch.micro_batch_size=choice(1,2)",
        "device=cpu",
        "plan=true",
        f"hydra.sweep.dir={tmp_path}",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "flopsweep: the Optuna study has no completed trial" in proc.stderr
    assert (tmp_path / "plan.csv").is_file() and "gpt-tiny" in proc.stdout
