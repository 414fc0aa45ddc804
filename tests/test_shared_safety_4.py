"""Issue 40, safe on a shared machine (round four): no code from the folder a run starts in, not in
a rank nor in the resource tracker, and console scripts that find the project's plug-ins (class 1);
Hydra's own files never written through a link nor blocking on a FIFO (2); locks that nested
directories meet (3); a refused ``resume=true`` single run leaves ``.hydra/`` as it was (12)."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run_py

from flopsweep.callbacks import SweepBusy, lock_sweep_dir
from flopsweep.config import RunConfig
from flopsweep.files import RecordExistsError, RecordUnwritable
from flopsweep.hydrafiles import JobLogHandler, write_hydra_files
from flopsweep.job import JobInfo, run_job

HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")

# --- planted code (class 1) ----------------------------------------------------------------------

PLANTED = """import importlib, os, sys
open({marker!r}, "a").write(__name__ + " " + str(os.getpid()) + "\\n")
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules[__name__]
sys.modules[__name__] = importlib.import_module(__name__)
"""
"""A planted module: it notes that it ran, then hands on the real module, so that a run that imports
it still ends ok (as the issue found: ``ok``, and the planted code ran in every rank)."""


def plant_code(folder: Path, marker: Path) -> None:
    """Packages and modules that a Python started in ``folder`` with it on its path would import."""
    code = PLANTED.format(marker=str(marker))
    for package in ("multiprocessing", "flopsweep", "analysis", "hydra_plugins"):
        (folder / package).mkdir(parents=True)
        (folder / package / "__init__.py").write_text(code)
    for module in ("torch", "hydra", "omegaconf", "pandas", "numpy", "yaml", "json", "run"):
        (folder / f"{module}.py").write_text(code)


def console_scripts(bin_dir: Path) -> dict[str, Path]:
    """The ``[project.scripts]`` of pyproject.toml, each as the file pip writes into ``bin/``."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    bin_dir.mkdir()
    made = {}
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        made[name] = bin_dir / name
        made[name].write_text(
            f"import re\nimport sys\nfrom {module} import {function}\n"
            'if __name__ == "__main__":\n'
            '    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])\n'
            f"    sys.exit({function}())\n"
        )
    return made


def installed_packages(folder: Path) -> Path:
    """A folder holding only the packages an install puts on the path (``flopsweep``, ``analysis``:
    links to the checkout's), not the checkout: as with ``pip install -e .``, whose import hook
    hides ``hydra_plugins/flopsweep_*`` from Hydra's plug-in scan."""
    folder.mkdir()
    for package in ("flopsweep", "analysis"):
        (folder / package).symlink_to(ROOT / package)
    return folder


def plant_files(job_dir: Path, victim: Path, victim_dir: Path) -> None:
    """Links (to a file, dangling), FIFOs and a link to a folder at every path Hydra or the job
    writes in a job directory."""
    hydra = job_dir / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "config.yaml").symlink_to(victim)
    (hydra / "hydra.yaml").symlink_to(job_dir / "nowhere.yaml")
    os.mkfifo(hydra / "overrides.yaml")
    os.mkfifo(job_dir / "run.log")
    (job_dir / ".flopsweep").symlink_to(victim_dir)


