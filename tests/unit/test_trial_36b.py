"""Session 36's new-user trial (docs/reliability-6.md #355-#364): where the job's log goes, and a resume with
the sweep's axes in another order. Each was exit 0 (the log outside the run's folder, lost, or a user's
``run.log`` link replaced) or exit 1 after a job ran (a resume in another order, ``multirun.yaml`` rewritten);
each is now one line, exit 2, before anything is written, and its fix passes the same check. No subprocess."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from flopsweep.folders import log_link_problem as folder_log_problem
from flopsweep.folders import run_folder_problem, sweep_folder_problem
from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)
from flopsweep.job_log import job_log_problem, log_file_problem, log_link_problem
from flopsweep.job_name import job_name_problem
from flopsweep.sweep_file_hydra import output_dir_problem as sweep_file_dir_problem
from run import refusal

RUN = ["device=cpu", "steps.measure=1", "steps.warmup=1"]
NAME_RULE = (
    "the job's log is <run folder>/<hydra.job.name>.log, so the name must be a plain file name (not empty, "
    "no '/', not '..', no control character, at most 251 bytes); this one would write the log outside the "
    "run's folder or lose it."
)


def _name_line(name: str, plain: str | None) -> str:
    fix = "drop the override (the log is run.log)" + (
        f", or give a plain name such as hydra.job.name={plain}" if plain else ""
    )
    return f"Invalid config: hydra.job.name={name}: {NAME_RULE} Fix: {fix}."


# --- #355-#357: hydra.job.name that is no plain file name ------------------------------------------------


@pytest.mark.parametrize(
    "name,plain",
    [("../esc2", "esc2"), ("../../escape", "escape"), ("x/../../y", "y"), ("/tmp/x/userfile", "userfile")],
)
def test_a_job_name_with_a_path_is_one_line_and_its_plain_name_passes(tmp_path: Path, name, plain) -> None:
    """#355/#356: ``hydra.job.name=../esc2`` wrote the log to ``<run folder>/../esc2.log`` (exit 0, no
    ``run.log`` in the folder); ``/tmp/x/userfile`` lost it (exit 0). ``plan=true`` and
    ``hydra.job.chdir=true`` alike."""
    folder = f"hydra.run.dir={tmp_path / 'jn3'}"
    for extra in ([], ["plan=true"], ["hydra.job.chdir=true"]):
        assert refusal([*RUN, *extra, f"hydra.job.name={name}", folder]) == _name_line(name, plain)
        assert refusal([*RUN, *extra, f"hydra.job.name={plain}", folder]) is None
    assert refusal(["-m", "seed=0,1", *RUN, f"hydra.job.name={name}"]) == _name_line(name, plain)
    assert not (tmp_path / "jn3").exists()


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 252])
def test_an_empty_dot_or_too_long_job_name_is_refused_and_dropping_it_passes(name: str) -> None:
    """#357: an empty name wrote ``<run folder>/.log``; ``..``, ``...log``; over 251 bytes, no log."""
    line = job_name_problem(name)
    assert line == _name_line(name, "myjob" if name in (".", "..") else None)
    assert job_name_problem("run") is None and job_name_problem("my-job.v2") is None
    assert job_log_problem([f"hydra.job.name={name}"]) == line and job_log_problem(["seed=1"]) is None


def test_a_job_name_from_an_interpolation_is_refused_by_the_folder_check(tmp_path: Path) -> None:
    """#355: ``hydra.job.name='${oc.env:JN}'`` with ``JN=../esc3`` is resolved only once Hydra composed: the
    callback's folder check (:func:`flopsweep.folders.run_folder_problem`) refuses the name it resolved to."""
    assert log_link_problem([f"hydra.run.dir={tmp_path}", "hydra.job.name=${oc.env:JN}"]) is None
    line = _name_line("../esc3", "esc3").removeprefix("Invalid config: ")
    assert run_folder_problem(tmp_path, "../esc3.log") == line
    assert sweep_folder_problem(tmp_path, {}, resume=False, log="../esc3.log") == line
    assert run_folder_problem(tmp_path, "esc3.log") is None


