"""A sweep cut short names its jobs that left no record (docs/reliability-11.md #727): a ``-m`` sweep of 4
tiny CPU jobs killed after its first records read as ``2 runs (1 ok, 1 error)``, the 2 jobs never run unsaid;
now ``2 of 4 jobs of S have no record (jobs 2, 3) ... Fix: flopsweep -m ... resume=true``."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from analysis.missing_jobs import missing_lines

RECORD = Path(__file__).resolve().parents[1] / "fixtures" / "records" / "v2-ok" / "metrics.json"


def _sweep(tmp_path: Path, task: list[str], done: list[int], params: dict | None = None) -> Path:
    sweep = tmp_path / "S"
    sweep.mkdir()
    hydra = {
        "overrides": {"task": task},
        "sweeper": {"params": params},
        "sweep": {"dir": str(sweep), "subdir": "${hydra.job.num}"},
    }
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
    for n in done:
        (sweep / str(n)).mkdir()
        shutil.copy(RECORD, sweep / str(n) / "metrics.json")
    return sweep


def test_a_killed_sweeps_jobs_without_a_record_are_counted_with_the_resume_fix(tmp_path: Path) -> None:
    task = ["model=llama-tiny", "device=cpu", "seed=0,1,2,3"]
    sweep = _sweep(tmp_path, task, [0, 1])
    (sweep / "2").mkdir()  # started, killed before its record
    (line,) = missing_lines([str(sweep)])
    fix = f"flopsweep -m model=llama-tiny device=cpu seed=0,1,2,3 hydra.sweep.dir={sweep} resume=true"
    assert line == (
        f"2 of 4 jobs of {sweep} have no record (jobs 2, 3): the sweep stopped before they ended (killed, or "
        f"still running). Fix: {fix} (re-runs each job without an ok record), then name {sweep} again"
    )
    assert shlex.split(fix)[-2:] == [f"hydra.sweep.dir={sweep}", "resume=true"]


@pytest.mark.parametrize(
    ("task", "params", "done", "said"),
    [
        (["repeats=2", "seed=0,1"], None, [0, 1, 2], "1 of 4 jobs"),  # rounds counted
        (["device=cpu"], {"seed": "0,1,2"}, [0], "2 of 3 jobs"),  # a sweep file's axes
        (["seed=0,1"], None, [0, 1], None),  # every job recorded: nothing said
    ],
)
def test_the_jobs_are_counted_as_the_sweeper_expands_them(
    tmp_path: Path, task: list[str], params: dict | None, done: list[int], said: str | None
) -> None:
    lines = missing_lines([str(_sweep(tmp_path, task, done, params))])
    assert lines[0].startswith(said) if said else lines == [], lines


def test_the_analysis_says_it_below_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from analysis.__main__ import main

    sweep = _sweep(tmp_path, ["seed=0,1"], [0])
    assert main([str(sweep)]) == 0
    err = capsys.readouterr().err
    assert f"1 of 2 jobs of {sweep} have no record (job 1)" in err
