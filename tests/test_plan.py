"""``plan=true``: every job validated and estimated, no worker started, no record written."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest
from helpers import run_py

from flopsweep.backends import DeepSpeedConfig, FSDPConfig
from flopsweep.config import BackendConfig, CheckpointingConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.memory import estimate, model_states_floor
from flopsweep.models.gpt2 import GPT2Config

GPT_13B = GPT2Config(name="gpt-1.3b", n_layer=24, n_embd=2048, n_head=16, seq_len=2048, vocab_size=50304)
P = 1_315_819_520


def _cfg(backend, **kw) -> RunConfig:
    cfg = dataclasses.replace(RunConfig(), model=GPT_13B, backend=backend, device="cuda", **kw)
    cfg.batch.micro_batch_size = 8
    return cfg


def test_model_states_follow_the_backend() -> None:
    single = estimate(_cfg(BackendConfig(name="single")), Layout.data_parallel(1))
    assert single.step_states == 16 * P  # fp32 weights, grads, AdamW moments (tests/test_memory.py: the rest)
    assert estimate(_cfg(BackendConfig(name="ddp")), Layout.data_parallel(1)).step_states == 20 * P
    assert estimate(_cfg(FSDPConfig()), Layout.data_parallel(8)).step_states == 16 * P // 8
    zero2 = estimate(_cfg(DeepSpeedConfig(zero_stage=2)), Layout.data_parallel(4))
    assert zero2.step_states == 2 * P + int(18 * P / 4) and "estimate_zero2" in zero2.method
    assert "estimate_zero3" in estimate(_cfg(DeepSpeedConfig(zero_stage=3)), Layout.data_parallel(4)).method


def test_checkpointing_keeps_only_block_inputs() -> None:
    plain = estimate(_cfg(BackendConfig(name="single")), Layout.data_parallel(1))
    ckpt = estimate(
        _cfg(BackendConfig(name="single"), activation_checkpointing=CheckpointingConfig(name="full")),
        Layout.data_parallel(1),
    )
    assert ckpt.activations < plain.activations / 4 and ckpt.logits == plain.logits


@pytest.mark.slow
def test_plan_on_a_gpu_sweep_starts_nothing(tmp_path: Path) -> None:
    proc = run_py("-m", "+sweep=backends", "plan=true", f"hydra.sweep.dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert [r["status"] for r in rows] == ["ok"] * 6
    assert {r["n_params"] for r in rows} == {str(P)}
    assert "launching" not in proc.stdout + proc.stderr and not list(tmp_path.rglob("metrics.json"))
    assert proc.stdout.count("| backend=") == 6  # one table, a row per job


def test_a_cpu_run_whose_model_states_exceed_host_memory_is_refused() -> None:
    """On the CPU the ranks share the machine's memory: when their fp32 weights, gradients and AdamW
    states alone (16 bytes per parameter per replica) exceed it, the run is refused in one line
    naming the model, the bytes and the fix. A tiny model passes, and a GPU run is not refused
    (its out-of-memory error is a status)."""
    from flopsweep.config import ConfigError
    from flopsweep.plan import Environment, resolve

    host = Environment(cpu_count=2, host_memory_bytes=16 * 2**30)
    big = dataclasses.replace(_cfg(BackendConfig(name="single")), device="cpu", nproc_per_node="1")
    with pytest.raises(ConfigError) as exc:
        resolve(big, host)
    message = str(exc.value)
    assert message.startswith(
        "Invalid config: model='gpt-1.3b': on the CPU the fp32 weights, gradients and AdamW states of 1 rank "
        "take at least 19.6 GiB"
    ), message
    assert (
        "the 16.0 GiB this machine lets a process use (its memory, or its cgroup's limit if smaller)"
        in message
        and "Fix: pick a smaller model (e.g. model=gpt-tiny)" in message
    )
    assert "\n" not in message
    assert resolve(dataclasses.replace(big, model=GPT2Config()), host).device == "cpu"
    assert resolve(big, dataclasses.replace(host, host_memory_bytes=32 * 2**30)).device == "cpu"
    assert resolve(big, Environment(cpu_count=2)).device == "cpu"  # memory unknown: not checked
    gpu = Environment(
        cuda_available=True, gpu_count=1, bf16_supported=True, capability=(9, 0), host_memory_bytes=1
    )
    assert resolve(dataclasses.replace(big, device="cuda"), gpu).device == "cuda"


def test_model_states_floor_is_below_the_estimate() -> None:
    """The refusal's floor never exceeds the estimate it stands in for (so it refuses only what
    the estimate would too), for every backend; sharded backends divide it by the world size."""
    for backend, world in (
        (BackendConfig(name="single"), Layout.data_parallel(1)),
        (BackendConfig(name="ddp"), Layout.data_parallel(4)),
        (FSDPConfig(), Layout.data_parallel(8)),
    ):
        cfg = _cfg(backend)
        assert model_states_floor(cfg, world) <= estimate(cfg, world).step_states
    four = Layout.data_parallel(4)
    for stage in (1, 2, 3):
        cfg = _cfg(DeepSpeedConfig(zero_stage=stage))
        assert model_states_floor(cfg, four) == 16 * P // 4 <= estimate(cfg, four).step_states


@pytest.mark.slow
def test_plan_on_the_cpu_says_whether_the_host_memory_holds_it(tmp_path: Path) -> None:
    """``plan=true device=cpu``: ``fits`` compares the estimate with the host's available memory;
    a model whose states exceed the machine is an ``invalid`` row, not a crash."""
    import psutil

    big = "gpt-13b" if 16 * 13e9 > psutil.virtual_memory().total else None
    models = "gpt-tiny" + (f",{big}" if big else "")
    proc = run_py(
        "-m", f"model={models}", "device=cpu", "plan=true", f"hydra.sweep.dir={tmp_path}", timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert (rows[0]["status"], rows[0]["fits"]) == ("ok", "True")
    if big:
        assert rows[1]["status"] == "invalid" and "this machine lets a process use" in rows[1]["note"]


def test_the_host_memory_refusal_suggests_sharding_only_where_it_helps() -> None:
    """All CPU ranks share one host: FSDP helps when DDP's copies overflow and one copy fits, never
    when one copy alone is too large."""
    from flopsweep.config import ConfigError
    from flopsweep.plan import Environment, resolve

    ddp2 = dataclasses.replace(_cfg(BackendConfig(name="ddp")), device="cpu", nproc_per_node="2")
    with pytest.raises(ConfigError) as copies:  # two 19.6 GiB copies, one fits in 32 GiB
        resolve(ddp2, Environment(cpu_count=2, host_memory_bytes=32 * 2**30))
    assert "backend=fsdp to shard it over the ranks" in str(copies.value)
    with pytest.raises(ConfigError) as one:  # one copy alone is over 16 GiB
        resolve(ddp2, Environment(cpu_count=2, host_memory_bytes=16 * 2**30))
    assert "fsdp" not in str(one.value) and "pick a smaller model" in str(one.value)


def test_a_plan_with_invalid_rows_says_so_last_and_exits_0(tmp_path: Path) -> None:
    """``plan=true`` is a report (exit 0), but its last line, on stderr, counts the invalid rows;
    a plan whose rows are all ``ok`` prints no such line."""
    proc = run_py(
        "-m",
        "model=gpt-tiny",
        "device=cpu",
        "nproc_per_node=1",
        "batch.micro_batch_size=1,0",  # 0: refused, an invalid row
        "plan=true",
        f"hydra.sweep.dir={tmp_path}",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert [r["status"] for r in rows] == ["ok", "invalid"]
    assert proc.stderr.strip().splitlines()[-1] == "flopsweep: 1 of 2 jobs are invalid: see the status column"

    from flopsweep.job import plan_invalid_line

    ok = tmp_path / "ok.csv"
    ok.write_text("job,status\n0,ok\n1,ok\n")
    assert plan_invalid_line(str(ok)) is None


def test_a_tiny_models_plan_row_shows_its_peak_to_three_significant_figures(
    hydra_compose, tmp_path: Path
) -> None:
    """gpt-tiny's estimated peak is a few MiB: rounded to 0.1 GiB it read 0.0; the column stays GiB,
    to 3 significant figures, and a ``batch=fixed`` row says nothing of ``batch=auto``."""
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.text import significant

    cfg = hydra_compose(["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "batch.micro_batch_size=1"])
    row = plan_job(cfg, JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok", row["note"]
    gib = float(row["est_peak_gib_per_rank"])
    assert 0 < gib < 0.1 and len(row["est_peak_gib_per_rank"].lstrip("0.")) == 3, row
    assert row["est_peak_gib_per_rank"] == significant(gib)
    assert "batch=auto" not in row["note"]
    assert [significant(x) for x in (0.012345, 12.345, 0.99951, 1234.5, 0.0)] == [
        "0.0123",
        "12.3",
        "1.00",
        "1230",
        "0",
    ]


def test_a_batch_auto_plan_row_says_it_is_estimated_at_the_searchs_start(
    hydra_compose, tmp_path: Path
) -> None:
    """``batch=auto`` finds its micro batch only by running: the row is estimated at the search's first
    size (``batch.micro_batch_size``), and its note says so."""
    from flopsweep.job import JobInfo, plan_job

    cfg = hydra_compose(["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "batch=auto"])
    row = plan_job(cfg, JobInfo(job_dir=tmp_path, overrides=["batch=auto"]))["plan"]
    assert row["status"] == "ok", row["note"]
    assert row["note"].startswith("batch=auto: estimated at micro batch 1, the search's start; "), row
    two = hydra_compose(
        ["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "batch=auto", "batch.micro_batch_size=2"]
    )
    row2 = plan_job(two, JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert "estimated at micro batch 2, the search's start" in row2["note"]
    assert float(row2["est_peak_gib_per_rank"]) > float(row["est_peak_gib_per_rank"])


def test_a_model_search_plan_row_says_which_size_it_is_estimated_at(hydra_compose, tmp_path: Path) -> None:
    """``search.model=largest`` finds its size only by running: the row is the configured model's, and
    its note names that size and the range the search probes (a trial read it as the searched size)."""
    from flopsweep.job import JobInfo, plan_job

    args = ["model=llama-tiny", "device=cpu", "nproc_per_node=1", "search.model=largest"]
    cfg = hydra_compose([*args, "search.min_n_layer=3", "search.max_n_layer=40"])
    row = plan_job(cfg, JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok", row["note"]
    expected = "search.model=largest: estimated at model.n_layer=2; the search probes 3 to 40 blocks"
    assert expected in row["note"], row["note"]
    plain = plan_job(hydra_compose(args[:3]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert "search.model" not in plain["note"]
