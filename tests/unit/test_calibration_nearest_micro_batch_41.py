"""A calibration of another micro batch is the nearest one, whatever the folder names or their order
(docs/reliability-12.md, row 860): :func:`flopsweep.predict.pick_calibration` orders the records of the
set-up by :func:`flopsweep.predict.micro_batch_distance` (ratio, then the larger micro batch), and the
job, ``plan=true`` and the tuner's held-out predictions reach it through
:func:`flopsweep.forecast.prediction`."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers import calibration_record, put, rescaled, validate

from flopsweep import forecast
from flopsweep import predict as pr
from flopsweep.layout import Layout

CPU_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "cpu-run" / "metrics.json"


def _loose(target: dict, pool: list[tuple[str, dict]]) -> str:
    """The name :func:`pick_calibration` takes for ``target`` from ``pool`` with any micro batch."""
    return pr.pick_calibration(pr.calibration_key(target), 2, "fsdp", pool, micro_batch=False)[0]


@pytest.mark.parametrize("names", [("a", "b"), ("z", "b")])
def test_the_nearest_micro_batch_calibrates_in_either_order_and_naming(names) -> None:
    one, two = calibration_record(1, mbs=1), calibration_record(1, mbs=2)
    pool = [(names[0], one), (names[1], two)]
    target = calibration_record(1, mbs=4)
    assert _loose(target, pool) == names[1]
    assert _loose(target, pool[::-1]) == names[1]


def test_a_tie_in_ratio_takes_the_larger_micro_batch() -> None:
    """1 and 4 are both a factor 2 from 2: the larger one, by its micro batch, not its name."""
    pool = [("a", calibration_record(1, mbs=1)), ("b", calibration_record(1, mbs=4))]
    for names in (("a", "b"), ("b", "a")):
        named = [(n, r) for n, (_, r) in zip(names, pool, strict=True)]
        wanted = names[1]
        assert _loose(calibration_record(1, mbs=2), named) == wanted
        assert _loose(calibration_record(1, mbs=2), named[::-1]) == wanted
    assert pr.micro_batch_distance(4, 2) < pr.micro_batch_distance(1, 2)
    assert pr.micro_batch_distance(3, 4) < pr.micro_batch_distance(6, 4)  # ratio 1.33 before 1.5
    assert pr.micro_batch_distance(None, 4) == (float("inf"), 0)
    assert pr.micro_batch_distance(1, None) == (0.0, 0)


def test_alike_records_take_the_latest_started_and_a_loose_key_still_matches() -> None:
    old, new = calibration_record(1, mbs=2, step=2.0), calibration_record(1, mbs=2, step=3.0)
    old["run"] = {"started_at": "2026-01-01T00:00:00"}
    new["run"] = {"started_at": "2026-02-01T00:00:00+00:00"}
    target = calibration_record(1, mbs=4)
    for pool in ([("a", old), ("b", new)], [("a", new), ("b", old)]):
        assert pr.pick_calibration(pr.calibration_key(target), 2, "fsdp", pool, micro_batch=False)[1] is new
    loose = pr.calibration_key(target, micro_batch=False)  # the form callers before row 860 passed
    assert pr.pick_calibration(loose, 2, "fsdp", [("a", old)], micro_batch=False)[0] == "a"


def _cpu_record(base: dict, mbs: int, step: float) -> dict:
    """The committed gpt-tiny CPU record as if it ran ``mbs`` sequences a step in ``step`` s, consistent."""
    record = copy.deepcopy(base)
    record["config"]["batch"]["micro_batch_size"] = mbs
    record["config"]["attention"]["density"] = 1.0  # as a run of today writes it (the plan resolves it)
    record["metrics"]["peak_tflops"] = 1.0  # rescaled divides by it; a CPU has none
    tokens = mbs * record["config"]["model"]["seq_len"]
    record = rescaled(record, world=1, tokens_per_device=tokens / step)
    record["metrics"].update(peak_tflops=None, mfu=None, hfu=None, tflops_per_device=None)
    return record


def test_the_plan_calibrates_from_the_nearest_micro_batch_folder(tmp_path, hydra_compose) -> None:
    """The user's case: ``predict.calibration=DIR`` with micro batch 1 in ``a/`` and 2 in ``b/`` (then ``z/``
    and ``b/``) predicts micro batch 4 from micro batch 2."""
    base = json.loads(CPU_RUN.read_text())
    cfg = validate(hydra_compose(["model=gpt-tiny", "device=cpu", "batch.micro_batch_size=4"]))
    sources = set()
    for first in ("a", "z"):
        root = tmp_path / first
        for folder, mbs, step in ((first, 1, 0.1), ("b", 2, 0.15)):
            put(root / folder, _cpu_record(base, mbs, step))
        records = forecast.calibration_records(str(root))
        assert len(records) == 2
        made = forecast.prediction(cfg, Layout.data_parallel(1), records, gpus_per_node=1, device_name=None)
        assert "micro batch 2 -> 4" in made["source"], made["source"]
        sources.add(made["iteration_time_s"])
    assert len(sources) == 1
