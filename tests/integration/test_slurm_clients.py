"""Slurm clients against hostile peers (issue 30, class 8): fake ``sbatch``, ``squeue``, ``sinfo`` and
``scancel`` executables on PATH, written by each test, that never answer, always fail, or answer
what is no job state. The code under test (flopsweep.cluster, the launcher plug-in) is real; only
the cluster it talks to is a small shell script."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from helpers import run_py
from submitit.slurm.slurm import SlurmJob

from flopsweep import cluster


def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **scripts: str) -> Path:
    """Executables named after ``scripts``' keys, first on PATH; the call deadline is 2 s."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = folder / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(cluster.TIMEOUT_ENV, "2")
    return folder


SCANCEL = 'echo "$@" >> "$(dirname "$0")/cancelled.txt"'
"""A scancel that notes the job ids it was asked to cancel."""


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _watch(tmp_path: Path) -> tuple[cluster.JobWatch, _Clock, list[str]]:
    job = SlurmJob(folder=tmp_path / "%j", job_id="7_0", tasks=(0,))
    clock, lines = _Clock(), []
    watch = cluster.JobWatch(
        [(0, job)], cluster.SlurmStates(), show=lines.append, clock=lambda: clock.now, sleep=clock.sleep
    )
    return watch, clock, lines


def test_a_queue_command_that_never_answers_is_stopped_at_its_deadline(tmp_path, monkeypatch) -> None:
    fake_bin(tmp_path, monkeypatch, squeue="exec sleep 600", sacct="exec sleep 600")
    assert cluster.SlurmStates()(["7_0"]) is None  # the job's state is unknown, not "gone"


def test_a_queue_that_always_fails_is_asked_a_bounded_number_of_times_then_the_job_is_cancelled(
    tmp_path, monkeypatch
) -> None:
    folder = fake_bin(
        tmp_path,
        monkeypatch,
        squeue='echo "squeue: error: Unable to contact slurm controller" >&2; exit 1',
        scancel=SCANCEL,
    )
    watch, clock, lines = _watch(tmp_path)
    (watched,) = watch.wait()
    assert watched.outcome == "lost" and watched.unknown_looks == cluster.UNANSWERED_LOOKS
    assert (folder / "cancelled.txt").read_text().split() == ["7_0"]
    assert "no usable answer 20 times in a row" in cluster.lost_message(watched)
    assert "flopsweep cancelled it" in cluster.lost_message(watched)
    assert "flopsweep: job #0 (id 7_0): cancelled" in lines


@pytest.mark.parametrize(
    ("answer", "unknown"),
    [("echo 'slurm_load_jobs: Zero Bytes were transmitted or received'", True), ("true", False)],
    ids=["garbage", "empty"],
)
def test_a_queue_answer_that_lists_no_job_is_unknown_and_a_job_recorded_lost_is_cancelled(
    tmp_path, monkeypatch, answer: str, unknown: bool
) -> None:
    """Garbage on stdout is no answer at all; an empty answer lists no job: only after
    MISSING_LOOKS such looks and the grace time is the job lost, and it is cancelled first."""
    folder = fake_bin(tmp_path, monkeypatch, squeue=answer, sacct="exit 1", scancel=SCANCEL)
    assert (cluster.SlurmStates()(["7_0"]) is None) is unknown
    watch, clock, _ = _watch(tmp_path)
    (watched,) = watch.wait()
    assert watched.outcome == "lost" and watched.cancelled == "cancelled"
    assert watched.unknown_looks >= (cluster.UNANSWERED_LOOKS if unknown else cluster.MISSING_LOOKS)
    assert (folder / "cancelled.txt").read_text().split() == ["7_0"]


def test_a_failing_scancel_is_named_in_the_record(tmp_path, monkeypatch) -> None:
    fake_bin(tmp_path, monkeypatch, squeue="true", sacct="exit 1", scancel="exec sleep 600")
    watch, _, _ = _watch(tmp_path)
    (watched,) = watch.wait()
    assert "cancelling it failed (scancel did not answer within 2 s)" in cluster.lost_message(watched)


@pytest.mark.slow
def test_an_sbatch_that_never_answers_stops_the_sweep_in_one_line(tmp_path, monkeypatch) -> None:
    node = "echo 'vm|debug*|4|8000|(null)'"
    fake_bin(tmp_path, monkeypatch, sinfo=node, sbatch="exec sleep 600", squeue="exit 1", srun="exit 0")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    proc = run_py(
        "-m",
        "hydra/launcher=slurm",
        "device=cpu",
        "nproc_per_node=2",
        "backend=ddp",
        "hydra.launcher.cpus_per_task=1",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    (line,) = [x for x in proc.stderr.splitlines() if "sbatch" in x]
    assert "sbatch did not answer within 2 s" in line and "Fix: " in line
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_the_wheel_ships_the_plugin_in_the_namespace_package(tmp_path) -> None:
    """``pip install`` installs hydra_plugins.flopsweep_slurm and its configs, and no
    ``hydra_plugins/__init__.py`` (that would hide every other Hydra plugin). Built from a copy."""
    import shutil
    import subprocess
    import sys
    import zipfile

    from helpers import ROOT

    src = tmp_path / "src"
    for name in ("pyproject.toml", "README.md"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, src / name)
    for name in ("flopsweep", "analysis", "hydra_plugins"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", ".", "-w", "dist"],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (src / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "hydra_plugins/__init__.py" not in names
    assert {
        "hydra_plugins/flopsweep_slurm/__init__.py",
        "hydra_plugins/flopsweep_slurm/conf/hydra/launcher/slurm.yaml",
        "hydra_plugins/flopsweep_slurm/conf/hydra/launcher/slurm_local.yaml",
    } <= names


@pytest.mark.slow
def test_an_app_without_the_launcher_keys_is_refused_in_one_line(tmp_path) -> None:
    import subprocess
    import sys

    from helpers import ROOT

    app = tmp_path / "app.py"
    app.write_text(
        "import hydra\n\n@hydra.main(version_base='1.3', config_path=None, config_name=None)\n"
        "def main(cfg):\n    print('ran')\n\nmain()\n"
    )
    proc = subprocess.run(
        [sys.executable, str(app), "-m", "hydra/launcher=slurm_local", "+x=1,2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "the app config has no nproc_per_node, nnodes, device" in line and "Fix: " in line
    assert "ran" not in proc.stdout


@pytest.mark.slow
def test_slurm_local_runs_one_job_at_a_time(tmp_path) -> None:
    from helpers import records

    proc = run_py(
        "-m",
        "hydra/launcher=slurm_local",
        "device=cpu",
        "nproc_per_node=2",
        "precision=fp32",
        "steps.warmup=1",
        "steps.measure=2",
        "backend=ddp,fsdp",
        "timeout_s=280",  # a job's own deadline, far above its ~10 s: a loaded machine is not a failure
        f"hydra.sweep.dir={tmp_path}",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = sorted(records(tmp_path), key=lambda r: r["run"]["job_num"])
    assert first["status"] == second["status"] == "ok", (first["error"], second["error"])
    assert first["run"]["finished_at"] <= second["run"]["started_at"]  # the second began after the first
