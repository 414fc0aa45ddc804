"""The session-29 new-user trial (docs/reliability-3.md, rows 223 on): command lines whose refusal told a
fix that was itself refused, or named Hydra's objects instead of the value typed. No process starts here;
``run.refusal`` is the line ``run.py`` prints before Hydra (exit 2)."""

from __future__ import annotations

import pytest

from run import refusal


@pytest.mark.parametrize(
    "given, fixed",
    [
        (["plan_clusters=H100:8,H200:8"], "plan_clusters=[H100:8,H200:8]"),
        (["plan_clusters=[H100:8]", "space.layouts=dp,tp2"], "space.layouts=[dp,tp2]"),
        (["plan_clusters=[H100:8]", "space.micro_batches=range(1,4)"], "space.micro_batches=[1,2,3]"),
        (["plan_clusters=[H100:8]", "space.micro_batches=[range(1,4)]"], "space.micro_batches=[1,2,3]"),
        (["plan_clusters=[H100:8]", "space.micro_batches=[1,range(2,4)]"], "space.micro_batches=[1,2,3]"),
    ],
)
@pytest.mark.parametrize("multirun", [True, False])
def test_a_sweep_of_a_list_keys_elements_is_told_the_one_list(given, fixed, multirun):
    """Session 29's trial: ``plan=true space.layouts=dp,tp2`` was told to add ``-m``, whose jobs were each
    refused as "'dp': is one value, not a list"; ``-m ... space.micro_batches=range(1,4)`` was told
    ``space.micro_batches=[1]`` (2 and 3 dropped); ``[range(1,4)]`` named ``RangeSweep(tags=set(), ...)``.
    Now one line with the one list of every value, and that fix passes; a sweep of lists stays a sweep."""
    m = ["-m"] if multirun else []
    line = refusal([*m, "plan=true", *given])
    typed = given[-1]
    assert line is not None and line.startswith(f"Invalid config: {typed}: ")
    assert f"Fix: write one list: {fixed} (several lists, one job each: -m '" in line
    assert refusal([*m, "plan=true", *given[:-1], fixed]) is None
    assert refusal(["-m", "plan=true", "plan_clusters=[H100:8],[H200:8]"]) is None


def test_a_tuner_sweep_over_its_space_is_told_the_one_list():
    """``-m hydra/sweeper=tune space.micro_batches=range(1,4)``: was ``space.micro_batches=1: is one value``
    (2 and 3 dropped)."""
    line = refusal(["-m", "hydra/sweeper=tune", "device=cpu", "space.micro_batches=range(1,4)"])
    assert line is not None
    assert "Fix: write one list: space.micro_batches=[1,2,3]" in line
    assert refusal(["-m", "hydra/sweeper=tune", "device=cpu", "space.micro_batches=[1,2,3]"]) is None


@pytest.mark.parametrize(
    "given, twice, once",
    [
        ("seed=1,1", "1", "seed=1"),
        ("seed=1,2,1", "1", "seed=1,2"),
        ("tag=a,a", "a", "tag=a"),
        ("model=gpt-tiny,gpt-tiny", "gpt-tiny", "model=gpt-tiny"),
        ("backend=zero1,zero1", "zero1", "backend=zero1"),
    ],
)
def test_a_sweep_that_lists_a_value_twice_is_one_line(given, twice, once):
    """Session 29's trial: ``-m seed=1,1`` (``tag=a,a``, ``model=gpt-tiny,gpt-tiny``) ran the same job twice
    under two job numbers, in silence (a plan: two equal rows). Now one line whose fix passes; a plan's fix
    names no ``repeats`` (a plan repeats nothing)."""
    line = refusal(["-m", "device=cpu", given])
    assert line == (
        f"Invalid config: {given}: lists {twice} more than once, so the same job would run twice. "
        f"Fix: give each value once: {once} (to measure a set-up several times: -m repeats=3)."
    )
    assert refusal(["-m", "device=cpu", once]) is None
    planned = refusal(["-m", "plan=true", "device=cpu", given])
    assert planned is not None and planned.endswith(f"Fix: give each value once: {once}.")
    assert refusal(["-m", "device=cpu", "tag=a,A", "seed=1,2"]) is None
    # a fault-injection sweep's clean job between faults is a job of its own (integration/test_failures.py)
    assert refusal(["-m", "device=cpu", "fault.kind=none,raise,none"]) is None
    assert refusal(["-m", "device=cpu", "fault={kind:oom},{kind:none},{kind:raise},{kind:none}"]) is None


