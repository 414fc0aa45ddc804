"""A single run that its checks refuse writes nothing; a sweep's refused job keeps its record
(docs/reliability-14.md row 1032).

Was: ``flopsweep model=llama3.1-8b device=cpu`` (and any value the job's checks refuse once Hydra has
composed) printed its one line, exit 2, and left ``metrics.json`` (``invalid``), ``.hydra/`` and ``run.log``
in the run's folder, while the same refusal under ``plan=true`` left nothing. In process here, the job's
folder made and announced as Hydra and ``run.py`` do (:mod:`flopsweep.unstarted`); the record's
``system.git_sha`` is not asked of git (a unit test starts no process).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopsweep import metrics, unstarted
from flopsweep.job import JobInfo, run_job

REFUSED = ["precision=fp16", "device=cpu"]  # refused by validation on every machine
FILES = {"config.yaml": "precision: fp16\n", "overrides.yaml": "- precision=fp16\n"}


@pytest.fixture(autouse=True)
def _no_git(monkeypatch) -> None:
    monkeypatch.setattr(metrics, "git_state", lambda folder=None: (None, None))


@pytest.fixture
def hydra_made(tmp_path: Path):
    """``tmp_path/out/run`` made with an empty ``run.log``, as Hydra makes a single run's folder."""
    folder = tmp_path / "out" / "run"
    unstarted.expect(tmp_path)
    folder.mkdir(parents=True)
    (folder / unstarted.JOB_LOG).write_text("")
    unstarted.job_folder_made(folder)
    yield folder
    unstarted.PENDING.update(folder=None, keep=None, lock=None, sweep=None)


def test_a_single_run_refused_by_its_checks_writes_nothing(hydra_compose, hydra_made: Path, tmp_path) -> None:
    info = JobInfo(job_dir=hydra_made, overrides=REFUSED, hydra_files=FILES)
    record = run_job(hydra_compose(REFUSED), info)
    assert record["status"] == "invalid" and record["error"]["phase"] == "config"
    assert record["error"]["message"].startswith("Invalid config: precision='fp16': ")
    assert not (tmp_path / "out").exists()  # the folder Hydra made, its run.log and the folder above: gone


def test_an_earlier_record_stays_in_place_when_resume_is_refused(hydra_compose, hydra_made: Path) -> None:
    earlier = {"status": "ok", "run": {"id": "x"}}
    (hydra_made / "metrics.json").write_text(json.dumps(earlier))
    given = [*REFUSED, "resume=true"]
    record = run_job(hydra_compose(given), JobInfo(job_dir=hydra_made, overrides=given, hydra_files=FILES))
    assert record["status"] == "invalid"
    assert sorted(p.name for p in hydra_made.iterdir()) == ["metrics.json"]  # not set aside, no .hydra/
    assert json.loads((hydra_made / "metrics.json").read_text()) == earlier


def test_a_sweep_s_refused_job_keeps_its_invalid_record(hydra_compose, tmp_path: Path) -> None:
    job = tmp_path / "sweep" / "0"
    info = JobInfo(job_dir=job, overrides=REFUSED, job_num=0, sweep_dir=str(job.parent), hydra_files=FILES)
    record = run_job(hydra_compose(REFUSED), info)
    written = json.loads((job / "metrics.json").read_text())
    assert written["status"] == "invalid" and written["error"] == record["error"]
    assert written["error"]["phase"] == "config" and written["run"]["job_num"] == 0
    assert sorted(p.name for p in (job / ".hydra").iterdir()) == sorted(FILES)
