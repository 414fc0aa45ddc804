"""model=hf against hostile and changing ``config.json`` files (issue 40, classes 6-8), on the CPU.

- Class 6: every hostile file is one ``ConfigError`` line naming ``model.config`` (validation builds
  the model once on the meta device), and an ``invalid`` record.
- Class 7: the ranks build from the bytes validation read; ``resume=true`` runs a changed file again.
- Class 8: the memory estimate counts the module's registered buffers, and the launch refuses a run
  whose host-memory estimate exceeds the free host memory.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import records, run_sweep
from unit.test_hf_safety import HOSTILE, QWEN, _file  # shared with the unit tier

from flopsweep.models import hf

pytest.importorskip("transformers")


def test_a_hostile_config_is_an_invalid_record_of_the_job(hydra_compose, tmp_path: Path) -> None:
    """run_job in-process: the job's record is ``invalid`` (phase config) with the one line; no rank
    starts (the record's metrics are null)."""
    from flopsweep.job import JobInfo, run_job

    for i, name in enumerate(("5000-deep array", "head_dim 0", "top-k over experts")):
        overrides = ["model=hf", f"model.config={_file(tmp_path, f'c{i}', HOSTILE[name][0])}", "device=cpu"]
        record = run_job(hydra_compose(overrides), JobInfo(job_dir=tmp_path / str(i), overrides=overrides))
        assert record["status"] == "invalid", (name, record["error"])
        assert (record["error"]["type"], record["error"]["phase"]) == ("ConfigError", "config")
        assert record["error"]["message"].startswith("Invalid config: model.config=")
        assert record["metrics"]["tokens_per_s"] is None


@pytest.mark.slow
def test_a_config_swapped_after_validation_is_not_what_the_ranks_build(hydra_compose, tmp_path: Path) -> None:
    """The job's steps in-process: validate (planned), then the file is replaced by a 60,000-token
    model, then the rank runs. It builds from the bytes validated: the record's parameter count
    and hash are the validated file's, and the first loss is that of a 512-token model at random
    initialisation (ln 512 = 6.2; ln 60000 = 11.0 was the symptom)."""
    from flopsweep.job.lifecycle import launched, new_run, planned, sized
    from flopsweep.job.records import measured, recorded
    from flopsweep.job.result import JobInfo, JobResult
    from flopsweep.record import METRICS_FILE

    path = _file(tmp_path, "config", QWEN)
    overrides = ["model=hf", f"model.config={path}", "device=cpu", "precision=fp32"]
    overrides += ["steps.warmup=1", "steps.measure=1", "batch.micro_batch_size=1"]
    cfg, info = hydra_compose(overrides), JobInfo(job_dir=tmp_path / "job", overrides=overrides)
    info.job_dir.mkdir()
    job = JobResult(path=info.job_dir / METRICS_FILE, cfg=cfg, run=new_run(cfg, info))
    assert planned(job, info) is None and job.status is None
    validated = hf.n_params(job.cfg.model)
    Path(path).write_text(json.dumps({**QWEN, "vocab_size": 60000, "hidden_size": 256}))
    record = recorded(measured(launched(sized(job))))
    assert record["status"] == "ok", record["error"]
    assert record["model"]["n_params"] == validated == 459_520
    assert record["model"]["config_sha256"] == record["config"]["model"]["config_sha256"]
    assert record["model"]["config_sha256"] == hf.load(_file(tmp_path, "again", QWEN)).sha256
    assert abs(record["metrics"]["loss_first"] - math.log(512)) < 0.5, record["metrics"]["loss_first"]


@pytest.mark.slow
def test_a_sweep_over_hostile_configs_records_each_and_prints_its_summary(tmp_path: Path) -> None:
    """``run.py -m`` over three hostile files and a good one: every job has its record (three
    ``invalid`` naming model.config, one ``ok``), the sweep prints its summary, and no traceback."""
    files = [
        _file(tmp_path, "deep", HOSTILE["5000-deep array"][0]),
        _file(tmp_path, "kv", HOSTILE["kv heads not dividing heads"][0]),
        _file(tmp_path, "act", HOSTILE["unknown hidden_act"][0]),
        "qwen3-tiny",
    ]
    proc = run_sweep(
        tmp_path / "sweep",
        "model=hf",
        f"model.config={','.join(files)}",
        "device=cpu",
        "precision=fp32",
        "steps.warmup=1",
        "steps.measure=1",
    )
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output[-3000:]
    assert "flopsweep summary:" in proc.stdout, output[-3000:]
    recs = records(tmp_path / "sweep")
    by_config = {r["config"]["model"]["config"]: r for r in recs}
    assert len(recs) == 4 and set(by_config) == set(files)
    for name in files[:3]:
        assert by_config[name]["status"] == "invalid", by_config[name]["error"]
        assert by_config[name]["error"]["message"].startswith("Invalid config: model.config=")
    assert by_config["qwen3-tiny"]["status"] == "ok", by_config["qwen3-tiny"]["error"]
