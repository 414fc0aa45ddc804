"""Session 31's refusals (docs/reliability-4.md, rows 259 on) as a user types them: ``python run.py`` from
an empty folder, exit 2, one line on stderr, and no ``outputs/`` or ``multirun/`` folder made (each came
after Hydra had made one, or not at all). The checks themselves: ``tests/unit/test_prehydra_31.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import checkout_copy, run_py

from flopsweep import hostmem
from flopsweep.local_gpus import no_gpu_here


def _one_line(proc: subprocess.CompletedProcess, starts: str) -> str:
    """The refusal's one line, after its exit status 2 and an empty stdout are checked."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and not proc.stdout.strip(), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert lines[0].startswith(f"flopsweep: Invalid config: {starts}"), lines[0]
    assert " Fix: " in lines[0]
    return lines[0]


@pytest.mark.slow
def test_a_cpu_plan_with_model_overrides_is_refused_before_hydra(tmp_path: Path) -> None:
    """``plan=true model=llama3.1-8b model.n_layer=40`` on a machine with no GPU: the job's line (after
    Hydra made ``outputs/<date>/<time>/``), now before Hydra."""
    host = hostmem.total_bytes()
    if not no_gpu_here() or host is None or host > 140 * 2**30:
        pytest.skip("a GPU is here, or this machine holds the model's 145.7 GiB of states")
    proc = run_py("plan=true", "model=llama3.1-8b", "model.n_layer=40", cwd=tmp_path, timeout=300)
    line = _one_line(
        proc,
        "model=llama3.1-8b with model.n_layer=40: on the CPU the fp32 weights, gradients and AdamW states",
    )
    assert "take at least 145.7 GiB" in line and "Fix: add plan_gpu=H100 or plan_clusters=[H100:8]" in line
    assert not list(tmp_path.iterdir()), sorted(tmp_path.rglob("*"))


@pytest.mark.slow
def test_batch_auto_beside_the_tuners_space_is_refused_before_hydra(tmp_path: Path) -> None:
    """It ran every set-up's search, measured each at the largest micro batch that fit (256 for gpt-tiny
    on the CPU), and named the winner by the micro batch ``space.micro_batches`` gave it, exit 0."""
    proc = run_py(
        "-m",
        "hydra/sweeper=tune",
        "device=cpu",
        "model=gpt-tiny",
        "batch=auto",
        "space.micro_batches=[1,2]",
        cwd=tmp_path,
        timeout=300,
    )
    line = _one_line(proc, "batch=auto: a tuning sweep over space.* gives each set-up its micro batch")
    assert "Fix: drop batch=auto and list the micro batches: space.micro_batches=[1,2,4,8]" in line
    assert not list(tmp_path.iterdir()), sorted(tmp_path.rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "space", "starts"),
    [
        (
            "hydra:\n  sweeper:\n    params:\n      batch.micro_batch_size: 1,2,4\n",
            ("hydra/sweeper=tune", "device=cpu", "model=gpt-tiny", "space.backends=[single]"),
            "batch.micro_batch_size=1,2,4: a tuning sweep over space.* takes it from space.micro_batches",
        ),
        (
            "defaults:\n  - override /backend: ddp\n",
            ("plan=true", "model=gpt-tiny", "plan_clusters=[H100:8]"),
            "backend=ddp: a plan over plan_clusters takes it from space.backends",
        ),
    ],
    ids=["micro-batch-axis-tuner", "backend-pick-plan"],
)
def test_a_sweep_file_setting_a_key_the_space_decides_is_refused_naming_it(
    tmp_path: Path, text: str, space: tuple[str, ...], starts: str
) -> None:
    """A sweep file with no plain value whose pick or axis sets a key the space decides: the tuner refused
    the axis after Hydra made ``multirun/``; the plan ignored the pick, exit 0. The file is planted in a
    copy of the checkout's ``run.py``, ``conf/`` and packages (never in the checkout: the checks read the
    package's ``conf/``), run from an empty folder."""
    src, work = checkout_copy(tmp_path)
    (src / "conf" / "sweep" / "mine-31.yaml").write_text("# @package _global_\n" + text)
    proc = subprocess.run(
        [sys.executable, str(src / "run.py"), "-m", "+sweep=mine-31", *space],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(src)},
    )
    _one_line(proc, f"conf/sweep/mine-31.yaml: {starts}")
    assert not list(work.iterdir()), sorted(work.rglob("*"))  # no multirun/ made