# --- #358/#359: a hydra.job_logging file handler's filename outside the run's folder --------------------


def test_an_absolute_log_filename_is_refused_and_one_in_the_run_folder_passes(tmp_path: Path) -> None:
    """#358: ``hydra.job_logging.handlers.file.filename=/tmp/abs.log`` wrote the job's log there (exit 0)."""
    key = "hydra.job_logging.handlers.file.filename"
    folder = f"hydra.run.dir={tmp_path / 'r'}"
    assert refusal([*RUN, f"{key}=/tmp/abs.log", folder]) == (
        f"Invalid config: {key}=/tmp/abs.log: the job's log would be written outside the run's folder "
        "(hydra.run.dir), where no resume, cleanup or reader of the run finds it. Fix: drop the override "
        f"(the log is the folder's run.log), or name a file in it: {key}=${{hydra.runtime.output_dir}}/"
        "abs.log."
    )
    for fine in ("${hydra.runtime.output_dir}/abs.log", "${hydra:runtime.output_dir}/${hydra.job.name}.txt"):
        assert refusal([*RUN, f"{key}={fine}", folder]) is None
    assert refusal([*RUN, f"{key}={tmp_path / 'r' / 'mine.log'}", folder]) is None  # literal, inside
    assert refusal([*RUN, "hydra.job.chdir=true", f"{key}=mine.log", folder]) is None  # from the folder
    below = refusal([*RUN, "hydra.job.chdir=true", f"{key}=sub/mine.log", folder])  # #445: no sub/ is made
    assert below is not None and "would be in sub/ below the job's folder, which nothing makes" in below


@pytest.mark.parametrize(
    "extra,value",
    [
        ([], "mine.log"),  # relative to the folder the user started in (chdir false)
        ([], "${hydra.runtime.output_dir}/../x.log"),
        ([], "${oc.env:HOME}/x.log"),
        (["hydra.job.chdir=true"], "../x.log"),
        ([], ""),
    ],
)
def test_a_log_filename_that_leaves_the_run_folder_is_refused(tmp_path: Path, extra, value) -> None:
    """#359: a relative file name (the start folder's), ``..`` below the output folder, an interpolation that
    may lead anywhere, an empty name."""
    key = "hydra.job_logging.handlers.file.filename"
    line = log_file_problem([*extra, f"{key}={value}", f"hydra.run.dir={tmp_path}"])
    assert line is not None and line.startswith(f"Invalid config: {key}={value}: the job's log would be")
    sweep = log_file_problem(["-m", f"{key}={value}", f"hydra.sweep.dir={tmp_path}"])
    assert sweep is not None and "outside the job's folder under hydra.sweep.dir" in sweep


def test_a_handler_given_as_a_mapping_is_held_to_the_run_folder() -> None:
    """#359: ``+hydra.job_logging.handlers.f={class:logging.FileHandler,filename:/tmp/x.log}``."""
    line = log_file_problem(["+hydra.job_logging.handlers.f={class:logging.FileHandler,filename:/tmp/x.log}"])
    assert line is not None and line.startswith(
        "Invalid config: hydra.job_logging.handlers.f.filename=/tmp/x.log: the job's log would be written"
    )
    fine = "+hydra.job_logging.handlers.f={filename:'${hydra.runtime.output_dir}/f.log'}"
    assert log_file_problem([fine]) is None


