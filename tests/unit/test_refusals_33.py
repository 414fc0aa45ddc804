"""Session 33 (docs/reliability-4.md, rows 280 on): a refused single plan leaves nothing behind, a sweep
file's ``hydra.sweep.dir`` is checked as the command line's, the job's line for a key added with ``+``
names the key, the value and the fix, and a plan sweep's progress line shows a refusal's whole reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from flopsweep import unstarted
from flopsweep.callbacks import progress_line
from flopsweep.checks import validate
from flopsweep.config import ConfigError
from flopsweep.job import JobInfo
from flopsweep.job.lifecycle import run_job
from flopsweep.job.planoutcome import plan_outcome
from flopsweep.sweep_file_hydra import output_dir_problem
from tests.unit.test_conf_files import _conf

ROOT = Path(__file__).resolve().parents[2]
HYDRA_FILES = {"overrides.yaml": "- plan=true\n"}
REPEAT = (
    "Invalid config: repeat=1: must be a round of repeats=1 (0 to 0). Fix: drop repeat=: the sweeper sets it "
    "from repeats=."
)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _single_plan(hydra_compose, root: Path, given: list[str], folder: Path) -> dict:
    """The single plan ``given`` in ``folder`` as Hydra runs it: the folders above made, an empty
    ``run.log``, the callback's :func:`flopsweep.unstarted.expect` (``root`` kept) and ``on_job_start``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.log").touch()
    unstarted.expect(root)
    unstarted.job_folder_made(folder)
    try:
        return run_job(
            hydra_compose(given), JobInfo(job_dir=folder, overrides=given, hydra_files=HYDRA_FILES)
        )
    finally:
        unstarted.job_started()


def test_a_refused_single_plan_leaves_no_plan_csv_and_no_folder(tmp_path: Path, hydra_compose) -> None:
    """``plan=true repeat=1``: exit 2 with its line, yet ``outputs/<date>/<time>/`` held ``plan.csv`` (its one
    ``invalid`` row), ``run.log`` and ``.hydra/``. Now nothing: the folder Hydra made is removed, and an
    earlier plan's ``plan.csv`` in a ``hydra.run.dir`` given again is kept as it was (it was replaced)."""
    given = ["plan=true", "device=cpu", "model=gpt-tiny", "repeat=1"]
    record = _single_plan(hydra_compose, tmp_path, given, tmp_path / "outputs" / "day" / "time")
    assert record["plan"]["status"] == "invalid" and record["plan"]["reason"] == REPEAT
    assert "invalid" in record["plan_csv"]  # run.py's line is read from the row's text
    assert _tree(tmp_path) == []

    kept = tmp_path / "mine"
    kept.mkdir()
    (kept / "plan.csv").write_text("an earlier plan\n")
    _single_plan(hydra_compose, tmp_path, given, kept)
    assert (
        _tree(tmp_path) == ["mine", "mine/plan.csv"]
        and (kept / "plan.csv").read_text() == "an earlier plan\n"
    )


def test_a_plan_that_is_not_refused_still_writes_its_plan_csv_and_hydra_files(
    tmp_path: Path, hydra_compose
) -> None:
    folder = tmp_path / "outputs" / "day" / "time"
    record = _single_plan(hydra_compose, tmp_path, ["plan=true", "device=cpu", "model=gpt-tiny"], folder)
    assert record["plan"]["status"] == "ok"
    assert _tree(folder) == [".hydra", ".hydra/overrides.yaml", "plan.csv", "run.log"]


def _sweep_file(tmp_path: Path, hydra: str) -> Path:
    return _conf(tmp_path, {"sweep/mine.yaml": f"# @package _global_\nhydra:\n{hydra}"})


