"""Issue 14, classes 2 and 3: an output directory that turns read-only, or a disk that fills,
during a sweep. Each case ends with one line naming the job, the path and why (and the free
space), the summary and exit status 1; torch's kept worker tracebacks go into the record.

The file systems are real: a small tmpfs per test, made read-only by a read-only bind mount or
filled with zeros (root only; skipped where mounting is not allowed). The moment comes from the
``FLOPSWEEP_TEST_WRITE_PAUSE`` hook, which pauses a job inside its record write, not from a clock.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT, RUN_PY, make_plan

from flopsweep.config import RunConfig, StepsConfig
from flopsweep.files import WRITE_PAUSE_ENV, NotRecorded
from flopsweep.job import JobInfo, run_job
from flopsweep.job.records import measured, recorded
from flopsweep.job.result import JobResult
from flopsweep.launch import launch_local

ONE_RANK = ["device=cpu", "precision=fp32", "steps.warmup=0", "steps.measure=1"]


def _sh(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of its own (unmounted, with any bind mount on it, at the end)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = _sh("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where))
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        if _sh("umount", "-R", str(where)).returncode:
            _sh("umount", "-R", "-l", str(where))


def fill(disk: Path) -> None:
    """Write zeros until the file system says ENOSPC."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def read_only(directory: Path) -> None:
    """Make ``directory`` read-only for every process from now on (files already open stay
    writable, as on an NFS server that turned read-only)."""
    for cmd in (
        ["mount", "--bind", str(directory), str(directory)],
        ["mount", "-o", "remount,bind,ro", str(directory)],
    ):
        done = _sh(*cmd)
        assert done.returncode == 0, done.stderr


def sweep_paused_in_first_record(sweep_dir: Path, act) -> subprocess.CompletedProcess:
    """Run a 3-job one-rank sweep; when job 0 pauses inside its record write, call ``act``."""
    cmd = [sys.executable, RUN_PY, "-m", "seed=0,1,2", *ONE_RANK, f"hydra.sweep.dir={sweep_dir}"]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**os.environ, WRITE_PAUSE_ENV: "10"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while proc.poll() is None and not list(sweep_dir.glob("0/.metrics.json.*.tmp.paused")):
            time.sleep(0.05)  # the hook's marker says when job 0 is inside its write window
        assert proc.poll() is None, proc.communicate()
        act()
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def summary(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("flopsweep summary: "))


@pytest.mark.slow
def test_sweep_dir_turned_read_only_mid_sweep_is_one_line_and_the_summary(disk: Path) -> None:
    """Class 2: the running job cannot be recorded; the sweep stops before Hydra's traceback."""
    sweep = disk / "sweep"
    proc = sweep_paused_in_first_record(sweep, lambda: read_only(sweep))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("flopsweep: ")]
    assert line.startswith(f"flopsweep: job 0 (seed=0 {' '.join(ONE_RANK)}) was not recorded: ")
    assert f"cannot write {sweep / '0' / 'metrics.json'}: Read-only file system" in line
    assert line.endswith(
        f"(it ended ok). Fix: make {sweep / '0'} writable, then re-run the sweep with resume=true "
        "(it keeps the ok records)."
    )
    kept = Path(re.search(r"the whole record is kept in (\S+)", line).group(1))
    assert kept.parent == sweep / "0" and json.loads(kept.read_text())["config"]["seed"] == 0  # nothing lost
    assert summary(proc.stdout).startswith(
        "flopsweep summary: 0 ok, 0 oom, 0 error, 0 invalid, 0 skipped (stopped: job 0 was not recorded)"
    )
    assert not (sweep / "0" / "metrics.json").exists() and not (sweep / "1").exists()