def test_a_sweep_files_job_name_and_log_file_are_refused_naming_the_file(tmp_path: Path) -> None:
    """#360: the same keys in a ``+sweep=`` file's ``hydra:`` block; the fix drops them from the file, and a
    command line's own value replaces the file's."""
    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    (conf / "sweep" / "mine.yaml").write_text("# @package _global_\nhydra:\n  job:\n    name: ../esc2\n")
    argv = ["-m", "+sweep=mine", *RUN]
    own = _name_line("../esc2", "esc2").replace("Fix: drop the override", "Fix: drop it from the file")
    assert sweep_file_dir_problem(argv, str(conf)) == own.replace(": ", ": conf/sweep/mine.yaml: ", 1)
    assert sweep_file_dir_problem([*argv, "hydra.job.name=esc2"], str(conf)) is None
    (conf / "sweep" / "mine.yaml").write_text(
        "# @package _global_\nhydra:\n  job_logging:\n    handlers:\n      file:\n"
        "        filename: /tmp/abs.log\n"
    )
    line = sweep_file_dir_problem(argv, str(conf))
    assert line is not None and line.startswith(
        "Invalid config: conf/sweep/mine.yaml: hydra.job_logging.handlers.file.filename=/tmp/abs.log: the"
    )
    assert "Fix: drop it from the file (the log is the folder's run.log)" in line
    # the command line's filename replaces the file's (re-trial, session 36: it was refused all the same)
    own_log = "hydra.job_logging.handlers.file.filename=${hydra.runtime.output_dir}/ok.log"
    assert sweep_file_dir_problem([*argv, own_log], str(conf)) is None
    other = [*argv, "hydra.job_logging.handlers.file.filename=/tmp/other.log"]
    assert (
        sweep_file_dir_problem(other, str(conf)) is None and log_file_problem(other) is not None
    )  # the command line's
    (conf / "sweep" / "mine.yaml").write_text(
        "# @package _global_\nhydra:\n  job_logging:\n    handlers:\n      file:\n"
        "        filename: ${hydra.runtime.output_dir}/mine.log\n"
    )
    assert sweep_file_dir_problem(argv, str(conf)) is None


# --- #361/#362: a run.log that is a link (or no regular file) in the run's or a job's folder -------------


def test_a_run_log_link_in_the_run_folder_is_refused_and_nothing_is_replaced(tmp_path: Path) -> None:
    """#361: ``ln -s victim ex4/run.log; flopsweep ... hydra.run.dir=ex4`` replaced the link with a regular
    ``run.log`` (exit 0)."""
    victim, ex4 = tmp_path / "victim.txt", tmp_path / "ex4"
    victim.write_text("precious")
    ex4.mkdir()
    (ex4 / "run.log").symlink_to(victim)
    line = (
        f"hydra.run.dir={ex4}: {ex4 / 'run.log'} is a symbolic link, not the job's log; a job never "
        f"writes through its log's path nor replaces what is there. Fix: remove {ex4 / 'run.log'} if it is "
        f"yours, or {another(ex4)}"
    )
    assert refusal([*RUN, f"hydra.run.dir={ex4}"]) == line
    assert run_folder_problem(ex4) == line  # the callback's, for a folder a sweep file or ${...} gives
    assert log_link_problem([*RUN, f"hydra.run.dir={ex4}", "hydra.job.name=other"]) is None  # other.log
    assert os.path.islink(ex4 / "run.log") and victim.read_text() == "precious"
    (ex4 / "run.log").unlink()
    assert refusal([*RUN, f"hydra.run.dir={ex4}"]) is None and run_folder_problem(ex4) is None
    (ex4 / "run.log").write_text("an earlier run's log\n")  # a regular file: appended to, as before
    assert run_folder_problem(ex4) is None


def test_a_fifo_or_folder_at_the_log_and_another_job_names_log_are_refused(tmp_path: Path) -> None:
    """#361: the handler replaced a FIFO with an empty file too; ``hydra.job.name=mine``: ``mine.log``."""
    os.mkfifo(tmp_path / "run.log")
    (tmp_path / "mine.log").mkdir()
    fifo = folder_log_problem("hydra.run.dir", tmp_path)
    assert fifo is not None and f"{tmp_path / 'run.log'} is a FIFO, not the job's log" in fifo
    line = log_link_problem([f"hydra.run.dir={tmp_path}", "hydra.job.name=mine"])
    assert line is not None and f"{tmp_path / 'mine.log'} is a directory, not the job's log" in line