@pytest.mark.parametrize("key", ["resume", "fail_fast"])
def test_a_key_of_the_whole_sweep_swept_is_one_line(key):
    """``-m resume=true,false`` (``fail_fast=true,false``) ran the same job twice, once resumed and once
    not: neither key is part of a job's identity. Now one line naming the key; one value passes."""
    line = refusal(["-m", "device=cpu", f"{key}=true,false"])
    assert line is not None
    assert line.startswith(f"Invalid config: {key}=true,false: is swept, but it steers the whole sweep")
    assert line.endswith(f"Fix: give it one value for the whole sweep, e.g. {key}=true.")
    assert refusal(["-m", "device=cpu", f"{key}=true", "seed=1,2"]) is None


def test_a_tuning_budget_under_one_gpu_second_never_reads_as_0():
    """``-m hydra/sweeper=tune hydra.sweeper.budget_gpu_s=0.001``: round 0 always runs (docs/tuning.md), and
    the report said ``GPU time: 12 of 0 GPU-s``, a budget the command line refuses. Now its digits."""
    from flopsweep.tunereport import gpu_time_line

    assert gpu_time_line({"spent_gpu_s": 12.3, "budget_gpu_s": 0.001}) == (
        "GPU time: 12 of 0.001 GPU-s, over the budget by 12 GPU-s"  # said since session 37
    )
    assert gpu_time_line({"spent_gpu_s": 26.0, "budget_gpu_s": 3600.0}) == "GPU time: 26 of 3600 GPU-s"
    assert gpu_time_line({"spent_gpu_s": 0.0, "budget_gpu_s": 0.25}) == "GPU time: 0 of 0.25 GPU-s"


@pytest.mark.parametrize("key", ["hydra.run.dir", "hydra.sweep.dir"])
@pytest.mark.parametrize("value", ["/", "/..", "//"])
def test_the_root_of_the_file_system_is_no_run_folder(key, value):
    """Session 29's trial: ``plan=true hydra.run.dir=/`` exited 0, writing ``/plan.csv`` and ``/.hydra``;
    every later run and sweep on the machine, in any folder, was then refused as inside a run's folder ``/``.
    Now one line before Hydra, nothing written; the fix's folder passes."""
    m = ["-m", "seed=1,2"] if "sweep" in key else []
    line = refusal([*m, "plan=true", "device=cpu", f"{key}={value}"])
    example = "multirun/my-sweep" if "sweep" in key else "outputs/my-run"
    assert line is not None
    assert line.startswith(f"Invalid config: {key}={value}: is the root of the file system (/);")
    assert line.endswith(f"Fix: name a folder of its own, e.g. {key}={example}.")
    assert refusal([*m, "plan=true", "device=cpu", f"{key}={example}"]) is None


@pytest.mark.parametrize("override", ["+sweep=../conf/config", "+sweep=./smoke", "model=../model/gpt-tiny"])
def test_a_group_option_written_as_a_path_is_no_option(override):
    """``-m +sweep=../conf/config``: Hydra's 12-line "Could not load" (conf/sweep links to sweep/, so the path
    reached conf/config.yaml), exit 1; ``model=../model/gpt-tiny`` ran gpt-tiny under that name. Now the
    group's line and its options; a nested option (``batch=auto/max16``) stays one."""
    line = refusal(["-m", "plan=true", override])
    group, _, name = override.lstrip("+").partition("=")
    assert line is not None and line.startswith(f"Invalid config: {override}: {name} is no option of {group}")
    assert refusal(["-m", "plan=true", "batch=auto/max16"]) is None


