"""Issue 30, safe on a shared machine: no code run from others' files (class 1), no file written
through a planted link (2), no record path that is a link (5), locks that cannot be sidestepped (6),
no environment that lifts limits (7), ``plan=true`` tables and Ctrl-C during ``--notebook`` (15)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run_py

from flopsweep.callbacks import SweepBusy, lock_path, lock_sweep_dir
from flopsweep.config import ConfigError, RunConfig
from flopsweep.files import RecordExistsError, atomic_write_json
from flopsweep.job import JobInfo, other_run_problem, run_job
from flopsweep.plan import Environment, plan, validate

SWEEP = Path(__file__).resolve().parent / "fixtures" / "sweep"


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


# --- class 1: the notebook imports exactly the analysis that wrote it --------------------------


@pytest.mark.slow
def test_notebook_never_imports_modules_planted_in_or_above_the_output_folder(tmp_path: Path) -> None:
    """An ``analysis`` package, a ``pandas.py`` and an ``ipykernel_launcher.py`` planted in the output
    folder and the folder above it: none runs; the notebook is written with the real analysis."""
    out = tmp_path / "shared" / "out"
    marker = tmp_path / "PLANTED_CODE_RAN"
    plant = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for folder in (out, out.parent):
        (folder / "analysis").mkdir(parents=True)
        (folder / "analysis" / "__init__.py").write_text(plant)
        (folder / "flopsweep").mkdir()
        (folder / "flopsweep" / "record.py").write_text(plant)
        for module in ("pandas.py", "ipykernel_launcher.py", "IPython.py"):
            (folder / module).write_text(plant)
    cmd = [sys.executable, "-m", "analysis", str(SWEEP), "--notebook", str(out / "results.ipynb")]
    done = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists(), marker.read_text()
    nb = json.loads((out / "results.ipynb").read_text())
    source = "".join(next(c for c in nb["cells"] if c.get("id") == "import")["source"])
    assert "sys.path" not in source and "parents" not in source


# --- class 2: files created in shared folders never follow a link --------------------------------


def test_temporary_files_and_the_lock_never_write_through_a_planted_link(tmp_path: Path) -> None:
    """Links planted at every name the writers used to pick (``.NAME.PID.tmp``) and at the lock file:
    the victim is untouched, the output is a regular file, the lock is refused in one line."""
    from analysis.notebook import write

    nbformat = pytest.importorskip("nbformat")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("results.ipynb", "metrics.json"):
        (shared / f".{name}.{os.getpid()}.tmp").symlink_to(victim)
    write(nbformat.v4.new_notebook(), shared / "results.ipynb")
    atomic_write_json(shared / "metrics.json", {"status": "ok"}, overwrite=False)
    for name in ("results.ipynb", "metrics.json"):
        assert (shared / name).is_file() and not (shared / name).is_symlink()
        assert (shared / name).stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert victim.read_text() == "precious"

    sweep = shared / "sweep"
    lock_path(sweep).symlink_to(victim)
    with pytest.raises(SweepBusy, match="is a symbolic link, not a lock flopsweep made; remove it"):
        lock_sweep_dir(sweep)
    assert victim.read_text() == "precious"
    lock_path(sweep).unlink()
    lock_path(sweep).write_text("someone else's text")  # a regular file flopsweep did not create
    held = lock_sweep_dir(sweep)
    held.close()
    assert lock_path(sweep).read_text() == "someone else's text"  # never truncated or written


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --- class 5: a link where the record goes is refused before the run; a FIFO is the job's error ---


@pytest.mark.parametrize("kind", ["dangling", "loop", "to-a-record"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_record_path_that_is_a_link_is_refused_before_the_job_runs(
    tmp_path: Path, kind: str, resume: bool
) -> None:
    path = tmp_path / "metrics.json"
    if kind == "dangling":
        path.symlink_to(tmp_path / "nowhere.json")
    elif kind == "loop":
        path.symlink_to(path)
    else:
        (tmp_path / "real.json").write_text("{}")
        path.symlink_to(tmp_path / "real.json")
    with pytest.raises(RecordExistsError) as info:
        run_job(RunConfig(device="cpu", resume=resume), JobInfo(job_dir=tmp_path, overrides=[]))
    message = str(info.value)
    assert (
        message.startswith(f"{path} is a symbolic link, not a run record")
        and "Fix: remove or rename it" in message
    )
    assert "resume=true" not in message and "\n" not in message
    assert os.path.lexists(path) and not list(tmp_path.glob("metrics.*.json"))  # nothing set aside
    assert {p.name for p in tmp_path.iterdir()} <= {"metrics.json", "nowhere.json", "real.json"}


@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_fifo_at_the_record_path_is_that_jobs_error_set_aside_unopened(
    tmp_path: Path, kind: str, resume: bool
) -> None:
    """Before, a FIFO at one job's ``metrics.json`` raised, and the sweep stopped at that job. Now the
    FIFO (or a directory) is set aside as a corrupt record is, unopened, and this job's ``error``
    record takes its name; the job does not run (no worker, no world)."""
    path = tmp_path / "metrics.json"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    record = run_job(RunConfig(device="cpu", resume=resume), JobInfo(job_dir=tmp_path, overrides=[]))
    assert record["status"] == "error" and record["system"]["world_size"] is None
    error = record["error"]
    assert (error["type"], error["phase"]) == ("NotARecord", "config")
    what = "FIFO" if kind == "fifo" else "directory"
    assert error["message"].startswith(f"{path} was a {what}, not a run record; it is set aside as metrics.")
    assert "resume=true" in error["message"] and "\n" not in error["message"]
    (aside,) = tmp_path.glob("metrics.unreadable-*.json")
    assert stat.S_ISFIFO(os.lstat(aside).st_mode) if kind == "fifo" else aside.is_dir()
    assert aside.name in error["message"]
    assert json.loads(path.read_text())["error"]["type"] == "NotARecord"  # a regular file now


# --- class 6: one lock per real directory, single runs too; resume keeps to its own sweep ---------


def test_a_symlinked_spelling_of_a_locked_directory_is_refused_naming_the_holder(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    held = lock_sweep_dir(real)
    try:
        with pytest.raises(SweepBusy) as info:
            lock_sweep_dir(tmp_path / "alias" / ".." / "alias")
    finally:
        held.close()
    assert f"another sweep or run (pid {os.getpid()}) is writing into" in str(info.value)
    lock_sweep_dir(tmp_path / "alias").close()  # released: the next one gets it


@pytest.mark.slow
def test_a_single_run_with_resume_takes_the_lock(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    held = lock_sweep_dir(run_dir)  # this test process plays a running sweep or run
    try:
        proc = run_py("device=cpu", "resume=true", f"hydra.run.dir={run_dir}", timeout=300)
    finally:
        held.close()
    assert proc.returncode == 1 and "another sweep or run" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not (run_dir / "metrics.json").exists()


def test_resume_into_another_sweeps_directory_is_refused_and_moves_nothing(tmp_path: Path) -> None:
    record = {"status": "ok", "run": {"id": "abc", "overrides": ["model=gpt-tiny", "seed=1"]}}
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(record))
    same = ["seed=1", "model=gpt-tiny", "resume=true", "fault.kind=none", "timeout_s=60"]
    assert other_run_problem(path, same) is None  # the same job: run-control keys aside
    with pytest.raises(RecordExistsError) as info:
        run_job(
            RunConfig(device="cpu", resume=True),
            JobInfo(job_dir=tmp_path, overrides=["seed=2", "resume=true"]),
        )
    message = str(info.value)
    assert "is the record of another sweep or run (model=gpt-tiny seed=1; this job: seed=2)" in message
    assert "Fix: choose a new hydra.sweep.dir" in message and "\n" not in message
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # not set aside
    assert json.loads(path.read_text()) == record


def test_resume_compares_overrides_by_parsed_value_not_text(tmp_path: Path) -> None:
    """Before, a record of ``optim.lr=0.0350`` was refused as another sweep's to a rerun that wrote
    ``optim.lr=0.035``. Overrides now compare by key and value in Hydra's grammar, in any order;
    a different value (or type, or key) is still refused, and text that does not parse compares as text."""
    written = ["optim.lr=0.0350", "compile=True", "model=gpt-tiny", "resume=true"]
    record = {"status": "ok", "run": {"id": "abc", "overrides": written}}
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(record))
    for same in (
        ["model=gpt-tiny", "compile=true", "optim.lr=0.035"],
        ["optim.lr=3.5e-2", "model='gpt-tiny'", "compile=True", "timeout_s=60"],
    ):
        assert other_run_problem(path, same) is None, same
    for other in (
        ["model=gpt-tiny", "compile=true", "optim.lr=0.036"],  # another value
        ["model=gpt-tiny", "compile=true", "optim.lr=1"],  # another type (int, not float)
        ["model=gpt-tiny", "compile=1", "optim.lr=0.035"],  # 1 is not true
        ["+model=gpt-tiny", "compile=true", "optim.lr=0.035"],  # another key element
        ["model=gpt-tiny", "compile=true"],  # a key missing
    ):
        assert other_run_problem(path, other) is not None, other
    with pytest.raises(RecordExistsError) as info:
        run_job(
            RunConfig(device="cpu", resume=True),
            JobInfo(job_dir=tmp_path, overrides=["compile=true", "optim.lr=0.035", "model=gpt-small"]),
        )
    message = str(info.value)
    assert "another sweep or run (compile=True model=gpt-tiny optim.lr=0.0350; this job: " in message
    assert "\n" not in message and json.loads(path.read_text()) == record
    unparsed = {"status": "ok", "run": {"id": "abc", "overrides": ["seed=((", "optim.lr=0.0350"]}}
    path.write_text(json.dumps(unparsed))
    assert other_run_problem(path, ["optim.lr=0.0350", "seed=(("]) is None  # unparsed: equal text
    assert other_run_problem(path, ["optim.lr=0.035", "seed=(("]) is not None  # unparsed: text differs


# --- class 7: only the launcher's task lifts the limits; every number bounded --------------------


def test_an_salloc_shell_keeps_the_cpu_rank_cap_and_only_a_launcher_task_lifts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("SUBMITIT_EXECUTOR", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # every salloc shell has it
    env = Environment.detect()
    assert env.slurm_job is False
    cfg = RunConfig(device="cpu", nproc_per_node=str(200 * (os.cpu_count() or 1)))
    with pytest.raises(ConfigError, match="nproc_per_node=.*starts more CPU ranks than 4 per core"):
        plan(cfg, env)
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert Environment.detect().slurm_job is True


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"timeout_s": 1e14}, "timeout_s"),
        ({"timeout_s": float("nan")}, "timeout_s"),
        ({"seed": 2**32}, "seed"),
        ({"nproc_per_node": "9" * 400}, "nproc_per_node"),
    ],
)
def test_every_number_is_bounded_before_launch(override: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(RunConfig(device="cpu", **override))
    assert str(info.value).startswith(f"Invalid config: {key}=") and "\n" not in str(info.value)
    assert len(str(info.value)) < 300


def test_a_400_digit_model_size_is_refused_in_one_line(hydra_compose) -> None:
    for key in (
        "model.n_layer",
        "model.seq_len",
        "model.vocab_size",
        "batch.micro_batch_size",
        "steps.measure",
    ):
        with pytest.raises(ConfigError) as info:
            validate(hydra_compose([f"{key}={'9' * 400}", "device=cpu"]))
        line = str(info.value)
        assert line.startswith(f"Invalid config: {key}=9999") and "(400 characters)" in line, line
        assert "is beyond the bound of" in line and f"Fix: set {key} to at most" in line


# --- class 15: plan=true tables; Ctrl-C during --notebook ----------------------------------------


@pytest.mark.slow
def test_a_second_plan_into_one_folder_shows_only_its_own_jobs_and_names_the_model(tmp_path: Path) -> None:
    import csv

    for seeds in ("1,2,3", "4"):
        proc = run_py(
            "-m", f"seed={seeds}", "plan=true", "device=cpu", f"hydra.sweep.dir={tmp_path}", timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert [(r["job"], r["model"], r["status"]) for r in rows] == [("0", "gpt-tiny", "ok")]
    assert "seed=4" in rows[0]["overrides"] and "| gpt-tiny " in proc.stdout
    assert [p.name for p in tmp_path.glob(".plan.csv*")] == []  # no temporary file left


@pytest.mark.slow
def test_ctrl_c_during_notebook_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """A cell that sleeps is added to the notebook's cells; SIGINT arrives while it runs."""
    script = (
        "import sys, analysis.notebook_cells as n\n"
        "n.CELLS.insert(4, ('code', 'slow', '# Sleep.\\nimport time\\ntime.sleep(600)'))\n"
        "from analysis.__main__ import main\n"
        f"sys.exit(main([{str(SWEEP)!r}, '--notebook', 'out/results.ipynb']))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=tmp_path, env=_env(), stderr=subprocess.PIPE, text=True
    )
    lines = []
    for line in proc.stderr:  # bounded by the notebook's own cells before the sleeping one
        lines.append(line)
        if "executing cell 4/" in line and "Sleep." in line:  # whatever the notebook's cell count
            break
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    err = "".join(lines) + rest
    assert proc.returncode == 130, err[-3000:]
    assert err.splitlines()[-1] == "python -m analysis: interrupted; out/results.ipynb not written"
    assert "Traceback" not in err and not (tmp_path / "out" / "results.ipynb").exists()


