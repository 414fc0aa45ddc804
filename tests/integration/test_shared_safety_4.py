"""Issue 40, safe on a shared machine (round four): no code from the folder a run starts in, not in
a rank nor in the resource tracker, and console scripts that find the project's plug-ins (class 1);
Hydra's own files never written through a link nor blocking on a FIFO (2); locks that nested
directories meet (3); a refused ``resume=true`` single run leaves ``.hydra/`` as it was (12)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run_py
from unit.test_shared_safety_4 import HYDRA_FILES, _victims  # shared with the unit tier

from flopsweep.callbacks import lock_sweep_dir
from flopsweep.free_folder import another  # the folder a fix names (#725)

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
    writes in a job directory, but the job's log: a ``run.log`` that is no regular file is refused before
    Hydra starts since session 36 (docs/reliability-6.md #361/#362; :func:`plant_log`)."""
    hydra = job_dir / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "config.yaml").symlink_to(victim)
    (hydra / "hydra.yaml").symlink_to(job_dir / "nowhere.yaml")
    os.mkfifo(hydra / "overrides.yaml")
    (job_dir / ".flopsweep").symlink_to(victim_dir)


def plant_log(job_dir: Path, victim: Path) -> None:
    """A FIFO at ``job_dir/run.log``, or a link to ``victim`` where ``job_dir`` is job 1's."""
    if job_dir.name == "1":
        (job_dir / "run.log").symlink_to(victim)
    else:
        os.mkfifo(job_dir / "run.log")


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


@pytest.mark.slow
def test_a_run_whose_hydra_file_is_a_directory_says_to_remove_it(tmp_path: Path) -> None:
    """Refused before a worker or a write since session 35 (docs/reliability-5.md #315: anything at a
    ``.hydra/`` file's name that no run explains, as a sweep's), exit 2; it was exit 1 at the write."""
    run_dir = tmp_path / "run"
    (run_dir / ".hydra" / "config.yaml").mkdir(parents=True)
    done = run_py("plan=true", "device=cpu", f"hydra.run.dir={run_dir}", timeout=300)
    line = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    target = run_dir / ".hydra" / "config.yaml"
    assert line.startswith(f"flopsweep: hydra.run.dir={run_dir}: {target} is already there")
    assert line.endswith(f"Fix: {another(run_dir)}, or remove {target} if it is yours")
    assert target.is_dir()


