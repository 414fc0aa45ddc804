"""Session 38: a ``hydra.sweep.subdir`` that varies with one axis while another is swept too gave two jobs
one folder (docs/reliability-8.md #439). Now one line before Hydra (exit 2), decided by composing the
subdir for each job of the sweep (:mod:`flopsweep.subdir_jobs`); each line's fix is itself accepted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flopsweep import override_schema
from flopsweep.override_schema import CONF
from flopsweep.subdir_jobs import job_subdir, shared_subdir, sweep_axes
from flopsweep.sweep_subdir import escapes, fixed_subdir_problem
from run import refusal

RUN = ["-m", "device=cpu", "steps.warmup=1"]
WHY = "two jobs of the sweep would write into one folder"


def _fix(line: str) -> str:
    return line.split("e.g. '", 1)[1].rstrip("'.")


@pytest.mark.parametrize(
    ("axes", "subdir", "said"),
    [
        (  # was: job 0 ran in .../0, job 2 stopped on .../0/metrics.json already exists, exit 1
            ["seed=0,1", "steps.measure=2,3"],
            "${seed}",
            f"{WHY} (0 under hydra.sweep.dir): seed=0 steps.measure=2 and seed=0 steps.measure=3",
        ),
        (
            ["seed=1,11", "steps.measure=12,2"],
            "${seed}${steps.measure}",
            f"{WHY} (112 under hydra.sweep.dir): seed=1 steps.measure=12 and seed=11 steps.measure=2",
        ),
        (
            ["seed=0,1", "repeats=2"],
            "${seed}",
            f"{WHY} (0 under hydra.sweep.dir): seed=0 repeat=0 and seed=0 repeat=1",
        ),
        (
            ["model=gpt-tiny,gpt-125m", "seed=0,1"],
            "${model.name}",
            f"{WHY}: model=gpt-tiny seed=0 and model=gpt-tiny seed=1",
        ),
    ],
)
def test_a_subdir_two_jobs_share_is_refused_and_its_fix_accepted(axes, subdir, said) -> None:
    """#439: the subdir is composed for every job; two the same folder is one line naming both jobs."""
    line = refusal([*RUN, *axes, f"hydra.sweep.subdir={subdir}"])
    assert line == (
        f"Invalid config: hydra.sweep.subdir={subdir}: {said}, so the second stops on the first's record. "
        f"Fix: include ${{hydra.job.num}}, e.g. 'hydra.sweep.subdir={subdir}_${{hydra.job.num}}'."
    )
    assert refusal([*RUN, *axes, _fix(line)]) is None


@pytest.mark.parametrize(
    ("axes", "subdir"),
    [
        (["seed=0,1"], "${seed}"),
        (["seed=0,1", "steps.measure=2,3"], "${seed}/${steps.measure}"),
        (["seed=0,1", "repeats=2"], "s${seed}-r${repeat}"),
        (["model=gpt-tiny,gpt-125m"], "${model.name}"),
        (["model=gpt-tiny,gpt-125m", "seed=0,1"], "${hydra.runtime.choices.model}/${seed}"),
    ],
)
def test_a_subdir_every_job_has_its_own_is_accepted(axes, subdir) -> None:
    assert refusal([*RUN, *axes, f"hydra.sweep.subdir={subdir}"]) is None


def test_the_composed_subdirs_and_axes() -> None:
    """What :func:`shared_subdir` compares: each job's folder, normalised, from the axes as listed."""
    axes = sweep_axes(["-m", "seed=range(0,3)", "steps.measure=2,3", "repeats=2", "tag=x"])
    assert axes == [("seed", ["0", "1", "2"]), ("steps.measure", ["2", "3"]), ("repeat", ["0", "1"])]
    assert job_subdir("a/./${seed}//${tag}", {"seed": "4"}) == "a/4"
    assert job_subdir("${seed}-${hydra.job.num}", {"seed": "4"}) is None
    assert job_subdir("${oc.decode:${seed}}", {"seed": "4"}) is None  # another resolver: not told here
    assert shared_subdir("${seed}", [("seed", ["0", "1"]), ("x", ["a", "b"])]) == (
        "0",
        {"seed": "0", "x": "a"},
        {"seed": "0", "x": "b"},
    )