def test_the_sweep_callback_pickles_for_a_task_without_its_lock(tmp_path: Path) -> None:
    """submitit pickles the sweep's callbacks for each task: the held lock (an open file of the sweep
    process) stays behind, the rest travels."""
    import cloudpickle

    from flopsweep.callbacks import SweepSummary, lock_sweep_dir

    summary = SweepSummary()
    summary.lock, summary.done = lock_sweep_dir(tmp_path / "sweep"), 3
    copy = cloudpickle.loads(cloudpickle.dumps(summary))
    assert copy.done == 3 and not hasattr(copy, "lock") and not summary.lock.closed


def test_resume_into_another_sweeps_folder_keeps_its_multirun_yaml(tmp_path: Path) -> None:
    """Before, ``resume=true`` into another sweep's folder let Hydra overwrite its ``multirun.yaml``
    (the jobs were refused one by one afterwards). Now the sweep stops first, in one line; the same
    sweep resumes (``resume``, ``hydra.*`` and run controls aside). ``plan=true``: nothing runs."""
    first = ["-m", "model=gpt-tiny", "seed=1,2", "device=cpu", "plan=true", f"hydra.sweep.dir={tmp_path}"]
    assert run_py(*first, timeout=300).returncode == 0
    saved = (tmp_path / "multirun.yaml").read_bytes()
    other = run_py(*[a.replace("seed=1,2", "seed=3") for a in first], "resume=true", timeout=300)
    assert other.returncode == 1, other.stderr[-2000:]
    line = other.stderr.strip().splitlines()[-1]
    assert line.startswith(f"flopsweep: {tmp_path / 'multirun.yaml'} belongs to another sweep (overrides ")
    assert (
        "'device=cpu model=gpt-tiny seed=1,2' there, 'device=cpu model=gpt-tiny seed=3' here" in line
        and "Fix: choose a new" in line
    )
    assert (tmp_path / "multirun.yaml").read_bytes() == saved
    same = run_py(*first, "resume=true", "timeout_s=600", timeout=300)
    assert same.returncode == 0, same.stderr[-2000:]


