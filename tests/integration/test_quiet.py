"""Issue 15, quiet by default: each message of a real (small) run or sweep is printed once, DeepSpeed's
build chatter is debug output, a ``fail_fast`` stop carries no Hydra hint, and the sweep progress
draws a bar on a terminal and stays a plain line elsewhere.

The end-to-end tests run ``python run.py`` as a user would and count lines in what it printed.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from helpers import RUN_PY, on_a_terminal, records, run_py

ONE_RANK = ["device=cpu", "precision=fp32", "steps.warmup=1", "steps.measure=1"]


DEEPSPEED = ["backend=deepspeed", "nproc_per_node=2", *ONE_RANK]


BUILT = "built successfully"  # DeepSpeed's print() from deepspeed.comm.torch.build_shm_op


INVALID = "Invalid config: batch.global_batch_size=3"  # refused in the job: no multiple of the micro batch


CPU_ACCELERATOR = "Setting accelerator to CPU."  # DeepSpeed's real_accelerator on a machine without GPUs


@pytest.fixture(scope="module")
def deepspeed_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Two jobs: a global batch of 3 (refused by the job's validation, no worker), then ZeRO-1 on two
    gloo ranks."""
    sweep_dir = tmp_path_factory.mktemp("quiet")
    proc = run_py(
        "-m",
        *DEEPSPEED,
        "backend.zero_stage=1",
        "batch.global_batch_size=3,null",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sweep_dir, proc.stdout + proc.stderr


@pytest.mark.slow
def test_deepspeed_build_chatter_is_not_printed(deepspeed_sweep: tuple[Path, str]) -> None:
    sweep_dir, output = deepspeed_sweep
    assert [r["status"] for r in records(sweep_dir)] == ["invalid", "ok"]
    assert output.count(BUILT) == 0, output[-3000:]
    assert output.count(CPU_ACCELERATOR) == 0, output[-3000:]  # the job process's import deepspeed


@pytest.mark.slow
def test_sweep_prints_summary_progress_and_invalid_once(deepspeed_sweep: tuple[Path, str]) -> None:
    sweep_dir, output = deepspeed_sweep
    assert output.count("flopsweep summary: ") == 1
    assert f"flopsweep summary: 1 ok, 0 oom, 0 error, 1 invalid, 0 skipped ({sweep_dir})" in output
    assert output.count(INVALID) == 1, output
    assert output.count("flopsweep: 1 of 2 jobs done (job 0): invalid, ") == 1
    assert output.count("flopsweep: 2 of 2 jobs done (job 1): ok, ") == 1
    assert "█" not in output  # captured output is not a terminal: plain lines, no bar
    # The launched job logs its warm-up step with the step time, once (rank 0 only).
    assert len(re.findall(r"\[flopsweep rank 0\] warm-up step 1/1: \d+\.\d{3} s\n", output)) == 1
    assert output.count("[flopsweep rank 1]") == 0


@pytest.mark.slow
def test_verbose_sweep_shows_deepspeed_chatter_and_one_summary(tmp_path: Path) -> None:
    """``hydra.verbose=flopsweep``: the ranks' debug lines (DeepSpeed's, once per rank), one summary."""
    proc = run_py(
        "-m", *DEEPSPEED, "backend.zero_stage=1", "hydra.verbose=flopsweep", f"hydra.sweep.dir={tmp_path}"
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    for rank in (0, 1):
        assert output.count(f"[flopsweep rank {rank}] DeepSpeed ") == 1, output[-3000:]
    assert output.count(BUILT) == 2
    assert output.count("flopsweep summary: ") == 1


@pytest.mark.slow
def test_fail_fast_prints_the_error_once_and_no_hydra_hint(tmp_path: Path) -> None:
    proc = run_py(
        "-m",
        "fault.kind=raise,none",
        "fault.phase=warmup",
        "fail_fast=true",
        *ONE_RANK,
        f"hydra.sweep.dir={tmp_path}",
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert output.count("injected fault: raise on rank 0 in warmup") == 1, output
    assert "HYDRA_FULL_ERROR" not in output and "Error executing job" not in output
    assert proc.stderr.count("fail_fast=true stopped the sweep") == 1
    assert (
        f"flopsweep: fail_fast=true stopped the sweep after job 0 (error, recorded in {tmp_path / '0'})"
        in (proc.stderr)
    )
    assert proc.stdout.count("flopsweep summary: ") == 1
    assert (
        "flopsweep summary: 0 ok, 0 oom, 1 error, 0 invalid, 0 skipped (stopped early by fail_fast)" in output
    )
    assert not (tmp_path / "1").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "message", "code"),
    [
        (["backend=deepspeed", "batch.global_batch_size=3", "device=cpu"], INVALID, 2),
        (
            ["fault.kind=raise", "fault.phase=measure", *ONE_RANK],
            "injected fault: raise on rank 0 in measure",
            1,
        ),
    ],
    ids=["invalid", "error"],
)
def test_single_run_failure_is_printed_once(
    tmp_path: Path, overrides: list[str], message: str, code: int
) -> None:
    proc = run_py(*overrides, f"hydra.run.dir={tmp_path}", timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == code, output[-3000:]
    assert output.count(message) == 1, output
    assert proc.stderr.strip().splitlines()[-1].startswith("flopsweep: ") and message in proc.stderr
    if code == 2:  # a refusal is the one line alone, and a single run's writes nothing (session 43)
        assert not (tmp_path / "metrics.json").exists() and not (tmp_path / ".hydra").exists()
        return
    record = json.loads((tmp_path / "metrics.json").read_text())  # a failure's record is written all the same
    assert record["status"] == "error" and f"-> {tmp_path / 'metrics.json'}" in output  # its log names it


@pytest.mark.slow
def test_sweep_on_a_terminal_draws_the_bar(tmp_path: Path) -> None:
    """A real sweep (plan=true: no worker starts) with its output on a pseudo-terminal; each line says the
    plan job's outcome (``ok``) before the bar."""
    argv = [
        sys.executable,
        RUN_PY,
        "-m",
        "seed=1,2",
        "device=cpu",
        "plan=true",
        f"hydra.sweep.dir={tmp_path}",
    ]
    code, output = on_a_terminal(argv, env={**os.environ, "TERM": "xterm"})
    assert code == 0
    assert re.search(
        r"flopsweep: 1 of 2 jobs done \(job 0\): ok \|█{10} {10}\| \d+:\d\d elapsed, about ", output
    ), output
    last = r"flopsweep: 2 of 2 jobs done \(job 1\): ok \|█{20}\| \d+:\d\d elapsed, about 0:00 left"
    assert re.search(last, output), output


def test_a_plan_over_clusters_with_zero_prints_no_deepspeed_accelerator_line(tmp_path: Path) -> None:
    """Session 38: a plan over clusters whose space has a ZeRO backend imports DeepSpeed before its job
    starts (``job.placement.job_libraries``, for Ctrl-C); the known line is dropped there too (it reached
    ``benchmarks/plan/llama3.1-8b.md``'s table, whose check caught it)."""
    proc = run_py(
        "plan=true",
        "model=llama3.1-8b",
        "plan_clusters=[H100:1x8]",
        "space.backends=[zero3]",
        f"hydra.run.dir={tmp_path / 'plan'}",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert CPU_ACCELERATOR not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    assert "H100:1x8" in proc.stdout  # the plan's table was printed
