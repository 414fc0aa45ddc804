"""Session 34's new-user trial of run and sweep folders (docs/reliability-5.md, rows 302 and 303): a ``~``
in a sweep file's output folder is refused as on the command line, before anything is made (it made a folder
named ``~``); a plan into a run's folder of another config, and a sweep into job folders holding ``.hydra/``
files no sweep made, are refused rather than replacing those files. No process starts here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flopsweep import unstarted
from flopsweep.files import RecordExistsError
from flopsweep.folders import hydra_files_problem, sweep_folder_problem
from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)
from flopsweep.job import JobInfo
from flopsweep.job.lifecycle import run_job
from flopsweep.job.resume import other_run_problem
from flopsweep.sweep_file_hydra import output_dir_problem
from tests.unit.test_conf_files import _conf

HEAD = "# @package _global_\n"


@pytest.mark.parametrize(
    ("text", "key", "value", "leaf", "multirun"),
    [
        ("hydra: {sweep: {dir: ~/z}}\n", "hydra.sweep.dir", "~/z", "z", True),
        ('hydra: {sweep: {dir: "~/x"}}\n', "hydra.sweep.dir", "~/x", "x", True),
        ("hydra:\n  run:\n    dir: ~/r\n", "hydra.run.dir", "~/r", "r", False),
    ],
)
def test_a_tilde_in_a_sweep_files_folder_is_refused_before_anything_is_made(
    tmp_path, monkeypatch, text: str, key: str, value: str, leaf: str, multirun: bool
) -> None:
    conf = _conf(tmp_path, {"sweep/t_tilde.yaml": HEAD + text})
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    argv = [*(["-m"] if multirun else []), "+sweep=t_tilde", "model=llama-tiny", "device=cpu", "plan=true"]
    line = output_dir_problem(argv, str(conf))
    assert line == (
        f"Invalid config: conf/sweep/t_tilde.yaml: {key}={value}: a leading ~ is not expanded (Hydra takes a "
        "file's value as written, and would make a folder named ~ here). Fix: write the path out, e.g. dir: "
        f'"${{oc.env:HOME}}/{leaf}" in the file ({os.path.expanduser(value)})'
    )
    assert list(here.iterdir()) == []  # the folder check's probe never made ./~
    # the command line's own key replaces the file's: not the file's to refuse
    assert output_dir_problem([*argv, f"{key}={here / 'mine'}"], str(conf)) is None


def test_a_tilde_alone_is_yaml_null_and_a_written_out_home_passes(tmp_path, monkeypatch) -> None:
    """A bare ``~`` is YAML's null: Hydra's traceback (a null folder) before; one line now (re-trial)."""
    monkeypatch.chdir(tmp_path)
    conf = _conf(tmp_path, {"sweep/a.yaml": HEAD + "hydra: {sweep: {dir: ~}}\n"})
    assert output_dir_problem(["-m", "+sweep=a", "seed=0"], str(conf)) == (
        "Invalid config: conf/sweep/a.yaml: hydra.sweep.dir is null (YAML reads a bare ~ or an empty value "
        "as null), and Hydra needs a folder. Fix: write the folder out, e.g. dir: "
        '"${oc.env:HOME}/runs" in the file, or drop dir from it'
    )
    assert output_dir_problem(["-m", "+sweep=a", "seed=0", "hydra.sweep.dir=x"], str(conf)) is None
    conf = _conf(tmp_path / "b", {"sweep/a.yaml": HEAD + 'hydra: {sweep: {dir: "${oc.env:HOME}/z"}}\n'})
    assert output_dir_problem(["-m", "+sweep=a", "seed=0"], str(conf)) is None


def _hydra_file(job: Path, name: str = "config.yaml") -> Path:
    (job / ".hydra").mkdir(parents=True)
    path = job / ".hydra" / name
    path.write_text("mine: 1\n")
    return path


@pytest.mark.parametrize("name", ["config.yaml", "hydra.yaml", "overrides.yaml"])
def test_a_sweep_into_job_folders_holding_hydra_files_no_sweep_made_is_refused(tmp_path, name: str) -> None:
    path = _hydra_file(tmp_path / "ud2" / "0", name)
    line = sweep_folder_problem(tmp_path / "ud2", {}, resume=False)
    assert (
        line
        == hydra_files_problem(tmp_path / "ud2")
        == (
            f"hydra.sweep.dir={tmp_path / 'ud2'}: {path} is already there (no record beside it, no sweep's "
            f"multirun.yaml in {tmp_path / 'ud2'}); a sweep never replaces a file it did not make. Fix: "
            f"{another(tmp_path / 'ud2', 'hydra.sweep.dir')}, or remove {path} if it is yours"
        )
    )
    assert sweep_folder_problem(tmp_path / "ud2", {}, resume=True) == line
    assert path.read_text() == "mine: 1\n"


def test_a_sweeps_own_job_folders_keep_their_hydra_files_rewritten(tmp_path) -> None:
    _hydra_file(tmp_path / "s" / "0")  # a sweep's job folder (its multirun.yaml above): resumed, or a plan's
    (tmp_path / "s" / "multirun.yaml").write_text("hydra: {}\n")
    assert hydra_files_problem(tmp_path / "s") is None
    _hydra_file(tmp_path / "r" / "0")  # a record beside it: whose sweep is sweep_folder_problem's question
    (tmp_path / "r" / "0" / "metrics.json").write_text("{}")
    assert hydra_files_problem(tmp_path / "r") is None
    (tmp_path / "e" / "0" / ".hydra").mkdir(parents=True)  # an empty .hydra/, a new folder: nothing replaced
    assert hydra_files_problem(tmp_path / "e") is None
    assert hydra_files_problem(tmp_path / "missing") is None


def _record(folder: Path, overrides: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "metrics.json"
    path.write_text(json.dumps({"status": "ok", "run": {"id": "a1", "overrides": overrides}}))
    return path


def test_a_plan_into_a_run_folder_of_another_config_is_refused(tmp_path, hydra_compose) -> None:
    path = _record(
        tmp_path / "other", ["model=llama-tiny", "device=cpu", "steps.warmup=1", "steps.measure=1"]
    )
    (tmp_path / "other" / ".hydra").mkdir()
    (tmp_path / "other" / ".hydra" / "config.yaml").write_text("the run's\n")
    given = ["device=cpu", "plan=true", "resume=true"]
    unstarted.expect(tmp_path / "other")
    try:
        with pytest.raises(RecordExistsError) as caught:
            run_job(
                hydra_compose(given),
                JobInfo(job_dir=tmp_path / "other", overrides=given, hydra_files={"config.yaml": "x"}),
            )
    finally:
        unstarted.job_started()
    assert str(caught.value) == (
        f"hydra.run.dir={tmp_path / 'other'}: {path} is the record of another run (device=cpu "
        "model=llama-tiny steps.measure=1 steps.warmup=1; this plan: device=cpu); the plan would replace "
        f"that run's .hydra/ files with its own config. Fix: {another(tmp_path / 'other')}"
    )
    assert (tmp_path / "other" / ".hydra" / "config.yaml").read_text() == "the run's\n"
    assert not (tmp_path / "other" / "plan.csv").exists()
    # the same config (run-control keys aside: plan, resume) is that run's own folder: planned as before
    same = ["model=llama-tiny", "device=cpu", "steps.warmup=1", "steps.measure=1", "plan=true", "resume=true"]
    assert other_run_problem(path, same, plan=True) is None
