"""The host-memory refusals' fixes say ``drop device=cpu`` only where ``device=cpu`` was given, and each fix
typed back is accepted (docs/reliability-14.md rows 1033 and 1034).

Was: the offload refusal said ``add plan=true and drop device=cpu and set plan_gpu=NAME`` of a command that
never typed ``device=cpu`` (``device=auto`` resolved to the CPU), and a CPU plan's states refusal of a command
that did type it said ``add plan_gpu=H100``, which ``device=cpu plan_gpu=H100`` then refused.
"""

from __future__ import annotations

import pytest

from flopsweep.config import ConfigError
from flopsweep.job import JobInfo
from flopsweep.job.dryrun import plan_job
from flopsweep.plan import Environment, plan, states_error

HOST = Environment(cpu_count=2, host_memory_bytes=int(23.5 * 2**30))
"""A machine without GPUs whose processes may use 23.5 GiB (the project's 2-core machine)."""

OFFLOAD = ["model=llama3.1-70b", "backend=fsdp", "backend.cpu_offload=true", "nproc_per_node=2"]


def _refused(hydra_compose, overrides: list[str]) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        plan(hydra_compose(overrides), HOST)
    return refused.value


def _planned_row(hydra_compose, overrides: list[str], tmp_path) -> dict:
    return plan_job(hydra_compose(overrides), JobInfo(job_dir=tmp_path, overrides=overrides))["plan"]


def test_the_offload_fix_without_device_cpu_sets_plan_gpu_and_is_accepted(hydra_compose, tmp_path) -> None:
    error = _refused(hydra_compose, OFFLOAD)
    assert error.key == "backend.cpu_offload" and "device=cpu" not in error.fix
    assert error.fix.endswith(
        "add plan=true and set plan_gpu=NAME (e.g. set plan_gpu=H100; offloading on the CPU moves the states "
        "nowhere)"
    )
    row = _planned_row(hydra_compose, [*OFFLOAD, "plan=true", "plan_gpu=H100"], tmp_path)  # typed back
    assert row["status"] == "ok" and row["world_size"] == 2, row["reason"]


def test_the_offload_fix_with_device_cpu_drops_it_and_is_accepted(hydra_compose, tmp_path) -> None:
    error = _refused(hydra_compose, [*OFFLOAD, "device=cpu"])
    assert (
        "add plan=true and drop device=cpu and set plan_gpu=NAME (e.g. drop device=cpu and set" in error.fix
    )
    row = _planned_row(
        hydra_compose, [*OFFLOAD, "plan=true", "plan_gpu=H100"], tmp_path
    )  # device=cpu dropped
    assert row["status"] == "ok", row["reason"]


def test_a_cpu_plan_s_states_fix_drops_device_cpu_where_given_and_is_accepted(
    hydra_compose, tmp_path
) -> None:
    given = ["plan=true", "model=llama3.1-8b", "device=cpu"]
    error = _refused(hydra_compose, given)
    assert error.key == "model" and error.fix.startswith(
        "drop device=cpu and add plan_gpu=H100 or plan_clusters=[H100:8] to plan for GPUs that are not here"
    )
    with pytest.raises(ConfigError, match="drop device=cpu"):  # why: plan_gpu beside device=cpu is refused
        plan(hydra_compose([*given, "plan_gpu=H100"]), HOST)
    row = _planned_row(hydra_compose, ["plan=true", "model=llama3.1-8b", "plan_gpu=H100"], tmp_path)
    assert row["status"] == "ok", row["reason"]
    plain = _refused(hydra_compose, given[:2])  # device not given: as before
    assert plain.fix.startswith("add plan_gpu=H100 or plan_clusters=[H100:8]")


def test_the_states_fix_names_device_cpu_only_for_a_plan_that_gave_it() -> None:
    need, host = 120 * 2**30, 23 * 2**30
    given = states_error("llama3.1-8b", need, 1, host, plan=True, shard=False, device_given="cpu")
    auto = states_error("llama3.1-8b", need, 1, host, plan=True, shard=False)
    run = states_error("llama3.1-8b", need, 1, host, plan=False, shard=False, gpu=False, device_given="cpu")
    assert given.fix == f"drop device=cpu and {auto.fix}"
    assert run.fix == "pick a smaller model (e.g. model=gpt-tiny)"  # a run's fix: no plan_gpu to drop it for
