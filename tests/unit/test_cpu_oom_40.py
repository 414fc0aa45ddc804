"""A CPU job the OOM killer ended: one estimate with one margin, and no later round of it (session 40).

Reliability rows 810-812 (docs/reliability-11.md): gpt-1.3b (``backend=single``, full checkpointing,
bf16, micro batch 1) was estimated at 19.7 GiB against ~21 GiB free, launched, and was killed by
SIGKILL after about 4 minutes in round 0 and again in round 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopsweep import hostmem
from flopsweep.config import ConfigError
from flopsweep.job.killed_rounds import ERROR_TYPE, killed_round_line

GIB = 2**30
ONE_3B = [
    "model=gpt-1.3b",
    "backend=single",
    "activation_checkpointing=full",
    "precision=bf16",
    "batch.micro_batch_size=1",
    "device=cpu",
]


def _plan(hydra_compose, overrides):
    from flopsweep.plan import Environment, plan

    host = Environment(cpu_count=2, host_memory_bytes=24 * GIB)
    return plan(hydra_compose(overrides), host)


def test_the_margin_covers_the_runs_measured_on_this_cpu_and_the_killed_one() -> None:
    """Row 811: the margin's line is above each measured peak RSS (gpt-125m, gpt-350m at seq_len 512),
    and puts the 19.7 GiB estimate of gpt-1.3b above the ~21 GiB free that the OOM killer ended it in."""
    for estimate, rss in ((1.8753, 2.5615), (5.2802, 6.2414)):
        assert rss * GIB <= hostmem.cpu_need_bytes(estimate * GIB, 1) <= 1.1 * rss * GIB
    assert hostmem.cpu_need_bytes(19.7 * GIB, 1) > 21 * GIB
    assert hostmem.cpu_need_bytes(1 * GIB, 2) == 2 * hostmem.cpu_need_bytes(1 * GIB, 1)


@pytest.mark.parametrize("free_gib", [0.5, 3.0, 21.0, 100.0])
@pytest.mark.parametrize("nproc", [1, 2, 8])
def test_the_tuners_and_searchs_allowance_is_the_launchs_need_inverted(free_gib: float, nproc: int) -> None:
    """Row 810: the per-rank estimate the tuner and the CPU search allow (``cpu_peak_allowed``) is the
    largest whose launch need (``cpu_need_bytes``) fits the same free memory."""
    free = int(free_gib * GIB)
    allowed = hostmem.cpu_peak_allowed(free, nproc)
    if allowed:
        assert hostmem.cpu_need_bytes(allowed, nproc) <= free
    assert hostmem.cpu_need_bytes(allowed + 2**20, nproc) > free


def test_the_1_3b_job_within_a_few_percent_of_the_free_memory_is_refused_by_the_plans_figure(
    hydra_compose,
) -> None:
    """Rows 810-811: the launch check refuses gpt-1.3b at 21 GiB free (it had launched at 19.7 GiB), by
    plan=true's est_peak_gib_per_rank with the margin; its fix names no micro batch below 1, and the
    fix it gives (model=gpt-tiny) is itself accepted by the same check."""
    from flopsweep.job import check_free_host_memory, plan_estimate
    from flopsweep.memory import peak_bytes
    from flopsweep.plan import Environment
    from flopsweep.text import significant

    p = _plan(hydra_compose, ONE_3B)
    per_rank = peak_bytes(p.cfg, p.layout)
    shown = plan_estimate(p, Environment(cpu_count=2, host_memory_bytes=24 * GIB), placed=False)
    assert shown["est_peak_gib_per_rank"] == significant(per_rank / GIB) == "19.7"
    assert per_rank < 21 * GIB  # before: launched (need = the estimate)
    no_gpu = Environment(cpu_count=2, host_memory_bytes=24 * GIB)
    with pytest.raises(ConfigError) as err:
        check_free_host_memory(p, free=21 * GIB, overrides=ONE_3B, cores=2, env=no_gpu)
    line = str(err.value)
    assert "\n" not in line and err.value.key == "model"
    assert "needs about 22.2 GiB" in line and "19.7 x 1.1 + 0.6 GiB per rank" in line
    assert "micro_batch_size" not in line.partition("Fix:")[2]
    assert "model=gpt-tiny" in line
    fixed = _plan(hydra_compose, [o for o in ONE_3B if not o.startswith("model=")] + ["model=gpt-tiny"])
    assert check_free_host_memory(fixed, free=21 * GIB, overrides=ONE_3B, cores=2, env=no_gpu) is None
    assert check_free_host_memory(p, free=23 * GIB, overrides=ONE_3B, cores=2, env=no_gpu) is None


def _record(folder: Path, config: dict, error: dict | None, status: str = "error") -> Path:
    folder.mkdir(parents=True)
    path = folder / "metrics.json"
    path.write_text(json.dumps({"schema_version": 2, "status": status, "config": config, "error": error}))
    return path


KILLED = {
    "type": "WorkerKilled",
    "message": "rank 0 was killed by SIGKILL (often the kernel's OOM killer: check host memory)",
    "phase": "warmup",
}


def _config(hydra_compose, overrides, repeat: int) -> dict:
    import dataclasses

    cfg = hydra_compose([*overrides, f"repeat={repeat}"])
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def test_a_set_up_sigkill_ended_is_not_run_again_by_its_later_rounds(hydra_compose, tmp_path: Path) -> None:
    """Row 812: round 1 and 2 of a set-up whose round 0 was killed by SIGKILL get one line naming the
    record; round 0 itself, another set-up, a fault the run injected, an ``oom`` and a single run
    (no sweep folder) are run."""
    killed = _config(hydra_compose, ONE_3B, 0)
    _record(tmp_path / "0", killed, KILLED)
    other = _config(hydra_compose, [*ONE_3B[:-2], "batch.micro_batch_size=2", "device=cpu"], 0)
    _record(tmp_path / "1", other, {**KILLED, "type": "OutOfMemoryError"}, status="oom")
    for repeat in (1, 2):
        line = killed_round_line(_config(hydra_compose, ONE_3B, repeat), tmp_path)
        assert line is not None and "\n" not in line
        assert line.startswith(f"round {repeat} of this set-up is not run: in round 0 (")
        assert str(tmp_path / "0" / "metrics.json") in line and "Fix: " in line
    assert killed_round_line(_config(hydra_compose, ONE_3B, 0), tmp_path) is None
    assert killed_round_line(_config(hydra_compose, ONE_3B, 1), None) is None
    second = [*ONE_3B[:-2], "batch.micro_batch_size=2", "device=cpu"]
    assert killed_round_line(_config(hydra_compose, second, 1), tmp_path) is None  # its round 0: oom
    injected = tmp_path / "injected"
    _record(injected / "0", {**killed, "fault": {"kind": "kill", "rank": 0}}, KILLED)
    assert killed_round_line(_config(hydra_compose, ONE_3B, 1), injected) is None


def test_the_later_round_is_recorded_invalid_before_any_worker_starts(hydra_compose, tmp_path: Path) -> None:
    """Row 812, through the job's own steps (:func:`flopsweep.job.lifecycle.planned`, which
    :func:`~flopsweep.job.lifecycle.run_job` calls before any worker): round 1 of the killed set-up
    ends ``invalid``, error :data:`ERROR_TYPE`, phase ``config``, with the one line, never launched;
    round 0 of it is ready to launch."""
    from flopsweep.job.lifecycle import planned
    from flopsweep.job.result import JobInfo, JobResult

    tiny = ["model=gpt-tiny", "device=cpu", "steps.warmup=1", "steps.measure=1", "repeats=3"]
    import dataclasses

    from flopsweep.plan import Environment, plan

    ran = plan(hydra_compose([*tiny, "repeat=0"]), Environment.detect()).cfg  # as its record keeps it
    _record(tmp_path / "0", json.loads(json.dumps(dataclasses.asdict(ran))), KILLED)
    for repeat, status in ((1, "invalid"), (0, None)):
        overrides = [*tiny, f"repeat={repeat}"]
        cfg = hydra_compose(overrides)
        job = JobResult(path=tmp_path / f"r{repeat}" / "metrics.json", cfg=cfg, run={})
        info = JobInfo(job_dir=tmp_path / f"r{repeat}", overrides=overrides, sweep_dir=str(tmp_path))
        assert planned(job, info) is None
        assert job.status == status
        if status:
            assert job.error["type"] == ERROR_TYPE and job.error["phase"] == "config", job.error
            assert job.error["message"].startswith("round 1 of this set-up is not run: in round 0 (")
            assert job.layout is None  # never launched
        else:
            assert job.layout is not None


def test_the_tuner_prunes_the_1_3b_set_up_at_21_gib_free_with_no_headroom(hydra_compose, monkeypatch) -> None:
    """Row 810: the tuner's cap on the CPU (``Judging.capacity``) is the launch's need inverted, so at
    21 GiB free and ``space.min_headroom=0`` its judge (``plan_assess.assess``) prunes gpt-1.3b at micro
    batch 1 as ``over memory`` (it had kept it at 19.65 GiB of 21); at 23 GiB free it keeps it."""
    from types import SimpleNamespace

    from flopsweep.plan import Environment
    from flopsweep.plan_assess import Machine, assess
    from hydra_plugins.flopsweep_tune.judging import Judging

    host = Environment(cpu_count=2, host_memory_bytes=24 * GIB)
    judging = SimpleNamespace(s=SimpleNamespace(memory_gib=None), gpus=None)
    for free_gib, status in ((21, "over memory"), (23, "no prediction")):
        monkeypatch.setattr(hostmem, "available_bytes", lambda free_gib=free_gib: free_gib * GIB)
        capacity = Judging.capacity(judging, host, 1)
        assert capacity[0] == hostmem.cpu_peak_allowed(free_gib * GIB, 1)
        where = Machine(label="here", nnodes=1, gpus_per_node=1, device_name=None, capacity=capacity)
        row, _ = assess(
            hydra_compose(ONE_3B), host, where, choices=None, setup=None, overrides=ONE_3B, min_headroom=0.0
        )
        assert row.status == status, row.reason
