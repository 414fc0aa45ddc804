"""Session 36's new-user trial (docs/reliability-6.md #350-#353): a sweep file without ``-m``, an interrupted
plan sweep, a fixed ``hydra.sweep.subdir`` in a sweep of several jobs and the line of a command-line key of
another option beside a ``+sweep=`` file. Each line exact and its fix passing the same check; no subprocess
(tests/integration/test_trial_36.py runs them as a user types them)."""

from __future__ import annotations

from pathlib import Path

import run
from flopsweep.job import JobInfo, plan_job
from flopsweep.job.plansweep import SWEEP_PLAN, interrupted_plan_lines
from flopsweep.job.plantable import start_plan_file
from flopsweep.sweep_file_keys import values_problem, without_m_problem
from flopsweep.sweep_subdir import fixed_subdir_problem

HEAD = "# @package _global_\n"
PARAMS = "hydra:\n  sweeper:\n    params:\n      batch.micro_batch_size: 1,2,4\n"
PLAIN = "device: cpu\nsteps:\n  warmup: 1\n  measure: 1\n"


def _conf(tmp_path: Path, text: str) -> str:
    """A ``conf/`` whose primary config picks ``model`` and ``backend``; ``sweep/mine.yaml``: ``text``."""
    conf = tmp_path / "conf"
    for group, options in (("model", ("gpt-tiny",)), ("backend", ("single", "ddp"))):
        (conf / group).mkdir(parents=True)
        for option in options:
            (conf / group / f"{option}.yaml").write_text(f"name: {option}\n")
    (conf / "sweep").mkdir()
    (conf / "config.yaml").write_text(
        "defaults:\n  - base_config\n  - model: gpt-tiny\n  - backend: single\n"
    )
    (conf / "sweep" / "mine.yaml").write_text(HEAD + text)
    return str(conf)


def test_a_sweep_file_of_axes_without_m_is_one_line_naming_its_axes(tmp_path: Path) -> None:
    """#350: ``+sweep=mine`` of ``batch.micro_batch_size: 1,2,4`` without ``-m`` ran one job (micro batch 4),
    exit 0; the shipped ``+sweep=smoke`` got the backend check's line, whose fix (nproc_per_node=1) was
    another sweep."""
    argv = ["+sweep=mine", "hydra.run.dir=/tmp/x"]
    conf = _conf(tmp_path, PLAIN + PARAMS)
    assert without_m_problem(argv, conf) == (
        "Invalid config: +sweep=mine: conf/sweep/mine.yaml sweeps batch.micro_batch_size "
        "(hydra.sweeper.params), which only a multirun runs. Fix: add -m (flopsweep -m +sweep=mine)."
    )
    assert without_m_problem([*argv, "plan=true"], conf) == without_m_problem(argv, conf)
    assert without_m_problem(["-m", "+sweep=mine"], conf) is None  # the fix
    assert without_m_problem([*argv, "batch.micro_batch_size=2"], conf) is None  # every axis given: one job
    assert without_m_problem([*argv, "--cfg", "job"], conf) is None  # prints one job's config
    assert without_m_problem(argv, _conf(tmp_path / "plain", PLAIN)) is None  # plain values: one job
    assert run.refusal(["+sweep=smoke"]) == (
        "Invalid config: +sweep=smoke: sweep/smoke.yaml sweeps backend, precision (hydra.sweeper.params), "
        "which only a multirun runs. Fix: add -m (flopsweep -m +sweep=smoke)."
    )