def test_a_sweep_files_subdir_two_jobs_share_is_refused_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#439: the file's axes count: ``seed: 0,1`` and ``steps.measure: 2,3`` with ``subdir: ${seed}``."""
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf, symlinks=False)
    monkeypatch.setattr(override_schema, "CONF", str(conf))
    mine = conf / "sweep" / "mine.yaml"
    head = "# @package _global_\nhydra:\n  sweeper:\n    params:\n      seed: 0,1\n      steps.measure: 2,3\n"
    mine.write_text(head + "  sweep:\n    subdir: ${seed}\n")
    argv = ["-m", "+sweep=mine", "device=cpu"]
    assert fixed_subdir_problem(argv, str(conf)) == (
        f"Invalid config: conf/sweep/mine.yaml: hydra.sweep.subdir: ${{seed}}: {WHY} (0 under "
        "hydra.sweep.dir): seed=0 steps.measure=2 and seed=0 steps.measure=3, so the second stops on the "
        "first's record. Fix: write subdir: ${seed}_${hydra.job.num} under its hydra.sweep, or drop subdir "
        "there (the default is ${hydra.job.num})."
    )
    mine.write_text(head + "  sweep:\n    subdir: ${seed}_${hydra.job.num}\n")
    assert fixed_subdir_problem(argv, str(conf)) is None
    assert fixed_subdir_problem([*argv, "steps.measure=2"], str(conf)) is None  # the command line's one value


def test_an_options_name_is_no_folder_outside_the_sweep() -> None:
    """#440: ``${hydra.runtime.choices.model}/${seed}`` was refused as naming a folder outside
    hydra.sweep.dir (every ``hydra.runtime.*`` taken for a folder); Hydra's folders still are."""
    assert not escapes("${hydra.runtime.choices.model}/${seed}")
    assert not escapes("${hydra:runtime.choices.model}")
    for folder in ("${hydra.runtime.output_dir}/x", "${hydra:runtime.cwd}", "${hydra.sweep.dir}/x"):
        assert escapes(folder), folder


def test_a_key_the_command_line_sets_is_read_through_in_the_subdir() -> None:
    """#443: ``-m seed=0,1 tag='${seed}' 'hydra.sweep.subdir=${tag}'`` was refused as one folder for every
    job (``tag`` is no axis), though Hydra resolves it to ``0`` and ``1`` (the sweep runs, 2 ok). Now the
    command line's keys are read through (:func:`flopsweep.subdir_jobs.expanded`) before the subdir is
    judged; ``tag=x`` is still one folder, ``tag=/abs`` still outside the sweep."""
    from flopsweep.subdir_jobs import expanded

    assert (
        expanded("${tag}/${steps.measure}", ["tag=s${seed}", "steps.measure=2,3"])
        == "s${seed}/${steps.measure}"
    )
    assert expanded("${a}", ["a=${b}", "b=${a}"]) in ("${a}", "${b}")  # a loop: left, never endless
    assert refusal([*RUN, "seed=0,1", "tag=${seed}", "hydra.sweep.subdir=${tag}"]) is None
    ok = [*RUN, "seed=0,1", "steps.measure=2,3", "tag=s${seed}", "hydra.sweep.subdir=${tag}/${steps.measure}"]
    assert refusal(ok) is None
    line = refusal([*RUN, "seed=0,1", "steps.measure=2,3", "tag=s${seed}", "hydra.sweep.subdir=${tag}"])
    assert line is not None and f"{WHY} (s0 under hydra.sweep.dir)" in line
    line = refusal([*RUN, "seed=0,1", "tag=x", "hydra.sweep.subdir=${tag}"])
    assert line is not None and "is the same for every job" in line
    line = refusal([*RUN, "seed=0,1", "tag=/abs", "hydra.sweep.subdir=${tag}"])
    assert line is not None and "names a folder outside hydra.sweep.dir once interpolated" in line
