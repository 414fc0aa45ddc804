"""The session-30 new-user trial's refusals that came only after Hydra made ``outputs/<date>/<time>/``
(docs/reliability-4.md #247-#252): each is now the job's one line from :func:`run.refusal`, before Hydra."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pandas as pd
import pytest

from analysis.load import add_scaling
from flopsweep.calibration_files import calibration_records
from run import refusal


@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "nproc_per_node=0",
            "Invalid config: nproc_per_node=0: must be a positive integer. Fix: set nproc_per_node=auto or a "
            "positive integer such as 2.",
        ),
        (
            "nnodes=2",
            "Invalid config: nnodes=2: only a Slurm job spans nodes; a local run has one. Fix: set nnodes=1, "
            "or run the sweep with -m hydra/launcher=slurm; to plan it here add plan=true (predict.nnodes= "
            "and predict.gpus_per_node= predict its step on another cluster).",
        ),
    ],
)
def test_a_rank_count_no_local_run_takes_is_the_jobs_line_before_hydra(override: str, line: str) -> None:
    """``nproc_per_node=0`` and ``nnodes=2`` (no launcher that gives nodes) are the job's lines, as typed."""
    assert refusal(["model=llama-tiny", "device=cpu", override]) == line


def test_more_cpu_ranks_than_the_cores_take_is_refused_before_hydra_and_a_plan_is_not() -> None:
    """``nproc_per_node=1000`` on ``device=cpu`` names this machine's cap (4 per core); with
    ``hydra/launcher=slurm`` or ``plan=true`` (other machines) it is left to the job."""
    cap = 4 * (os.cpu_count() or 1)
    line = refusal(["model=llama-tiny", "device=cpu", f"nproc_per_node={cap + 1}"])
    assert line is not None and line.startswith(f"Invalid config: nproc_per_node={cap + 1}: starts more CPU")
    assert line.endswith(f"Fix: set nproc_per_node to at most {cap}.")
    assert refusal(["model=llama-tiny", "device=cpu", f"nproc_per_node={cap}"]) is None
    assert refusal(["model=llama-tiny", "plan=true", "nnodes=2", "nproc_per_node=8"]) is None


def test_an_unknown_key_added_with_plus_is_the_jobs_line_before_hydra() -> None:
    """``+bogus=1``: the job's "is not a key of the config schema", the value as typed; a group
    (``+sweep=...``) and a nested key (the option's to decide) are not refused here."""
    line = refusal(["model=llama-tiny", "device=cpu", "+bogus=1"])
    assert line is not None and line.startswith(
        "Invalid config: bogus=1: is not a top-level key of the config (a '+' override adds keys without "
        "checking them). Fix: drop +bogus=1 (the top-level keys are model, attention, backend,"
    )


def test_a_model_config_that_is_missing_a_fifo_or_not_json_is_refused_before_hydra(tmp_path: Path) -> None:
    """``model.config=`` a missing name, a FIFO (never opened), a file that is not JSON: the job's read."""
    fifo, text = tmp_path / "fifo", tmp_path / "x.txt"
    os.mkfifo(fifo)
    text.write_text("not json")
    base = ["model=hf", "device=cpu"]
    missing = refusal([*base, "model.config=nonexistent-config"])
    assert missing is not None and missing.startswith(
        "Invalid config: model.config='nonexistent-config': is neither a shipped config nor an existing file"
    )
    assert refusal([*base, f"model.config={fifo}"]) == (
        f"Invalid config: model.config='{fifo}': cannot be read (a FIFO, not a regular file). "
        "Fix: give a readable config.json."
    )
    assert refusal([*base, f"model.config={text}"]) == (
        f"Invalid config: model.config='{text}': is not valid JSON (Expecting value: line 1 column 1 "
        "(char 0)). Fix: give a model's config.json."
    )
    assert refusal([*base, "model.config=qwen3-tiny"]) is None


