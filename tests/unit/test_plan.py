"""``plan=true``: every job validated and estimated, no worker started, no record written."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from flopsweep.backends import DeepSpeedConfig, FSDPConfig
from flopsweep.config import BackendConfig, CheckpointingConfig, RunConfig
from flopsweep.job.planfit import unwrapped
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
    # fp32 weights, grads, AdamW moments (tests/unit/test_memory.py: the rest)
    assert single.step_states == 16 * P
    assert estimate(_cfg(BackendConfig(name="ddp")), Layout.data_parallel(1)).step_states == 20 * P
    assert estimate(_cfg(FSDPConfig()), Layout.data_parallel(8)).step_states == 16 * P // 8
    zero2 = estimate(_cfg(DeepSpeedConfig(zero_stage=2)), Layout.data_parallel(4))
    # DeepSpeed's estimator and the step's flattened bf16 gradient partition (test_memory_zero_step.py)
    assert zero2.step_states == 2 * P + int(18 * P / 4) + 2 * P // 4 and "estimate_zero2" in zero2.method
    assert "estimate_zero3" in estimate(_cfg(DeepSpeedConfig(zero_stage=3)), Layout.data_parallel(4)).method


def test_checkpointing_keeps_only_block_inputs() -> None:
    plain = estimate(_cfg(BackendConfig(name="single")), Layout.data_parallel(1))
    ckpt = estimate(
        _cfg(BackendConfig(name="single"), activation_checkpointing=CheckpointingConfig(name="full")),
        Layout.data_parallel(1),
    )
    assert ckpt.activations < plain.activations / 4 and ckpt.logits == plain.logits


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


def test_the_plans_memory_checks_see_the_resolved_device(hydra_compose) -> None:
    """``device=auto`` is resolved before the plan's memory checks (host memory, the search budget)
    estimate anything: on this CPU machine it estimates as ``device=cpu`` (DeepSpeed's optimizer
    states on the CPU: before, ``auto`` was estimated as CUDA, 1.875 GiB against 0.012), and on a GPU
    as ``device=cuda`` (SDPA's math kernel in fp32 with GQA keeps the scores: 0.011 against 0.01197)."""
    from flopsweep.config import ConfigError
    from flopsweep.plan import Environment, resolve

    base = ["model=llama-tiny", "precision=fp32", "attention=sdpa", "nproc_per_node=1"]
    base += ["search.model=largest", "search.memory_budget_gib=0.0001"]  # refused, naming the estimate
    gpu = Environment(cuda_available=True, gpu_count=1, bf16_supported=True, capability=(9, 0), cpu_count=2)

    def refusal(device: str, env: Environment, *extra: str) -> str:
        with pytest.raises(ConfigError, match="search.memory_budget_gib=0.0001") as exc:
            resolve(hydra_compose([*base, *extra, f"device={device}"]), env)
        return str(exc.value)

    for extra in (["backend=deepspeed"], []):
        assert refusal("auto", Environment(cpu_count=2), *extra) == refusal(
            "cpu", Environment(cpu_count=2), *extra
        )
        assert refusal("auto", gpu, *extra) == refusal("cuda", gpu, *extra)
    # the two devices' estimates differ, so the equalities above can fail
    assert refusal("cpu", Environment(cpu_count=2), "backend=deepspeed") != refusal(
        "cuda", gpu, "backend=deepspeed"
    )
    assert refusal("cpu", Environment(cpu_count=2)) != refusal("cuda", gpu)
    placed = resolve(hydra_compose([*base[:4], "device=auto"]), Environment(cpu_count=2))
    assert placed.cfg.device == placed.device == "cpu"


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
    hydra_compose, tmp_path: Path, monkeypatch
) -> None:
    """``batch=auto`` finds its micro batch only by running: a CPU plan sizes it within the host's
    available memory less the launch's margin (``sizesearch.cpu_allowance``, #843), and where even the
    search's first size (``batch.micro_batch_size``) is over that, the row is estimated at that size and
    its note says so. With a budget, the one rule of a CPU probe (its estimate against the budget), the row
    is at the largest size within it, as the search's."""
    from flopsweep import hostmem
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.plan import Environment, plan
    from flopsweep.text import significant

    monkeypatch.setattr(hostmem, "available_bytes", lambda: hostmem.CPU_RSS_BASE_BYTES)  # the margin alone
    cfg = hydra_compose(["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "batch=auto"])
    row = plan_job(cfg, JobInfo(job_dir=tmp_path, overrides=["batch=auto"]))["plan"]
    assert row["status"] == "ok", row["note"]
    assert row["note"].startswith(
        "batch=auto: estimated at micro batch 1, the search's start; even that is "
    ), row["note"]
    assert "(the host's available memory less the CPU's margin)" in row["note"]
    two = hydra_compose(
        ["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "batch=auto", "batch.micro_batch_size=2"]
    )
    row2 = plan_job(two, JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert "estimated at micro batch 2, the search's start" in row2["note"]
    assert float(row2["est_peak_gib_per_rank"]) > float(row["est_peak_gib_per_rank"])
    monkeypatch.setattr(hostmem, "available_bytes", lambda: 64 * 2**30)  # the budget below is the smaller
    held = ["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "batch=auto"]
    p = plan(hydra_compose(held), Environment(cpu_count=2))

    def peak(n: int) -> int:
        cfg = dataclasses.replace(p.cfg, batch=dataclasses.replace(p.cfg.batch, micro_batch_size=n))
        return estimate(cfg, p.layout).total

    budget = (peak(3) + peak(4)) / 2 / 2**30
    row3 = plan_job(
        hydra_compose([*held, f"search.memory_budget_gib={budget}"]), JobInfo(job_dir=tmp_path, overrides=[])
    )["plan"]
    assert (
        f"batch=auto: predicted at micro batch 3, the largest the estimate fits in {significant(budget)} GiB "
        "(search.memory_budget_gib)"
    ) in row3["note"], row3["note"]
    assert float(row3["est_peak_gib_per_rank"]) == float(significant(peak(3) / 2**30))


def test_a_batch_auto_plan_for_a_gpu_is_predicted_at_the_largest_micro_batch_the_estimate_fits(
    hydra_compose, tmp_path: Path
) -> None:
    """A ``batch=auto`` run measures the largest micro batch that fits (often 8-22 on an H200); a plan
    row at the search's first size (1) predicted far too few tokens/s. With the GPU's memory known
    (``plan_gpu=H100``), the row is estimated and predicted at the largest size whose estimated peak
    fits it (found here by trying every size), says so in its note, and predicts what a
    ``batch=fixed`` plan at that size does: more tokens/s than at micro batch 1, where the
    all-gathers hide behind less compute. ``batch.max_micro_batch_size`` caps it;
    ``search.memory_budget_gib``, when smaller, is the memory it fits in."""
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.memory import GIB, planned_gpu_bytes
    from flopsweep.models import family
    from flopsweep.plan import Environment, plan
    from flopsweep.text import significant

    args = ["model=llama3.2-1b", "backend=fsdp", "precision=bf16", "device=cuda", "nproc_per_node=2"]
    args += ["plan=true", "plan_gpu=H100"]

    def row(*extra: str) -> dict:
        out = plan_job(hydra_compose([*args, *extra]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
        assert out["status"] == "ok", out["note"]
        return out

    gpus = Environment(cuda_available=True, gpu_count=2, bf16_supported=True, capability=(9, 0), cpu_count=2)
    p = plan(hydra_compose([*args, "batch=auto"]), dataclasses.replace(gpus, paths_here=False))
    capacity = planned_gpu_bytes("H100", None)[0]

    def peak(n: int) -> int:
        cfg = dataclasses.replace(p.cfg, batch=dataclasses.replace(p.cfg.batch, micro_batch_size=n))
        return estimate(cfg, p.layout).total

    fitting = [n for n in range(1, 65) if peak(n) <= capacity]
    size = max(fitting)
    assert fitting == list(range(1, size + 1)) and 4 < size < 64, fitting
    auto = row("batch=auto")
    assert (
        f"batch=auto: predicted at micro batch {size}, the largest the estimate fits in 79.6 GiB; the run "
        "measures the largest its probes fit without cudaMalloc retries; "
    ) in auto["note"], auto["note"]
    assert auto["est_peak_gib_per_rank"] == significant(peak(size) / GIB) and auto["fits"] is True
    m = p.cfg.model
    flops = family(m).model_flops(m, size * 2 * m.seq_len, 1.0)  # micro batch x dp x seq_len tokens
    assert auto["model_flops_per_step"] == f"{flops:.4g}"
    fixed = row(f"batch.micro_batch_size={size}")
    one = row("batch.micro_batch_size=1")
    assert auto["predicted_tokens_per_s_per_device"] == fixed["predicted_tokens_per_s_per_device"]
    assert float(auto["predicted_tokens_per_s_per_device"]) > float(one["predicted_tokens_per_s_per_device"])
    assert float(auto["predicted_iteration_time_s"]) > float(one["predicted_iteration_time_s"])

    capped = row("batch=auto", "batch.max_micro_batch_size=4")
    assert (
        "batch=auto: predicted at micro batch 4, batch.max_micro_batch_size, which the estimate fits in "
        "79.6 GiB; "
    ) in capped["note"], capped["note"]
    budget = (peak(3) + peak(4)) / 2 / GIB
    held = row("batch=auto", f"search.memory_budget_gib={budget}")
    assert (
        f"batch=auto: predicted at micro batch 3, the largest the estimate fits in {significant(budget)} GiB "
        "(search.memory_budget_gib)"
    ) in held["note"], held["note"]
    over = row("batch=auto", "model.seq_len=131072")  # even micro batch 1 is estimated over 79.6 GiB
    assert (
        "batch=auto: estimated at micro batch 1, the search's start; even that is estimated over 79.6 GiB; "
    ) in over["note"], over["note"]
    assert over["fits"] is False


def test_a_model_search_plan_row_says_which_size_it_is_estimated_at(
    hydra_compose, tmp_path: Path, monkeypatch
) -> None:
    """``search.model=largest`` finds its size only by running: a configured ``model.n_layer`` inside
    the range it probes is the row's size, and its note names that size and the range (a trial read
    it as the searched size). One outside the range, which the search never probes, is clamped into
    it (a trial found a row estimated at 2 blocks for a search of 3 to 40): below, the search's first
    probe; above, the most it probes. In range or clamped, the model is named ``<model>-L<n>``, as the
    probes and the run's record are (a trial found only the clamped rows renamed). No memory is known for
    a GPU job placed on a machine without GPUs (a CPU row is sized within the host's memory, #843): the
    plan sees none here whatever this machine has (``Environment.detect(no_gpu=True)``, #904; on a GPU
    machine the row had been sized by its GPU)."""
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.models import family
    from flopsweep.plan import Environment

    seen = Environment.detect.__func__
    monkeypatch.setattr(Environment, "detect", classmethod(lambda cls, no_gpu=False: seen(cls, no_gpu=True)))

    args = ["model=llama-tiny", "device=cuda", "nproc_per_node=1", "search.model=largest"]  # 2 blocks

    def row(*extra: str) -> dict:
        out = plan_job(hydra_compose([*args, *extra]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
        assert out["status"] == "ok", out["note"]
        return out

    inside = row("search.min_n_layer=1", "search.max_n_layer=40")
    expected = "search.model=largest: estimated at model.n_layer=2; the search probes 1 to 40 blocks"
    assert expected in inside["note"] and inside["model"] == "llama-tiny-L2", inside
    below = row("search.min_n_layer=3", "search.max_n_layer=40")
    expected = (
        "search.model=largest: estimated at n_layer=3, the search's first probe (model.n_layer=2 is outside "
        "the 3 to 40 blocks it probes)"
    )
    assert expected in below["note"] and below["model"] == "llama-tiny-L3", below
    three = dataclasses.replace(hydra_compose(args).model, n_layer=3)
    assert int(below["n_params"]) == family(three).n_params(three) > int(inside["n_params"])
    assert float(below["est_peak_gib_per_rank"]) > float(inside["est_peak_gib_per_rank"])
    above = row("search.min_n_layer=1", "search.max_n_layer=1")
    assert "estimated at n_layer=1, the most the search probes (model.n_layer=2 is outside" in above["note"]
    assert above["model"] == "llama-tiny-L1" and int(above["n_params"]) < int(inside["n_params"])
    plain = plan_job(hydra_compose(args[:3]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert "search.model" not in plain["note"]


def test_a_model_search_plan_row_is_estimated_at_the_largest_size_within_its_budget(
    hydra_compose, tmp_path: Path
) -> None:
    """Under ``search.memory_budget_gib`` (or a GPU's memory), as ``batch=auto``'s row is, a
    ``search.model=largest`` row is estimated at the largest ``n_layer`` whose estimate fits the smaller
    of the two, and its note names that memory: a trial's row of a 32-block Llama 8B under a 40 GiB
    budget was estimated at 70.8 GiB, ``fits`` true against the GPU, the budget unsaid. A configured
    ``model.n_layer`` over the budget is not the row's size; one under it grows to what the search would
    reach. A GPU memory below the first probe's estimate leaves the row there, said so."""
    from flopsweep.job import JobInfo, plan_job

    args = ["model=llama-tiny", "nproc_per_node=1", "search.model=largest", "search.max_n_layer=40"]
    cfg = hydra_compose([*args, "device=cpu"])  # model.n_layer=2

    def peak(n: int, base: RunConfig = cfg) -> int:
        sized = dataclasses.replace(base, model=dataclasses.replace(base.model, n_layer=n))
        return estimate(sized, Layout()).total

    def row(*extra: str) -> dict:
        out = plan_job(hydra_compose([*args, *extra]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
        assert out["status"] == "ok", out["note"]
        return out

    for n in (1, 6):  # a budget between the estimates of n and n + 1 blocks: below and above n_layer=2
        gib = (peak(n) + peak(n + 1)) / 2 / 2**30
        under = row("device=cpu", f"search.memory_budget_gib={gib}")
        said = f"search.model=largest: estimated at n_layer={n}, the largest the estimate fits in "
        assert said in under["note"] and "GiB (search.memory_budget_gib)" in under["note"], under["note"]
        assert under["model"] == f"llama-tiny-L{n}" and float(under["est_peak_gib_per_rank"]) <= gib, under
    roomy = row("device=cpu", "search.memory_budget_gib=1000")
    assert "estimated at n_layer=40, search.max_n_layer, which the estimate fits in " in roomy["note"]
    assert "GiB (the host's available memory less the CPU's margin)" in roomy["note"]  # under 1000 GiB (#843)
    # A GPU's memory alone bounds it too; the smaller one wins. A GPU has 1 GiB or more
    # (gpu_memory.MIN_GPU_MEMORY_GIB): longer micro batches give a block that much (1 block: 3 GiB).
    big = ["model.seq_len=4096", "batch.micro_batch_size=64"]
    big_cfg = hydra_compose([*args, "device=cpu", *big])
    gpu = (peak(3, big_cfg) + peak(4, big_cfg)) / 2 / 2**30
    for extra in ([], [f"search.memory_budget_gib={gpu * 2}"]):
        on_gpu = row("device=cuda", *big, f"plan_gpu_memory_gib={gpu}", *extra)
        assert on_gpu["model"] == "llama-tiny-L3" and on_gpu["fits"] is True, on_gpu
        assert "(search.memory_budget_gib)" not in on_gpu["note"], on_gpu["note"]
    tiny = row("device=cuda", *big, f"plan_gpu_memory_gib={peak(1, big_cfg) / 2 / 2**30}")
    assert "estimated at n_layer=1, the search's first probe; even that is estimated over" in tiny["note"]
    assert tiny["model"] == "llama-tiny-L1" and tiny["fits"] is False, tiny
    # On the CPU offloaded states share the memory: the size is the largest whose shown peak fits
    # (a review found L23 at 0.118 GiB under a 0.05 GiB budget: sized by the estimate without them).
    offload = row("device=cpu", "backend=fsdp", "backend.cpu_offload=true", "search.memory_budget_gib=0.05")
    assert float(offload["est_peak_gib_per_rank"]) <= 0.05 and offload["fits"] is True, offload


def test_a_plan_for_gpus_not_here_leaves_the_nvme_path_to_the_launch(hydra_compose, tmp_path: Path) -> None:
    """Under ``plan_gpu`` the ZeRO-3 NVMe offload's ``backend.nvme_path`` is the target machine's: a
    path missing here is no refusal (a trial's plan was refused on the laptop's folders), and the row
    says it is checked when the run launches. Without ``plan_gpu`` the plan is of this machine and
    refuses the missing folder, as the run would."""
    from flopsweep.job import JobInfo, plan_job

    missing = tmp_path / "absent"
    args = ["model=gpt-tiny", "nproc_per_node=1", "backend=zero3", "backend.offload_optimizer=nvme"]
    args += [f"backend.nvme_path={missing}", "plan=true"]
    row = plan_job(hydra_compose([*args, "plan_gpu=H100"]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok" and row["fits_on"].startswith("H100"), row["note"]
    assert f"backend.nvme_path={missing} is checked when the run launches" in row["note"]
    here = plan_job(hydra_compose([*args, "device=cuda"]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert here["status"] == "invalid" and here["reason"].startswith(
        f"Invalid config: backend.nvme_path='{missing}': is not an existing folder"
    ), here
    assert not missing.exists()


def test_a_plan_for_gpus_not_here_leaves_the_kernels_package_to_the_launch(
    hydra_compose, tmp_path: Path
) -> None:
    """A trial's ``plan_gpu=H100 attention=xformers`` was refused because xformers is not installed on
    the laptop: the package is the target machine's, checked when the run launches, as the row says.
    (Where xformers is missing here, the same plan of this machine is refused, as the run would be.)"""
    import importlib.util

    from flopsweep.job import JobInfo, plan_job

    args = ["model=gpt-tiny", "nproc_per_node=1", "attention=xformers", "plan=true"]
    row = plan_job(hydra_compose([*args, "plan_gpu=H100"]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok", row["note"]
    assert (
        "attention=xformers: the xformers package is checked when the run launches (not here)" in row["note"]
    )
    if importlib.util.find_spec("xformers") is None:
        here = plan_job(hydra_compose([*args, "device=cuda"]), JobInfo(job_dir=tmp_path, overrides=[]))[
            "plan"
        ]
        assert here["status"] == "invalid" and "the xformers package is not installed" in here["reason"]


def test_a_plan_of_several_nodes_is_placed_as_the_slurm_job_it_needs(hydra_compose, tmp_path: Path) -> None:
    """``plan=true nnodes=2`` plans the two-node job (a trial was sent to the Slurm launcher to plan):
    world size and memory of 2 nodes, the note saying a run needs the Slurm launcher, and ``batch=auto``
    planned there too (its probes run on every node's ranks, flopsweep.lockstep). A run of
    several nodes outside Slurm is refused in one line that keeps the launcher and names the planning keys."""
    from flopsweep.config import ConfigError
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.plan import Environment, resolve

    args = ["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "backend=fsdp", "nnodes=2"]
    row = plan_job(hydra_compose([*args, "plan=true"]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok", row["note"]
    assert (row["world_size"], row["predicted_nnodes"], row["predicted_world_size"]) == (2, 2, 2)
    assert "nnodes=2: planned as a Slurm job (a run needs -m hydra/launcher=slurm)" in row["note"]
    one = plan_job(hydra_compose([*args[:4], "plan=true"]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert float(row["est_peak_gib_per_rank"]) < float(one["est_peak_gib_per_rank"])  # FSDP shards over 2
    auto = plan_job(
        hydra_compose([*args, "plan=true", "batch=auto"]), JobInfo(job_dir=tmp_path, overrides=[])
    )
    assert auto["plan"]["status"] == "ok", auto["plan"]["note"]  # its probes run on both nodes (lockstep)
    assert "nnodes=2: planned as a Slurm job" in auto["plan"]["note"]
    with pytest.raises(ConfigError) as err:
        resolve(hydra_compose(args), Environment(cpu_count=2))
    message = str(err.value)
    assert err.value.key == "nnodes" and "run the sweep with -m hydra/launcher=slurm" in message
    assert "add plan=true" in message and "predict.nnodes=" in message and "predict.gpus_per_node=" in message
    assert "\n" not in message


def test_a_calibration_at_the_plans_own_world_size_is_its_prediction(hydra_compose, tmp_path: Path) -> None:
    """A record of the set-up itself, at the plan's own world size, is the best calibration there is: the
    plan predicts its step time (a trial's was refused with a message asking for what it gave). A
    record of more ranks still calibrates nothing, and the source says which world sizes would."""
    import json

    from flopsweep import forecast
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.models import family
    from flopsweep.plan import Environment, plan

    args = ["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "plan=true"]
    cfg = plan(hydra_compose(args), Environment(cpu_count=2)).cfg  # resolved, as a run records it
    work = forecast.workload(cfg, Layout.data_parallel(1))
    record = {
        "status": "ok",
        "config": json.loads(json.dumps(dataclasses.asdict(cfg), default=str)),
        "model": {"n_params": family(cfg.model).n_params(cfg.model)},
        "system": {"world_size": 1, "nproc_per_node": 1, "parallel": {"dp_shard": 1}},
        "metrics": {"iteration_time_s": {"mean": 0.25}, "model_flops_per_iteration": work.model_flops},
    }
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "metrics.json").write_text(json.dumps(record))
    calibrated = [*args, f"predict.calibration={tmp_path / 'cal'}"]
    row = plan_job(hydra_compose(calibrated), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok", row["note"]
    assert row["prediction_source"].startswith(f"calibrated: {tmp_path / 'cal' / 'metrics.json'}"), row
    assert float(row["predicted_iteration_time_s"]) == pytest.approx(0.25)
    record["system"] = {"world_size": 2, "nproc_per_node": 2, "parallel": {"dp_shard": 2}}
    (tmp_path / "cal" / "metrics.json").write_text(json.dumps(record))
    row = plan_job(hydra_compose(calibrated), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert "none of its 1 ok records ran on 1 rank or fewer" in row["prediction_source"], row
    assert row["predicted_iteration_time_s"] == "", row["prediction_source"]


def test_a_cpu_record_does_not_calibrate_a_plan_for_gpus(hydra_compose, tmp_path: Path) -> None:
    """A CPU record's step says nothing of an H100's: a trial's ``plan_gpu=H100`` plan was
    "calibrated" by a one-rank CPU record and predicted the CPU's own step. The device type is part
    of the calibration's match (``predict.CALIBRATION_KEYS``): the plan is predicted uncalibrated, from
    the H100 datasheet, and its source names the device the record ran on."""
    import json

    from flopsweep import forecast
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.models import family
    from flopsweep.plan import Environment, plan

    args = ["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "plan=true"]
    cfg = plan(hydra_compose(args), Environment(cpu_count=2)).cfg
    record = {
        "status": "ok",
        "config": json.loads(json.dumps(dataclasses.asdict(cfg), default=str)),
        "model": {"n_params": family(cfg.model).n_params(cfg.model)},
        "system": {"world_size": 1, "nproc_per_node": 1, "parallel": {"dp_shard": 1}},
        "metrics": {
            "iteration_time_s": {"mean": 1.5},
            "model_flops_per_iteration": forecast.workload(cfg, Layout.data_parallel(1)).model_flops,
        },
    }
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "metrics.json").write_text(json.dumps(record))
    gpu = [
        "model=gpt-tiny",
        "nproc_per_node=1",
        "plan=true",
        "plan_gpu=H100",
        f"predict.calibration={tmp_path / 'cal'}",
    ]
    row = plan_job(hydra_compose(gpu), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok", row["note"]
    source = row["prediction_source"]
    assert source.startswith("uncalibrated: ") and "H100" in source, source
    assert "device cuda vs cpu" in source, source
    assert float(row["predicted_iteration_time_s"]) < 1.5
    cpu = plan_job(
        hydra_compose([*args, f"predict.calibration={tmp_path / 'cal'}"]),
        JobInfo(job_dir=tmp_path, overrides=[]),
    )
    assert cpu["plan"]["prediction_source"].startswith("calibrated: "), cpu["plan"]


def test_the_plan_table_escapes_control_characters(tmp_path: Path) -> None:
    """A cell holding an escape sequence or a newline (an override's value, a note quoting a path)
    reaches the terminal escaped, one row per line (a trial saw a raw ESC and a row split in two);
    the CSV keeps the exact value."""
    import csv

    from flopsweep.job import plan_table

    path = tmp_path / "plan.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["job", "overrides", "status", "note"])
        writer.writerow([0, "backend.nvme_path=/a\x1b[31mred", "ok", "tag a\nb"])
        writer.writerow([1, "model=gpt-tiny", "ok", ""])
    table = plan_table(str(path))
    assert "\x1b" not in table and "/a\\x1b[31mred" in table and "[1] tag a\\nb" in table
    # header, rule, two rows, the note, the footer (wrapped at 160 columns: a long tmp path, #723)
    assert len(table.partition("\n(plan:")[0].splitlines()) == 2 + 2 + 1 and "\n(plan:" in table
    with path.open(newline="") as f:
        assert list(csv.reader(f))[1][3] == "tag a\nb"


def test_the_plan_table_is_compact_and_prints_each_long_text_once(tmp_path: Path) -> None:
    """A trial's plan printed 24 columns over 900 characters a line, the same source and note in every
    row: the terminal table keeps the columns some row fills, under short headers, the texts every row
    repeats as ``[k]`` (each printed once below), and the overrides every job shares once; the CSV
    keeps every column and value."""
    import csv

    from flopsweep.job import plan_table
    from flopsweep.job.plantable import PLAN_COLUMNS

    source, note = "uncalibrated: " + "s" * 150, "placed as an H200 SXM; " + "n" * 150
    rows = [
        {
            "job": job,
            "model": "llama3.1-8b",
            "overrides": f"backend={backend} model=llama3.1-8b plan=true plan_gpu=H200",
            "status": "ok",
            "world_size": 1,
            "layout": "dp1",
            "est_peak_gib_per_rank": 120.5,
            "fits": True,
            "predicted_iteration_time_s": 0.5,
            "predicted_tokens_per_s_per_device": 9000 + job,
            "predicted_mfu": 0.45,
            "rank": 3 - job,
            "prediction_source": source,
            "note": note if backend == "single" else "other",
        }
        for job, backend in enumerate(["single", "fsdp", "zero3"])
    ]
    path = tmp_path / "plan.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PLAN_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    lines = unwrapped(plan_table(str(path)))
    header, rows_shown, below = lines[0], lines[2:5], lines[5:]
    cells = [cell.strip() for cell in header.strip("|").split("|")]
    assert {"source", "tokens/s/GPU", "step_s", "peak_GiB", "rank"} <= set(cells), cells
    assert not {"USD", "days", "n_params", "fits_on"} & set(cells), cells  # unfilled, or in the file only
    assert [line.count(source) for line in lines].count(1) == 1 and sum(note in line for line in lines) == 1
    assert below[:3] == [f"[1] {source}", f"[2] {note}", "[3] other"], below
    assert below[3] == "every job: model=llama3.1-8b plan_gpu=H200", below  # plan=true: every plan has it
    assert "| backend=fsdp " in rows_shown[1] and "plan_gpu" not in rows_shown[1]
    assert max(len(line) for line in lines[:5]) < 200, lines[0]
    with path.open(newline="") as f:
        assert next(csv.DictReader(f))["prediction_source"] == source  # the file keeps the text


def test_plan_csv_defuses_spreadsheet_formulas_and_keeps_numbers(hydra_compose, tmp_path: Path) -> None:
    """``plan.csv`` goes through the project's one CSV-injection guard (:func:`flopsweep.text.csv_cell`,
    the analysis CSV's too): a model name or an override that begins with ``=``, ``+``, ``-``, ``@``,
    tab or CR gets a leading apostrophe (a trial found them written raw); the counts and the formatted
    figures stay numbers. The plan table shows the values as typed, ``|`` escaped."""
    import pandas as pd

    from analysis.sanitize import csv_cell as analysis_guard
    from flopsweep.job import JobInfo, plan_job, plan_table
    from flopsweep.text import csv_cell

    assert analysis_guard is csv_cell  # one guard, not two
    cfg = hydra_compose(["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "batch.micro_batch_size=1"])
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name="=HYPERLINK(1)"))
    overrides = ["+sweep=x", "tag=a|b"]
    plan_job(cfg, JobInfo(job_dir=tmp_path, overrides=overrides))
    with (tmp_path / "plan.csv").open(newline="") as f:
        row = next(csv.DictReader(f))
    assert row["status"] == "ok", row["note"]
    assert row["model"] == "'=HYPERLINK(1)" and row["overrides"] == "'+sweep=x tag=a|b", row
    assert row["world_size"] == "1" and int(row["n_params"]) > 0
    assert not row["model_flops_per_step"].startswith("'") and float(row["model_flops_per_step"]) > 0
    frame = pd.read_csv(tmp_path / "plan.csv", keep_default_na=False)
    assert frame["world_size"].dtype.kind == "i" and frame["est_peak_gib_per_rank"].dtype.kind == "f"

    table = plan_table(str(tmp_path / "plan.csv"))
    header, _, line = table.splitlines()[:3]
    assert "| =HYPERLINK(1) " in line, line
    assert "overrides: +sweep=x tag=a\\|b" in unwrapped(table)  # a single plan's: below its table (#523)
    assert line.replace("\\|", "").count("|") == header.count("|")  # one column per cell
    assert [csv_cell(v) for v in ("-0.5", "1.611e+09", "-2+3", "@SUM(A1)", -3)] == [
        "-0.5",
        "1.611e+09",
        "'-2+3",
        "'@SUM(A1)",
        -3,
    ]


@pytest.mark.parametrize("empty", ["plan_gpu=''", "plan_gpu=", "plan_gpu=' '"])
def test_an_empty_plan_gpu_is_unset(hydra_compose, tmp_path: Path, empty: str) -> None:
    """``plan_gpu=''`` (a shell's ``plan_gpu=$GPU`` with ``GPU`` unset) is unset, as ``null`` is: it was
    half applied (a trial): the plan was placed on GPUs (``device=auto``) with no GPU memory to compare,
    ``device=cpu`` refused it, and a run warned of "the  it names". Now the plan is this machine's."""
    from flopsweep.job import JobInfo, plan_job, warn_plan_gpu

    args = ["model=gpt-tiny", "nproc_per_node=1", "batch.micro_batch_size=1", "plan=true", empty]
    cfg = hydra_compose(args)
    assert cfg.plan_gpu is None and RunConfig(plan_gpu="").plan_gpu is None
    for extra in ([], ["device=cpu"]):
        row = plan_job(hydra_compose([*args, *extra]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
        assert row["status"] == "ok" and row["fits"] in (True, False) and row["fits_on"], row
        assert "no GPU here" not in row["note"], row["note"]
    assert warn_plan_gpu(dataclasses.replace(cfg, plan=False), None) is None


@pytest.mark.parametrize(
    ("gpu", "setup", "says"),
    [
        (
            "A100-80GB",
            ["precision=fp8"],
            "precision='fp8': fp8 needs a CUDA GPU of compute capability 8.9 or newer (Ada, Hopper, "
            "Blackwell); this GPU is 8.0 (sm_80)",
        ),
        ("V100-SXM2-32GB", ["precision=bf16"], "precision='bf16': this GPU has no bf16 support"),
        (
            "V100-SXM2-32GB",
            ["precision=fp16", "attention=sdpa-flash"],
            "attention='sdpa-flash': needs an NVIDIA GPU of compute capability 8.0 or newer",
        ),
        ("MI300X", ["attention=sdpa-cudnn"], "attention='sdpa-cudnn': runs on NVIDIA GPUs only (cuDNN)"),
    ],
    ids=["a100-fp8", "v100-bf16", "v100-flash", "mi300x-cudnn"],
)
def test_a_plan_for_a_named_gpu_refuses_what_that_gpu_cannot_run(
    hydra_compose, tmp_path: Path, gpu: str, setup: list[str], says: str
) -> None:
    """``plan=true plan_gpu=`` plans with the named GPU's compute capability, bf16 and vendor (the peak
    table's), not as a 9.0 GPU (a trial's A100 plan said ok to fp8, its V100 plan to bf16, its MI300X
    plan to cuDNN): the row is ``invalid`` with the run's one line and says what it was placed as. The
    same set-up for an H100 is ok."""
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.peaks import lookup

    args = ["model=gpt-tiny", "nproc_per_node=1", "plan=true", *setup]
    row = plan_job(hydra_compose([*args, f"plan_gpu={gpu}"]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "invalid" and row["reason"].startswith(f"Invalid config: {says}"), row["reason"]
    assert row["reason"].endswith(".") and "placed as" not in row["reason"], row["reason"]  # said apart
    placed = lookup(gpu)
    article = "an" if gpu[0] in "AM" else "a"
    cap = f"{placed.capability[0]}.{placed.capability[1]}"
    assert (
        row["note"].startswith(f"no GPU here: placed as {article} {placed.name} (")
        and f"capability {cap}" in row["note"]
    )
    assert "\n" not in row["note"] + row["reason"] and "Invalid config" not in row["note"], row
    h100 = plan_job(hydra_compose([*args, "plan_gpu=H100"]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert h100["status"] == "ok" and "placed as an H100 SXM (capability 9.0, bf16)" in h100["note"], h100


@pytest.mark.parametrize(
    ("asked", "says"),
    [
        (["plan_gpu=A100"], "plan_gpu='A100': A100 comes in more than one memory size (40 GB (40 GiB) or 80"),
        (["plan_gpu=H100-94GB"], "plan_gpu='H100-94GB': names 94 GB; the H100 SXM has 80 GB"),
        (["plan_gpu=H100", "plan_gpu_memory_gib=-1"], "plan_gpu_memory_gib=-1: must be a positive number"),
        (["plan_gpu=NOTAGPU", "plan_gpu_memory_gib=40"], "plan_gpu='NOTAGPU': is no device of the peak"),
    ],
    ids=["a100-no-size", "h100-94gb", "negative-memory", "unknown-with-memory"],
)
def test_a_refused_plan_gpu_is_placed_nowhere(
    hydra_compose, tmp_path: Path, asked: list[str], says: str
) -> None:
    """A ``plan_gpu`` that validation refuses (a trial's ``plan_gpu=A100``, which comes in 40 and 80 GB)
    places the job on no GPU: the invalid row's reason is the refusal and its note is empty, without
    the "placed as an A100 (capability 8.0, bf16)" a trial found after it, and :func:`plan_environment`
    changes nothing of the machine but what a plan for other hosts always changes (their memory and paths)."""
    from flopsweep.job import JobInfo, plan_environment, plan_job
    from flopsweep.plan import Environment

    args = ["model=gpt-tiny", "nproc_per_node=1", "plan=true", "device=cuda", *asked]
    row = plan_job(hydra_compose(args), JobInfo(job_dir=tmp_path / "0", overrides=[], job_num=0))["plan"]
    assert row["status"] == "invalid" and row["reason"].startswith(f"Invalid config: {says}"), row["reason"]
    # a single plan: the plan's own key refused as a run's (run.py: one line, exit 2), not a row printed twice
    single = plan_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=[]))
    assert single == {"status": "invalid", "error": {"message": row["reason"]}, "plan": {}}
    assert row["note"] == "", row["note"]  # placed on no GPU: no "placed as", no "no GPU here"
    laptop = Environment(cpu_count=2)
    _, env, notes = plan_environment(hydra_compose(args), laptop)
    assert (env, notes) == (dataclasses.replace(laptop, host_memory_bytes=None, paths_here=False), [])
    h200 = Environment(cuda_available=True, gpu_count=8, bf16_supported=True, capability=(9, 0), cpu_count=16)
    _, env, notes = plan_environment(hydra_compose(args), h200, "NVIDIA H200")
    assert (env.planned_gpu, env.capability, notes) == (None, (9, 0), [])


def test_an_unknown_plan_gpu_is_refused_whatever_plan_gpu_memory_gib_says(
    hydra_compose, tmp_path: Path
) -> None:
    """``plan_gpu_memory_gib`` wins over the name's memory, not over the name: a trial's
    ``plan_gpu=NOTAGPU plan_gpu_memory_gib=40`` passed validation (the name was never looked up). It is
    refused in the same line as without the memory, and a known name with a memory keeps planning
    for that memory, placed as the named GPU (``plan_gpu=A100`` needs no size then)."""
    from flopsweep.job import JobInfo, plan_job

    args = ["model=llama3.1-8b", "nproc_per_node=1", "plan=true", "device=cuda", "plan_gpu=NOTAGPU"]

    def note(*extra: str) -> str:
        job = JobInfo(job_dir=tmp_path / "0", overrides=[], job_num=0)  # a sweep's job: a row
        row = plan_job(hydra_compose([*args, *extra]), job)["plan"]
        assert row["status"] == "invalid" and "\n" not in row["reason"], row
        return row["reason"]

    alone = note()
    assert alone.startswith(
        "Invalid config: plan_gpu='NOTAGPU': is no device of the peak table (H100, H100-80GB"
    )
    assert note("plan_gpu_memory_gib=40") == note("plan_gpu_memory_gib=0.5") == alone
    args[-1] = "plan_gpu=A100"
    known = hydra_compose([*args, "plan_gpu_memory_gib=40"])
    row = plan_job(known, JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok" and row["fits_on"] == "A100 (40 GiB)", row
    assert "placed as an A100 (capability 8.0, bf16)" in row["note"], row["note"]


def test_an_fp8_plan_predicted_from_a_datasheet_says_it_is_predicted_as_bf16(
    hydra_compose, tmp_path: Path
) -> None:
    """fp8 is not modelled from a datasheet: an uncalibrated compiled fp8 row is predicted at the bf16 peak,
    the same step as the bf16 row (a trial read the two identical rows as fp8 bringing nothing), and its
    source says so; the bf16 row's does not, nor does an fp8 row calibrated from an fp8 record (the
    committed H200 one), whose measured step models it. An eager fp8 row adds torchao's unfused casts
    (issue 41), said in its source."""
    from flopsweep.job import JobInfo, plan_job

    args = ["model=llama3.1-8b", "device=cuda", "nproc_per_node=1", "plan=true", "plan_gpu=H200"]
    args.append("predict.measured=false")  # the datasheet's, not the shipped records' (test_shipped.py)
    setup = ["compile=true", "activation_checkpointing=full", "model.seq_len=2048"]
    setup.append("batch.micro_batch_size=2")  # the committed record's set-up

    def row(*extra: str) -> dict:
        out = plan_job(hydra_compose([*args, *extra]), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
        assert out["status"] == "ok" and out["predicted_iteration_time_s"], out
        return out

    fp8, bf16 = row("precision=fp8", "compile=true"), row("precision=bf16", "compile=true")
    says = "fp8 predicted as bf16: fp8 GEMM speed-up not modelled"
    assert fp8["prediction_source"].startswith("uncalibrated: ") and says in fp8["prediction_source"], fp8
    assert "predicted as bf16" not in bf16["prediction_source"], bf16["prediction_source"]
    assert fp8["predicted_iteration_time_s"] == bf16["predicted_iteration_time_s"]
    assert "eager fp8 casts" not in fp8["prediction_source"]
    eager = row("precision=fp8", "compile=false")  # torchao's casts unfused: on top (flopsweep.fp8_cast)
    assert "+ eager fp8 casts" in eager["prediction_source"] and says in eager["prediction_source"], eager
    assert (
        eager["predicted_iteration_time_s"]
        > row("precision=bf16", "compile=false")["predicted_iteration_time_s"]
    )
    record = Path(__file__).resolve().parents[2] / "benchmarks/results/h200/fp8/llama3.1-8b/1/metrics.json"
    assert json.loads(record.read_text())["config"]["precision"]["name"] == "fp8"
    calibrated = row("precision=fp8", *setup, f"predict.calibration={record}")
    assert calibrated["prediction_source"].startswith(f"calibrated: {record}"), calibrated
    assert "predicted as bf16" not in calibrated["prediction_source"]


def test_a_plan_without_a_gpu_name_is_placed_at_9_0_and_of_this_gpu_is_this_machines(
    hydra_compose, tmp_path: Path
) -> None:
    """``plan_gpu_memory_gib`` alone names no GPU: on a machine without one the job is placed as on a
    GPU of capability 9.0 with bf16, and the row says so (fp8 is ok there). On a GPU machine a plan
    of its own GPU is this machine's; of another GPU, that GPU's capability, and the note says so."""
    from flopsweep.job import NO_GPU_NOTE, JobInfo, plan_environment, plan_job
    from flopsweep.plan import Environment

    args = ["model=gpt-tiny", "nproc_per_node=1", "plan=true", "precision=fp8", "plan_gpu_memory_gib=80"]
    cfg = hydra_compose(args)
    _, env, notes = plan_environment(cfg, Environment(cpu_count=2))
    assert (env.capability, env.bf16_supported, env.planned_gpu, notes) == ((9, 0), True, None, [NO_GPU_NOTE])
    assert "capability 9.0 with bf16" in NO_GPU_NOTE
    row = plan_job(cfg, JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    if not Environment.detect().cuda_available:
        assert row["status"] == "ok" and row["note"].startswith(NO_GPU_NOTE), row["note"]
    h200 = Environment(cuda_available=True, gpu_count=8, bf16_supported=True, capability=(9, 0), cpu_count=16)
    own = hydra_compose([*args[:4], "plan_gpu=H200"])
    assert plan_environment(own, h200, "NVIDIA H200")[1:] == (
        dataclasses.replace(h200, host_memory_bytes=None, paths_here=False),
        [],
    )
    _, a100, notes = plan_environment(hydra_compose([*args[:4], "plan_gpu=A100-80GB"]), h200, "NVIDIA H200")
    assert (a100.capability, a100.bf16_supported, a100.gpu_count, a100.planned_gpu.name) == (
        (8, 0),
        True,
        8,
        "A100",
    )
    assert notes == ["not this machine's NVIDIA H200: placed as an A100 (capability 8.0, bf16)"]


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (  # a refused backend combination
            ["backend=single", "parallel.tp=2", "nproc_per_node=2", "plan_gpu=H100"],
            "Invalid config: parallel.tp=2: tensor parallelism runs on backend=fsdp, and backend=single runs "
            "one rank. Fix: set parallel.tp=1, or backend=fsdp parallel.tp=2.",
        ),
        (  # a bad micro batch
            ["batch.micro_batch_size=0", "plan_gpu=A100-80GB"],
            "Invalid config: batch.micro_batch_size=0: must be a positive integer. Fix: set "
            "batch.micro_batch_size=1.",
        ),
        (  # what the named GPU cannot run
            ["precision=fp8", "plan_gpu=A100-80GB"],
            "Invalid config: precision='fp8': fp8 needs a CUDA GPU of compute capability 8.9",
        ),
    ],
    ids=["single-tp2", "micro-batch-0", "a100-fp8"],
)
def test_an_invalid_plan_row_says_its_reason_and_where_it_was_placed_apart(
    hydra_compose, tmp_path: Path, setup: list[str], reason: str
) -> None:
    """An ``invalid`` row's ``reason`` is the run's one line (key, value, fix) and its ``note`` where
    the job was placed; the stderr line names the reason alone, once. The placement was glued into the
    fix (``Fix: set parallel.tp=1, or backend=fsdp; no GPU here: placed as an H100 SXM ...``) and the
    table and that line said both as one (issue 42)."""
    from flopsweep.job import JobInfo, plan_invalid_line, plan_job, plan_table

    cfg = hydra_compose(["model=gpt-tiny", "plan=true", *setup])
    record = plan_job(cfg, JobInfo(job_dir=tmp_path, overrides=setup))
    row, text = record["plan"], record["plan_csv"]  # refused: no plan.csv written (reliability-4.md #280)
    assert row["status"] == "invalid" and row["reason"].startswith(reason), row
    assert row["reason"].count("Fix: ") == 1 and row["reason"].endswith(".") and "placed" not in row["reason"]
    assert row["note"].startswith("no GPU here: placed as an ") and "Fix" not in row["note"], row["note"]
    assert not (tmp_path / "plan.csv").exists()
    line = plan_invalid_line(str(tmp_path / "plan.csv"), text=text)
    assert (
        line == f"flopsweep: 1 of 1 jobs are invalid (the status and reason columns); job 0: {row['reason']}"
    )
    below = unwrapped(plan_table(str(tmp_path / "plan.csv"), text=text))[3:5]
    assert below == [f"[1] {row['reason']}", f"[2] {row['note']}"], below


def test_the_invalid_line_counts_the_other_reasons_and_an_unfit_row_gets_its_own_line(tmp_path: Path) -> None:
    """Several invalid rows: the first one's reason, and how many other reasons the column holds; an
    ``ok`` row that does not fit its GPU gets one line naming the model, the estimate, the GPU and the
    fix, its clusters of the plan's GPU (it was said by a ``False`` in the table alone)."""
    import csv

    from flopsweep.clusters import parse_cluster
    from flopsweep.job import plan_invalid_line
    from flopsweep.job.planprint import plan_unfit_line
    from flopsweep.job.plantable import PLAN_COLUMNS

    rows = [
        {"job": 0, "status": "ok", "model": "llama3.1-70b", "est_peak_gib_per_rank": 1190, "fits": False}
        | {"fits_on": "H200 SXM (140.4 GiB)", "world_size": 1},
        {"job": 1, "status": "invalid", "reason": "Invalid config: a=1: no. Fix: set a=2."},
        {"job": 2, "status": "invalid", "reason": "Invalid config: b=1: no. Fix: set b=2."},
        {"job": 3, "status": "invalid", "reason": "Invalid config: a=1: no. Fix: set a=2."},
        {"job": 4, "status": "ok", "model": "gpt-tiny", "fits": True},
    ]
    path = tmp_path / "plan.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PLAN_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    assert plan_invalid_line(str(path)) == (
        "flopsweep: 3 of 5 jobs are invalid (the status and reason columns); job 1: Invalid config: a=1: no. "
        "Fix: set a=2. (1 other reason in the reason column)"
    )
    line = plan_unfit_line(str(path), "H200")
    assert line == (
        "flopsweep: 1 of 5 jobs does not fit; job 0: model=llama3.1-70b: estimated 1190 GiB per rank, "
        "more than H200 SXM (140.4 GiB). "
        "Fix: shard it over more GPUs (backend=fsdp or zero3, nproc_per_node, nnodes), "
        "set activation_checkpointing=full or a smaller batch.micro_batch_size; "
        "plan_clusters=[H200:1x8,H200:8x8] ranks the set-ups that fit."
    )
    for name in line.split("plan_clusters=[")[1].split("]")[0].split(","):
        assert parse_cluster(name).gpu == "H200"  # a hint the user can paste
    rows[0]["fits"] = True
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PLAN_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    assert plan_unfit_line(str(path), "H200") is None


def test_plan_unfit_line_on_host_names_the_ranks_of_a_node_and_plan_gpu(tmp_path):
    """A CPU plan of 8 nodes of 8 ranks is checked against this host for the 8 ranks of one node
    (not the 64 of the job), and the fix names plan_gpu for a plan of a GPU cluster."""
    import csv

    from flopsweep.job.planprint import plan_unfit_line
    from flopsweep.job.plantable import PLAN_COLUMNS
    from flopsweep.oom_note import HOST_MEMORY_FIX

    row = {"job": 0, "status": "ok", "model": "llama3.1-8b", "est_peak_gib_per_rank": 59.6, "fits": False}
    row |= {"fits_on": "host (21.8 GiB free now for 8 ranks a node)", "world_size": 64}
    path = tmp_path / "plan.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PLAN_COLUMNS)
        writer.writeheader()
        writer.writerow(row)
    assert plan_unfit_line(str(path), "H100") == (
        "flopsweep: 1 of 1 job does not fit; job 0: model=llama3.1-8b: estimated 59.6 GiB per rank, "
        f"more than host (21.8 GiB free now for 8 ranks a node). Fix: {HOST_MEMORY_FIX}; "
        "or drop device=cpu and set plan_gpu=NAME to plan it for a GPU (e.g. drop device=cpu and set "
        "plan_gpu=H100)."
    )


@pytest.mark.parametrize(
    ("plan_gpu", "local", "named"),
    [
        ("H200", None, "H200"),
        ("A100-80GB", "NVIDIA H100 80GB HBM3", "A100-80GB"),
        ("NVIDIA H200 NVL", None, "H200-NVL"),
        (None, "NVIDIA H100 80GB HBM3", "H100"),
        (None, "NVIDIA A100-SXM4-40GB", "A100-40GB"),
        (None, "AMD Instinct MI300X", "MI300X"),
        ("A100", "NVIDIA L4", "L4"),  # A100 needs its size: passed over for this machine's GPU
        ("NOTAGPU", None, "H100"),
        (None, None, "H100"),
        (None, "NVIDIA A100-SXM4", "H100"),  # no size: the default
    ],
)
def test_the_plan_hint_names_the_gpu_the_plan_is_about(
    tmp_path: Path, plan_gpu: str | None, local: str | None, named: str
) -> None:
    """The plan table's last line named ``plan_clusters=[H100:1x8,H100:8x8]`` whatever the GPU: it names
    ``plan_gpu``, else this machine's GPU, else the H100, in a spelling the user can paste
    (:func:`flopsweep.clusters.hint_gpu`, each name parsed by :func:`parse_cluster`)."""
    import csv

    from flopsweep.clusters import hint_gpu, parse_cluster
    from flopsweep.job import plan_table
    from flopsweep.job.plantable import PLAN_COLUMNS

    gpu = hint_gpu(plan_gpu, local)
    assert gpu == named
    parse_cluster(f"{gpu}:8x8")
    path = tmp_path / "plan.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PLAN_COLUMNS)
        writer.writeheader()
        writer.writerow({"job": 0, "status": "ok", "model": "gpt-tiny"})
    last = unwrapped(plan_table(str(path), gpu))[-1]
    assert last.endswith(
        f"; plan_clusters=[{named}:1x8,{named}:8x8] ranks set-ups on clusters: docs/plan.md)"
    )


def test_the_other_plan_hints_name_the_plans_gpu(hydra_compose) -> None:
    """The ``space.*`` refusal's fix and ``plan_clusters``' NVLink line name the plan's GPU, not the
    H100 (the NVLink line said ``H100/H200: 315 GB/s`` for an A100 cluster)."""
    from flopsweep.clusters import parse_cluster
    from flopsweep.job.plandecide import defaults_used
    from flopsweep.overrides import unread_space_problem

    line = unread_space_problem(["plan=true", "plan_gpu=H200", "space.backends=[fsdp]"])
    assert line is not None and "Fix: add plan_clusters=[H200:8], or drop the space.* overrides." in line
    line = unread_space_problem(["plan_gpu='A100-80GB'", "space.backends=[fsdp]"])
    assert line is not None and "or plan=true plan_clusters=[A100-80GB:8], or drop" in line
    cfg = hydra_compose(["model=gpt-tiny", "plan=true"])
    clusters = [parse_cluster("A100-80GB:8"), parse_cluster("H200:8"), parse_cluster("L4:4")]
    said = [n for n in defaults_used(cfg, [], clusters, []) if n.startswith("in a node")]
    assert said == [  # each GPU its datasheet's link (issue 42: the A100 and the L4 had none)
        "in a node of A100-80GB: 210 GB/s busbw, 0.7 x A100 SXM4 NVLink 300 GB/s per direction "
        "(NVIDIA A100 datasheet, SXM4: NVLink 600 GB/s); SXM4 assumed: A100-80GB says neither SXM4 nor PCIe; "
        "set predict.intra_node_gbps",
        "in a node of H200: 315 GB/s busbw, 0.7 x H200 SXM NVLink 450 GB/s per direction "
        "(NVIDIA H200 datasheet, SXM: NVLink 900 GB/s)",
        "in a node of L4: 22.4 GB/s busbw, 0.7 x L4 PCIe Gen4 x16 32 GB/s per direction "
        "(NVIDIA L4 datasheet: PCIe Gen4 x16 64 GB/s)",
    ]


def test_an_interrupted_plan_says_it_wrote_nothing_not_that_no_run_was_recorded(monkeypatch):
    """Ctrl-C during ``plan=true plan_clusters=[...]`` said ``no run had been recorded yet``, a run's words:
    a plan records no run at all (docs/reliability-5.md #311)."""
    from run import interrupted_message

    monkeypatch.setattr("sys.argv", ["run.py", "plan=true", "plan_clusters=[H100:8x8]", "model=llama3.1-8b"])
    said = "the plan stopped before its table; nothing was written (a plan starts no worker)"
    assert interrupted_message() == said
    monkeypatch.setattr("sys.argv", ["run.py", "model=llama3.1-8b"])
    assert interrupted_message() == "no run had been recorded yet"
