"""Issue 30, safe on a shared machine: no code run from others' files (class 1), no file written
through a planted link (2), no record path that is a link (5), locks that cannot be sidestepped (6),
no environment that lifts limits (7), ``plan=true`` tables and Ctrl-C during ``--notebook`` (15)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flopsweep.callbacks import SweepBusy, lock_path, lock_sweep_dir
from flopsweep.config import ConfigError, RunConfig
from flopsweep.files import JobFolderUnwritable, RecordExistsError, atomic_write_json
from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)
from flopsweep.job import JobInfo, other_run_problem, run_job
from flopsweep.launcher_choice import launcher_set
from flopsweep.plan import Environment, plan, validate


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
    assert not isinstance(info.value, JobFolderUnwritable)  # a record refused: run.py exits 2
    message = str(info.value)
    assert (
        message.startswith(f"{path} is a symbolic link, not a run record")
        and "Fix: remove or rename it" in message
    )
    assert "resume=true" not in message and "\n" not in message
    assert os.path.lexists(path) and not list(tmp_path.glob("metrics.*.json"))  # nothing set aside
    assert {p.name for p in tmp_path.iterdir()} <= {"metrics.json", "nowhere.json", "real.json"}


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
    assert f"Fix: {another(tmp_path, either=True)}" in message and "\n" not in message
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
    assert Environment.detect().slurm_job is False  # the environment alone does not make a Slurm job
    with launcher_set(
        {"_target_": "hydra_plugins.flopsweep_slurm.FlopsweepSlurmLauncher", "tasks_per_node": 1}
    ):
        assert Environment.detect().slurm_job is True  # the job's config names the Slurm launcher


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


def test_the_sweep_callback_pickles_for_a_task_without_its_lock(tmp_path: Path) -> None:
    """submitit pickles the sweep's callbacks for each task: the held lock (an open file of the sweep
    process) stays behind, the rest travels."""
    import cloudpickle

    from flopsweep.callbacks import SweepSummary, lock_sweep_dir

    summary = SweepSummary()
    summary.lock, summary.done = lock_sweep_dir(tmp_path / "sweep"), 3
    copy = cloudpickle.loads(cloudpickle.dumps(summary))
    assert copy.done == 3 and not hasattr(copy, "lock") and not summary.lock.closed


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
    (tmp_path / "0").mkdir()  # a job of it ran (a sweep that ran none is replaced: reliability-7.md #396)
    same = hydra(
        ["compile=true", "optim.lr=3.5e-2,0.07", "resume=true"], {"optim.beta1": "0.9", "seed": "1,2"}
    )
    assert other_sweep_problem(tmp_path, same) is None
    other = hydra(["compile=true", "optim.lr=0.035,0.08"], {"seed": "choice(1,2)", "optim.beta1": "0.9"})
    problem = other_sweep_problem(tmp_path, other)
    assert problem == (
        f"{tmp_path / 'multirun.yaml'} belongs to another sweep (overrides "
        "'compile=True optim.lr=0.0350,0.07' there, 'compile=true optim.lr=0.035,0.08' here); "
        f"resume=true would overwrite it. Fix: {another(tmp_path, 'hydra.sweep.dir')}, or resume with the "
        "command line that started this sweep"
    )