def test_a_calibration_folder_of_corrupt_records_is_refused_before_hydra_its_reason_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder whose one ``metrics.json`` is not JSON: the job's line before Hydra, and the reason is in
    it alone (no WARNING repeating it)."""
    (tmp_path / "metrics.json").write_text("{\n")
    args = ["plan=true", "model=llama3.1-8b", "plan_gpu=H100", f"predict.calibration={tmp_path}"]
    with caplog.at_level(logging.WARNING):
        line = refusal(args)
        with pytest.raises(Exception, match="holds no metrics.json that may calibrate"):
            calibration_records(str(tmp_path))
    assert line is not None and line.startswith(
        f"Invalid config: predict.calibration='{tmp_path}': holds no "
    )
    assert "1 skipped; the first: invalid JSON" in line
    assert [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()] == []


def test_an_objective_a_plan_over_clusters_cannot_predict_is_refused_before_hydra() -> None:
    """``objective=hfu`` beside ``plan_clusters``: the job's "not predicted by plan=true" line; a run
    (no plan) measures it."""
    line = refusal(["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]", "objective=hfu"])
    assert line is not None and line.startswith(
        "Invalid config: objective='hfu': is measured by a run but not predicted by plan=true"
    )
    assert refusal(["model=llama-tiny", "device=cpu", "objective=hfu"]) is None


def test_disagreeing_one_rank_runs_are_one_warning_line_however_many_set_ups(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three set-ups whose one-rank runs disagree beyond their intervals: one line that counts them."""
    rows = []
    for sid in ("a", "b", "c"):
        for rate, half in ((100.0, 1.0), (200.0, 1.0)):
            rows.append(
                {
                    "status": "ok",
                    "setup_id": sid,
                    "base_setup_id": sid,
                    "world_size": 1,
                    "tokens_per_s_per_device": rate,
                    "tokens_per_s_per_device_ci_low": rate - half,
                    "tokens_per_s_per_device_ci_high": rate + half,
                }
            )
    with caplog.at_level(logging.WARNING):
        add_scaling(pd.DataFrame(rows))
    lines = [r.getMessage() for r in caplog.records if "disagree" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("the one-rank runs of 3 set-ups disagree"), lines


def test_readme_gives_one_count_of_the_unit_tier() -> None:
    """README.md names the unit tier's size once (two figures disagreed)."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert text.count("tests, 2026-12-05") == 0 and "2,939" not in text
    assert json.dumps(text).count("tests; see below") == 1


@pytest.mark.parametrize("gpu", [[], ["plan_gpu="], ["plan_gpu= "], ["plan_gpu=null"]])
def test_a_plan_this_cpu_cannot_hold_names_a_gpu_to_plan_for_before_hydra(gpu: list[str]) -> None:
    """``plan=true model=llama3.1-8b`` with no GPU here and none named (absent, blank, null): the job's
    line, before Hydra, whose fix is ``plan_gpu=H100`` (a plan needs no local device); ``plan_gpu=H100``
    and a model that fits pass."""
    from flopsweep.local_gpus import no_gpu_here

    if not no_gpu_here():
        pytest.skip("a GPU is here: the plan is of it")
    line = refusal(["plan=true", "model=llama3.1-8b", *gpu])
    assert line is not None and line.startswith("Invalid config: model='llama3.1-8b': on the CPU the fp32 ")
    assert line.endswith(
        "Fix: add plan_gpu=H100 or plan_clusters=[H100:8] to plan for GPUs that are not here, or pick a "
        "smaller model (e.g. model=gpt-tiny)."
    )
    assert refusal(["plan=true", "model=llama3.1-8b", "plan_gpu=H100"]) is None
    assert refusal(["plan=true", "model=gpt-tiny"]) is None


def test_a_plan_whose_jobs_a_remote_launcher_runs_is_left_to_the_job() -> None:
    """``-m hydra/launcher=slurm ... plan=true model=llama3.1-8b`` plans on the GPU node Slurm gives, not
    this submit host: the check of this machine's memory before Hydra does not apply (it refused the run,
    "on the CPU ..."); a local launcher keeps it."""
    from flopsweep.local_gpus import no_gpu_here

    if not no_gpu_here():
        pytest.skip("a GPU is here: the plan is of it")
    plan = ["-m", "plan=true", "model=llama3.1-8b", "nproc_per_node=1"]
    for launcher in ("slurm", "slurm_local"):
        line = refusal([*plan, f"hydra/launcher={launcher}", "hydra.launcher.partition=gpu"])
        assert line is None or "on the CPU the fp32" not in line, (launcher, line)
    local = refusal([*plan, "hydra/launcher=basic"])
    assert local is not None and "on the CPU the fp32" in local
