"""End to end, as a user runs it: ``python run.py`` in a subprocess, real ranks, real backends."""

from __future__ import annotations

import io
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import ROOT, records, run_py, run_sweep

from flopsweep.record import METRIC_KEYS, SCHEMA_VERSION

SCHEMA_KEYS = {"schema_version", "status", "error", "warnings", "run", "config", "model", "system", "metrics"}
SYSTEM_KEYS = {
    "hostname",
    "nccl",
    "gpu_topology",
    "nccl_env",
    "device_name",
    "device_count",
    "world_size",
    "nproc_per_node",
    "parallel",
    "torch",
    "cuda",
    "deepspeed",
    "xformers",
    "torchao",
    "python",
    "git_sha",
    "loadavg",
    "cuda_alloc_conf",
}


@pytest.mark.slow
def test_default_run_writes_complete_ok_record(tmp_path: Path) -> None:
    proc = run_py(f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert set(record) == SCHEMA_KEYS
    assert record["schema_version"] == SCHEMA_VERSION and record["status"] == "ok" and record["error"] is None
    # a loaded CPU may leave unsteady steps (a warning on the CPU, never invalid); nothing else
    assert all(w.startswith("unsteady") for w in record["warnings"]), record["warnings"]
    assert set(record["metrics"]) == set(METRIC_KEYS)
    assert set(record["system"]) == SYSTEM_KEYS
    assert record["system"]["parallel"] == {"dp_replicate": 1, "dp_shard": 1, "tp": 1, "pp": 1, "cp": 1}
    assert set(record["run"]) == {"id", "started_at", "finished_at", "overrides", "job_num"}
    m = record["metrics"]
    assert m["tokens_per_s"] > 0 and m["tflops_per_device"] > 0
    assert m["model_flops_per_iteration"] == 1_610_612_736  # gpt-tiny, micro batch 4, one rank
    assert m["global_batch_size"] == 4 and m["tokens_per_step"] == 512
    assert m["measured_matmul_tflops"] > 0 and m["matmul_fraction"] > 0
    assert math.isfinite(m["loss_first"]) and math.isfinite(m["loss_last"])
    assert len(m["iteration_time_s"]["values"]) == record["config"]["steps"]["measure"]
    assert m["mfu"] is None and m["peak_tflops"] is None  # no peak is known for a CPU
    assert record["model"] == {
        "name": "gpt-tiny",
        "arch": "gpt2",
        "n_layer": 2,
        "n_embd": 128,
        "n_head": 4,
        "seq_len": 128,
        "vocab_size": 512,
        "n_params": 478_720,
    }
    assert record["config"]["device"] == "cpu" and record["system"]["world_size"] == 1
    assert record["system"]["nproc_per_node"] == 1
    assert {len(record["system"]["loadavg"][when]) for when in ("start", "end")} == {3}
    assert not (tmp_path / ".flopsweep").exists()  # scratch files are cleaned up


@pytest.fixture(scope="module")
def cpu_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sweep_dir = tmp_path_factory.mktemp("sweep")
    proc = run_sweep(
        sweep_dir,
        "backend=ddp,fsdp,zero1,zero2,zero3",
        "nproc_per_node=2",
        "device=cpu",
        "precision=fp32",
        "steps.warmup=1",
        "steps.measure=2",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = [(r["config"]["backend"], r["error"]) for r in records(sweep_dir) if r["status"] != "ok"]
    assert not errors and len(records(sweep_dir)) == 5, (errors, proc.stdout[-3000:])
    assert "0 oom, 0 error, 0 invalid" in proc.stdout, proc.stdout[-3000:]
    return sweep_dir


@pytest.mark.slow
def test_cpu_sweep_every_backend_two_ranks(cpu_sweep: Path) -> None:
    recs = records(cpu_sweep)
    assert len(recs) == 5
    assert {(r["config"]["backend"]["name"], r["config"]["backend"].get("zero_stage")) for r in recs} >= {
        ("deepspeed", 1),
        ("deepspeed", 2),
        ("deepspeed", 3),
    }
    for r in recs:
        assert r["status"] == "ok", r["error"]
        assert r["system"]["world_size"] == 2 and len(r["metrics"]["per_rank"]) == 2
        assert [p["rank"] for p in r["metrics"]["per_rank"]] == [0, 1]
    assert len({r["run"]["id"] for r in recs}) == 5


@pytest.mark.slow
def test_backends_start_from_same_weights_and_data(cpu_sweep: Path) -> None:
    """Same seed, same data: the first-step loss of every backend agrees (a fair comparison)."""
    losses = {
        r["config"]["backend"]["name"] + str(r["config"]["backend"].get("zero_stage")): r["metrics"][
            "loss_first"
        ]
        for r in records(cpu_sweep)
    }
    reference = losses.pop(next(k for k in losses if k.startswith("ddp")))
    for name, loss in losses.items():
        assert loss == pytest.approx(reference, abs=1e-4), name


@pytest.mark.slow
def test_analysis_prints_one_row_per_job(cpu_sweep: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "analysis", str(cpu_sweep)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    rows = [line for line in lines if line.lstrip().startswith("gpt-tiny")]
    assert len(rows) == 5 and "backend" in lines[0]
    csv = subprocess.run(
        [sys.executable, "-m", "analysis", str(cpu_sweep), "--format", "csv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    df = pd.read_csv(io.StringIO(csv))
    assert len(df) == 5 and (df["status"] == "ok").all() and (df["world_size"] == 2).all()


BAD = [
    (["model.n_embd=130"], "model.n_embd"),
    (["backend=deepspeed", "backend.zero_stage=4"], "backend.zero_stage"),
    (["batch.micro_batch_size=0"], "batch.micro_batch_size"),
    (["backend=single", "nproc_per_node=2"], "backend"),
    (["device=cuda"], "device"),
    (["precision=fp16", "device=cpu"], "precision"),
    (["nproc_per_node=two"], "nproc_per_node"),
]


@pytest.mark.parametrize(("overrides", "key"), BAD)
def test_bad_config_is_one_paragraph_and_starts_no_worker(
    tmp_path: Path, overrides: list[str], key: str
) -> None:
    proc = run_py(*overrides, f"hydra.run.dir={tmp_path}", timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    message = proc.stderr.strip().splitlines()[-1]
    assert key in message and "Fix:" in message
    assert "launching" not in proc.stdout and "[flopsweep rank" not in proc.stdout
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "invalid" and record["error"]["phase"] == "config"
    assert all(v is None for v in record["metrics"].values())


@pytest.mark.parametrize("override", ["batch.micro_batch_size=abc", "model.n_layers=3", "backend=zero9"])
def test_type_errors_and_typos_fail_at_composition(tmp_path: Path, override: str) -> None:
    proc = run_py(override, f"hydra.run.dir={tmp_path}", timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert override.split("=")[0].split(".")[-1] in proc.stderr
    assert not (tmp_path / "metrics.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "kind"), [(signal.SIGTERM, "Terminated"), (signal.SIGINT, "KeyboardInterrupt")]
)
def test_a_signalled_job_is_recorded_and_stops_its_workers(tmp_path: Path, sig: int, kind: str) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "run.py",
            "model=gpt-125m",
            "device=cpu",
            "steps.measure=50",
            f"hydra.run.dir={tmp_path}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / ".flopsweep" / "rank0_phase.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130)
    assert "Traceback" not in err
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "error" and record["error"]["type"] == kind
    assert record["error"]["phase"] in ("init", "warmup", "measure")
    assert all(v is None for v in record["metrics"].values())


def test_a_cpu_run_too_big_for_host_memory_is_warned_about(caplog):
    from flopsweep.config import ModelConfig, RunConfig
    from flopsweep.job import warn_host_memory
    from flopsweep.layout import Layout
    from flopsweep.plan import Plan

    def one_rank(cfg: RunConfig) -> Plan:
        return Plan(cfg=cfg, device=cfg.device, nproc_per_node=1, nnodes=1, layout=Layout.data_parallel(1))

    big = ModelConfig(name="gpt-13b", n_layer=40, n_embd=5120, n_head=40, seq_len=2048, vocab_size=50304)
    with caplog.at_level("WARNING", logger="flopsweep"):
        warn_host_memory(one_rank(RunConfig(device="cpu", nproc_per_node="1", model=big)))  # 13 B x 16 B
        assert "model=gpt-13b on the CPU" in caplog.text and "device=cuda" in caplog.text
        caplog.clear()
        warn_host_memory(one_rank(RunConfig(device="cpu", nproc_per_node="1")))  # gpt-tiny
        warn_host_memory(one_rank(RunConfig(device="cuda", nproc_per_node="1", model=big)))  # not host
    assert caplog.text == ""
