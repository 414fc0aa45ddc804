"""A section of an ``ok`` record written as ``null`` is a wrong type (session 38, docs/reliability-8.md
#446-#448): ``"config": null``, ``config.backend: null``, ``"metrics": null`` were used by the analysis,
``resume=true`` and the tuner as if the record were whole, where a list or a text there was refused
(#410-#414). One decision, :func:`flopsweep.plausible.section_problems`, refuses them all; an absent group
(an older record's) stays read.

The record is a real one: ``tests/fixtures/cpu-run/metrics.json``, written by ``flopsweep model=gpt-tiny
device=cpu steps.warmup=1 steps.measure=2 seed=0`` (one CPU rank), copied and edited here; no subprocess."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest
from helpers import ROOT, edit, put

from analysis import load
from flopsweep.calibration_files import calibration_records
from flopsweep.checks import validate
from flopsweep.plausible import calibration_problems, section_problems, usable_problems
from flopsweep.tune import Budget, Candidate
from hydra_plugins.flopsweep_tune.tuning import Tuning

CPU_RUN = ROOT / "tests" / "fixtures" / "cpu-run" / "metrics.json"
"""The record of a real one-rank CPU run (module docstring)."""
OVERRIDES = ["model=gpt-tiny", "device=cpu", "steps.warmup=1", "steps.measure=2", "seed=0"]
"""The run's command line, as its record has it."""

NULLED = [
    (("config",), "config is a JSON null, not an object"),
    (("config", "backend"), "config.backend is a JSON null, not an object"),
    (("config", "model"), "config.model is a JSON null, not an object"),
    (("config", "batch"), "config.batch is a JSON null, not an object"),
    (("metrics",), "metrics is a JSON null, not an object"),
    (("system",), "system is a JSON null, not an object"),
    (("run",), "run is a JSON null, not an object"),
]


def cpu_record() -> dict:
    """A fresh copy of the real CPU run's record."""
    return json.loads(CPU_RUN.read_text())


def nulled(path: tuple[str, ...]) -> dict:
    return edit(cpu_record(), path, None)


def test_the_cpu_record_is_ok_and_passes() -> None:
    record = cpu_record()
    assert record["status"] == "ok" and record["system"]["device_name"] == "cpu"
    assert record["run"]["overrides"] == OVERRIDES
    assert usable_problems(record) == [] == section_problems(record)


@pytest.mark.parametrize(("path", "phrase"), NULLED)
def test_a_null_section_is_a_wrong_type_in_the_one_decision(path, phrase) -> None:
    """Was: ``usable_problems`` empty for each (null was read as "may lack it")."""
    record = nulled(path)
    assert usable_problems(record)[0] == phrase
    assert calibration_problems(record) == usable_problems(record)


def test_an_absent_group_or_a_failed_runs_null_model_still_reads() -> None:
    """Older records lack some groups (``config.cost``, ``config.space``: 1,777 absences in the shipped and
    fixture records, no explicit null): absent stays allowed; so does ``"model": null`` of a record that is
    not ``ok``. A failed record's null ``config.backend`` is unreadable, as a list there is."""
    record = cpu_record()
    del record["config"]["cost"], record["config"]["space"]
    assert usable_problems(record) == [] == section_problems(record)
    failed = cpu_record()
    failed.update(status="error", model=None)
    assert section_problems(failed) == []
    failed["config"]["backend"] = None
    assert section_problems(failed) == ["config.backend is a JSON null, not an object"]
    assert usable_problems(failed) == []  # not ok: nothing uses its figures


@pytest.mark.parametrize(("path", "phrase"), NULLED[1:4])
def test_resume_runs_a_null_group_record_again(hydra_compose, tmp_path, caplog, path, phrase) -> None:
    """Was: ``skipped (resume=true): ... already holds an ok record of this config`` for ``config.backend:
    null``. Now it is run again, said in one line."""
    from flopsweep.job import ok_record

    # as the job resolved them before it ran: one rank, dense attention
    cfg = validate(hydra_compose([*OVERRIDES, "resume=true", "nproc_per_node=1", "attention.density=1.0"]))
    metrics = put(tmp_path, cpu_record())
    assert ok_record(metrics, cfg) == cpu_record()  # the real record of this config: kept
    metrics.write_text(json.dumps(nulled(path)))
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        assert ok_record(metrics, cfg) is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == f"resume=true: running again: {metrics} fails its checks: {phrase}"


def test_the_tuner_never_ranks_a_null_group_record(tmp_path: Path) -> None:
    """Was: the record's ``model_tflops_per_device`` was the objective (ranked)."""
    put(tmp_path / "0", cpu_record())
    put(tmp_path / "1", nulled(("config", "backend")))
    tuning = type("T", (), {"objective": "model_tflops_per_device", "budget": Budget(1000.0)})()
    good, bad = Candidate(index=0, overrides=(), label="x"), Candidate(index=1, overrides=(), label="y")
    Tuning.take(tuning, good, tmp_path / "0")
    Tuning.take(tuning, bad, tmp_path / "1")
    assert good.failed is None and good.values == [cpu_record()["metrics"]["model_tflops_per_device"]]
    assert len(bad.values) == 1 and math.isnan(bad.values[0])
    assert bad.failed.endswith("fails its checks: config.backend is a JSON null, not an object")


@pytest.mark.parametrize(("path", "phrase"), NULLED[1:4])
def test_the_analysis_and_calibration_skip_a_null_group_record(tmp_path, caplog, path, phrase) -> None:
    """Was: ``python -m analysis`` ranked it (``2 runs (2 ok)``, a blank backend). Now ``1 run (1 ok); 1
    unreadable record skipped``; ``predict.calibration`` keeps the good record alone."""
    good = put(tmp_path / "0", cpu_record())
    bad = nulled(path)
    bad["run"]["id"] = "edited"
    put(tmp_path / "1", bad)
    with caplog.at_level(logging.WARNING, logger="analysis"):
        df = load(tmp_path)
    assert len(df) == 1 and [w.replace("'", "") for w in df.attrs["unreadable"].values()] == [phrase]
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        assert [p for p, _ in calibration_records(str(tmp_path))] == [str(good)]