def test_a_multirun_yaml_that_is_a_fifo_is_refused_unopened(tmp_path: Path) -> None:
    from flopsweep.callbacks import other_sweep_problem

    os.mkfifo(tmp_path / "multirun.yaml")
    hydra = {"job": {"config_name": "config"}, "overrides": {"task": ["seed=1"]}, "sweeper": {"params": None}}
    problem = other_sweep_problem(tmp_path, hydra)
    assert problem.startswith(f"{tmp_path / 'multirun.yaml'} is unreadable (a FIFO, not a regular file)")
    assert other_sweep_problem(tmp_path / "absent", hydra) is None


def test_a_multirun_yaml_of_the_same_values_written_otherwise_is_this_sweeps(tmp_path: Path) -> None:
    """Before, ``optim.lr=0.0350,0.07`` in ``multirun.yaml`` stopped a rerun that wrote
    ``optim.lr=0.035,0.07``; overrides and sweeper params now compare by parsed value, in any order."""
    import yaml

    from flopsweep.callbacks import other_sweep_problem

    def hydra(task: list[str], params: dict[str, str]) -> dict:
        return {"job": {"config_name": "config"}, "overrides": {"task": task}, "sweeper": {"params": params}}

    saved = hydra(["optim.lr=0.0350,0.07", "compile=True"], {"seed": "1,2", "optim.beta1": "0.90"})
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump({"hydra": saved}))
    same = hydra(
        ["compile=true", "optim.lr=3.5e-2,0.07", "resume=true"], {"optim.beta1": "0.9", "seed": "1,2"}
    )
    assert other_sweep_problem(tmp_path, same) is None
    other = hydra(["compile=true", "optim.lr=0.035,0.08"], {"seed": "choice(1,2)", "optim.beta1": "0.9"})
    problem = other_sweep_problem(tmp_path, other)
    assert problem == (
        f"{tmp_path / 'multirun.yaml'} belongs to another sweep (overrides "
        "'compile=True optim.lr=0.0350,0.07' there, 'compile=true optim.lr=0.035,0.08' here); "
        "resume=true would overwrite it. Fix: choose a new "
        "hydra.sweep.dir, or resume with the command line that started this sweep"
    )


@pytest.mark.slow
def test_a_fifo_at_one_jobs_record_does_not_stop_the_sweep(tmp_path: Path) -> None:
    """Job 0's ``metrics.json`` is a FIFO: that job is an ``error`` record, job 1 runs ``ok``."""
    (tmp_path / "0").mkdir()
    os.mkfifo(tmp_path / "0" / "metrics.json")
    proc = run_py(
        "-m", "seed=1,2", "model=gpt-tiny", "device=cpu", "precision=fp32", "steps.warmup=1",
        "steps.measure=1", f"hydra.sweep.dir={tmp_path}", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    statuses = [json.loads((tmp_path / str(j) / "metrics.json").read_text())["status"] for j in (0, 1)]
    assert statuses == ["error", "ok"]
    assert "flopsweep summary: 1 ok, 0 oom, 1 error, 0 invalid, 0 skipped" in proc.stdout + proc.stderr