def test_an_interrupted_plan_sweep_shows_the_rows_its_jobs_kept(tmp_path: Path, hydra_compose) -> None:
    """#351: a ``plan=true`` sweep stopped by SIGINT printed ``(not shown: read_regular() missing 1
    required positional argument: 'limit')``. The sweep's ``plan.csv`` is written as the sweep writes it
    (the callback starts it, each job appends its row), three of its jobs done."""
    sweep = tmp_path / "p"
    start_plan_file(sweep)
    base = ["plan=true", "device=cpu"]
    for n in range(3):
        given = [f"seed={n}", *base]
        (sweep / str(n)).mkdir()
        plan_job(hydra_compose(given), JobInfo(job_dir=sweep / str(n), overrides=given, job_num=n))
    plan = sweep / "plan.csv"
    SWEEP_PLAN.update(plan=plan, config=hydra_compose.config(["seed=0", *base]))
    try:
        lines = interrupted_plan_lines()
    finally:
        SWEEP_PLAN.update(plan=None, config=None)
    assert lines[-1] == f"flopsweep: kept 3 rows of planned set-ups in {plan} (the jobs that finished)"
    table = lines[0]
    assert "not shown" not in "\n".join(lines)
    cells = [[c.strip() for c in r.split("|")[1:5]] for r in table.splitlines() if "| gpt-tiny |" in r]
    assert cells == [
        [str(n), "gpt-tiny", f"seed={n}", "ok"] for n in range(3)
    ]  # job, model, overrides, status
    assert "every job: device=cpu" in table.splitlines()


def test_a_fixed_sweep_subdir_in_a_sweep_of_several_jobs_is_one_line() -> None:
    """#352: ``-m seed=0,1 hydra.sweep.subdir=x``: job 0 ran, job 1 stopped on ``.../x/metrics.json already
    exists`` (exit 1)."""
    argv = ["-m", "seed=0,1", "device=cpu", "hydra.sweep.subdir=x"]
    line = (
        "Invalid config: hydra.sweep.subdir=x: every job of the sweep would write into one folder. Fix: "
        "include ${hydra.job.num}, e.g. 'hydra.sweep.subdir=x_${hydra.job.num}'."
    )
    assert fixed_subdir_problem(argv) == line
    assert fixed_subdir_problem(["-m", "repeats=2", "hydra.sweep.subdir=x"]) == line  # rounds are jobs
    assert fixed_subdir_problem(["-m", "+sweep=smoke", "hydra.sweep.subdir=x"]) == line  # the file's axes
    assert fixed_subdir_problem(["-m", "hydra/sweeper=tune", "hydra.sweep.subdir=x"]) == line  # its trials
    assert fixed_subdir_problem([*argv[:-1], "hydra.sweep.subdir=x_${hydra.job.num}"]) is None  # the fix
    assert fixed_subdir_problem(["-m", "seed=0", "device=cpu", "hydra.sweep.subdir=x"]) is None  # one job
    assert fixed_subdir_problem(["seed=0", "hydra.sweep.subdir=x"]) is None  # no sweep
    assert (
        fixed_subdir_problem(["-m", "+sweep=smoke", "backend=ddp", "precision=fp32", "hydra.sweep.subdir=x"])
        is None
    )


def test_a_command_line_key_of_another_option_beside_a_sweep_file_says_it_is_the_command_lines() -> None:
    """#353: ``-m +sweep=smoke backend.cpu_offload=true`` said ``(the file's value is to every job of the
    sweep)`` of a value the command line gave; docs/usage.md said Hydra stops it (exit 1)."""
    argv = ["-m", "+sweep=smoke", "backend.cpu_offload=true"]
    assert values_problem(argv, run.FILE_VALUE_CHECKS, run.RUN_CONF) == (
        "Invalid config: sweep/smoke.yaml: backend.cpu_offload: belongs to backend=fsdp, not to "
        "backend=ddp,zero1,zero2,zero3 (the command line's backend.cpu_offload=true applies to each job of "
        "the file's sweep). Fix: drop the override, or sweep only backend=fsdp with it, or run the others "
        "without it."
    )
    assert run.refusal(argv) == values_problem(argv, run.FILE_VALUE_CHECKS, run.RUN_CONF)
    assert values_problem([*argv, "backend=fsdp"], run.FILE_VALUE_CHECKS, run.RUN_CONF) is None  # the fix
    assert values_problem(argv[:-1], run.FILE_VALUE_CHECKS, run.RUN_CONF) is None  # dropped