def test_a_sweeps_job_folder_run_log_link_is_refused_under_resume(tmp_path: Path) -> None:
    """#362: ``resume=true`` into a sweep whose ``S/1/run.log`` is a link replaced it; a sweep without resume
    over job folders without records too."""
    sweep = tmp_path / "S"
    (sweep / "1").mkdir(parents=True)
    (log := sweep / "1" / "run.log").symlink_to(tmp_path / "victim.txt")
    hydra = {
        "overrides": {"task": ["seed=0,1"]},
        "sweeper": {"params": None},
        "job": {"config_name": "config"},
    }
    line = (
        f"hydra.sweep.dir={sweep}: {log} is a symbolic link, not the job's log; a job never writes through "
        f"its log's path nor replaces what is there. Fix: remove {log} if it is yours, or "
        f"{another(sweep, 'hydra.sweep.dir')}"
    )
    for resume in (True, False):
        assert sweep_folder_problem(sweep, hydra, resume=resume) == line
    assert refusal(["-m", "seed=0,1", *RUN, f"hydra.sweep.dir={sweep}", "resume=true"]) == line
    (sweep / "1" / "run.log").unlink()
    assert sweep_folder_problem(sweep, hydra, resume=True) is None


# --- #363/#364: resume=true with the sweep's axes in another order ------------------------------------------


def _sweep(tmp_path: Path, task: list[str], params: dict | None = None) -> tuple[Path, dict]:
    """A sweep folder whose ``multirun.yaml`` holds ``task`` (and ``params``), and its ``hydra`` node."""
    sweep = tmp_path / "D"
    sweep.mkdir()
    hydra = {"overrides": {"task": task}, "sweeper": {"params": params}, "job": {"config_name": "config"}}
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
    return sweep, hydra


def _node(task: list[str], params: dict | None = None) -> dict:
    return {"overrides": {"task": task}, "sweeper": {"params": params}, "job": {"config_name": "config"}}


def test_a_resume_with_the_axes_in_another_order_names_the_sweeps_own_order(tmp_path: Path) -> None:
    """#363: job 0 skipped, then job 1 ``is the record of another sweep or run ... Fix: choose a new
    hydra.sweep.dir``, exit 1, ``multirun.yaml`` rewritten in the new order (or, every record but job 0's
    gone, each job run into another job's folder, exit 0)."""
    theirs = ["backend=ddp,fsdp", "seed=0,1", *RUN]
    sweep, _ = _sweep(tmp_path, theirs)
    ours = _node(["seed=0,1", "backend=ddp,fsdp", *RUN, "resume=true"])
    assert sweep_folder_problem(sweep, ours, resume=True) == (
        f"{sweep / 'multirun.yaml'} is this sweep's, with its axes in another order (backend=ddp,fsdp "
        "seed=0,1 there, seed=0,1 backend=ddp,fsdp here); resume=true would number its jobs differently and "
        "meet each record under another job's number. Fix: resume with the sweep's own order: "
        "backend=ddp,fsdp seed=0,1"
    )
    fixed = _node(
        ["backend=ddp,fsdp", "seed=0,1", "device=cpu", "steps.warmup=1", "steps.measure=1", "resume=true"]
    )
    assert sweep_folder_problem(sweep, fixed, resume=True) is None  # plain values in any order: the same jobs
    assert sweep_folder_problem(sweep, ours, resume=False) is None  # no records: a new sweep takes it over


def test_a_reordered_sweep_files_axes_name_the_files_order_and_other_values_stay_another_sweep(
    tmp_path,
) -> None:
    """#364: the axes of ``hydra.sweeper.params`` reordered; values in another order (``seed=1,0``) stay
    another sweep (its own line since session 31)."""
    sweep, _ = _sweep(tmp_path, ["+sweep=mine"], {"backend": "ddp,fsdp", "seed": "0,1"})
    (sweep / "0").mkdir()  # a job of it ran (a sweep that ran none is replaced: reliability-7.md #396)
    line = sweep_folder_problem(
        sweep, _node(["+sweep=mine"], {"seed": "0,1", "backend": "ddp,fsdp"}), resume=True
    )
    assert line is not None and line.endswith(
        "Fix: give the sweep file's axes (hydra.sweeper.params) their own order again: "
        "backend=ddp,fsdp seed=0,1"
    )
    other = sweep_folder_problem(
        sweep, _node(["+sweep=mine"], {"backend": "fsdp,ddp", "seed": "0,1"}), resume=True
    )
    assert other is not None and "belongs to another sweep" in other
