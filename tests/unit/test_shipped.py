"""The measured set-ups flopsweep ships (flopsweep/data/measured.json, :mod:`flopsweep.shipped`): the file
is current against the committed records, loads by its own path, and a plan with ``predict.calibration``
null is predicted from it (``predict.measured``), a CPU plan never."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from flopsweep import forecast, shipped
from flopsweep.config import ConfigError
from flopsweep.safe_read import read_regular

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_the_shipped_file_is_current_against_the_committed_records() -> None:
    """Regenerated in memory from benchmarks/results, the file is byte for byte the one shipped (else:
    ``python -m flopsweep.shipped --write``)."""
    made = shipped.dumps(shipped.build(RESULTS))
    assert read_regular(shipped.DATA, shipped.MAX_BYTES).decode() == made, (
        "flopsweep/data/measured.json is not current: run python -m flopsweep.shipped --write"
    )


def test_the_shipped_file_holds_the_ok_cuda_records_each_named_by_its_path() -> None:
    records = shipped.records()
    assert len(records) > 200  # 217 on 2026-12-04: one and two H200s; 280 with one H100 (12-05)
    assert shipped.DATA.stat().st_size < 2_000_000  # 1.04 MB with session 39's H100 records; read up to 4 MiB
    worlds = set()
    for name, view in records:
        assert (RESULTS / name).is_file(), name
        assert name.split("/")[0] in ("h100", "h200", "h200x2"), name  # GPU machines, never cpu/
        assert view["status"] == "ok" and view["config"]["device"] == "cuda", name
        assert isinstance(view["metrics"]["iteration_time_s"]["mean"], float), name
        assert set(view["metrics"]) <= set(shipped.METRIC_KEYS), name
        assert view["metrics"]["model_flops_per_iteration"] > 0 and view["model"]["n_params"] > 0, name
        source = json.loads((RESULTS / name).read_text())
        assert not source["metrics"].get("cuda_alloc_retries"), name  # none at the memory edge
        assert source["metrics"]["iteration_time_s"]["mean"] == view["metrics"]["iteration_time_s"]["mean"]
        assert "values" not in view["metrics"]["iteration_time_s"], name
        assert shipped.is_shipped(view)
        worlds.add(view["system"]["world_size"])
    assert worlds == {1, 2}
    on_disk = json.loads(shipped.DATA.read_text())["records"][0]["record"]
    assert shipped.SHIPPED not in on_disk  # the mark is the loader's, never stored


def test_the_file_is_read_by_the_module_path_never_through_a_link(tmp_path: Path, monkeypatch) -> None:
    """A ``flopsweep/data/measured.json`` in the working folder is never read; a link in place of the
    file is refused (a broken install), and the job's error names ``predict.measured`` and the fix."""
    planted = tmp_path / "flopsweep" / "data"
    planted.mkdir(parents=True)
    (planted / "measured.json").write_text('{"format": 1, "records": []}')
    monkeypatch.chdir(tmp_path)
    shipped._loaded.cache_clear()
    assert len(shipped.records()) > 200
    link = tmp_path / "link.json"
    os.symlink(shipped.DATA, link)
    monkeypatch.setattr(shipped, "DATA", link)
    shipped._loaded.cache_clear()
    try:
        with pytest.raises(shipped.ShippedError, match="symbolic link"):
            shipped.records()
        with pytest.raises(ConfigError, match=r"predict\.measured=true: cannot read the shipped records"):
            forecast.shipped_records()
    finally:
        monkeypatch.undo()
        shipped._loaded.cache_clear()


