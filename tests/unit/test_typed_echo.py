"""Refusals echo a value as it is typed (``null``, ``true``, ``1e9``, ``1``), never in Python's
spelling (``None``, ``True``, ``1000000000.0``, ``1.0``); a JSON value's type has JSON's name."""

from __future__ import annotations

import json

import pytest

from analysis.schema import check
from flopsweep.config import ConfigError, typed_form
from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)
from flopsweep.outcome import timeout_message
from flopsweep.safe_read import RecordError, read_json
from flopsweep.text import json_type
from hydra_plugins.flopsweep_tune import parameter_problem


@pytest.mark.parametrize(
    ("value", "typed"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (1e9, "1e9"),
        (1.0, "1"),
        (0.1, "0.1"),
        (0.0001, "0.0001"),
        (3600.0, "3600"),
        (1e30, "1e30"),
        (1.5e-7, "1.5e-7"),
        (-2.5, "-2.5"),
        (float("inf"), "inf"),
        (8, "8"),
        ("llama70b", "'llama70b'"),
    ],
)
def test_a_value_is_shown_as_typed(value, typed):
    assert typed_form(value) == typed
    if isinstance(value, float) and value != float("inf"):
        assert float(typed) == value  # it reads back the same


def test_a_config_error_echoes_the_typed_form():
    assert str(ConfigError("plan_gpu_memory_gib", 1e9, "too big", "set 80")).startswith(
        "Invalid config: plan_gpu_memory_gib=1e9: too big."
    )
    assert str(ConfigError("space.min_headroom", 1.0, "is a share in [0, 1)", "e.g. 0.1")).startswith(
        "Invalid config: space.min_headroom=1: "
    )


@pytest.mark.parametrize(("value", "shown"), [(None, "null"), (True, "true"), (float("inf"), "inf")])
def test_the_tuner_budget_asks_for_a_finite_number_and_echoes_the_value_as_typed(value, shown):
    assert parameter_problem(budget_gpu_s=value) == (
        f"Invalid config: hydra.sweeper.budget_gpu_s={shown}: must be a finite number above 0. "
        "Fix: set hydra.sweeper.budget_gpu_s=3600.0 (its default), or another such value."
    )


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (1, "number"),
        (2.5, "number"),
        ("x", "string"),
        ([1], "array"),
        ({}, "object"),
    ],
)
def test_json_types_have_json_names(value, name):
    assert json_type(value) == name


@pytest.mark.parametrize(
    ("text", "name"), [("null", "null"), ("[1, 2]", "array"), ("true", "true"), ('"x"', "string")]
)
def test_a_record_that_is_no_object_names_its_json_type(tmp_path, text, name):
    path = tmp_path / "metrics.json"
    path.write_text(text)
    with pytest.raises(RecordError, match=rf"^top level is a JSON {name}, not an object$"):
        read_json(path)


def test_a_section_or_run_id_of_the_wrong_type_names_its_json_type():
    record = {
        "schema_version": 2,
        "status": "ok",
        "run": {"id": [1]},
        "config": {},
        "system": {},
        "metrics": None,
    }
    with pytest.raises(RecordError, match=r"'metrics' is a JSON null, not an object"):
        check(record)
    with pytest.raises(RecordError, match=r"run.id is a JSON array, not a string"):
        check({**record, "metrics": {}})


def test_one_worker_is_singular():
    assert "(the rank was still starting); its one worker was stopped." in timeout_message(5, 1, "launch")
    assert "(the ranks were in warmup); all 2 workers were stopped." in timeout_message(5, 2, "warmup")


def test_sort_and_columns_count_the_same_columns_and_offer_the_nearest():
    import pandas as pd

    from analysis.query import ColumnError, check_columns

    columns = ["model", "peak_tflops", "model_tflops_per_device", "tflops_per_device", "mfu", "a", "b", "c"]
    loaded = pd.DataFrame(columns=columns)
    shown = loaded.assign(not_significant=False)  # the table's tie? flag, added before --columns is read
    said = []
    for frame, what in ((loaded, "sort"), (shown, "--columns")):
        with pytest.raises(ColumnError) as err:
            check_columns(frame, ["tflop"], what)
        said.append(str(err.value).split(f" in {what}")[1])
    assert said[0] == said[1]
    assert said[0].startswith(
        "; did you mean 'model_tflops_per_device' or 'tflops_per_device' or 'peak_tflops'?"
    )
    assert said[0].endswith("(8 in all)")


def test_a_run_folder_above_a_single_run_says_a_runs_folder_not_a_sweeps(tmp_path):
    from flopsweep.callbacks import run_folder_problem

    (tmp_path / "e7").mkdir()
    record = {"status": "ok", "run": {"id": "e7", "job_num": None}, "metrics": {}}
    (tmp_path / "e7" / "metrics.json").write_text(json.dumps(record))
    where = tmp_path / "e7" / "metrics.json"
    assert run_folder_problem(tmp_path) == (
        f"hydra.run.dir={tmp_path} is the folder above a single run's folder ({where} is there); a record "
        f"there would be read with the runs below it, as a sweep's jobs are (python -m analysis {tmp_path}). "
        f"Fix: choose another hydra.run.dir, a folder of its own, e.g. {free_folder(tmp_path / 'run')}"
    )
    (tmp_path / "e7" / "metrics.json").write_text(json.dumps({**record, "run": {"id": "e7", "job_num": 0}}))
    assert run_folder_problem(tmp_path).startswith(f"hydra.run.dir={tmp_path} is a sweep's folder (")
