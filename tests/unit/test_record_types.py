"""A hand-edited record with a value of the wrong type (``"tokens_per_s": "fast"``, a list for the mean
step) is flagged ``check?``, never ranked or called a tie, and the warning names the file, the key,
the value and what was expected: for every key the analysis reads (:mod:`flopsweep.figure_types`).

Real records (the committed fixture), the real loader and the CLI's ``main`` in process."""

from __future__ import annotations

import copy
import json
import logging

import pytest
from helpers import fixture_record, put

from analysis import load
from analysis.__main__ import main
from analysis.load import rankable
from flopsweep.config import typed_form
from flopsweep.figure_types import CHECKS, MAX_BYTES, UNITLESS, type_problems
from flopsweep.plausible import calibration_problems, record_problems
from flopsweep.record import METRIC_SPECS


def set_at(record: dict, path: tuple[str, ...], value) -> dict:
    tree = record
    for key in path[:-1]:
        if not isinstance(tree.get(key), dict):
            tree[key] = {}
        tree = tree[key]
    tree[path[-1]] = value
    return record


def test_the_committed_ok_record_passes_every_type_check():
    assert type_problems(fixture_record()) == []
    assert record_problems(fixture_record()) == []


def test_every_metric_without_a_unit_has_an_expected_type():
    keys = {".".join(s.path or (s.key,)) for s in METRIC_SPECS if not s.unit}
    keys -= {k for k in keys if k.startswith("breakdown.")}
    assert keys <= set(UNITLESS), keys - set(UNITLESS)


WRONG = [("text", "fast"), ("list", [1, 2]), ("object", {"a": 1})]


@pytest.mark.parametrize("path", [p for p, _ in CHECKS], ids=lambda p: ".".join(p))
def test_every_key_read_with_a_wrong_type_is_named_with_its_value_and_what_was_expected(path):
    """Every key of :data:`flopsweep.figure_types.CHECKS` refuses some of text, a list and an object
    (a figure all three): one phrase naming the dotted key, the value and what was expected; the
    record may not calibrate a prediction either."""
    refused = []
    for what, value in WRONG:
        rec = set_at(fixture_record(), path, copy.deepcopy(value))
        found = [p for p in type_problems(rec) if p.startswith(".".join(path) + " ")]
        if found:
            (phrase,) = found
            assert phrase.startswith(f"{'.'.join(path)} {json.dumps(value)}: expected "), phrase
            assert phrase in calibration_problems(rec)
            refused.append(what)
    assert refused, path
    if path[0] == "metrics" and path[-1] not in UNITLESS and ".".join(path[1:]) not in UNITLESS:
        if path[-1] not in ("iteration_time_s", "budget", "predicted", "values"):
            assert refused == ["text", "list", "object"], (path, refused)


def test_the_trial_record_is_flagged_not_ranked_and_not_a_tie(tmp_path, caplog):
    """The user's trial: ``tokens_per_s="fast"`` and ``iteration_time_s.mean=[1,2]`` beside an ok copy.
    Was: the row stayed ok with TFLOPs 485.9 and both were flagged ``tie?``; no warning."""
    good = fixture_record()
    bad = fixture_record()
    bad["run"]["id"] = "edited"
    bad["metrics"]["tokens_per_s"] = "fast"
    bad["metrics"]["iteration_time_s"]["mean"] = [1, 2]
    put(tmp_path / "good", good)
    put(tmp_path / "bad", bad)
    with caplog.at_level(logging.WARNING, logger="analysis"):
        df = load(tmp_path)
    row = df[df["run_id"].eq("edited")].iloc[0]
    assert "metrics.tokens_per_s" in row["implausible"]
    assert "metrics.iteration_time_s.mean" in row["implausible"]
    assert rankable(df).tolist() == df["run_id"].ne("edited").tolist()
    said = [r.getMessage() for r in caplog.records if "bad" in r.getMessage()]
    fast = 'metrics.tokens_per_s "fast": expected a number >= 0 (1/s), not text'
    mean = "metrics.iteration_time_s.mean [1, 2]: expected a number >= 0 (s), not a list"
    assert any(fast in m and mean in m and str(tmp_path / "bad") in m for m in said), said


def test_the_cli_says_check_and_no_tie_for_a_record_of_wrong_types(tmp_path, capsys):
    good, bad = fixture_record(), fixture_record()
    bad["run"]["id"] = "edited"
    bad["metrics"]["tokens_per_s"] = "fast"
    put(tmp_path / "good", good)
    put(tmp_path / "bad", bad)
    assert main([str(tmp_path), "--width", "0"]) == 0
    out = capsys.readouterr()
    rows = out.out.split("Legend:")[0].splitlines()[1:]
    assert len(rows) == 2 and "Not significant" not in out.out and not any("tie?" in r for r in rows)
    assert ["check?" in r for r in rows].count(True) == 1 and "left out of rankings" in out.err


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("metrics", "peak_cuda_allocated_bytes"), 1e308, f"at most {typed_form(MAX_BYTES)}"),
        (("metrics", "model_flops_per_iteration"), 1e300, "at most 1e30"),
        (("metrics", "global_batch_size"), 16.5, "a whole number >= 1"),
        (("metrics", "cuda_alloc_retries"), -1, "a whole number >= 0"),
        (("metrics", "loss_finite"), "yes", "true or false"),
        (("metrics", "unsteady_steps"), [1, "x"], "a list of whole numbers"),
        (("config", "batch", "micro_batch_size"), 70000, "<= 65536"),
        (("config", "compile"), "true", "true or false"),
        (("system", "cpu_count"), 0, "a whole number >= 1"),
        (("run", "wall_s"), -5, "a number >= 0 (s)"),
        (("config", "attention", "density"), float("inf"), "a number >= 0"),
        (("system", "loadavg"), {"start": ["x"]}, "an object of lists of numbers"),
        (("run", "model_search", "probes"), [{"n_params": "big"}], "a whole number >= 0"),
    ],
)
def test_out_of_range_and_wrong_kind_values_are_named(path, value, expected):
    rec = set_at(fixture_record(), path, value)
    problems = type_problems(rec)
    assert any(expected in p for p in problems), problems


def test_a_hostile_list_names_a_few_and_a_huge_value_is_cut():
    rec = fixture_record()
    rec["metrics"]["tokens_per_s"] = "x" * 100_000
    rec["metrics"]["unsteady_steps"] = ["y"] * 100_000
    problems = type_problems(rec)
    assert problems and all(len(p) < 200 for p in problems)
