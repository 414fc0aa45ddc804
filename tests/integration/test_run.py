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
from dataclasses import dataclass
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
    }
    assert record["metrics"]["predicted"]["source"].startswith("uncalibrated")
    assert set(record["run"]) == {
        "id",
        "started_at",
        "finished_at",
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


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """One ``python run.py`` that must be refused before any worker starts (torchtitan's
    ``OverrideDefinitions`` style: a table of command lines, one slow test runs them all).

    Attributes:
        args: the overrides (the run or sweep directory is added).
        sweep: run with ``-m`` into ``hydra.sweep.dir`` (else ``hydra.run.dir``).
        status: the exit status; None for any non-zero one.
        stderr_has: each must be in stderr.
        last_line_has: each must be in stderr's last line.
        line_starts: the one stderr line with ``Invalid config`` starts with this.
        every_line_has: every stderr line holds this (the refusal is all there is).
        record: ``invalid``: one ``invalid`` record of phase ``config``, every metric null;
            None: no ``metrics.json`` (and no sweep directory for a sweep refused before Hydra).
    """

    args: tuple[str, ...]
    sweep: bool = False
    status: int | None = 2
    stderr_has: tuple[str, ...] = ()
    last_line_has: tuple[str, ...] = ()
    line_starts: str | None = None
    every_line_has: str | None = None
    record: str | None = "invalid"


def _invalid(args: tuple[str, ...], key: str) -> Refusal:
    return Refusal(args=args, last_line_has=(key, "Fix:"))


def _typo(override: str) -> Refusal:
    return Refusal(
        args=(override,), status=None, stderr_has=(override.split("=")[0].split(".")[-1],), record=None
    )


REFUSALS = {
    # validation: one paragraph, exit 2, an invalid record, no worker
    "n_embd": _invalid(("model.n_embd=130",), "model.n_embd"),
    # offload: 70B's 16 bytes per parameter (1.1 TB) on the host of two CPU ranks
    "offload_exceeds_host": _invalid(
        ("device=cpu", "nproc_per_node=2", "backend=fsdp", "backend.cpu_offload=true", "model=llama3.1-70b"),
        "backend.cpu_offload",
    ),
    # the free host memory (at launch, by plan=true's estimate): gpt-tiny's ~3.8 TiB of activations per rank
    "over_free_host_memory": Refusal(
        args=(
            "device=cpu",
            "nproc_per_node=2",
            "backend=fsdp",
            "batch.micro_batch_size=65536",
            "model.seq_len=8192",
        ),
        last_line_has=("model='gpt-tiny'", "2 ranks need about", "GiB is free now", "Fix:", "device=cuda"),
    ),
    "nvme_without_path": _invalid(("backend=zero3", "backend.offload_optimizer=nvme"), "backend.nvme_path"),
    "path_without_nvme": _invalid(("backend=zero3", "backend.nvme_path=/tmp"), "backend.nvme_path"),
    "memory_budget_eager": _invalid(("activation_checkpointing=memory_budget",), "activation_checkpointing"),
    "zero_stage": _invalid(("backend=deepspeed", "backend.zero_stage=4"), "backend.zero_stage"),
    "micro_batch_0": _invalid(("batch.micro_batch_size=0",), "batch.micro_batch_size"),
    "single_2_ranks": _invalid(("backend=single", "nproc_per_node=2"), "backend"),
    "cuda": _invalid(("device=cuda",), "device"),
    "fp16_cpu": _invalid(("precision=fp16", "device=cpu"), "precision"),
    "nproc_two": _invalid(("nproc_per_node=two",), "nproc_per_node"),
    # layouts (issue 23): a layout on a data-parallel backend; TP that does not split the KV heads
    "tp_on_ddp": _invalid(("backend=ddp", "device=cpu", "nproc_per_node=2", "parallel.tp=2"), "parallel.tp"),
    "tp_kv_heads": _invalid(
        ("model=llama-tiny", "backend=fsdp", "device=cpu", "nproc_per_node=4", "parallel.tp=4"), "parallel.tp"
    ),
    # optim.in_backward: a global-norm clip needs every gradient at once; DDP steps after its buckets
    "in_backward_clip": _invalid(("device=cpu", "optim.in_backward=true"), "optim.grad_clip"),
    "in_backward_ddp": _invalid(
        ("device=cpu", "backend=ddp", "nproc_per_node=2", "optim.in_backward=true", "optim.grad_clip=0"),
        "optim.in_backward",
    ),
    "zero2-stage3": Refusal(
        args=("backend=zero2", "backend.zero_stage=3", "device=cpu"),
        line_starts="flopsweep: invalid: Invalid config: backend.zero_stage=3: contradicts backend=zero2, "
        "which is ZeRO stage 2.",
    ),
    # composition: Hydra refuses a wrong type or an unknown key or option, no record
    "typo_type": _typo("batch.micro_batch_size=abc"),
    "typo_key": _typo("model.n_layers=3"),
    "typo_option": _typo("backend=zero9"),
    # before Hydra starts: one line, no job, no sweep directory
    "sort_range": Refusal(
        args=("seed=sort(range(0,3))",), sweep=True, stderr_has=("seed=0,1,2",), record=None
    ),
    "bad_objective": Refusal(
        args=("objective=model_tflops_per_device,nope",),
        sweep=True,
        every_line_has="objective='nope'",
        record=None,
    ),
    "repeats_with_optuna": Refusal(
        args=("repeats=2", "hydra/sweeper=optuna_objective", "device=cpu"),
        sweep=True,
        every_line_has="repeats=2: the rounds come from flopsweep's basic sweeper",
        record=None,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(REFUSALS.values()), ids=list(REFUSALS))
def test_run_py_refuses_before_any_worker(tmp_path: Path, case: Refusal) -> None:
    """Each refusal through ``python run.py`` as a user types it: its exit status and message, no
    traceback, no worker launched, and the record (or none) it leaves."""
    where = tmp_path / "out"
    args = (
        ("-m", *case.args, f"hydra.sweep.dir={where}")
        if case.sweep
        else (*case.args, f"hydra.run.dir={where}")
    )
    proc = run_py(*args, timeout=300)
    exited = proc.returncode == case.status if case.status is not None else proc.returncode != 0
    assert exited, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "launching" not in proc.stdout + proc.stderr and "[flopsweep rank" not in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert all(text in proc.stderr for text in case.stderr_has), proc.stderr[-2000:]
    assert all(text in lines[-1] for text in case.last_line_has), lines[-1]
    if case.line_starts is not None:
        [line] = [x for x in lines if "Invalid config" in x]
        assert line.startswith(case.line_starts), line
    if case.every_line_has is not None:
        assert lines and all(case.every_line_has in line for line in lines), lines
    if case.record is None:
        assert not list(tmp_path.rglob("metrics.json"))
        if case.sweep:
            assert not where.exists()
    else:
        [record] = records(tmp_path)
        assert record["status"] == case.record and record["error"]["phase"] == "config"
        assert all(v is None for v in record["metrics"].values())


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