@pytest.mark.slow
def test_console_scripts_and_ranks_run_no_code_planted_in_the_start_folder(tmp_path: Path) -> None:
    """``flopsweep -m backend=ddp nproc_per_node=2`` started in a folder holding a ``multiprocessing/``
    package, a ``torch.py``, a ``flopsweep/`` ... (each notes that it ran, then hands on the real
    module), with the packages installed without the checkout on the path: the sweep's plug-ins are
    found, the run is ok, and no planted module ran: not in the sweep, a rank or the resource
    tracker. Its job directory holds links and FIFOs at Hydra's paths and the scratch folder's:
    the victims are byte-identical. Then ``flopsweep-analysis`` from the same folder tables it."""
    start, marker = tmp_path / "start", tmp_path / "PLANTED_CODE_RAN"
    plant_code(start, marker)
    victim, victim_dir = tmp_path / "victim.txt", tmp_path / "victim_dir"
    victim.write_text("precious")
    victim_dir.mkdir()
    (victim_dir / "keep.txt").write_text("kept")
    sweep = tmp_path / "sweep"
    plant_files(sweep / "0", victim, victim_dir)
    (sweep / "multirun.yaml").symlink_to(victim)
    scripts = console_scripts(tmp_path / "bin")
    env = {**os.environ, "PYTHONPATH": str(installed_packages(tmp_path / "site"))}
    args = ["-m", "backend=ddp", "device=cpu", "nproc_per_node=2", "precision=fp32", "steps.warmup=1"]
    cmd = [sys.executable, str(scripts["flopsweep"]), *args, "steps.measure=1", f"hydra.sweep.dir={sweep}"]
    done = subprocess.run(cmd, cwd=start, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not marker.exists(), marker.read_text()
    record = json.loads((sweep / "0" / "metrics.json").read_text())
    assert record["status"] == "ok" and record["system"]["world_size"] == 2
    assert victim.read_text() == "precious" and [p.name for p in victim_dir.iterdir()] == ["keep.txt"]
    for path in [sweep / "multirun.yaml", sweep / "0" / "run.log", *(sweep / "0" / ".hydra").iterdir()]:
        assert stat.S_ISREG(os.lstat(path).st_mode), path
    assert "seed" in (sweep / "0" / ".hydra" / "config.yaml").read_text()
    assert "backend=ddp" in (sweep / "0" / ".hydra" / "overrides.yaml").read_text()
    assert "output_subdir: .hydra" in (sweep / "multirun.yaml").read_text()  # as Hydra wrote it
    table = [sys.executable, str(scripts["flopsweep-analysis"]), str(sweep), "--format", "csv"]
    done = subprocess.run(table, cwd=start, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "ddp" in done.stdout, done.stderr[-2000:]
    assert not marker.exists(), marker.read_text()


def test_the_run_script_says_in_one_line_when_no_checkout_is_beside_the_package(tmp_path: Path) -> None:
    from flopsweep.cli import checkout_problem

    assert checkout_problem() is None
    line = checkout_problem(tmp_path)
    assert line.startswith(f"flopsweep: run.py and conf not found beside the installed package ({tmp_path})")
    assert "Fix: install from a checkout with pip install -e ." in line and "\n" not in line


# --- Hydra's files (class 2) ---------------------------------------------------------------------


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
        with pytest.raises(RecordExistsError) as info:
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


@pytest.mark.slow
def test_a_run_whose_hydra_file_is_a_directory_says_to_remove_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / ".hydra" / "config.yaml").mkdir(parents=True)
    done = run_py("plan=true", "device=cpu", f"hydra.run.dir={run_dir}", timeout=300)
    line = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    target = run_dir / ".hydra" / "config.yaml"
    assert line.startswith(
        f"flopsweep: cannot write {target}: it is a directory, where flopsweep writes a file"
    )
    assert f"Fix: remove the directory {target} " in line


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


@pytest.mark.slow
def test_a_single_run_and_a_sweep_write_no_hydra_file_through_a_planted_link(tmp_path: Path) -> None:
    """``plan=true`` (no rank starts; the same Hydra files): a single run into a directory and a sweep
    into another, with links, dangling links and FIFOs at ``.hydra/*.yaml``, the job log,
    ``multirun.yaml`` and ``plan.csv``: both end 0, without hanging, and every victim is byte-identical."""
    victim, victim_dir = _victims(tmp_path)
    run_dir, sweep = tmp_path / "run", tmp_path / "sweep"
    plant_files(run_dir, victim, victim_dir)
    for job in ("0", "1"):
        plant_files(sweep / job, victim, victim_dir)
    (sweep / "1" / "run.log").unlink()
    (sweep / "1" / "run.log").symlink_to(victim)
    os.mkfifo(sweep / "multirun.yaml")
    (sweep / "plan.csv").symlink_to(victim)
    single = run_py("plan=true", "device=cpu", f"hydra.run.dir={run_dir}", timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    multi = run_py("-m", "plan=true", "device=cpu", "seed=1,2", f"hydra.sweep.dir={sweep}", timeout=300)
    assert multi.returncode == 0, multi.stderr[-2000:]
    written = [sweep / "multirun.yaml", sweep / "plan.csv"]
    for job in (run_dir, sweep / "0", sweep / "1"):
        written += [job / "run.log", *[job / ".hydra" / name for name in HYDRA_FILES]]
    for path in written:
        assert stat.S_ISREG(os.lstat(path).st_mode), path
    assert "seed=2" in (sweep / "1" / ".hydra" / "overrides.yaml").read_text()
    assert victim.read_text() == "precious"
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]


# --- locks that nested directories meet (class 3) ------------------------------------------------


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
            assert "choose a hydra.sweep.dir (hydra.run.dir for a single run) outside it" in line
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


@pytest.mark.slow
def test_a_run_into_a_running_sweeps_job_and_a_sweep_over_a_running_run_are_refused(tmp_path: Path) -> None:
    """This test process holds the locks a running sweep (on S) and a running run (on T/0) hold. A
    single run into S/0 and a sweep into T each exit 1 with one line, before Hydra writes anything:
    the job's scratch file, ``.hydra/`` and record are byte-identical, and T has no ``multirun.yaml``."""
    sweep, other = tmp_path / "S", tmp_path / "T"
    for job in (sweep / "0", other / "0"):
        (job / ".flopsweep").mkdir(parents=True)
        (job / ".flopsweep" / "rank0_phase.txt").write_text("measure")
        (job / ".hydra").mkdir()
        (job / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
    held = [lock_sweep_dir(sweep), lock_sweep_dir(other / "0")]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    try:
        single = run_py("device=cpu", "resume=true", f"hydra.run.dir={sweep / '0'}", timeout=300)
        multi = run_py("-m", "device=cpu", "seed=1,2", f"hydra.sweep.dir={other}", timeout=300)
    finally:
        for lock in held:
            lock.close()
    for done, busy, where in ((single, sweep, "above"), (multi, other / "0", "inside")):
        assert done.returncode == 1, done.stderr[-2000:]
        line = done.stderr.strip().splitlines()[-1]
        holder = f"another sweep or run (pid {os.getpid()})"
        assert line.startswith(f"flopsweep: {holder} is writing into {busy}, {where} "), line
        assert "Traceback" not in done.stderr
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


# --- a refused resume=true leaves .hydra/ as it was (class 12) -----------------------------------


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


# --- every sweeper, launcher and job folder of a sweep (class 2, continued) ----------------------


@pytest.mark.slow
def test_hydras_own_basic_sweeper_is_refused_before_it_writes_multirun_yaml(tmp_path: Path) -> None:
    """``hydra/sweeper=basic`` (Hydra's own, whose ``multirun.yaml`` is a plain open) with a link
    planted at ``multirun.yaml``: one line naming the sweeper and the fix, exit 1, nothing made or
    written; the default sweeper writes it as a regular file."""
    victim, _ = _victims(tmp_path)
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").symlink_to(victim)
    done = run_py(
        "-m", "hydra/sweeper=basic", "plan=true", "device=cpu", "seed=1", f"hydra.sweep.dir={sweep}"
    )
    line = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert line.startswith(
        "flopsweep: hydra/sweeper=basic (hydra._internal.core_plugins.basic_sweeper.BasicSweeper)"
    )
    assert "Fix: drop hydra/sweeper=" in line
    assert victim.read_text() == "precious" and [p.name for p in sweep.iterdir()] == ["multirun.yaml"]


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
        with pytest.raises(RecordExistsError) as info:
            run_job(RunConfig(device="cpu"), JobInfo(job_dir=job, overrides=[], hydra_files=files))
        line = str(info.value)
        assert line.startswith(f"{job} is a ") and "never followed or written through. Fix: remove" in line
        handler = JobLogHandler(str(job / "run.log"))
        handler.emit(logging.makeLogRecord({"msg": "a log line"}))
        handler.close()
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]
    assert not (tmp_path / "made-by-nobody").exists()


@pytest.mark.slow
def test_sweep_and_run_folders_planted_as_links_are_refused_in_one_line(tmp_path: Path) -> None:
    """A sweep whose job folder ``S/0`` is a link to another folder, one whose ``S/1`` is a dangling
    link, and a single run whose ``hydra.run.dir`` is a link: each ends 1 or 2 with one line naming
    the folder and no traceback; the other folder is byte-identical, nothing is made where the
    dangling link leads."""
    _, victim_dir = _victims(tmp_path)
    linked, dangling, run_dir = tmp_path / "S", tmp_path / "D", tmp_path / "R"
    linked.mkdir()
    (linked / "0").symlink_to(victim_dir)
    dangling.mkdir()
    (dangling / "1").symlink_to(tmp_path / "made-by-nobody")
    run_dir.symlink_to(victim_dir)
    for sweep, job in ((linked, "0"), (dangling, "1")):
        done = run_py("-m", "plan=true", "device=cpu", "seed=1,2", f"hydra.sweep.dir={sweep}", timeout=300)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
        line = done.stderr.strip().splitlines()[-1]
        assert str(sweep / job) in line and "never followed" in line and "Fix: remove" in line, line
    single = run_py("plan=true", "device=cpu", f"hydra.run.dir={run_dir}", timeout=300)
    assert single.returncode == 2 and "Traceback" not in single.stderr, single.stderr[-2000:]
    assert f"hydra.run.dir={run_dir}: is a symbolic link" in single.stderr.strip().splitlines()[-1]
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]
    assert not (tmp_path / "made-by-nobody").exists()