@pytest.mark.parametrize(
    "given, line",
    [
        (
            ["+sweep=smoke,backends"],
            "Invalid config: +sweep=smoke,backends: is swept, but a sweep file's axes (its "
            "hydra.sweeper.params) are read once, for the whole sweep: each job would run its file's fixed "
            "values alone. Fix: give it one value for the whole sweep, e.g. +sweep=smoke, one command per "
            "sweep file.",
        ),
        (
            ["+sweep=smoke", "+sweep=backends"],
            "Invalid config: +sweep=smoke and +sweep=backends: + adds the group sweep once, and Hydra "
            "refuses it twice. Fix: give +sweep once.",
        ),
    ],
)
def test_sweep_files_swept_or_added_twice_are_one_line(given, line):
    """``-m +sweep=smoke,backends`` ran 2 jobs, one per file, each file's axes dropped, exit 0;
    ``+sweep=smoke +sweep=smoke``: Hydra's "sweep appears more than once in the final defaults list",
    exit 1."""
    assert refusal(["-m", "plan=true", *given]) == line
    assert refusal(["-m", "plan=true", "+sweep=smoke"]) is None


def test_a_cpu_pool_without_its_slots_is_refused_before_hydra():
    """``-m hydra/launcher=pool device=cpu`` (no ``hydra.launcher.slots``): the launcher's line, exit 1, an
    empty ``multirun/<date>/<time>/`` left. Now the same line before Hydra (exit 2, nothing made); with slots
    given, or a ``CUDA_VISIBLE_DEVICES`` to pool, it passes."""
    from flopsweep.pool import cpu_pool_problem

    argv = ["-m", "hydra/launcher=pool", "device=cpu", "seed=1,2"]
    line = cpu_pool_problem(argv, environ={})
    assert line == (
        "Invalid config: hydra.launcher.slots=null: no GPU was found to pool (device=cpu). Fix: give the "
        "pool's devices, e.g. hydra.launcher.slots=[0,1] (device=cpu: each job gets slots of its own)."
    )
    assert cpu_pool_problem([*argv, "hydra.launcher.slots=[0,1]"], environ={}) is None
    assert cpu_pool_problem([*argv, "hydra.launcher.slots=2"], environ={}) is None
    assert cpu_pool_problem(argv, environ={"CUDA_VISIBLE_DEVICES": "0,1"}) is None
    assert (
        cpu_pool_problem(["-m", "hydra/launcher=pool", "seed=1,2"], environ={}) is None
    )  # device=auto: the GPUs


def test_a_list_for_plan_gpu_is_told_it_takes_one_name():
    """``plan=true plan_gpu=[H100]``: was ``plan_gpu="['H100']": is no device of the peak table (...)``,
    Python's repr of the list among 40 names. Now the type's line, naming the list as typed."""
    line = refusal(["plan=true", "plan_gpu=[H100]"])
    assert line is not None and line.startswith(
        "Invalid config: plan_gpu=[H100]: takes one text value, not a list."
    )
    assert refusal(["plan=true", "plan_gpu=H100"]) is None


def test_a_cpu_pool_without_m_is_told_m_and_its_slots_at_once():
    """``hydra/launcher=pool device=cpu`` without ``-m``: its fix, ``add -m``, was refused in turn for want of
    ``hydra.launcher.slots``; the one fix names both, and passes."""
    line = refusal(["hydra/launcher=pool", "device=cpu"])
    fixed = "flopsweep -m hydra/launcher=pool hydra.launcher.slots=[0,1] ..."
    assert line is not None and line.endswith(f"Fix: add -m and the pool's devices ({fixed}).")
    assert refusal(["-m", "hydra/launcher=pool", "device=cpu", "hydra.launcher.slots=[0,1]"]) is None
