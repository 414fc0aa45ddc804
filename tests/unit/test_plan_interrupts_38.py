"""Ctrl-C in a plan sweep, session 38 (docs/reliability-8.md #449-#450): a SIGINT that landed in the
job's import of torch or pandas (a plan of ``plan_gpu=H100`` imported both after its job had started) left
the module half-made: the ``KeyboardInterrupt`` was swallowed in C, the sweep ran on, and its table failed
with ``module 'numpy' has no attribute 'matrix'`` (exit 0, that error the last line). And one that landed
in a plan job before its row was written left the sweep's ``multirun.yaml`` and the job's ``0/run.log``
and ``.hydra/`` behind, where the interrupted line said "nothing was written".

Real signals (``signal.raise_signal`` at a function the code calls, as in test_interrupts_37), the real
plan job and the real clean-up; no subprocess."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from flopsweep import unstarted
from flopsweep.checks import validate
from flopsweep.job import JobInfo, job_libraries
from flopsweep.job.lifecycle import planned_job
from flopsweep.job.planoutcome import take_outcome
from flopsweep.job.plantable import PLAN_FILE, complete_records
from tests.unit.test_interrupts_37 import sigint_at

PLAN = ["plan=true", "plan_gpu=H100", "model=gpt-125m", "batch.micro_batch_size=2"]
"""One job of the brief's sweep (``-m plan=true plan_gpu=H100 model=gpt-125m,gpt-350m
batch.micro_batch_size=1,2,4,8``)."""


def test_the_libraries_a_job_imports_are_named_before_it_starts(hydra_compose) -> None:
    """``run.py`` imports these before ``jobs_starting`` (a signal there ends the process, or is held between
    jobs). Was: torch only for a run or a plan of this machine's GPU; a ``plan_gpu`` plan imported torch
    (its placement) and pandas (its table) once started."""
    assert job_libraries(validate(hydra_compose(["device=cpu", "model=gpt-tiny"]))) == ("torch",)
    assert job_libraries(validate(hydra_compose(PLAN))) == ("torch", "pandas")
    assert job_libraries(validate(hydra_compose([*PLAN, "backend=deepspeed"]))) == (
        "torch",
        "pandas",
        "deepspeed",
    )
    clusters = ["plan=true", "plan_clusters=[H100:8]", "model=gpt-125m"]
    assert job_libraries(validate(hydra_compose([*clusters, "space.backends=[fsdp,ddp]"]))) == ()
    assert job_libraries(validate(hydra_compose([*clusters, "space.backends=[fsdp,zero2]"]))) == (
        "deepspeed",
    )


def _first_job(tmp_path: Path, hydra_compose) -> tuple[Path, Path, JobInfo, object]:
    """The sweep's state as its callback and Hydra leave it for job 0: the sweep's ``multirun.yaml``, the
    job's folder with its empty ``run.log``, the clean-up's marks (:mod:`flopsweep.unstarted`)."""
    sweep = tmp_path / "S"
    unstarted.sweep_starting(sweep)
    job_dir = sweep / "0"
    job_dir.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    unstarted.expect(sweep)
    (job_dir / "run.log").write_text("")
    unstarted.job_folder_made(job_dir)
    info = JobInfo(
        job_dir=job_dir,
        overrides=PLAN[1:],
        job_num=0,
        sweep_dir=str(sweep),
        hydra_files={"overrides.yaml": "- plan=true\n"},
    )
    return sweep, job_dir, info, validate(hydra_compose(PLAN))


def test_a_plan_job_stopped_before_its_row_leaves_nothing(tmp_path, hydra_compose) -> None:
    """Was: ``multirun.yaml``, ``0/run.log`` and ``0/.hydra/`` left (the job marked started before it
    planned). Now the job is started by its row: stopped before it, run.py's clean-up removes all of it."""
    sweep, job_dir, info, cfg = _first_job(tmp_path, hydra_compose)
    with pytest.raises(KeyboardInterrupt), sigint_at("flopsweep/job/dryrun.py", "plan_estimate") as fired:
        planned_job(cfg, info, job_dir)
    assert fired
    assert unstarted.remove_unstarted() == job_dir  # what run.py runs on the interrupt
    assert not sweep.exists() and tmp_path.is_dir()


def test_a_plan_job_stopped_as_its_row_is_written_keeps_the_row_and_its_folder(
    tmp_path, hydra_compose
) -> None:
    """The row and the job's start are one step (signals held): an interrupt there comes after both, so the
    row, the job's folder and the sweep's ``multirun.yaml`` stay together."""
    sweep, job_dir, info, cfg = _first_job(tmp_path, hydra_compose)
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), sigint_at("flopsweep/job/plantable.py", "_append_rows") as fired:
        planned_job(cfg, info, job_dir)
    assert fired and signal.getsignal(signal.SIGINT) is before
    assert unstarted.remove_unstarted() is None
    rows = complete_records((sweep / PLAN_FILE).read_text(encoding="utf-8"))[0]
    assert len(rows) == 2 and rows[1][0] == "0"  # the header and job 0's row
    assert (sweep / "multirun.yaml").is_file() and (job_dir / "run.log").is_file()


def test_a_plan_job_not_interrupted_keeps_its_row_folder_and_hydra_files(tmp_path, hydra_compose) -> None:
    sweep, job_dir, info, cfg = _first_job(tmp_path, hydra_compose)
    record = planned_job(cfg, info, job_dir)
    assert record["status"] == "plan" and record["plan"]["status"] == "ok"
    assert take_outcome(job_dir) == "ok"  # the sweep's progress line's word, taken (as the callback does)
    assert unstarted.remove_unstarted() is None
    assert (job_dir / ".hydra" / "overrides.yaml").read_text() == "- plan=true\n"
    assert (sweep / "multirun.yaml").is_file() and (sweep / PLAN_FILE).is_file()