def _row(hydra_compose, tmp_path: Path, *args: str) -> dict:
    from flopsweep.job import JobInfo, plan_job

    out = plan_job(hydra_compose(["plan=true", *args]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert out["status"] == "ok", out
    return out


EIGHT_B = ("model=llama3.1-8b", "nproc_per_node=1", "model.seq_len=4096")
"""Llama 3.1 8B on one GPU, micro batch 4, sequences of 4096: a set-up no shipped record measured at any
policy (it does not fit; a calibration of a sibling policy would stand for it at 2048)."""


def test_a_plan_of_a_set_up_never_measured_is_predicted_from_the_nearest_shipped_one(
    hydra_compose, tmp_path: Path
) -> None:
    h200 = _row(hydra_compose, tmp_path, *EIGHT_B, "plan_gpu=H200")
    source = h200["prediction_source"]
    assert source.startswith("nearest (shipped records): h200"), source
    assert "differs in activation_checkpointing none vs full; model.seq_len 4096 vs" in source, source
    assert "datasheet" not in source, source
    # at 2048 tokens the shipped 8B `full` record (micro batch 2) is a policy sibling's calibration
    sibling = _row(hydra_compose, tmp_path, *EIGHT_B[:2], "plan_gpu=H200")["prediction_source"]
    assert sibling.startswith("calibrated (shipped records): h200/peer-torchtitan/flopsweep/8b/"), sibling
    assert "activation_checkpointing=none from its policy sibling full's calibration" in sibling, sibling
    flat = _row(hydra_compose, tmp_path, *EIGHT_B, "plan_gpu=H200", "predict.measured=false")
    assert flat["prediction_source"].startswith("uncalibrated: executed FLOPs at 0.45 x the H200"), flat
    assert "shipped" not in flat["prediction_source"]
    assert h200["predicted_iteration_time_s"] != flat["predicted_iteration_time_s"]


def test_another_gpu_kind_is_scaled_by_the_datasheet_ratio_and_says_so(hydra_compose, tmp_path: Path) -> None:
    """No shipped record ran on an A100: the nearest set-up of another kind stands for it (the H200's own,
    the same model at another policy), its compute scaled by the bf16 peak ratio (312 / 989.4), its
    optimizer (the H200 profiles' rate) by the memory bandwidth ratio (4.8 / 2.039 TB/s), each said in the
    source. An H100 SXM has the H200 SXM's peak (:func:`flopsweep.nearest.same_peak`): it takes the
    H200's base record too, ahead of an H100 record of a farther model, its compute x 1, its optimizer
    x 4.8/3.35, so it is never predicted faster than the H200 (before: a gpt-2.7b H100 record, 5% faster)."""
    h200 = _row(hydra_compose, tmp_path, *EIGHT_B, "plan_gpu=H200")
    h100 = _row(hydra_compose, tmp_path, *EIGHT_B, "plan_gpu=H100-80GB")
    a100 = _row(hydra_compose, tmp_path, *EIGHT_B, "plan_gpu=A100-80GB")
    assert "scaled by the datasheet bf16 peak ratio 1;" in h100["prediction_source"], h100
    assert "scaled by the datasheet bf16 peak ratio 0.315" in a100["prediction_source"], a100
    first = h200["prediction_source"].split(" (1 of its set-up")[0]
    assert first.startswith("nearest (shipped records): h200/"), h200
    assert a100["prediction_source"].startswith(first), a100  # the same record
    assert h100["prediction_source"].startswith(first), h100
    assert float(h100["predicted_iteration_time_s"]) > float(h200["predicted_iteration_time_s"])
    assert "x1.43 memory bandwidth 4.8/3.35 TB/s (H200 SXM on H100 SXM)" in h100["prediction_source"], h100
    assert "x2.35 memory bandwidth 4.8/2.039 TB/s (H200 SXM on A100)" in a100["prediction_source"], a100

    def optimizer_s(row: dict) -> float:  # one GPU: its optimizer updates every parameter
        ps = re.search(r"optimizer ([0-9.]+) ps per parameter", row["prediction_source"])
        assert ps is not None, row
        return float(ps.group(1)) * 1e-12 * float(row["n_params"])

    compute = float(h200["predicted_iteration_time_s"]) - optimizer_s(h200)
    expected = compute * 989.4 / 312 + optimizer_s(a100)
    assert float(a100["predicted_iteration_time_s"]) == pytest.approx(expected, rel=0.02)


FP8 = (
    "model=llama3.1-8b",
    "nproc_per_node=1",
    "precision=fp8",
    "compile=true",
    "activation_checkpointing=full",
    "model.seq_len=2048",
    "batch.micro_batch_size=2",
)
"""The set-up of the committed benchmarks/results/h200/fp8/llama3.1-8b records."""


def test_a_shipped_record_of_the_set_up_calibrates_it_on_its_gpu_kind_only(
    hydra_compose, tmp_path: Path
) -> None:
    """A plan of a shipped set-up on an H200 is calibrated by its record (its step, the record's); on an
    H100 the H200 record is not a calibration: it stands as the nearest set-up, scaled, saying so."""
    h200 = _row(hydra_compose, tmp_path, *FP8, "plan_gpu=H200")
    source = h200["prediction_source"]
    assert source.startswith("calibrated (shipped records): h200/"), source
    name = source.removeprefix("calibrated (shipped records): ").split(" ", 1)[0]
    view = dict(shipped.records())[name]
    assert view["config"]["precision"]["name"] == "fp8" and view["config"]["batch"]["micro_batch_size"] == 2
    step = view["metrics"]["iteration_time_s"]["mean"]
    assert float(h200["predicted_iteration_time_s"]) == pytest.approx(step, rel=0.02)
    h100 = _row(hydra_compose, tmp_path, *FP8, "plan_gpu=H100-80GB")
    source = h100["prediction_source"]
    assert source.startswith("nearest (shipped records): h200/"), source
    assert "differs in" not in source.split(";", 1)[0], source  # the same set-up, on another GPU
    assert "measured on H200 SXM, scaled by the datasheet fp8 peak ratio 1" in source, source


def test_a_cpu_plan_is_never_predicted_from_the_shipped_gpu_records(hydra_compose, tmp_path: Path) -> None:
    """The shipped records are CUDA's: a CPU run's prediction is the one without them, whatever
    ``predict.measured`` says."""
    from flopsweep.layout import Layout
    from flopsweep.plan import Environment, plan

    args = ["model=gpt-tiny", "device=cpu", "nproc_per_node=1"]
    cfg = plan(hydra_compose(args), Environment(cpu_count=2)).cfg
    assert cfg.predict.measured and forecast.prediction_records(cfg)  # read, then set aside
    made = forecast.prediction(
        cfg, Layout.data_parallel(1), shipped.records(), gpus_per_node=1, device_name=None, gemm_tflops=50.0
    )
    alone = forecast.prediction(
        cfg, Layout.data_parallel(1), [], gpus_per_node=1, device_name=None, gemm_tflops=50.0
    )
    assert made == alone and made["source"].startswith("uncalibrated: "), made
    row = _row(hydra_compose, tmp_path, *args)
    assert "shipped" not in row["prediction_source"] and "nearest" not in row["prediction_source"], row


def test_a_cluster_of_another_gpu_keeps_the_shipped_records_not_the_users_of_another_gpu() -> None:
    """``plan_clusters``: a user's H200 record never stands for an H100 cluster (one ``predict.compute_scale``
    cannot serve two GPUs), the shipped ones do (calibrating only their own GPU kind, else scaled)."""
    from flopsweep.clusters import parse_cluster
    from flopsweep.plan_space import same_gpu

    name, view = next((n, v) for n, v in shipped.records() if n.startswith("h200/"))
    users = {k: v for k, v in view.items() if k != shipped.SHIPPED}
    assert view["system"]["device_name"] == users["system"]["device_name"] == "NVIDIA H200"
    records = [(name, view), ("mine/metrics.json", users)]
    assert same_gpu(records, parse_cluster("H100:8")) == [(name, view)]
    assert same_gpu(records, parse_cluster("H200:8")) == records


def test_the_analysis_keeps_to_the_records_it_loaded() -> None:
    """``analysis --predict`` (:func:`flopsweep.predict_record.predict_record`) is the honest check: a record
    loaded alone has no other set-up to stand for it, shipped records or not."""
    from flopsweep.predict_record import predict_record

    name, view = next((n, v) for n, v in shipped.records() if v["system"]["world_size"] == 1)
    assert isinstance(view["metrics"]["model_flops_per_iteration"], float)  # the counts: every one has them
    alone = {k: v for k, v in view.items() if k != shipped.SHIPPED}
    made = predict_record(name, alone, [(name, alone)])
    assert made["compute_source"] == "flops" and "shipped" not in made["source"], made
    assert made["iteration_time_s"] > 0
    assert "no nearest set-up: none of the 0 records read" in made["source"], made


def test_the_records_a_job_reads_before_it_launches(hydra_compose, tmp_path: Path) -> None:
    """:func:`flopsweep.forecast.prediction_records` (the job, ``plan=true``): ``predict.calibration``'s
    records when named, else the shipped ones, none with ``predict.measured=false``."""
    cfg = hydra_compose(["model=gpt-tiny", "device=cuda"])
    assert forecast.prediction_records(cfg) == shipped.records()
    off = hydra_compose(["model=gpt-tiny", "device=cuda", "predict.measured=false"])
    assert forecast.prediction_records(off) == []
    record = RESULTS / shipped.records()[0][0]
    named = hydra_compose(["model=gpt-tiny", f"predict.calibration={record}"])
    ((name, view),) = forecast.prediction_records(named)
    assert name == str(record) and not shipped.is_shipped(view)
