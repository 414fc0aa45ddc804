"""Issue 40, the members a fresh-user trial found still open (round five): a ``hydra.sweep.dir`` or
``hydra.run.dir`` that is no folder, or lies inside a run's own files, is refused before anything is
written; a sweep whose job folder was planted is refused before its first job runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers import run_py, validate

from flopsweep.config import ConfigError
from flopsweep.hydrafiles import output_folder_problem
from flopsweep.limits import MAX_BY_KEY


def _plant(path: Path, kind: str, target: Path) -> None:
    """A link to a folder, a link to a link, a dangling link, a FIFO, a file or a socket at ``path``."""
    if kind == "link":
        path.symlink_to(target, target_is_directory=True)
    elif kind == "link-to-link":
        (path.parent / f"{path.name}-hop").symlink_to(target, target_is_directory=True)
        path.symlink_to(path.parent / f"{path.name}-hop")
    elif kind == "dangling":
        path.symlink_to(path.parent / "made-by-nobody")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "file":
        path.write_text("theirs")
    else:
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()


@pytest.mark.parametrize("key", ["hydra.sweep.dir", "hydra.run.dir"])
@pytest.mark.parametrize("kind", ["link", "link-to-link", "dangling", "fifo", "file", "socket"])
def test_an_output_folder_that_is_no_folder_is_refused_naming_what_is_there(
    tmp_path: Path, key: str, kind: str
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    path = tmp_path / "out"
    _plant(path, kind, victim)
    for spelling in (str(path), f"{path}/", f"{path}/.", f"{tmp_path}/x/../out"):
        line = output_folder_problem(key, spelling)
        assert line is not None and line.startswith(f"Invalid config: {key}={spelling}: is a "), line
        assert "never followed" in line and f"Fix: remove {path} if it is yours" in line, line
    what = {"fifo": "a FIFO", "file": "a regular file", "socket": "a socket"}
    expected = what.get(kind, "a dangling symbolic link" if kind == "dangling" else "a symbolic link (to ")
    assert f": is {expected}" in output_folder_problem(key, str(path))
    assert list(victim.iterdir()) == [] and not (tmp_path / "made-by-nobody").exists()


@pytest.mark.parametrize("folder", [".hydra", ".submitit", ".flopsweep"])
def test_an_output_folder_inside_a_runs_own_files_is_refused(tmp_path: Path, folder: str) -> None:
    """Inside ``.hydra``, ``.submitit`` or the scratch folder, as written or through a link that leads
    there (the link's own name is innocent); a real folder elsewhere, or a missing one, passes."""
    own = tmp_path / "R" / folder
    own.mkdir(parents=True)
    (tmp_path / "innocent").symlink_to(own, target_is_directory=True)
    for key in ("hydra.run.dir", "hydra.sweep.dir"):
        for value in (own, own / "x" / "y", tmp_path / "innocent" / "x"):
            line = output_folder_problem(key, str(value))
            assert line == (
                f"Invalid config: {key}={value}: is inside a {folder} folder, a run's own files; the records "
                f"and Hydra's files would be written among them. Fix: choose another {key}, e.g. "
                f"{key}={tmp_path / 'R'}-2, outside any .hydra, .submitit, .flopsweep folder."
            )
        assert output_folder_problem(key, str(tmp_path / "R")) is None
        assert output_folder_problem(key, str(tmp_path / "new" / "deeper")) is None
        assert output_folder_problem(key, str(tmp_path / "R" / "hydra")) is None


@pytest.mark.slow
def test_a_sweep_dir_that_is_a_link_or_a_fifo_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """``hydra.sweep.dir`` a link to another folder (as written, and from a config value the command
    line cannot see: ``${oc.env:...}``), a dangling link, a FIFO: one line naming the key, the value,
    what is there and the fix; no traceback; the other folder stays empty, no lock file beside it, and
    nothing is made where the dangling link leads."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "L").symlink_to(victim, target_is_directory=True)
    (tmp_path / "D").symlink_to(tmp_path / "made-by-nobody")
    os.mkfifo(tmp_path / "F")
    cases = [
        (["hydra.sweep.dir=" + str(tmp_path / "L")], 2, "is a symbolic link (to "),
        (["hydra.sweep.dir=${oc.env:FLOPSWEEP_TEST_DIR}"], 2, "is a symbolic link (to "),
        (["hydra.sweep.dir=" + str(tmp_path / "D")], 2, "is a dangling symbolic link"),
        (["hydra.sweep.dir=" + str(tmp_path / "F")], 2, "is a FIFO"),
    ]
    for args, code, what in cases:
        done = run_py(
            "-m", "plan=true", "device=cpu", "seed=1,2", *args,
            env={"FLOPSWEEP_TEST_DIR": str(tmp_path / "L")}, timeout=300,
        )  # fmt: skip
        line = done.stderr.strip().splitlines()[-1]
        assert done.returncode == code and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert line.startswith("flopsweep: Invalid config: hydra.sweep.dir=") and f": {what}" in line, line
        assert "Fix: remove" in line and "cannot make the directory" not in line, line
        assert "job 1/2" not in done.stdout
    assert list(victim.iterdir()) == [] and not (tmp_path / "made-by-nobody").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D", "F", "L", "victim"]


@pytest.mark.slow
def test_a_run_or_sweep_inside_another_runs_hydra_folder_is_refused(tmp_path: Path) -> None:
    """``hydra.run.dir=R/.hydra plan=true`` and ``-m hydra.sweep.dir=R/.submitit/s`` (and the same from
    a config value) exit with one line; another run's ``.hydra/`` is byte-identical."""
    run = tmp_path / "R"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("theirs: 1\n")
    (run / ".submitit").mkdir()
    cases = [
        (("plan=true", "device=cpu", f"hydra.run.dir={run / '.hydra'}"), 2, "hydra.run.dir", ".hydra"),
        (("plan=true", "device=cpu", "hydra.run.dir=${oc.env:FLOPSWEEP_TEST_DIR}"), 2,
         "hydra.run.dir", ".hydra"),
        (("-m", "plan=true", "device=cpu", "seed=1,2", f"hydra.sweep.dir={run / '.submitit' / 's'}"), 2,
         "hydra.sweep.dir", ".submitit"),
        (("-m", "plan=true", "device=cpu", "seed=1,2", "hydra.sweep.subdir=.hydra"), 2,
         "hydra.sweep.subdir", ".hydra"),
    ]  # fmt: skip
    for args, code, key, folder in cases:
        done = run_py(*args, env={"FLOPSWEEP_TEST_DIR": str(run / ".hydra")}, timeout=300)
        line = done.stderr.strip().splitlines()[-1]
        assert done.returncode == code and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert line.startswith(f"flopsweep: Invalid config: {key}=") and folder in line, line
    assert [p.name for p in (run / ".hydra").iterdir()] == ["config.yaml"]
    assert (run / ".hydra" / "config.yaml").read_text() == "theirs: 1\n"
    assert list((run / ".submitit").iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dangling", "link", "fifo"])
def test_a_planted_job_folder_is_refused_before_the_first_job_and_its_progress(
    tmp_path: Path, kind: str
) -> None:
    """A sweep of two jobs whose second job folder ``S/1`` was planted: refused in one line at the
    start, before job 0 runs (no progress line, no ``S/0``); the planted thing is left as it was."""
    sweep, victim = tmp_path / "S", tmp_path / "victim"
    sweep.mkdir()
    victim.mkdir()
    _plant(sweep / "1", kind, victim)
    done = run_py("-m", "plan=true", "device=cpu", "seed=1,2", f"hydra.sweep.dir={sweep}", timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"flopsweep: {sweep / '1'} is a ") and "where job 1 of this sweep goes" in line
    assert "Fix: remove" in line and "flopsweep: job" not in done.stdout, done.stdout
    assert sorted(p.name for p in sweep.iterdir()) == ["1"] and list(victim.iterdir()) == []


# --- a fix proposes only values inside every bound (item 4) -------------------------------------------

FIX_CASES = {
    # name: (overrides, the key refused)
    "pp near 2^31": (["parallel.pp=2147483647"], "parallel.pp"),
    "pp over the layer cap": (["parallel.pp=2048"], "parallel.pp"),
    "stages per rank over the layer cap": (
        ["parallel.pp=2", "parallel.pp_schedule=Interleaved1F1B", "parallel.pp_stages_per_rank=1000",
         "model.n_layer=4", "nproc_per_node=2"],
        "parallel.pp_stages_per_rank",
    ),
    "pipeline micro-batches near 2^31": (
        ["parallel.pp=2", "parallel.pp_microbatches=2147483647", "nproc_per_node=2"],
        "parallel.pp_microbatches",
    ),
    "tp near 2^31": (["parallel.tp=2147483647"], "parallel.tp"),
    "dp_replicate near 2^31": (["parallel.dp_replicate=2147483647"], "parallel"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FIX_CASES))
def test_a_fix_proposes_only_values_inside_every_bound(hydra_compose, name: str) -> None:
    """Each refusal's fix names no number past the bound of what it proposes to set (the layer cap
    of 1,024 for ``model.n_layer``, 65,536 for a batch factor): a huge degree is never echoed back as
    a size to reach."""
    overrides, key = FIX_CASES[name]
    with pytest.raises(ConfigError) as err:
        validate(hydra_compose(["device=cpu", "backend=fsdp", *overrides]))
    message = str(err.value)
    assert message.startswith(f"Invalid config: {key}="), message
    fix = message.split("Fix: ", 1)[1]
    layers = re.findall(r"model\.n_layer to a multiple of (\d+)", fix)
    assert all(int(n) <= MAX_BY_KEY["model.n_layer"] for n in layers), fix
    assert all(int(n) <= MAX_BY_KEY["batch.grad_accum"] for n in re.findall(r"\d+", fix)), fix


# --- a compute probe on model=hf (it fell back before session 18; the console line is item 7) ---------


@pytest.mark.slow
def test_an_hf_run_is_predicted_from_its_probe(hydra_compose, tmp_path: Path, caplog) -> None:
    """``model=hf predict.probe=true``: the probe times one decoder layer of each kind with what the
    model's forward passes it (before session 18 it fell back: "no separable block"); the prediction
    is the probe's and the console has no fallback line (the line itself: the test below)."""
    from flopsweep.job import JobInfo, run_job

    overrides = ["model=hf", "model.config=qwen3-tiny", "device=cpu", "predict.probe=true"]
    overrides += ["steps.warmup=1", "steps.measure=1"]
    with caplog.at_level("WARNING", logger="flopsweep"):
        record = run_job(hydra_compose(overrides), JobInfo(job_dir=tmp_path / "run", overrides=overrides))
    assert record["status"] == "ok", record["error"]
    predicted = record["metrics"]["predicted"]
    assert predicted["probe"]["fallback"] is None and predicted["compute_source"] == "probe"
    assert predicted["probe"]["layers_per_kind"] == [record["model"]["n_layer"]]
    assert predicted["iteration_time_s"] > 0
    assert not [r for r in caplog.records if r.getMessage().startswith("predict.probe:")]


def test_no_probe_line_without_a_fallback() -> None:
    from flopsweep.probe_fallback import probe_fallback_line

    assert probe_fallback_line({"source": "calibrated from x", "probe": {"fallback": None}}) is None
    assert probe_fallback_line({"source": "uncalibrated"}) is None
    assert probe_fallback_line(None) is None
    line = probe_fallback_line({"source": "no prediction: y; compute probe fell back: too big"})
    assert line == "predict.probe: the compute probe fell back (too big); predicted from: no prediction: y"


# --- a relative sweep dir under hydra.job.chdir=true (the trial's D1) ------------------------------------


def test_a_relative_sweep_dir_with_chdir_runs_every_job_and_resumes(tmp_path: Path) -> None:
    """``hydra.sweep.dir=S hydra.job.chdir=true`` from ``tmp_path``: Hydra runs each job, and calls the
    job-end callbacks, inside ``S/N``, where ``S`` named ``S/N/S``: the sweep stopped after job 0 as
    "cannot write S" with a summary of 0 ok. Now every job runs in ``tmp_path/S``, the rounds of
    ``repeats=2`` share one group, the summary counts them, and ``resume=true`` skips them all. (One
    set-up: its second round is the job after job 0; several set-ups' rounds in one group are
    test_repeats.py's, CI time.)"""
    import json

    args = ["-m", "device=cpu", "steps.warmup=1", "steps.measure=1", "repeats=2", "hydra.sweep.dir=S",
            "hydra.job.chdir=true"]  # fmt: skip
    done = run_py(*args, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"flopsweep summary: 2 ok, 0 oom, 0 error, 0 invalid, 0 skipped ({tmp_path / 'S'})" in done.stdout
    records = [json.loads((tmp_path / "S" / str(n) / "metrics.json").read_text()) for n in range(2)]
    assert [r["status"] for r in records] == ["ok"] * 2 and [r["run"]["repeat"] for r in records] == [0, 1]
    assert len({r["run"]["repeat_group"] for r in records}) == 1
    assert sorted(p.name for p in (tmp_path / "S").iterdir()) == ["0", "1", "multirun.yaml"]
    again = run_py(*args, "resume=true", cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "0 ok, 0 oom, 0 error, 0 invalid, 2 skipped" in again.stdout


def test_relative_input_paths_under_chdir_name_files_of_the_start_folder(tmp_path: Path) -> None:
    """``model.config=cfgs/m.json predict.calibration=cal`` with ``hydra.job.chdir=true``: the job
    runs inside ``S/0`` and read ``S/0/cfgs/m.json`` (every job ``invalid``); now both name files of
    the folder the sweep started in (Hydra's ``to_absolute_path``), and the record says which; an empty
    ``cal`` of the start folder is refused before Hydra."""
    import json
    import shutil

    from flopsweep.models.hf_files import SHIPPED

    (tmp_path / "cfgs").mkdir()
    shutil.copy(SHIPPED / "mistral-tiny.json", tmp_path / "cfgs" / "m.json")
    (tmp_path / "cal").mkdir()
    done = run_py(
        "-m", "model=hf", "model.config=cfgs/m.json", "model.seq_len=64", "device=cpu", "steps.warmup=1",
        "steps.measure=1", "predict.calibration=cal", "hydra.sweep.dir=S", "hydra.job.chdir=true",
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    # an empty calibration folder of the start folder is refused before Hydra (session 30): no S/ made
    assert done.returncode == 2, done.stderr
    assert "predict.calibration='cal': holds no metrics.json" in done.stderr, done.stderr
    assert not (tmp_path / "S").exists()
    again = run_py(
        "-m", "model=hf", "model.config=cfgs/m.json", "model.seq_len=64", "device=cpu", "steps.warmup=1",
        "steps.measure=1", "hydra.sweep.dir=T", "hydra.job.chdir=true", cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    record = json.loads((tmp_path / "T" / "0" / "metrics.json").read_text())
    assert record["status"] == "ok", record["error"]
    assert record["config"]["model"]["config"] == str(tmp_path / "cfgs" / "m.json")