@pytest.mark.parametrize(
    ("hydra", "said"),
    [
        (
            f"  sweep:\n    dir: {ROOT}/conf/backend/mine\n",
            f"hydra.sweep.dir={ROOT}/conf/backend/mine: is inside {ROOT}/conf (conf/, the config folder)",
        ),
        (
            f"  sweep:\n    dir: {ROOT}/sweep/mine\n",
            f"hydra.sweep.dir={ROOT}/sweep/mine: is inside {ROOT}/sweep (conf/sweep, a config group linked "
            "in)",
        ),
        (f"  run:\n    dir: {ROOT}/flopsweep/x\n", f"hydra.run.dir={ROOT}/flopsweep/x: is inside"),
        (
            "  sweep:\n    dir: ''\n",
            "hydra.sweep.dir='': an empty directory writes the records into the current",
        ),
        (
            "  sweep:\n    dir: ${hydra:runtime.cwd}/sd\n",
            "hydra.sweep.dir=${hydra:runtime.cwd}/sd: Hydra makes the sweep's folder before it sets what",
        ),
        (
            "  sweep:\n    subdir: ../escape\n",
            "hydra.sweep.subdir='../escape': each job's directory must stay",
        ),
    ],
)
def test_a_sweep_files_output_folder_is_checked_as_the_command_lines(
    tmp_path: Path, hydra: str, said: str
) -> None:
    """A ``+sweep=`` file's ``hydra.sweep.dir`` (or ``run.dir``, ``sweep.subdir``) was not checked before
    Hydra: into ``conf/`` it was refused only by the callback, after Hydra composed every job, its file
    unnamed; ``''`` wrote the sweep into the current folder, exit 0; ``${hydra:...}`` was Hydra's
    traceback, exit 1; ``../escape`` put a job outside the sweep. Now the command line's line, the file
    named."""
    conf = _sweep_file(tmp_path, hydra)
    line = output_dir_problem(["-m", "plan=true", "+sweep=mine"], str(conf))
    assert line is not None and line.startswith(f"Invalid config: conf/sweep/mine.yaml: {said}")
    assert "\n" not in line and "Fix: " in line


def test_a_sweep_folder_given_on_the_command_line_replaces_the_files(tmp_path: Path) -> None:
    conf = _sweep_file(tmp_path, f"  sweep:\n    dir: {ROOT}/conf/backend/mine\n")
    assert output_dir_problem(["-m", "+sweep=mine", f"hydra.sweep.dir={tmp_path}/sd"], str(conf)) is None
    assert (
        output_dir_problem(
            ["-m", "+sweep=mine"], str(_sweep_file(tmp_path / "ok", "  sweep:\n    dir: sd\n"))
        )
        is None
    )


def test_run_py_refuses_a_sweep_files_folder_before_hydra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is in :func:`run.refusal`'s chain (``conf/`` swapped for one holding the file)."""
    import run

    conf = _sweep_file(tmp_path, f"  sweep:\n    dir: {ROOT}/conf/backend/mine\n")
    monkeypatch.setattr(run, "RUN_CONF", str(conf))
    line = run.refusal(["-m", "plan=true", "+sweep=mine", "seed=1,2"])
    assert line is not None and line.startswith("Invalid config: conf/sweep/mine.yaml: hydra.sweep.dir=")


@pytest.mark.parametrize(
    ("section", "key", "value", "line"),
    [
        (
            "steps",
            "bogus",
            1,
            "Invalid config: steps.bogus=1: is not a key of steps (an override with '+' or '++' adds keys "
            "without checking them). Fix: drop the override that adds steps.bogus (the keys of steps are "
            "warmup, measure, max_extra_warmup, gc_freq).",
        ),
        (
            "model",
            "n_layers",
            3,
            "Invalid config: model.n_layers=3: is not a key of model (an override with '+' or '++' adds keys "
            "without checking them). Fix: write model.n_layer=3, without the '+' or '++' (model.n_layer is a "
            "key already).",
        ),
    ],
)
def test_the_jobs_line_for_an_added_key_names_the_key_the_value_and_the_fix(
    hydra_compose, section: str, key: str, value: int, line: str
) -> None:
    """It said "a '+' override" whatever was typed (``++`` too), and "Fix: remove it; the keys here are ...":
    which override, and where "here" is, unsaid."""
    cfg = hydra_compose(["device=cpu", "model=gpt-tiny"])
    setattr(getattr(cfg, section), key, value)  # what OmegaConf.to_object does with +steps.bogus=1
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert str(err.value) == line