@pytest.mark.slow
def test_a_single_run_and_a_sweep_write_no_hydra_file_through_a_planted_link(tmp_path: Path) -> None:
    """``plan=true`` (no rank starts; the same Hydra files): a single run into a directory and a sweep
    into another, with links, dangling links and FIFOs at ``.hydra/*.yaml`` and ``multirun.yaml``: the
    sweep ends 0, without hanging, and every victim is byte-identical. A link at the sweep's ``plan.csv``
    (no plan of a sweep made it) is refused first, exit 2, nothing written (session 33), then a FIFO or a
    link at a job's ``run.log`` (session 36, docs/reliability-6.md #362), until they are removed;
    the single run's folder (no record, no plan, no sweep's ``multirun.yaml``) is refused, exit 2, its links
    left as they were (session 35, docs/reliability-5.md #315)."""
    victim, victim_dir = _victims(tmp_path)
    run_dir, sweep = tmp_path / "run", tmp_path / "sweep"
    plant_files(run_dir, victim, victim_dir)
    for job in ("0", "1"):
        plant_files(sweep / job, victim, victim_dir)
        plant_log(sweep / job, victim)
    os.mkfifo(sweep / "multirun.yaml")
    (sweep / "plan.csv").symlink_to(victim)
    single = run_py("plan=true", "device=cpu", f"hydra.run.dir={run_dir}", timeout=300)
    assert single.returncode == 2 and "is already there" in single.stderr, single.stderr[-2000:]
    kinds = [stat.S_IFMT(os.lstat(run_dir / ".hydra" / name).st_mode) for name in HYDRA_FILES]
    assert kinds == [stat.S_IFLNK, stat.S_IFLNK, stat.S_IFIFO]  # as planted: config, hydra, overrides
    multi = run_py("-m", "plan=true", "device=cpu", "seed=1,2", f"hydra.sweep.dir={sweep}", timeout=300)
    assert multi.returncode == 2 and f"{sweep / 'plan.csv'} is already there (a symbolic link" in multi.stderr
    assert stat.S_ISFIFO(os.lstat(sweep / "multirun.yaml").st_mode) and victim.read_text() == "precious"
    (sweep / "plan.csv").unlink()
    multi = run_py("-m", "plan=true", "device=cpu", "seed=1,2", f"hydra.sweep.dir={sweep}", timeout=300)
    assert multi.returncode == 2 and f"{sweep / '0' / 'run.log'} is a FIFO, not the job's log" in multi.stderr
    assert stat.S_ISFIFO(os.lstat(sweep / "multirun.yaml").st_mode) and (sweep / "1" / "run.log").is_symlink()
    for job in ("0", "1"):
        (sweep / job / "run.log").unlink()
    multi = run_py("-m", "plan=true", "device=cpu", "seed=1,2", f"hydra.sweep.dir={sweep}", timeout=300)
    assert multi.returncode == 0, multi.stderr[-2000:]
    written = [sweep / "multirun.yaml", sweep / "plan.csv"]
    for job in (sweep / "0", sweep / "1"):
        written += [job / "run.log", *[job / ".hydra" / name for name in HYDRA_FILES]]
    for path in written:
        assert stat.S_ISREG(os.lstat(path).st_mode), path
    assert "seed=2" in (sweep / "1" / ".hydra" / "overrides.yaml").read_text()
    assert victim.read_text() == "precious"
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]


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
        after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}  # the locks still held
    finally:
        for lock in held:
            lock.close()
    for done, busy, where in ((single, sweep, "above"), (multi, other / "0", "inside")):
        assert done.returncode == 1, done.stderr[-2000:]
        line = done.stderr.strip().splitlines()[-1]
        holder = f"another sweep or run (pid {os.getpid()})"
        assert line.startswith(f"flopsweep: {holder} is writing into {busy}, {where} "), line
        assert "Traceback" not in done.stderr
    assert after == before
    assert not list(tmp_path.rglob("*flopsweep-lock"))  # unlinked by their holder on release


@pytest.mark.slow
def test_hydras_own_basic_sweeper_is_refused_before_it_writes_multirun_yaml(tmp_path: Path) -> None:
    """``hydra/sweeper=basic`` (Hydra's own, whose ``multirun.yaml`` is a plain open) with a link
    planted at ``multirun.yaml``: one line naming the sweeper and the fix, exit 2, nothing made or
    written; the default sweeper writes it as a regular file."""
    victim, _ = _victims(tmp_path)
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").symlink_to(victim)
    done = run_py(
        "-m", "hydra/sweeper=basic", "plan=true", "device=cpu", "seed=1", f"hydra.sweep.dir={sweep}"
    )
    line = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert line.startswith(
        "flopsweep: hydra/sweeper=basic (hydra._internal.core_plugins.basic_sweeper.BasicSweeper)"
    )
    assert "Fix: drop hydra/sweeper=" in line
    assert victim.read_text() == "precious" and [p.name for p in sweep.iterdir()] == ["multirun.yaml"]


@pytest.mark.slow
def test_sweep_and_run_folders_planted_as_links_are_refused_in_one_line(tmp_path: Path) -> None:
    """A sweep whose job folder ``S/0`` is a link to another folder, one whose ``S/1`` is a dangling
    link, and a single run whose ``hydra.run.dir`` is a link: each ends 2 (a folder refused) with one line
    naming
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
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        line = done.stderr.strip().splitlines()[-1]
        assert str(sweep / job) in line and "never followed" in line and "Fix: remove" in line, line
    single = run_py("plan=true", "device=cpu", f"hydra.run.dir={run_dir}", timeout=300)
    assert single.returncode == 2 and "Traceback" not in single.stderr, single.stderr[-2000:]
    assert f"hydra.run.dir={run_dir}: is a symbolic link" in single.stderr.strip().splitlines()[-1]
    assert [(p.name, p.read_text()) for p in victim_dir.iterdir()] == [("config.yaml", "theirs")]
    assert not (tmp_path / "made-by-nobody").exists()


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
