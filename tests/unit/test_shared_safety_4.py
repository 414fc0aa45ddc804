"""Issue 40, safe on a shared machine (round four): no code from the folder a run starts in, not in
a rank nor in the resource tracker, and console scripts that find the project's plug-ins (class 1);
Hydra's own files never written through a link nor blocking on a FIFO (2); locks that nested
directories meet (3); a refused ``resume=true`` single run leaves ``.hydra/`` as it was (12)."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from flopsweep.callbacks import SweepBusy, lock_sweep_dir
from flopsweep.config import RunConfig
from flopsweep.files import JobFolderUnwritable, RecordExistsError, RecordUnwritable
from flopsweep.hydrafiles import JobLogHandler, write_hydra_files
from flopsweep.job import JobInfo, run_job

HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")


def test_the_run_script_says_in_one_line_when_no_checkout_is_beside_the_package(tmp_path: Path) -> None:
    from flopsweep.cli import checkout_problem

    assert checkout_problem() is None
    line = checkout_problem(tmp_path)
    assert line.startswith(f"flopsweep: run.py and conf not found beside the installed package ({tmp_path})")
    assert "Fix: install from a checkout with pip install -e ." in line and "\n" not in line


def _victims(tmp_path: Path) -> tuple[Path, Path]:
    victim, victim_dir = tmp_path / "victim.txt", tmp_path / "victim_dir"
    victim.write_text("precious")
    victim_dir.mkdir()
    (victim_dir / "config.yaml").write_text("theirs")
    return victim, victim_dir


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo", "hard-link"])
def test_hydra_files_and_the_job_log_replace_what_is_planted_never_writing_through(
    tmp_path: Path, kind: str
) -> None:
    """Each of ``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml`` and the job log planted as a
    link to a victim file, a dangling link, a FIFO or a hard link of the victim: the job's files are
    written, each a regular file of one link, without blocking, and the victim is byte-identical."""
    victim, _ = _victims(tmp_path)
    job = tmp_path / "job"
    (job / ".hydra").mkdir(parents=True)
    paths = [job / ".hydra" / name for name in HYDRA_FILES] + [job / "run.log"]
    for path in paths:
        if kind == "link":
            path.symlink_to(victim)
        elif kind == "dangling":
            path.symlink_to(tmp_path / "made-by-nobody")
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            os.link(victim, path)
    write_hydra_files(job, {name: f"{name}: written\n" for name in HYDRA_FILES})
    handler = JobLogHandler(str(job / "run.log"))
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.emit(logging.makeLogRecord({"msg": "a log line"}))
    handler.close()
    for path in paths:
        st = os.lstat(path)
        assert stat.S_ISREG(st.st_mode) and st.st_nlink == 1, path
    assert [(job / ".hydra" / n).read_text() for n in HYDRA_FILES] == [f"{n}: written\n" for n in HYDRA_FILES]
    assert (job / "run.log").read_text() == "a log line\n"
    assert victim.read_text() == "precious" and not (tmp_path / "made-by-nobody").exists()


def test_a_hydra_folder_that_is_a_link_or_a_fifo_refuses_the_job_in_one_line(tmp_path: Path) -> None:
    """``.hydra`` as a link to another folder, or a FIFO: the job is refused before it runs (one line
    naming the path, what it is and the fix); nothing is written in the other folder."""
    _, victim_dir = _victims(tmp_path)
    files = {name: "x: 1\n" for name in HYDRA_FILES}
    for kind in ("link", "fifo"):
        job = tmp_path / kind
        job.mkdir()
        os.mkfifo(job / ".hydra") if kind == "fifo" else (job / ".hydra").symlink_to(victim_dir)
        with pytest.raises(RecordUnwritable) as info:
            write_hydra_files(job, files)
        what = "FIFO" if kind == "fifo" else "symbolic link"
        assert str(info.value).startswith(f"{job / '.hydra'} is a {what}, not a folder flopsweep made")
        with pytest.raises(JobFolderUnwritable) as info:  # run.py: exit 1, not a record refused's 2
            run_job(RunConfig(device="cpu"), JobInfo(job_dir=job, overrides=[], hydra_files=files))
        line = str(info.value)
        assert "never followed or written through. Fix: remove " in line and "\n" not in line
        assert not (job / "metrics.json").exists()
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]


def test_a_directory_where_a_hydra_file_goes_is_refused_with_the_fix_to_remove_it(tmp_path: Path) -> None:
    """A directory at ``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml`` or ``multirun.yaml``
    (any file written by :func:`flopsweep.files.replace_text`): one line saying it is a directory,
    whose fix says to remove it; the directory and what it holds are kept."""
    from flopsweep.files import replace_text

    for name in (*HYDRA_FILES, "multirun.yaml"):
        job = tmp_path / name
        target = job / ".hydra" / name if name in HYDRA_FILES else job / name
        (target / "inside").mkdir(parents=True)
        with pytest.raises(RecordUnwritable) as info:
            if name in HYDRA_FILES:
                write_hydra_files(job, {n: "x: 1\n" for n in HYDRA_FILES})
            else:
                replace_text(target, "x: 1\n")
        assert str(info.value) == f"cannot write {target}: it is a directory, where flopsweep writes a file"
        assert info.value.fix.startswith(f"remove the directory {target} ")
        assert (target / "inside").is_dir()


def test_the_scratch_and_trace_folders_never_follow_a_planted_link(tmp_path: Path) -> None:
    """The ranks' scratch folder planted as a link to another folder, a FIFO or a folder of stale
    files: it becomes an empty real folder of this run (mode 0700), the other folder untouched (it
    was emptied before). A profile folder that is a link is refused with its reason, nothing written."""
    from flopsweep.launch import SCRATCH, prepare_scratch
    from flopsweep.profile import trace_dir_problem

    _, victim_dir = _victims(tmp_path)
    for kind in ("link", "fifo", "stale"):
        job = tmp_path / kind
        job.mkdir()
        if kind == "link":
            (job / SCRATCH).symlink_to(victim_dir)
        elif kind == "fifo":
            os.mkfifo(job / SCRATCH)
        else:
            (job / SCRATCH / "old").mkdir(parents=True)
            (job / SCRATCH / "rank0_error.json").write_text("{}")
        scratch = prepare_scratch(job)
        st = os.lstat(scratch)
        assert stat.S_ISDIR(st.st_mode) and st.st_mode & 0o777 == 0o700 and not list(scratch.iterdir())
    (tmp_path / "job" / "profile").parent.mkdir()
    (tmp_path / "job" / "profile").symlink_to(victim_dir)
    assert "is a symbolic link, not a directory of this run" in trace_dir_problem(
        tmp_path / "job" / "profile"
    )
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]


def test_an_output_subdir_override_is_refused_before_hydra_writes_there() -> None:
    from run import refusal

    line = refusal(["hydra.output_subdir=.hydra", "device=cpu"])
    assert line.startswith("Invalid config: hydra.output_subdir=.hydra: Hydra would write")
    assert line.endswith("Fix: drop the override.")
    assert refusal(["hydra.output_subdir=null", "device=cpu"]) is None


def test_a_lock_inside_or_above_a_held_one_is_refused_and_makes_nothing(tmp_path: Path) -> None:
    """A sweep holds S: a run into S/0, S/0/deeper or a linked spelling of S/3 is refused in one line
    naming the holder, making nothing (no directory, no lock file). A run holds S/0/x: a sweep into S
    or its parent is refused. Siblings and unrelated directories still lock."""
    sweep = tmp_path / "S"
    sweep.mkdir()
    (tmp_path / "alias").symlink_to(sweep, target_is_directory=True)
    held = lock_sweep_dir(sweep)
    try:
        for run_dir in (sweep / "0", sweep / "0" / "deeper" / "still", tmp_path / "alias" / "3"):
            with pytest.raises(SweepBusy) as info:
                lock_sweep_dir(run_dir)
            line = str(info.value)
            assert line.startswith(
                f"another sweep or run (pid {os.getpid()}) is writing into {sweep}, above "
            )
            assert "choose a hydra.run.dir outside it" in line  # pytest's argv: no -m
        assert [p.name for p in sweep.iterdir()] == []  # made nothing, not even a lock file
    finally:
        held.close()
    inner = lock_sweep_dir(sweep / "0" / "x")
    try:
        for outer in (sweep, tmp_path):
            with pytest.raises(SweepBusy) as info:
                lock_sweep_dir(outer)
            assert f"is writing into {sweep / '0' / 'x'}, inside {outer};" in str(info.value)
        lock_sweep_dir(sweep / "1").close()  # a sibling
    finally:
        inner.close()
    lock_sweep_dir(sweep).close()  # all released: the sweep locks


def test_resume_into_another_runs_directory_leaves_its_hydra_files_as_they_were(tmp_path: Path) -> None:
    record = {"status": "ok", "run": {"id": "abc", "overrides": ["seed=1"]}}
    (tmp_path / "metrics.json").write_text(json.dumps(record))
    (tmp_path / ".hydra").mkdir()
    for name in HYDRA_FILES:
        (tmp_path / ".hydra" / name).write_text(f"theirs: {name}\n")
    mine = {name: f"mine: {name}\n" for name in HYDRA_FILES}
    with pytest.raises(RecordExistsError, match="is the record of another sweep or run"):
        run_job(
            RunConfig(device="cpu", resume=True),
            JobInfo(job_dir=tmp_path, overrides=["seed=2", "resume=true"], hydra_files=mine),
        )
    assert [(tmp_path / ".hydra" / n).read_text() for n in HYDRA_FILES] == [
        f"theirs: {n}\n" for n in HYDRA_FILES
    ]


def test_only_flopsweeps_sweepers_pass(hydra_compose) -> None:
    from flopsweep.hydrafiles import SAFE_SWEEPERS, sweeper_problem

    config = hydra_compose.config(["device=cpu"], hydra=True)
    assert str(config.hydra.sweeper._target_) in SAFE_SWEEPERS and sweeper_problem(config) is None
    assert "hydra_plugins.flopsweep_optuna.OptunaSweeper" in SAFE_SWEEPERS


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo"])
def test_optimization_results_are_saved_never_through_a_planted_file(tmp_path: Path, kind: str) -> None:
    """hydra-optuna-sweeper's ``_impl`` ends its study with ``OmegaConf.save(..., SWEEP/
    optimization_results.yaml)``, a plain open: under :func:`saved_safely` (how ``optuna_objective``
    runs it) the same call writes a new regular file; a link's victim is byte-identical, a FIFO
    never blocks. Outside the block the module's ``OmegaConf`` is the real one again."""
    import types

    from omegaconf import OmegaConf

    from flopsweep.hydrafiles import saved_safely

    victim, _ = _victims(tmp_path)
    impl = types.ModuleType("stand_in_impl")  # the plugin's module as the sweep sees it
    impl.OmegaConf = OmegaConf
    exec(  # the plugin's own lines (hydra-optuna-sweeper 1.2, _impl.py, end of sweep)
        "def finish(sweep_dir):\n"
        "    OmegaConf.save(OmegaConf.create({'name': 'optuna', 'best_value': 1.5}),"
        " f'{sweep_dir}/optimization_results.yaml')\n",
        impl.__dict__,
    )
    path = tmp_path / "optimization_results.yaml"
    if kind == "link":
        path.symlink_to(victim)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "made-by-nobody")
    else:
        os.mkfifo(path)
    with saved_safely(impl):
        impl.finish(tmp_path)
    assert impl.OmegaConf is OmegaConf
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and st.st_nlink == 1
    assert OmegaConf.load(path).best_value == 1.5
    assert victim.read_text() == "precious" and not (tmp_path / "made-by-nobody").exists()


