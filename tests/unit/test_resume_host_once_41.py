"""Session 41 (docs/reliability-12.md #920): a CPU sweep run with ``resume=true`` is checked once before any
job for the launch's free host memory over the jobs that will run (those ``resume=true`` does not skip:
:func:`flopsweep.job.resume.skipped_record`), and refused in one line where each of them would be. Real Hydra
compositions of ``conf/`` through Hydra's own config loader, records written as the jobs wrote them; the
machine given as an :class:`flopsweep.plan.Environment` and its free memory in bytes; no rank, no
subprocess."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import config_loader
from hydra.types import HydraContext, RunMode
from omegaconf import OmegaConf, open_dict

from flopsweep.plan import Environment, plan
from hydra_plugins.flopsweep_repeats.once import refusal_line

GIB = 2**30
NO_GPU_HERE = Environment(cpu_count=2, host_memory_bytes=1024 * GIB)
"""A machine without a GPU whose memory every model's states fit (1 TiB): the free memory decides."""
FREE = 22 * GIB
"""What was free on the 24 GiB machine of the trial (``22.0 GiB is free now``)."""
KILLED = {
    "type": "WorkerKilled",
    "message": "rank 0 was killed by SIGKILL (often the kernel's OOM killer: check host memory)",
    "phase": "measure",
}

loader = pytest.fixture(scope="module", name="loader")(config_loader)


def _sweeper(loader, sweep: Path, jobs: list[list[str]]) -> SimpleNamespace:
    """What a sweeper has when it checks: the sweep's config (``resume=true`` into ``sweep``), its batch,
    its Hydra context."""
    master = loader.load_configuration(
        "config", ["device=cpu", "resume=true", f"hydra.sweep.dir={sweep}"], run_mode=RunMode.MULTIRUN
    )
    return SimpleNamespace(
        config=master, overrides=[jobs], hydra_context=HydraContext(config_loader=loader, callbacks=None)
    )


def _record(loader, sweeper, job: list[str], folder: Path, status: str, error: dict | None = None) -> None:
    """The record the job of ``job`` left in ``folder``: its config as the job validated it."""
    cfg = loader.load_sweep_config(sweeper.config, job)
    with open_dict(cfg):
        del cfg["hydra"]
    ran = plan(OmegaConf.to_object(cfg), NO_GPU_HERE).cfg
    record = {"schema_version": 2, "status": status, "run": {"id": "r1"}, "error": error}
    record["config"] = json.loads(json.dumps(dataclasses.asdict(ran)))
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(record))


def _jobs(*models: str) -> list[list[str]]:
    return [[f"model={m}", "device=cpu", "resume=true"] for m in models]


def test_a_resumed_sweep_whose_remaining_jobs_do_not_fit_is_refused_once(loader, tmp_path) -> None:
    """Was: with ``resume=true`` the check was skipped (the ok job 0 is skipped before it), and jobs 1 and 2
    were each refused in a line of their own, exit 0. Now one line, for the two jobs left."""
    jobs = _jobs("gpt-tiny", "gpt-1.3b", "gpt-2.7b")
    sweeper = _sweeper(loader, tmp_path, jobs)
    assert refusal_line(sweeper, NO_GPU_HERE, free=FREE) is None  # job 0 would start
    _record(loader, sweeper, jobs[0], tmp_path / "0", "ok")
    line = refusal_line(sweeper, NO_GPU_HERE, free=FREE)
    assert line is not None and line.startswith("Invalid config: model='gpt-2.7b': on the CPU 1 rank needs")
    assert line.endswith(
        "(each of the sweep's 2 remaining jobs is refused for it; job 2 needs the most). "
        "Fix: pick a smaller model (e.g. model=gpt-tiny)."
    )


def test_the_fix_is_accepted_and_a_sweep_with_nothing_left_is_not_refused(loader, tmp_path) -> None:
    """The line's fix typed back passes; a job SIGKILL ended is skipped too (#921), so a sweep every job
    of which is kept has nothing to refuse; a failed (not killed) job runs again and is checked."""
    jobs = _jobs("gpt-tiny", "gpt-1.3b", "gpt-2.7b")
    sweeper = _sweeper(loader, tmp_path, jobs)
    _record(loader, sweeper, jobs[0], tmp_path / "0", "ok")
    typed = [[*job, "model=gpt-tiny"] for job in jobs]
    assert refusal_line(_sweeper(loader, tmp_path, typed), NO_GPU_HERE, free=FREE) is None
    _record(loader, sweeper, jobs[1], tmp_path / "1", "error", KILLED)
    line = refusal_line(sweeper, NO_GPU_HERE, free=FREE)
    assert line is not None and "(the sweep's one remaining job; job 2 needs the most)" in line
    raised = {"type": "RuntimeError", "message": "boom", "phase": "measure"}
    _record(loader, sweeper, jobs[2], tmp_path / "2", "error", KILLED)
    assert refusal_line(sweeper, NO_GPU_HERE, free=FREE) is None  # every job kept: none to refuse
    (tmp_path / "2" / "metrics.json").unlink()
    (tmp_path / "2").rmdir()
    _record(loader, sweeper, jobs[2], tmp_path / "2", "error", raised)
    assert refusal_line(sweeper, NO_GPU_HERE, free=FREE) is not None  # a failed job runs again: refused