def test_a_private_folder_is_made_0700_and_refuses_what_was_planted(tmp_path: Path) -> None:
    """:func:`flopsweep.files.private_folder` (submitit's folder): made with mode 0700; a link, a
    FIFO or a file at its name, or a link or FIFO inside (two levels) refuses it in one line; a
    group-writable folder of this user is kept and made private."""
    from flopsweep.files import private_folder

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


@pytest.mark.slow
def test_submitit_local_refuses_a_planted_submitit_folder_and_makes_a_private_one(tmp_path: Path) -> None:
    """``hydra/launcher=submitit_local``: ``S/.submitit`` planted as a link to another folder, or
    holding a link where a job's pickle goes, is refused in one line, exit 1, before submitit writes
    anything; a fresh sweep makes it 0700 and runs."""
    _, victim_dir = _victims(tmp_path)
    linked, inner, fresh = tmp_path / "S", tmp_path / "I", tmp_path / "F"
    linked.mkdir()
    (linked / ".submitit").symlink_to(victim_dir)
    (inner / ".submitit").mkdir(parents=True)
    (inner / ".submitit" / "123_submitted.pkl").symlink_to(victim_dir / "config.yaml")
    args = ("-m", "hydra/launcher=submitit_local", "plan=true", "device=cpu", "seed=1")
    for sweep in (linked, inner):
        done = run_py(*args, f"hydra.sweep.dir={sweep}", timeout=300)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
        line = done.stderr.strip().splitlines()[-1]
        assert line.startswith(f"flopsweep: {sweep / '.submitit'}") and "never followed" in line, line
    done = run_py(*args, f"hydra.sweep.dir={fresh}", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert stat.S_IMODE(os.lstat(fresh / ".submitit").st_mode) == 0o700
    assert (fresh / "plan.csv").is_file()
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["submitit_local", "slurm_local"])
def test_submitit_tasks_run_no_code_planted_in_the_start_folder(tmp_path: Path, launcher: str) -> None:
    """``hydra/launcher=submitit_local`` and ``slurm_local`` started in a folder holding planted
    modules (``socket.py``, ``json.py``, ``multiprocessing/``, ...): submitit's task process (``python -m
    submitit.core._submit``) ran them until the sweep set ``PYTHONSAFEPATH``; now none runs and
    the run is ok."""
    start, marker = tmp_path / "start", tmp_path / "PLANTED_CODE_RAN"
    plant_code(start, marker)
    for module in ("socket", "signal", "pickle"):
        (start / f"{module}.py").write_text(PLANTED.format(marker=str(marker)))
    env = {**os.environ, "PYTHONPATH": str(installed_packages(tmp_path / "site"))}
    env.pop("PYTHONSAFEPATH", None)
    sweep = tmp_path / "sweep"
    args = [
        "-m",
        f"hydra/launcher={launcher}",
        "device=cpu",
        "nproc_per_node=1",
        "precision=fp32",
        "steps.warmup=1",
    ]
    cmd = [sys.executable, str(ROOT / "run.py"), *args, "steps.measure=1", f"hydra.sweep.dir={sweep}"]
    done = subprocess.run(cmd, cwd=start, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not marker.exists(), marker.read_text()
    assert json.loads((sweep / "0" / "metrics.json").read_text())["status"] == "ok"
