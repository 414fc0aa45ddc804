"""End to end, as a user runs it: ``python run.py`` in a subprocess, real ranks, real backends."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import ROOT, make_plan, read_record, records, run_py, run_sweep

from flopsweep.memory import estimate
from flopsweep.record import METRIC_KEYS, SCHEMA_VERSION, null_metrics

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
    "power_limit_w",  # the GPUs' enforced power limit (issue 25; null on the CPU)
    "cpu_count",  # the scale of loadavg (issue 26)
    "interconnect",  # the probe's bus bandwidths (issue 27; [] on one rank)
    "cpu_threads",  # rank 0's intra-op threads (torch.get_num_threads())
    "optimizer",  # rank 0's optimizer as built: {class, fused, foreach, in_backward}
    "torch",
    "cuda",
    "deepspeed",
    "xformers",
    "torchao",
    "python",
    "git_sha",
    "git_dirty",  # whether tracked files differ from git_sha (session 31)
    "loadavg",
    "cuda_alloc_conf",
    "visible_devices",  # the devices hydra/launcher=pool pinned the job to (issue 44)
}


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or not shutil.which("taskset") or (os.cpu_count() or 1) < 2,
    reason="needs Linux's taskset and two cores",
)
def test_a_cpu_rank_uses_the_cores_it_may_run_on_or_omp_num_threads(tmp_path: Path) -> None:
    """A one-rank CPU run confined to one core (``taskset``, as a cgroup cpuset or Slurm's binding
    would) ran ``os.cpu_count()`` threads on it; it now runs one, and ``OMP_NUM_THREADS`` set by the
    user still wins. The record keeps the count (``system.cpu_threads``)."""
    base = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    one_core = ["taskset", "-c", str(min(os.sched_getaffinity(0))), sys.executable, "run.py"]
    one_core += ["device=cpu", "steps.warmup=1", "steps.measure=1"]
    threads = {}
    for omp in (None, "2"):  # torch takes at most the machine's cores from OMP_NUM_THREADS
        run_dir = tmp_path / f"omp-{omp}"
        env = base if omp is None else {**base, "OMP_NUM_THREADS": omp}
        proc = subprocess.run(
            [*one_core, f"hydra.run.dir={run_dir}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        record = json.loads((run_dir / "metrics.json").read_text())
        assert record["status"] == "ok", record["error"]
        threads[omp] = record["system"]["cpu_threads"]
    assert threads == {None: 1, "2": 2}


@pytest.mark.slow
def test_default_run_writes_complete_ok_record(tmp_path: Path) -> None:
    proc = run_py(f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert set(record) == SCHEMA_KEYS
    assert record["schema_version"] == SCHEMA_VERSION and record["status"] == "ok" and record["error"] is None
    # a loaded CPU may leave unsteady steps (a warning on the CPU, never invalid); nothing else
    # only the warnings a loaded machine can cause (step spread, load average), nothing else
    noise = ("unsteady", "noisy_steps", "host_load")
    assert all(w.startswith(noise) for w in record["warnings"]), record["warnings"]
    assert set(record["metrics"]) == set(METRIC_KEYS)
    assert set(record["system"]) == SYSTEM_KEYS
    assert record["system"]["parallel"] == {
        "dp_replicate": 1,
        "dp_shard": 1,
        "tp": 1,
        "pp": 1,
        "cp": 1,
        "ep": 1,
    }
    assert record["system"]["interconnect"] == []  # one rank: no link to measure
    assert isinstance(record["system"]["cpu_threads"], int) and record["system"]["cpu_threads"] >= 1
    assert record["system"]["optimizer"] == {
        "class": "torch.optim.adamw.AdamW",
        "fused": record["system"]["device_name"] != "cpu",  # build_adamw: fused on CUDA
        "foreach": False,
        "in_backward": False,
        "overlap_forward": False,
    }
    assert record["metrics"]["predicted"]["source"].startswith(
        "cpu probe: "
    )  # predict.cpu_probe, the default
    assert set(record["run"]) == {
        "id",
        "started_at",
        "finished_at",
        "wall_s",
        "overrides",
        "job_num",
        "repeat",
        "repeats",
        "repeat_group",
        "setup_key",
        "job_key",
        "identity_version",
    }
    assert (record["run"]["repeat"], record["run"]["repeats"], record["run"]["repeat_group"]) == (0, 1, None)
    assert record["run"]["wall_s"] > 0  # the job's own clock, beside the whole seconds of the stamps
    m = record["metrics"]
    assert m["probe_s"] > 0 and 0 < m["probe_share"] < 1  # the CPU step probe ran (predict.cpu_probe)
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


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "kind"), [(signal.SIGTERM, "Terminated"), (signal.SIGINT, "KeyboardInterrupt")]
)
def test_a_signalled_job_is_recorded_and_stops_its_workers(
    tmp_path: Path, sig: int, kind: str, hydra_compose
) -> None:
    overrides = [
        "model=gpt-125m",
        "device=cpu",
        "batch.micro_batch_size=1",  # 3.4 GiB, not 8.8: a loaded machine's free memory refused the larger
        "steps.measure=50",
    ]
    proc = subprocess.Popen(
        [sys.executable, "run.py", *overrides, f"hydra.run.dir={tmp_path}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / ".flopsweep" / "rank0_phase.txt").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended before the signal: {proc.communicate()[1][-2000:]}"
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130)
    assert "Traceback" not in err
    record = read_record(tmp_path / "metrics.json")  # a failed record's metrics all null (DESIGN.md)
    assert record["status"] == "error" and record["error"]["type"] == kind
    assert record["error"]["phase"] in ("init", "warmup", "measure")
    plan = make_plan(hydra_compose(overrides))  # the estimate made before the ranks started stays
    before = record["run"]["before_run"]
    assert before["predicted_peak_gib"] == round(estimate(plan.cfg, plan.layout).total_gib, 6) > 0
    assert isinstance(before["predicted"]["source"], str)
    assert record["metrics"] == null_metrics()
