"""The host memory limit of a cgroup (flopsweep.hostmem): read from real files laid out as the
kernel's cgroup v2 and v1 mounts lay them out, and used by the offload check before launch."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from flopsweep import hostmem
from flopsweep.config import ConfigError, RunConfig
from flopsweep.models.llama import LlamaConfig
from flopsweep.options import FSDPConfig
from flopsweep.plan import Environment, resolve

GIB = 2**30


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_cgroup_v2_takes_the_smallest_limit_of_the_process_cgroup_and_its_ancestors(tmp_path: Path) -> None:
    proc = tmp_path / "proc_cgroup"
    proc.write_text("0::/slurm/uid_1/job_7/step_0\n")
    _tree(
        tmp_path / "cg",
        {
            "slurm/memory.max": "max\n",
            "slurm/uid_1/job_7/memory.max": f"{64 * GIB}\n",
            "slurm/uid_1/job_7/step_0/memory.max": "max\n",
            "slurm/uid_1/job_7/step_0/memory.current": f"{GIB}\n",
        },
    )
    assert hostmem.cgroup_limit_bytes(tmp_path / "cg", proc) == 64 * GIB
    assert hostmem._cgroup_usage_bytes(tmp_path / "cg", proc) == GIB


def test_cgroup_v1_memory_controller_and_its_no_limit_value(tmp_path: Path) -> None:
    proc = tmp_path / "proc_cgroup"
    proc.write_text("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    root = tmp_path / "cg"
    _tree(root, {"memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n"})
    assert hostmem.cgroup_limit_bytes(root, proc) is None  # v1's "unlimited"
    _tree(root, {"memory/docker/memory.limit_in_bytes": f"{24 * GIB}\n"})
    assert hostmem.cgroup_limit_bytes(root, proc) == 24 * GIB
    _tree(root, {"memory/docker/abc/memory.usage_in_bytes": f"{3 * GIB}\n"})
    assert hostmem._cgroup_usage_bytes(root, proc) == 3 * GIB


def test_unreadable_or_odd_cgroup_files_mean_no_limit(tmp_path: Path) -> None:
    """A missing proc file, a link in place of memory.max, garbage and a FIFO: never followed or
    blocked on, each read as no limit."""
    root, proc = tmp_path / "cg", tmp_path / "proc_cgroup"
    assert hostmem.cgroup_limit_bytes(root, proc) is None
    proc.write_text("0::/a\n")
    _tree(root, {"a/memory.max": "lots\n", "elsewhere": f"{GIB}\n"})
    assert hostmem.cgroup_limit_bytes(root, proc) is None
    (root / "a/memory.max").unlink()
    (root / "a/memory.max").symlink_to(root / "elsewhere")
    assert hostmem.cgroup_limit_bytes(root, proc) is None
    (root / "a/memory.max").unlink()
    os.mkfifo(root / "a/memory.max")
    assert hostmem.cgroup_limit_bytes(root, proc) is None
    proc.write_text("0::/../../etc\n")  # no climbing out of the mount
    assert hostmem.cgroup_limit_bytes(root, proc) is None


def test_the_host_memory_used_here_is_never_more_than_psutil_reports() -> None:
    import psutil

    assert 0 < hostmem.total_bytes() <= psutil.virtual_memory().total
    assert 0 <= hostmem.available_bytes() <= psutil.virtual_memory().available + GIB


def test_a_cgroup_limit_below_the_offloaded_states_refuses_the_run_in_one_line() -> None:
    """The offload check uses the environment's host memory, which is the cgroup's limit where one
    is set: 16 bytes per parameter of a 1.2 B Llama (19.6 GiB) do not fit a 16 GiB job."""
    llama = LlamaConfig(n_layer=16, n_embd=2048, n_head=32, n_kv_head=8, ffn_dim=8192, vocab_size=128256)
    cfg = dataclasses.replace(RunConfig(), model=llama, backend=FSDPConfig(cpu_offload=True), device="cuda")
    host = Environment(cuda_available=True, gpu_count=1, bf16_supported=True, capability=(9, 0), cpu_count=8)
    with pytest.raises(ConfigError) as err:
        resolve(cfg, dataclasses.replace(host, host_memory_bytes=16 * GIB))
    assert err.value.key == "backend.cpu_offload" and "16.0 GiB this machine lets a process use" in str(
        err.value
    )
    assert "\n" not in str(err.value)
    assert resolve(cfg, dataclasses.replace(host, host_memory_bytes=64 * GIB)).device == "cuda"


def test_on_the_cpu_the_offload_refusal_suggests_only_what_runs_there() -> None:
    """On the CPU, offload to nvme is refused and turning offload off keeps the states on the same
    host: the fix names a smaller model or device=cuda only."""
    llama = LlamaConfig(n_layer=16, n_embd=2048, n_head=32, n_kv_head=8, ffn_dim=8192, vocab_size=128256)
    cfg = dataclasses.replace(RunConfig(), model=llama, backend=FSDPConfig(cpu_offload=True), device="cpu")
    host = Environment(cpu_count=8, host_memory_bytes=16 * GIB)
    with pytest.raises(ConfigError) as err:
        resolve(cfg, host)
    message = str(err.value)
    assert err.value.key == "backend.cpu_offload" and "model=gpt-tiny" in message
    assert (
        "plan=true and drop device=cpu and set plan_gpu=NAME (e.g. drop device=cpu and set plan_gpu=H100; "
        in message
        and "device=cuda" not in message
    )
    assert "nvme" not in message and "offload off" not in message
    # the example is the GPU plan_clusters names, where one does (here names none)
    clusters = dataclasses.replace(cfg, plan_clusters=["here", "H200:2x8"])
    with pytest.raises(
        ConfigError,
        match=r"plan=true and drop device=cpu and set plan_gpu=NAME \(e\.g\. drop device=cpu and set "
        r"plan_gpu=H200; ",
    ):
        resolve(clusters, host)


def test_gpu_offload_over_the_free_host_memory_by_its_estimate_is_refused_or_let_go() -> None:
    """On GPUs with offload, the launch (job.check_free_host_memory) refuses a run whose estimate of
    host memory (the offloaded states, 16 bytes per parameter, times what the H200's runs held over
    them: memory.OFFLOAD_HOST_HELD, 1.25 for ZeRO-Offload, which passed the lower bound at 6.94 B
    parameters and was killed by the OOM killer) exceeds the host memory free now, also where the
    lower bound alone would fit (issue 40: it was only warned about); a model whose estimate fits is
    let go."""
    from flopsweep.job import check_free_host_memory
    from flopsweep.memory import offload_host_bytes, offload_host_held_bytes
    from flopsweep.options import DeepSpeedConfig
    from flopsweep.plan import plan

    backend = DeepSpeedConfig(zero_stage=3, offload_optimizer="cpu")
    cfg = dataclasses.replace(RunConfig(), backend=backend, device="cuda", nproc_per_node=1)
    gpu = Environment(cuda_available=True, gpu_count=1, bf16_supported=True, capability=(9, 0), cpu_count=8)
    gpu = dataclasses.replace(gpu, host_memory_bytes=1 << 60)  # validation passes: the launch checks

    def planned(n_layer: int, n_embd: int = 16384):
        width = dict(n_embd=n_embd, n_head=max(8, n_embd // 128), n_kv_head=8, ffn_dim=n_embd * 13 // 4)
        return plan(
            dataclasses.replace(cfg, model=LlamaConfig(n_layer=n_layer, vocab_size=256, **width)), gpu
        )

    huge = planned(800)  # 12 TiB of states
    assert offload_host_bytes(huge.cfg, huge.layout) > hostmem.available_bytes()
    with pytest.raises(ConfigError) as err:
        check_free_host_memory(huge)
    message = str(err.value)
    assert err.value.key == "backend.offload_optimizer" and "\n" not in message
    assert "GiB is free now" in message and "offload off" in message
    assert check_free_host_memory(planned(2, n_embd=128)) is None
    # Between: 16 P at 0.89 of the free memory, 20 P (ZeRO's 1.25) at 1.11 of it: refused.
    per_layer = offload_host_bytes(planned(2, 1024).cfg, planned(2, 1024).layout) - offload_host_bytes(
        planned(1, 1024).cfg, planned(1, 1024).layout
    )
    free = hostmem.available_bytes()  # read once: the check is given it, so load cannot move it
    between = planned(max(1, int(free / 1.125 / per_layer)), 1024)
    lower, held = (
        offload_host_bytes(between.cfg, between.layout),
        offload_host_held_bytes(between.cfg, between.layout),
    )
    assert held == int(lower * 1.25) and lower < free < held
    with pytest.raises(ConfigError) as err:
        check_free_host_memory(between, free)
    message = str(err.value)
    assert err.value.key == "backend.offload_optimizer" and "expected to hold about" in message
    assert f"{lower / GIB:.1f} GiB of model states" in message and "OOM killer" in message
    assert check_free_host_memory(between, held + GIB) is None


def test_on_the_cpu_the_peak_counts_the_offloaded_states_in_the_same_memory() -> None:
    """The fresh-user trial: gpt-1.3b, FSDP2 cpu_offload, 2 CPU ranks. plan=true showed 17.0 GiB per
    rank (memory.estimate leaves the offloaded states out, as a GPU does not hold them) and the
    launch warned of 52.8 GiB (16 P / 2 per rank plus activations, without the gathered weights);
    on the CPU the offloaded states are in the same memory, so plan=true and the launch now both
    use memory.peak_bytes: the estimate plus 16 P / 2, 26.8 GiB per rank."""
    from flopsweep.config import ModelConfig
    from flopsweep.memory import estimate, offload_host_bytes, peak_bytes
    from flopsweep.plan import plan

    host = Environment(cpu_count=8, host_memory_bytes=1 << 60)
    gpt = ModelConfig(name="gpt-1.3b", n_layer=24, n_embd=2048, n_head=16, seq_len=2048, vocab_size=50304)
    cfg = dataclasses.replace(
        RunConfig(), model=gpt, backend=FSDPConfig(cpu_offload=True), device="cpu", nproc_per_node="2"
    )
    p = plan(cfg, host)
    est, states = estimate(p.cfg, p.layout), offload_host_bytes(p.cfg, p.layout)
    assert states == 16 * 1_315_819_520 // 2
    assert round(est.total / GIB, 1) == 17.0 and peak_bytes(p.cfg, p.layout) == est.total + states
    assert round(peak_bytes(p.cfg, p.layout) / GIB, 1) == 26.8
    on_gpu = dataclasses.replace(p.cfg, device="cuda")
    assert peak_bytes(on_gpu, p.layout) == estimate(on_gpu, p.layout).total  # the GPU holds no states


@pytest.mark.parametrize(
    ("key", "value"), [("model.seq_len", 2**20), ("batch.micro_batch_size", 2**16), ("model.n_layer", 1024)]
)
def test_a_cpu_run_over_the_free_memory_names_the_key_given_and_a_value_that_fits(
    key: str, value: int
) -> None:
    """Trial 24: ``model.seq_len=1048576`` (the bound the type check named) was refused for host memory
    in a line naming ``model=gpt-tiny`` alone. The line names the memory key the command line set, its
    value, and the largest power of two of it that fits the free memory (given here: 2 GiB, so that
    the machine's load cannot move it), which the same check then passes; without the override, the
    line names the model as before."""
    from flopsweep.cpu_duration import run_seconds
    from flopsweep.job import check_free_host_memory
    from flopsweep.key_needs import MEMORY_KEYS
    from flopsweep.plan import plan
    from flopsweep.worker import usable_cores

    assert key in MEMORY_KEYS
    section, _, leaf = key.partition(".")
    host = Environment(cpu_count=8, host_memory_bytes=1 << 60)  # validation passes: the launch checks

    def planned(v: int):
        cfg = RunConfig(device="cpu")
        return plan(
            dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **{leaf: v})}),
            host,
        )

    free = 2 * GIB
    big = planned(value)
    with pytest.raises(ConfigError) as err:
        check_free_host_memory(big, free=free, overrides=["device=cpu", f"{key}={value}"])
    line = str(err.value)
    assert (
        line.startswith(f"Invalid config: {key}={value}: on the CPU 1 rank needs about ") and "\n" not in line
    )
    fit = int(
        re.search(rf"Fix: set {re.escape(key)}=(\d+) \(the largest power of two that fits", line).group(1)
    )
    assert 1 <= fit < value and fit & (fit - 1) == 0
    assert check_free_host_memory(planned(fit), free=free, overrides=[f"{key}={fit}"]) is None
    twice = planned(fit * 2)  # twice the fit does not: over the memory, or counted past timeout_s (#501)
    batch = twice.cfg.batch
    tokens = twice.layout.global_batch(batch.micro_batch_size, batch.grad_accum) * twice.cfg.model.seq_len
    if run_seconds(twice.cfg, tokens, usable_cores()) <= twice.cfg.timeout_s:
        with pytest.raises(ConfigError):  # the largest power of two
            check_free_host_memory(twice, free=free, overrides=[f"{key}={fit * 2}"])
    with pytest.raises(ConfigError) as err:
        check_free_host_memory(big, free=free)
    assert err.value.key == "model"
