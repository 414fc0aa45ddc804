"""One rule for a hand-edited or damaged ``ok`` record (session 37, reliability #410-#415): the
analysis' checks (:func:`flopsweep.plausible.usable_problems`) decide whether it may be used, and
resume, the tuner, ``predict.calibration`` and the analysis all ask that one function.

Real records (the committed fixture and the real record builder), the real readers; no subprocess."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import edit, fixture_record, put

from analysis import load
from analysis.load import rankable
from flopsweep.calibration_files import calibration_records
from flopsweep.checks import validate
from flopsweep.plausible import CONFIG_GROUPS, calibration_problems, section_problems, usable_problems
from flopsweep.tune import Budget, Candidate
from hydra_plugins.flopsweep_tune.tuning import Tuning

SECTION_EDITS = [
    (("config", "backend"), "single", "config.backend is a JSON string, not an object"),
    (("config", "backend"), ["ddp"], "config.backend is a JSON array, not an object"),
    (("config", "model"), "gpt-tiny", "config.model is a JSON string, not an object"),
    (("config",), ["x"], "config is a JSON array, not an object"),
    (("model",), None, "model is a JSON null, not an object"),
    (("model",), "gpt", "model is a JSON string, not an object"),
    (("run",), [1], "run is a JSON array, not an object"),
    (("warnings",), "oops", "warnings is a JSON string, not a list of text"),
    (("warnings",), [1, 2], "warnings is a JSON array, not a list of text"),
]
FIGURE_EDITS = [
    (("metrics", "model_tflops_per_device"), 99, "model_tflops_per_device 99"),
    (("metrics", "tokens_per_s"), "fast", 'metrics.tokens_per_s "fast"'),
]


def edited(path: tuple[str, ...], value) -> dict:
    return edit(fixture_record(), path, value)


def test_the_fixture_passes_and_every_group_of_the_config_is_checked():
    assert usable_problems(fixture_record()) == [] == section_problems(fixture_record())
    assert {"backend", "model", "batch", "parallel", "precision", "steps"} <= set(CONFIG_GROUPS)
    assert {"tag", "device", "seed"}.isdisjoint(CONFIG_GROUPS)


@pytest.mark.parametrize(("path", "value", "phrase"), SECTION_EDITS + FIGURE_EDITS)
def test_one_decision_names_each_wrong_section_or_figure(path, value, phrase):
    record = edited(path, value)
    problems = usable_problems(record)
    assert any(p.startswith(phrase) for p in problems), problems
    assert calibration_problems(record) == problems  # the calibration reader's is the same decision
    failed = edited(path, value)
    failed["status"] = "error"
    assert usable_problems(failed) == []  # not ok: nothing uses its figures


def test_a_record_that_is_not_an_object_is_its_own_phrase():
    assert usable_problems([1]) == ["the record is a JSON array, not an object"]


@pytest.mark.parametrize(("path", "value", "phrase"), SECTION_EDITS)
def test_the_analysis_skips_a_wrong_typed_section_as_unreadable(tmp_path, caplog, path, value, phrase):
    put(tmp_path / "good", fixture_record())
    bad = edited(path, value)
    if isinstance(bad["run"], dict):
        bad["run"]["id"] = "edited"
    put(tmp_path / "bad", bad)
    with caplog.at_level(logging.WARNING, logger="analysis"):
        df = load(tmp_path)
    assert len(df) == 1 and rankable(df).tolist() == [True]
    assert [why.replace("'", "") for why in df.attrs["unreadable"].values()] == [phrase]
    assert any(phrase in r.getMessage().replace("'", "") and "bad" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("path", "value", "phrase"), SECTION_EDITS[:3] + SECTION_EDITS[4:] + FIGURE_EDITS)
def test_calibration_skips_the_bad_record_and_keeps_the_good(tmp_path, caplog, path, value, phrase):
    """Was: ``config.backend ["ddp"]`` beside a good record failed the whole prediction (the step
    model failed (AttributeError: 'list' object has no attribute 'get'))."""
    good = put(tmp_path / "good", fixture_record())
    put(tmp_path / "bad", edited(path, value))
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        found = calibration_records(str(tmp_path))
    assert [p for p, _ in found] == [str(good)]
    said = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert len(said) == 1 and "fails its checks" in said[0] and phrase in said[0], said


def _ok_record(cfg) -> dict:
    """A real ok record of ``cfg`` from the builder (no figures: each test writes the ones it edits)."""
    from flopsweep.layout import Layout
    from flopsweep.metrics import build_record

    run = {"id": "r1", "overrides": [], "job_num": 0, "repeat": 0, "repeats": 1, "repeat_group": None}
    system = {"device_name": "cpu", "world_size": 1, "parallel": Layout().as_dict()}
    return build_record(cfg=cfg, status="ok", error=None, run=run, system=system, metrics={})


RESUME_EDITS = [
    *SECTION_EDITS[:2],
    SECTION_EDITS[-2],
    (("metrics", "model_tflops_per_device"), 1e300, "metrics.model_tflops_per_device 1e+300"),
    (("metrics", "tokens_per_s"), "fast", 'metrics.tokens_per_s "fast"'),
]


@pytest.mark.parametrize(("path", "value", "phrase"), RESUME_EDITS)
def test_resume_runs_a_check_failing_ok_record_again(hydra_compose, tmp_path, caplog, path, value, phrase):
    """Was: resume=true skipped an ok record with ``model_tflops_per_device`` edited to 99 (the tuner
    then named it the winner). Now it is run again, said in one line naming the file and the check."""
    from flopsweep.job import ok_record

    cfg = validate(hydra_compose(["device=cpu", "model=gpt-tiny", "resume=true"]))
    record = _ok_record(cfg)
    assert usable_problems(record) == []
    metrics = put(tmp_path, record)
    assert ok_record(metrics, cfg) == record  # passes: skipped, as before
    tree = record
    for key in path[:-1]:
        tree = tree[key]
    tree[path[-1]] = value
    metrics.write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        assert ok_record(metrics, cfg) is None  # run again
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"resume=true: running again: {metrics} fails its checks: ") and phrase in line


def _tuning(objective: str = "model_tflops_per_device") -> SimpleNamespace:
    return SimpleNamespace(objective=objective, budget=Budget(1000.0))


def test_the_tuner_never_ranks_a_check_failing_record(tmp_path: Path):
    """``take`` (the tuner's reader of each job's record): a passing record gives its objective; one
    with ``model_tflops_per_device`` 99 edited in is failed, its value NaN (never the winner)."""
    good, bad = Candidate(index=0, overrides=(), label="x"), Candidate(index=0, overrides=(), label="x")
    put(tmp_path / "0", fixture_record())
    put(tmp_path / "1", edited(("metrics", "model_tflops_per_device"), 99))
    put(tmp_path / "2", edited(("config", "backend"), ["ddp"]))
    tuning = _tuning()
    Tuning.take(tuning, good, tmp_path / "0")
    Tuning.take(tuning, bad, tmp_path / "1")
    assert good.failed is None and good.values == [fixture_record()["metrics"]["model_tflops_per_device"]]
    assert len(bad.values) == 1 and math.isnan(bad.values[0])  # never ranked
    assert bad.failed.startswith(f"{tmp_path / '1' / 'metrics.json'} fails its checks: ")
    worse = Candidate(index=0, overrides=(), label="x")
    Tuning.take(tuning, worse, tmp_path / "2")
    assert worse.failed.endswith("fails its checks: config.backend is a JSON array, not an object")


def test_rounds_of_an_edited_config_are_not_pooled(tmp_path, caplog):
    """Was: the rounds of a ``repeats=2`` sweep, one with ``config.seed`` edited to 7, pooled into one row
    by the stored ``run.setup_key``. Now two rows, and one warning naming the differing key."""
    from flopsweep.identity import record_keys

    rounds = []
    for repeat in (0, 1):
        record = fixture_record()
        record["run"].update(
            id=f"r{repeat}", repeat=repeat, repeats=2, repeat_group="g1", **record_keys(record)
        )
        rounds.append(put(tmp_path / str(repeat), record))
    assert len(load(tmp_path)) == 1  # pooled: two rounds of one set-up
    record = json.loads(rounds[1].read_text())
    record["config"]["seed"] = 7
    rounds[1].write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="analysis"):
        df = load(tmp_path)
    assert len(df) == 2 and df["setup_id"].nunique() == 2
    said = [r.getMessage() for r in caplog.records if "not pooled" in r.getMessage()]
    assert (
        len(said) == 1
        and said[0].startswith(f"{tmp_path / '1'}: its config differs")
        and "(config.seed;" in said[0]
    )