def test_the_optuna_objective_sweeper_saves_its_results_safely() -> None:
    """Where the plugin is installed: its ``_impl`` module saves through ``OmegaConf`` (the name
    :func:`saved_safely` replaces), and the sweeper's ``sweep`` enters the block."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper._impl")
    import inspect

    from hydra_plugins.hydra_optuna_sweeper import _impl

    from hydra_plugins.flopsweep_optuna import OptunaSweeper

    assert "OmegaConf.save(" in inspect.getsource(_impl) and hasattr(_impl, "OmegaConf")
    assert "saved_safely(_impl)" in inspect.getsource(OptunaSweeper.sweep)


def test_a_job_folder_that_is_a_link_is_refused_never_followed(tmp_path: Path) -> None:
    """The job's folder itself planted as a link to another folder (or a dangling one, or a FIFO):
    run_job refuses it in one line before anything is written; the log handler writes nothing
    there; the other folder stays empty."""
    _, victim_dir = _victims(tmp_path)
    for kind in ("link", "dangling", "fifo"):
        job = tmp_path / kind
        if kind == "link":
            job.symlink_to(victim_dir)
        elif kind == "dangling":
            job.symlink_to(tmp_path / "made-by-nobody")
        else:
            os.mkfifo(job)
        files = {name: "x: 1\n" for name in HYDRA_FILES}
        with pytest.raises(JobFolderUnwritable) as info:  # run.py: exit 1, not a record refused's 2
            run_job(RunConfig(device="cpu"), JobInfo(job_dir=job, overrides=[], hydra_files=files))
        line = str(info.value)
        assert line.startswith(f"{job} is a ") and "never followed or written through. Fix: remove" in line
        handler = JobLogHandler(str(job / "run.log"))
        handler.emit(logging.makeLogRecord({"msg": "a log line"}))
        handler.close()
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]
    assert not (tmp_path / "made-by-nobody").exists()


def test_a_private_folder_is_made_0700_and_refuses_what_was_planted(tmp_path: Path) -> None:
    """:func:`flopsweep.safe_folders.private_folder` (submitit's folder): made with mode 0700; a link, a
    FIFO or a file at its name, or a link or FIFO inside (two levels) refuses it in one line; a
    group-writable folder of this user is kept and made private."""
    from flopsweep.safe_folders import private_folder

    _, victim_dir = _victims(tmp_path)
    fresh = private_folder(tmp_path / "sweep" / ".submitit")
    assert stat.S_IMODE(os.lstat(fresh).st_mode) == 0o700
    for kind in ("link", "fifo", "file", "link inside", "fifo inside", "link two levels down"):
        folder = tmp_path / kind / ".submitit"
        folder.parent.mkdir()
        if kind == "link":
            folder.symlink_to(victim_dir)
        elif kind == "fifo":
            os.mkfifo(folder)
        elif kind == "file":
            folder.write_text("x")
        else:
            (folder / "4242").mkdir(parents=True)
            inner = folder / "4242" if "two levels" in kind else folder
            os.mkfifo(inner / "x_submitted.pkl") if "fifo" in kind else (
                inner / "x_submitted.pkl"
            ).symlink_to(victim_dir / "config.yaml")
        with pytest.raises(RecordUnwritable) as info:
            private_folder(folder)
        line = str(info.value)
        assert "never followed or written through" in line and "\n" not in line, (kind, line)
        assert str(folder) in line and info.value.fix.startswith("remove "), (kind, line)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    (shared / "1_submitted.pkl").write_bytes(b"mine")
    assert private_folder(shared) == shared and stat.S_IMODE(os.lstat(shared).st_mode) == 0o755
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]


def test_the_sweep_dir_is_absolute_from_the_folder_the_sweep_started_in(tmp_path) -> None:
    """``hydrafiles.sweep_dir``: a relative ``hydra.sweep.dir`` joins ``hydra.runtime.cwd`` (not the
    job folder a ``hydra.job.chdir=true`` job runs in); an absolute one is kept; a root config or its
    ``hydra`` node alike."""
    from omegaconf import OmegaConf

    from flopsweep.hydrafiles import sweep_dir

    root = OmegaConf.create({"hydra": {"sweep": {"dir": "multirun/x"}, "runtime": {"cwd": str(tmp_path)}}})
    assert sweep_dir(root) == sweep_dir(root.hydra) == tmp_path / "multirun" / "x"
    root.hydra.sweep.dir = "/abs/S"
    assert sweep_dir(root) == Path("/abs/S")