@pytest.mark.slow
def test_full_disk_between_jobs_names_the_free_space_and_prints_the_summary(disk: Path) -> None:
    """Class 3: job 0 is recorded, the disk fills; the sweep stops before the next job's Hydra files."""
    sweep = disk / "sweep"
    proc = sweep_paused_in_first_record(sweep, lambda: fill(disk))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("flopsweep: ")]
    assert re.fullmatch(
        rf"flopsweep: the sweep stopped before its next job: {re.escape(str(sweep))} has (\d+ B|\d+\.\d KiB) "
        rf"free, under the 1\.0 MiB a job needs\. Fix: free space on {re.escape(str(sweep))}, then re-run "
        r"the sweep with resume=true \(it keeps the ok records\)\.",
        line,
    ), line
    assert json.loads((sweep / "0" / "metrics.json").read_text())["status"] == "ok"
    assert summary(proc.stdout).startswith(
        "flopsweep summary: 1 ok, 0 oom, 0 error, 0 invalid, 0 skipped (stopped"
    )
    assert not (sweep / "1").exists()


def test_a_record_on_a_full_disk_is_one_line_with_the_free_space(disk: Path) -> None:
    """Class 3, the record itself: ENOSPC names the job, the path and the free space; nothing is left."""
    fill(disk)
    cfg = RunConfig(device="cpu", steps=StepsConfig(measure=0))  # invalid: recorded without a worker
    with pytest.raises(NotRecorded) as info:
        run_job(cfg, JobInfo(job_dir=disk / "3", overrides=["steps.measure=0"], job_num=3))
    assert str(info.value) == (
        f"job 3 (steps.measure=0) was not recorded: cannot write {disk / '3' / 'metrics.json'}: "
        f"No space left on device, 0 B free on {disk / '3'} (it ended invalid). Fix: free space on "
        f"{disk / '3'}, then re-run the sweep with resume=true (it keeps the ok records)."
    )
    assert list((disk / "3").iterdir()) == []  # no temporary file left behind


@pytest.mark.slow
def test_a_rank_that_cannot_write_keeps_its_traceback_in_the_record(
    disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Class 2: a rank whose directory is full cannot write its error file; torch keeps its
    traceback in ``<tmp>/pytorch-errorfile-*``, which goes into the record and is removed."""
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))  # where torch puts its error files
    fill(disk)
    p = make_plan(RunConfig(device="cpu"))
    outcome = launch_local(p, disk / "job")
    error = outcome.error
    assert outcome.status == "error" and (error["type"], error["rank"], error["phase"]) == (
        "RecordUnwritable",
        0,
        "init",
    )
    assert error["message"].startswith(
        "rank 0 could not write its error file; its last exception: cannot write "
    )
    text = error["traceback_text"]
    assert "Traceback (most recent call last):" in text and "No space left on device" in text
    assert 'phase.enter("init")' in text and "rank0_error.json" in text  # the cause, then the error file
    assert not list(private_tmp.iterdir())  # read, then removed
    run = {"id": "x", "started_at": None, "finished_at": None, "overrides": [], "job_num": None}
    job = JobResult(path=tmp_path / "metrics.json", cfg=p.cfg, run=run, layout=p.layout, outcome=outcome)
    record = recorded(measured(job))
    assert json.loads((tmp_path / "metrics.json").read_text())["error"]["traceback_text"] == text
    assert record["error"]["traceback_text"] == text


def test_a_full_run_directory_is_refused_before_hydra_writes(disk: Path) -> None:
    """Classes 2 and 3 at the start: run.py refuses in one line, and leaves no directory behind."""
    from flopsweep.command_line_checks import output_dir_problem

    run_dir = disk / "run" / "a"
    fill(disk)
    assert output_dir_problem([f"hydra.run.dir={run_dir}"]) == (
        f"Invalid config: hydra.run.dir={run_dir}: cannot write {run_dir}: No space left on device, 0 B free "
        f"on {run_dir}. Fix: free space on {run_dir}, or choose another hydra.run.dir, e.g. "
        f"hydra.run.dir={run_dir}-2."
    )
    assert not (disk / "run").exists()