LONG = (
    "Invalid config: model='llama70b': on the CPU the fp32 weights, gradients and AdamW states of 1 rank "
    "take at least 1051.3 GiB, more than the 23.5 GiB this machine lets a process use (its memory, or its "
    "cgroup's limit if smaller). Fix: add plan_gpu=H100 or plan_clusters=[H100:8] to plan for GPUs that are "
    "not here, or pick a smaller model (e.g. model=gpt-tiny)."
)


def test_a_plan_jobs_progress_line_shows_the_whole_reason_cut_at_a_word() -> None:
    """``1 of 2 jobs done (job 0): invalid: model='llama70b', 0:05 elapsed``: the reason read as cut at its
    first comma (it was the KEY=VALUE alone). Now the whole line, then ``; `` before the times; over 200
    characters it is cut at a word, ending `` ...``."""
    status = plan_outcome({"status": "plan", "plan": {"status": "invalid", "reason": LONG}})
    assert status == "invalid: " + LONG.removeprefix("Invalid config: ")
    line = progress_line(1, 2, 5, status=status, job=0)
    assert len(line) <= 200 and line.endswith(" ...; 0:05 elapsed, about 0:05 left")
    assert line.startswith(
        "flopsweep: 1 of 2 jobs done (job 0): invalid: model='llama70b': on the CPU the fp32 weights, "
        "gradients and "
    )
    short = plan_outcome({"status": "plan", "plan": {"status": "invalid", "reason": REPEAT}})
    assert progress_line(1, 2, 5, status=short, job=0) == (
        f"flopsweep: 1 of 2 jobs done (job 0): invalid: {REPEAT.removeprefix('Invalid config: ')}; "
        "0:05 elapsed, about 0:05 left"
    )
    assert progress_line(3, 12, 151, status="ok, 4 ranked, 6 dropped", job=2) == (
        "flopsweep: 3 of 12 jobs done (job 2): ok, 4 ranked, 6 dropped, 2:31 elapsed, about 7:33 left"
    )


def test_a_plan_sweep_stopped_by_a_refused_job_says_its_plan_is_partial(tmp_path: Path, capsys) -> None:
    """``-m plan=true 'steps.measure=3,${oc.env:HOME}'``: job 1 is refused once Hydra composed it, and the
    sweep stops (exit 1). ``plan.csv`` held job 0's row, nothing said it was not the whole plan, and the
    line was the records' summary, ``0 ok, ... (stopped early by fail_fast)``. Now the file is
    ``plan.partial.csv``, its table printed, and a line says the plan is partial from which job."""
    import os
    import time

    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf

    from flopsweep.callbacks import PARTIAL_PLAN, SweepStopped, SweepSummary
    from flopsweep.job.plantable import PLAN_COLUMNS, append_plan_row

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    row = dict.fromkeys(PLAN_COLUMNS, "")
    row.update(job=0, model="gpt-tiny", overrides="steps.measure=3", status="ok", fits=True)
    append_plan_row(sweep / "plan.csv", row)
    config = OmegaConf.create(
        {
            "plan": True,
            "plan_format": "table",
            "hydra": {
                "sweep": {"dir": str(sweep)},
                "job": {"num": 1},
                "runtime": {"output_dir": str(sweep / "1")},
            },
        }
    )
    summary = SweepSummary()
    summary.started, summary.pid, summary.total = time.monotonic(), os.getpid(), 2
    stopped = JobReturn()
    stopped.status, stopped._return_value = (
        JobStatus.FAILED,
        SweepStopped("Invalid config: steps.measure=..."),
    )
    with pytest.raises(SystemExit):
        summary.on_job_end(config, stopped)
    assert _tree(sweep) == [PARTIAL_PLAN]
    out = capsys.readouterr()
    assert "| gpt-tiny |" in out.out and "summary" not in out.out + out.err
    assert (
        f"flopsweep: the plan is partial: {sweep / PARTIAL_PLAN} holds the rows of the jobs planned before "
        "the sweep stopped at job 1 (why: below); job 1 and those after it were not planned\n"
        "flopsweep: Invalid config: steps.measure=...\n"
    ) in out.err
