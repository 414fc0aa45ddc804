"""Session 36's new-user trial (docs/reliability-6.md #355-#364), as a user types it: a ``hydra.job.name``
that is no plain file name, a log file outside the run's folder, a ``run.log`` link in the run's folder and a
``resume=true`` with the sweep's axes in another order. Each was exit 0 (the log outside the folder, lost,
or the link replaced) or exit 1 after a job ran; now one line, exit 2, no traceback, nothing written or
replaced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import run_py

RUN = ["device=cpu", "steps.measure=1", "steps.warmup=1"]


def _files(folder: Path) -> dict[str, bytes | str]:
    """Every path below ``folder``: a file's bytes, a link's target, a folder's ``/``."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        out[key] = os.readlink(path) if path.is_symlink() else "/" if path.is_dir() else path.read_bytes()
    return out


def _one_line(done) -> str:
    """The refusal's one line, after checking it is exit 2, alone on stderr, with no traceback or output."""
    assert done.returncode == 2, (done.stdout + done.stderr)[-3000:]
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args,name",
    [
        (["hydra.job.name=../esc2"], "../esc2"),
        (["plan=true", "hydra.job.name=../../escape"], "../../escape"),
        (["hydra.job.chdir=true", "hydra.job.name=x/../../y"], "x/../../y"),
        (["hydra.job.name=/tmp/s36-trial-36b/userfile"], "/tmp/s36-trial-36b/userfile"),
    ],
)
def test_a_job_name_with_a_path_is_refused_before_anything_is_made(tmp_path: Path, args, name) -> None:
    """#355/#356: was exit 0, the log at ``<run folder>/../esc2.log`` (or lost), no ``run.log`` in the run's
    folder."""
    run_dir = tmp_path / "a" / "b" / "jn3"
    line = _one_line(run_py(*RUN, *args, f"hydra.run.dir={run_dir}", cwd=tmp_path, timeout=300))
    assert line.startswith(
        f"flopsweep: Invalid config: hydra.job.name={name}: the job's log is <run folder>/"
    )
    assert line.endswith(
        f"Fix: drop the override (the log is run.log), or give a plain name such as "
        f"hydra.job.name={name.rstrip('/').rpartition('/')[2]}."
    )
    assert _files(tmp_path) == {} and not os.path.lexists("/tmp/s36-trial-36b")


def test_a_log_file_outside_the_run_folder_is_refused(tmp_path: Path) -> None:
    """#358: ``hydra.job_logging.handlers.file.filename=/tmp/abs.log`` was exit 0, the log written there."""
    key, log = "hydra.job_logging.handlers.file.filename", tmp_path / "abs.log"
    done = run_py(*RUN, f"{key}={log}", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path, timeout=300)
    assert _one_line(done) == (
        f"flopsweep: Invalid config: {key}={log}: the job's log would be written outside the run's folder "
        "(hydra.run.dir), where no resume, cleanup or reader of the run finds it. Fix: drop the override "
        f"(the log is the folder's run.log), or name a file in it: {key}=${{hydra.runtime.output_dir}}/"
        "abs.log."
    )
    assert _files(tmp_path) == {}


def test_a_run_log_link_in_the_run_folder_is_refused_and_kept(tmp_path: Path) -> None:
    """#361: ``mkdir ex4 && ln -s victim.txt ex4/run.log; flopsweep ... hydra.run.dir=ex4`` was exit 0, the
    link replaced by a regular ``run.log``."""
    (tmp_path / "victim.txt").write_text("precious")
    (tmp_path / "ex4").mkdir()
    (tmp_path / "ex4" / "run.log").symlink_to(tmp_path / "victim.txt")
    before = _files(tmp_path)
    line = _one_line(run_py(*RUN, "hydra.run.dir=ex4", cwd=tmp_path, timeout=300))
    assert line == (
        "flopsweep: hydra.run.dir=ex4: ex4/run.log is a symbolic link, not the job's log; a job never "
        "writes through its log's path nor replaces what is there. Fix: remove ex4/run.log if it is yours, "
        "or choose another hydra.run.dir, e.g. hydra.run.dir=ex4-2"
    )
    assert _files(tmp_path) == before


@pytest.mark.slow
def test_a_plain_job_name_logs_into_the_run_folder(tmp_path: Path) -> None:
    """#355's fix: ``hydra.job.name=esc2`` runs, its log ``jn3/esc2.log``, nothing outside ``jn3``."""
    done = run_py(*RUN, "hydra.job.name=esc2", "hydra.run.dir=jn3", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ok:" in (tmp_path / "jn3" / "esc2.log").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jn3"]


@pytest.mark.slow
def test_a_resume_with_the_axes_in_another_order_is_refused_before_multirun_yaml_is_rewritten(
    tmp_path: Path,
) -> None:
    """#363: job 0 was skipped, then job 1 refused as "the record of another sweep or run", exit 1, and
    ``multirun.yaml`` rewritten in the new order. Now one line naming the sweep's own order, nothing written;
    that order resumes (jobs 2 and 3 re-run)."""
    sweep = tmp_path / "D"
    first = run_py("-m", "backend=ddp,fsdp", "seed=0,1", *RUN, f"hydra.sweep.dir={sweep}", timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    for job in ("2", "3"):
        (sweep / job / "metrics.json").unlink()
    before = _files(tmp_path)
    again = run_py("-m", "seed=0,1", "backend=ddp,fsdp", *RUN, f"hydra.sweep.dir={sweep}", "resume=true")
    assert _one_line(again) == (
        f"flopsweep: {sweep / 'multirun.yaml'} is this sweep's, with its axes in another order "
        "(backend=ddp,fsdp seed=0,1 there, seed=0,1 backend=ddp,fsdp here); resume=true would number its "
        "jobs differently and meet each record under another job's number. Fix: resume with the sweep's "
        "own order: backend=ddp,fsdp seed=0,1"
    )
    assert _files(tmp_path) == before
    fixed = run_py("-m", "backend=ddp,fsdp", "seed=0,1", *RUN, f"hydra.sweep.dir={sweep}", "resume=true")
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert "2 ok, 0 oom, 0 error, 0 invalid, 2 skipped" in fixed.stdout + fixed.stderr
