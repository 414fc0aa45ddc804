"""Build the ``metrics.json`` record (schema_version 2) from what the ranks measured.

The record layout, its metric specs and the atomic writer live in the torch-free
:mod:`flopsweep.record`; this module computes the figures (through the model's
family for FLOPs, :mod:`flopsweep.flops` for eq. 3 and the peaks) and adds the
host and software facts.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import platform
import socket
import statistics
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from flopsweep import blocksparse, checkpointing, cost, flops, identity
from flopsweep.attention import attention_density, executed_density
from flopsweep.config import RunConfig
from flopsweep.expert_parallel import imbalance
from flopsweep.free_folder import another
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.options import BlockSparseConfig
from flopsweep.pool import visible_devices
from flopsweep.precision import PRECISIONS
from flopsweep.record import BEFORE_RUN, SCHEMA_VERSION, STATUSES, null_metrics, strict
from flopsweep.text import plural
from flopsweep.wire import PER_RANK_KEYS

PLAUSIBLE_FACTOR = 1.05
"""A run whose hardware TFLOPs exceed this times the measured GEMM rate (or the datasheet
peak) cannot be real: status ``invalid``."""

UNSTEADY_FACTOR = 3.0
"""A measured step slower than this times the median of the others is not steady."""

TRACE_DIR = "profile"
"""``profile=true``: the folder of the run directory that holds ``rank<R>.trace.json.gz``
(the record's ``breakdown.trace_dir``)."""


def _summary(values: list[float]) -> dict[str, Any]:
    """``iteration_time_s``: mean, median, min, max, std (population, s) and cv of ``values``; std and
    cv are None for one value (no spread to measure: ``warnings`` says so, :func:`warnings_for`)."""
    mean = statistics.fmean(values)
    std = statistics.pstdev(values) if len(values) > 1 else None
    return {
        "mean": mean,
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "std": std,
        "cv": std / mean if std is not None and mean > 0 else None,
        "values": values,
    }


def unsteady_steps(times: list[float]) -> list[int]:
    """Indices of measured steps over :data:`UNSTEADY_FACTOR` x the median of the other steps
    (compilation, autotuning, allocator growth). Needs at least 3 steps; else none."""
    if len(times) < 3:
        return []
    out = []
    for i, t in enumerate(times):
        others = times[:i] + times[i + 1 :]
        if t > UNSTEADY_FACTOR * statistics.median(others):
            out.append(i)
    return out


def recompute_mode(cfg: RunConfig) -> str:
    """What activation checkpointing recomputes, from the policy
    (:func:`flopsweep.checkpointing.recompute_mode`): ``none``; ``early_stop`` (eager blocks under
    non-reentrant ``torch.utils.checkpoint``, torch's default, and compiled blocks, whose partitioner keeps
    only what backward reads); ``selective`` (per-operator selective checkpointing); ``unknown``
    (``memory_budget``: the compiler decides)."""
    return checkpointing.recompute_mode(cfg)


def hardware_flops(cfg: RunConfig, tokens: int, density: float) -> float | None:
    """FLOPs of one optimizer step that run, recompute included: the family's ``hardware_flops``
    for the policy's mode (:func:`recompute_mode`) on the share of blocks the policy checkpoints
    (``every_n``: ``l // every`` of ``l``; recompute is per block, so the extra FLOPs scale with the
    count). None for ``unknown`` (``memory_budget``: the compiler's partitioner decides; the record
    says so in ``warnings``).

    Args:
        tokens: tokens per optimizer step ``T``; density: the attention's executed density.
    """
    mode = recompute_mode(cfg)
    if mode == "unknown":
        return None
    fam, m = family(cfg.model), cfg.model
    base = fam.hardware_flops(m, tokens, density, "none")
    if mode == "none":
        return base
    share = len(checkpointing.checkpointed_blocks(cfg.activation_checkpointing, m.n_layer)) / m.n_layer
    return base + share * (fam.hardware_flops(m, tokens, density, mode) - base)


FLOPS_CONVENTION = (
    "model_flops_per_iteration: 6 x matmul weights x tokens (every weight matmul fwd+bwd, LM head included) "
    "+ 12 x layers x attention width x seq_len x tokens x attention density (full s^2 square, scaled by the "
    "fraction of blocks computed); no recompute. hardware_flops_per_iteration: model FLOPs + the forward "
    "recompute of activation checkpointing that runs (metrics.recompute), and the padded blocks that "
    "blocksparse impl=gather computes. Neither counts "
    "norms, activations, softmax or the optimizer. tflops_per_device: Narayanan et al. 2021 eq. 3 as "
    "published (dense, f = 4 with checkpointing), null for non-GPT shapes. mfu/hfu: against the dense "
    "datasheet peak of the run's matmul precision (bf16 for fp8 runs)."
)
"""How the FLOPs figures of ``metrics.json`` are counted (``metrics.flops_convention``)."""


def _peaks(cfg: RunConfig, device_name: str) -> dict[str, Any]:
    """The datasheet peak for MFU/HFU (bf16 for an fp8 run, as torchtitan does), and for an
    fp8 run also the dense fp8 peak."""
    fp8 = PRECISIONS[cfg.precision.name].fp8_recipe is not None
    peak, source = flops.peak_tflops(device_name, "bf16" if fp8 else cfg.precision.name)
    peak_fp8 = flops.peak_tflops(device_name, "fp8")[0] if fp8 else None
    return {"peak_tflops": peak, "peak_tflops_source": source, "peak_tflops_fp8": peak_fp8}


def compute_metrics(
    cfg: RunConfig, ranks: list[dict[str, Any]], layout: Layout | None = None
) -> dict[str, Any]:
    """Headline metrics from the per-rank figures gathered by rank 0.

    Iteration time of step ``i`` is the slowest rank's time for that step; rates use
    the mean. FLOPs come from the model's family (:mod:`flopsweep.models`) for
    ``B x s`` tokens, ``B = micro_batch_size x grad_accum x dp`` (the layout's data-parallel
    degree, :meth:`flopsweep.layout.Layout.global_batch`), and eq. 3 from
    :func:`flopsweep.flops.flops_per_iteration` where the family is GPT-shaped. Per-device
    figures divide by every rank (``layout.world_size``).

    Args:
        ranks: one dict per rank with ``step_times_s``, ``losses`` (warm-up and measured
            steps, each the mean over micro batches; None where not finite), peak memory
            figures, ``matmul_tflops`` and ``warmup_steps``.
        layout: the plan's layout; None: pure data parallel over ``len(ranks)`` ranks.

    Raises:
        ValueError: when the layout's world size is not the number of ranks.
    """
    import psutil

    layout = layout or Layout.data_parallel(len(ranks))
    world = layout.world_size
    if world != len(ranks):
        raise ValueError(f"the layout has {world} ranks but {len(ranks)} reported")
    steps = [max(times) for times in zip(*(r["step_times_s"] for r in ranks), strict=True)]
    it = _summary(steps)
    m, b = cfg.model, cfg.batch
    fam = family(m)
    global_batch = layout.global_batch(b.micro_batch_size, b.grad_accum)
    tokens = global_batch * m.seq_len
    density = cfg.attention.density if cfg.attention.density is not None else 1.0
    model_flops = fam.model_flops(m, tokens, density)
    executed = executed_density(cfg.attention, m.seq_len) if cfg.attention.density is not None else 1.0
    hw_flops = hardware_flops(cfg, tokens, executed)
    ckpt = checkpointing.policy(cfg.activation_checkpointing)
    eq3 = fam.eq3_flops(m, global_batch, ckpt.recomputes_forward)
    model_tflops = flops.tflops_per_device(model_flops, it["mean"], world)
    hw_tflops = None if hw_flops is None else flops.tflops_per_device(hw_flops, it["mean"], world)
    peaks = _peaks(cfg, ranks[0]["device"])
    peak = peaks["peak_tflops"]
    gemm = [r.get("matmul_tflops") for r in ranks]
    gemm_rate = None if None in gemm or not gemm else min(gemm)
    losses = [_mean_or_none(step) for step in zip(*(r["losses"] for r in ranks), strict=True)]
    cuda_alloc = [r["peak_cuda_allocated_bytes"] for r in ranks]
    cuda_res = [r["peak_cuda_reserved_bytes"] for r in ranks]
    retries = [r.get("cuda_alloc_retries") for r in ranks]
    tokens_per_s = tokens / it["mean"]
    energy = cost.energy_figures(ranks, tokens=tokens * len(steps), window_s=sum(steps), world=world)
    return {
        "iteration_time_s": it,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_device": tokens / it["mean"] / world,
        "global_batch_size": global_batch,
        "tokens_per_step": tokens,
        "model_flops_per_iteration": model_flops,
        "hardware_flops_per_iteration": hw_flops,
        "model_tflops_per_device": model_tflops,
        "hardware_tflops_per_device": hw_tflops,
        "tflops_per_device": None if eq3 is None else flops.tflops_per_device(eq3, it["mean"], world),
        "mfu": model_tflops / peak if peak else None,
        "hfu": hw_tflops / peak if peak and hw_tflops is not None else None,
        **peaks,
        "mfu_fp8": model_tflops / peaks["peak_tflops_fp8"] if peaks["peak_tflops_fp8"] else None,
        "measured_matmul_tflops": gemm_rate,
        "matmul_fraction": model_tflops / gemm_rate if gemm_rate else None,
        "peak_cuda_allocated_bytes": None if None in cuda_alloc else max(cuda_alloc),
        "peak_cuda_reserved_bytes": None if None in cuda_res else max(cuda_res),
        "cuda_alloc_retries": None if None in retries else max(retries),
        "per_rank": [{k: r.get(k) for k in PER_RANK_KEYS} for r in ranks],
        "peak_host_rss_bytes": max(r["peak_host_rss_bytes"] for r in ranks),
        "swap_used_bytes": psutil.swap_memory().used,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "loss_finite": all(v is not None and math.isfinite(v) for v in losses),
        "warmup_steps": ranks[0].get("warmup_steps", cfg.steps.warmup),
        "unsteady_steps": ranks[0].get("unsteady_steps") or [],
        "recompute": recompute_mode(cfg),
        "fp8_layers": ranks[0].get("fp8_layers"),
        "routing_imbalance": imbalance([r.get("expert_tokens") or [] for r in ranks]),
        # Every rank's or none: a mean over some ranks would not be the run's step.
        "breakdown": mean_breakdown([r["breakdown"] for r in ranks])
        if all(r.get("breakdown") for r in ranks)
        else None,
        "flops_convention": FLOPS_CONVENTION,
        **energy,
        **_cost(cfg, tokens_per_s, world, energy["joules_per_token"]),
    }


def _cost(cfg: RunConfig, tokens_per_s: float, world: int, joules_per_token: float | None) -> dict[str, Any]:
    """``usd_per_million_tokens`` (with ``cost.usd_per_gpu_hour``) and ``budget`` (with
    ``budget.tokens``) at the measured rate (:mod:`flopsweep.cost`)."""
    price = cfg.cost.usd_per_gpu_hour
    return {
        "usd_per_million_tokens": cost.usd_per_million_tokens(price, world=world, tokens_per_s=tokens_per_s),
        "budget": cost.budget(
            cfg.budget.tokens,
            tokens_per_s=tokens_per_s,
            world=world,
            joules_per_token=joules_per_token,
            usd_per_gpu_hour=price,
        ),
    }


def mean_breakdown(breakdowns: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``metrics.breakdown``: the mean over ranks of each field of the ranks' step breakdowns
    (``profile.StepBreakdown.as_dict()``; seconds), so the parts still sum to the mean ``step_s``;
    text fields (``view``) from the first rank. None when there are none."""
    if not breakdowns:
        return None
    out: dict[str, Any] = {}
    for key, first in breakdowns[0].items():
        values = [b.get(key) for b in breakdowns]
        numeric = isinstance(first, int | float) and not isinstance(first, bool) and None not in values
        out[key] = sum(float(v) for v in values) / len(values) if numeric else first
    out["ranks"] = len(breakdowns)
    out["trace_dir"] = TRACE_DIR
    return out


def _mean_or_none(values: tuple[Any, ...]) -> float | None:
    """Mean of one step's per-rank losses; None when any is missing or not finite."""
    if any(v is None or not math.isfinite(v) for v in values):
        return None
    return statistics.fmean(values)


def warnings_for(metrics: dict[str, Any] | None) -> list[str]:
    """The record's ``warnings``: findings that do not make a run invalid."""
    out = []
    if metrics and metrics.get("loss_finite") is False:
        out.append(
            "loss_not_finite: a step's loss was NaN or infinite (metrics.loss_finite false); "
            "the timings stand, the losses are null where not finite"
        )
    if metrics and metrics.get("unsteady_steps"):
        out.append(
            f"unsteady: measured steps {metrics['unsteady_steps']} were over {UNSTEADY_FACTOR}x the median "
            "of the others after the extra warm-up (CPU runs are recorded anyway)"
        )
    steps = (metrics or {}).get("iteration_time_s") or {}
    if isinstance(steps.get("values"), list) and len(steps["values"]) == 1:
        cold = metrics.get("warmup_steps") == 0
        out.append(
            "one_step: one measured step gives no spread (iteration_time_s.std and cv are null)"
            + (
                ", and it was not warmed up (steps.warmup=0): its time holds the start-up cost"
                if cold
                else ""
            )
            + f" (fix: steps.measure=3{' steps.warmup=1' if cold else ''} or more)"
        )
    if metrics and metrics.get("recompute") == "unknown":
        out.append(
            "recompute_unknown: the compiler's partitioner chose what to recompute "
            "(activation_checkpointing=memory_budget), which no formula gives: "
            "hardware_flops_per_iteration, hardware_tflops_per_device and hfu are null; mfu stands"
        )
    if metrics and metrics.get("cuda_alloc_retries"):
        out.append(
            f"alloc_retries: the CUDA caching allocator freed its cache and retried cudaMalloc "
            f"{metrics['cuda_alloc_retries']} times in the measured steps (each retry synchronises the "
            "device): memory is too tight for speed; a smaller batch.micro_batch_size may run faster"
        )
    return out


def profile_warnings(ranks: list[dict[str, Any]] | None, run_dir: str | Path = ".") -> list[str]:
    """The record's warning for a ``profile=true`` run whose profile failed on some rank (its
    trace could not be written or read): one line, the first rank's reason, the measured
    figures kept, and the fix naming the folder the traces go to (``run_dir``/:data:`TRACE_DIR`) and
    a free ``hydra.run.dir`` (:func:`flopsweep.free_folder.another`). Empty when every rank has its
    breakdown or nothing was profiled."""
    problems = [(r["rank"], r["profile_problem"]) for r in ranks or [] if r.get("profile_problem")]
    if not problems:
        return []
    rank, why = problems[0]
    return [
        f"profile_failed: rank {rank}: {why}; the measured figures stand, metrics.breakdown is null "
        f"(fix: move the file or directory in the way of {Path(run_dir) / TRACE_DIR}, or "
        f"{another(run_dir)}, and run again)"
    ]


def executed_tflops_floor(cfg: RunConfig, metrics: dict[str, Any]) -> float:
    """The fewest TFLOPs per device the measured step can have run: the hardware FLOPs (the model
    FLOPs under ``memory_budget``, whose recompute the compiler decides) with the attention square
    halved (``model=hf``'s counted square too, :func:`flopsweep.models.hf.hardware_flops`; a block-sparse
    layout keeps no block above the diagonal already: only its diagonal blocks' upper halves come off).
    The FLOPs convention counts the full ``s^2`` square (PaLM, Chowdhery et al. 2022, app. B);
    causal kernels (FlashAttention, cuDNN, flex with a causal mask) skip the blocks above the diagonal
    (Dao 2023, FlashAttention-2 sec. 3.1), so at long sequences the convention's figure can exceed
    the GEMM rate on an honest timing: Llama 3.1 8B at 65,536 tokens on an H200 counted 806 TFLOP/s
    against a measured 705."""
    world = max(1, len(metrics.get("per_rank") or [None]))
    floor = executed_flops(cfg, metrics["tokens_per_step"])
    return flops.tflops_per_device(floor, metrics["iteration_time_s"]["mean"], world)


def executed_flops(cfg: RunConfig, tokens: int) -> float:
    """FLOPs a step of ``tokens`` tokens (every rank together) executes at the least: the hardware
    FLOPs with the attention square halved, as :func:`executed_tflops_floor` explains (causal kernels
    skip the blocks above the diagonal). The uncalibrated step-time prediction divides these by a GEMM
    rate (:func:`flopsweep.compute_time.compute_uncalibrated`): at 87,040 tokens the full square
    doubled Llama 3.1 8B's predicted step (48.8 s against 25.9 measured on an H200)."""
    fam, m = family(cfg.model), cfg.model
    if isinstance(cfg.attention, BlockSparseConfig):  # its layouts are causal: no block above the diagonal
        diagonal = blocksparse.n_blocks(m.seq_len, cfg.attention.block_size) * cfg.attention.block_size**2
        half_diagonal = 0.5 * diagonal / m.seq_len**2  # the diagonal blocks' upper halves, of s^2
        executed = max(0.0, executed_density(cfg.attention, m.seq_len) - half_diagonal)
        density = max(0.0, attention_density(cfg.attention, m.seq_len) - half_diagonal)
    else:
        given = cfg.attention.density is not None
        density = 0.5 * (cfg.attention.density if given else 1.0)
        executed = 0.5 * (executed_density(cfg.attention, m.seq_len) if given else 1.0)
    return hardware_flops(cfg, tokens, executed) or fam.model_flops(m, tokens, density)


def sanity_problem(cfg: RunConfig, metrics: dict[str, Any], device_type: str = "cuda") -> str | None:
    """Why measured figures cannot be real, or None. Such a run gets status ``invalid``.

    Checks: as many measured steps as ``steps.measure``; every step time finite and
    > 0; on a GPU, hardware TFLOPs per device at most :data:`PLAUSIBLE_FACTOR` x the
    measured GEMM rate, or x the datasheet peak when no rate was measured (so an
    unknown device keeps a check; an fp8 run's fp8 peak, ``peak_tflops_fp8``); on a GPU, steps
    still unsteady after the extra warm-up. On the CPU, ranks share cores with each other and the
    GEMM burst, so only the first two checks apply. A diverged loss is a finding, not a timing error.
    """
    times = metrics["iteration_time_s"]["values"]
    if len(times) < cfg.steps.measure:
        return f"measured {plural(len(times), 'step')} but steps.measure={cfg.steps.measure}"
    if not all(isinstance(t, float | int) and math.isfinite(t) and t > 0 for t in times):
        return f"a measured step time is not a positive number of seconds: {times}"
    if device_type != "cuda":
        return None
    bound, what = metrics.get("measured_matmul_tflops"), "the measured dense GEMM rate"
    if not bound and metrics.get("peak_tflops_fp8"):  # an fp8 run's GEMMs: its fp8 peak, not bf16's (MFU's)
        bound, what = metrics["peak_tflops_fp8"], "the fp8 datasheet peak"
    if not bound:
        bound, what = metrics.get("peak_tflops"), f"the datasheet peak ({metrics.get('peak_tflops_source')})"
    hw = executed_tflops_floor(cfg, metrics)
    if bound and hw > PLAUSIBLE_FACTOR * bound:
        return (
            f"{hw:.1f} TFLOPs per device executed at least (causal attention's half square) exceeds "
            f"{PLAUSIBLE_FACTOR} x {what}, {bound:.1f}: the timing cannot be real; step times (s): "
            f"{[round(t, 6) for t in times]}"
        )
    if metrics.get("unsteady_steps"):
        return (
            f"measured steps {metrics['unsteady_steps']} stayed over {UNSTEADY_FACTOR}x the median "
            "of the others "
            f"after {plural(metrics.get('warmup_steps') or 0, 'warm-up step')}; step times (s): {times}. "
            "Raise steps.warmup or steps.max_extra_warmup"
        )
    return None


def model_info(cfg: RunConfig) -> dict[str, Any]:
    """The record's ``model`` section, from the model's family."""
    return family(cfg.model).info(cfg.model)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_state(folder: Path | None = None) -> tuple[str | None, bool | None]:
    """``(sha, dirty)`` of the git checkout holding ``folder`` (default: this package's): the commit
    (``git rev-parse HEAD``) and whether its tracked files differ from it (``git diff --quiet HEAD
    --``: exit 1), so that a record made from edited code says so; untracked files do not count.
    ``(None, None)`` outside a checkout or without git; each command under a 5 s deadline, its
    output bounded to the 40-hex commit (``dirty`` None where the diff failed)."""
    where = folder if folder is not None else Path(__file__).resolve().parent
    run = functools.partial(subprocess.run, cwd=where, capture_output=True, text=True, timeout=5, check=False)
    try:
        head = run(["git", "rev-parse", "--verify", "-q", "HEAD"])
        sha = head.stdout.strip()[:40] if head.returncode == 0 else ""
        if not sha:
            return None, None
        diff = run(["git", "diff", "--quiet", "HEAD", "--"])
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    return sha, {0: False, 1: True}.get(diff.returncode)


def loadavg() -> list[float] | None:
    """The host's load average over 1, 5 and 15 minutes (None where the OS has none)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def system_info(
    device: str,
    world_size: int | None,
    device_name: str | None = None,
    nproc_per_node: int | None = None,
    *,
    load_start: list[float] | None = None,
    layout: Layout | None = None,
    power_limit_w: float | None = None,
) -> dict[str, Any]:
    """Host and software versions; ``power_limit_w`` the GPUs' enforced power limit (W, from the
    ranks: :func:`flopsweep.cost.power_limit_w`; null on the CPU or for a run that never
    measured); ``device_name`` from rank 0 when it ran; ``world_size``,
    ``nproc_per_node`` and ``parallel`` (the layout's degrees, :meth:`Layout.as_dict`) null for a
    run that never launched; ``loadavg`` at the job's start
    (``load_start``, from :func:`loadavg`) and now, so that a measurement taken on a busy host
    shows it."""
    import torch

    cuda = device == "cuda" and torch.cuda.is_available()
    sha, dirty = git_state()
    return {
        "hostname": socket.gethostname(),
        "device_name": device_name or (torch.cuda.get_device_name(0) if cuda else "cpu"),
        "device_count": torch.cuda.device_count() if cuda else 0,
        "world_size": world_size,
        "nproc_per_node": nproc_per_node,
        "parallel": None if layout is None else layout.as_dict(),
        "power_limit_w": power_limit_w,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "deepspeed": _version("deepspeed"),
        "xformers": _version("xformers"),
        "torchao": _version("torchao"),
        "python": platform.python_version(),
        "git_sha": sha,
        "git_dirty": dirty,
        "loadavg": {"start": load_start, "end": loadavg()},
        "cpu_count": os.cpu_count(),
        "cuda_alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF") or os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "visible_devices": visible_devices(),  # the devices the job was pinned to (hydra/launcher=pool)
        **interconnect(cuda),
    }


def interconnect(cuda: bool) -> dict[str, Any]:
    """What scaling numbers depend on: ``nccl`` (the version torch's NCCL reports, ``"2.27.5"``),
    ``gpu_topology`` (the text of ``nvidia-smi topo -m``: NV# = NVLink, PIX/PXB/PHB/NODE/SYS =
    PCIe paths; null where it cannot run) and ``nccl_env`` (every ``NCCL_*`` variable set here,
    which is what the workers inherit)."""
    import torch

    version = None
    if cuda:
        try:
            v = torch.cuda.nccl.version()
            version = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except (RuntimeError, AttributeError):
            version = None
    return {
        "nccl": version,
        "gpu_topology": _command_text(["nvidia-smi", "topo", "-m"]) if cuda else None,
        "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
    }


def _command_text(cmd: list[str]) -> str | None:
    """The stdout of ``cmd`` (10 s at most), or None when it fails or is missing."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as strings (``"nan"``, ``"inf"``): the config of an
    ``invalid`` record may hold one (``timeout_s=inf``), and keeps what was typed."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: json_safe(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def build_record(
    *,
    cfg: RunConfig,
    status: str,
    error: dict[str, Any] | None,
    run: dict[str, Any],
    system: dict[str, Any],
    metrics: dict[str, Any] | None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The schema v2 record; ``metrics=None`` or a ``status`` other than ``ok`` gives every metric
    key as null (what was known before such a run is ``run.before_run``,
    :data:`flopsweep.record.BEFORE_RUN`, which the caller puts in ``run``). ``run`` gains
    ``setup_key``, ``job_key`` and ``identity_version`` (:func:`flopsweep.identity.record_keys`).

    Non-finite metric values (and those of ``run.before_run``) become null, and each is named in
    ``warnings``, after those of :func:`warnings_for` and the given ``warnings`` (e.g.
    :func:`profile_warnings`).
    """
    extra = list(warnings or [])
    assert status in STATUSES, status
    nulled: list[str] = []
    values = metrics if metrics is not None and status == "ok" else null_metrics()
    values = strict(values, "metrics", nulled)
    if run.get(BEFORE_RUN) is not None:
        run = {**run, BEFORE_RUN: strict(run[BEFORE_RUN], f"run.{BEFORE_RUN}", nulled)}
    warnings = warnings_for(values if status == "ok" else None) + extra
    warnings += [f"non_finite: {path} was not a finite number and is recorded as null" for path in nulled]
    try:
        model = model_info(cfg)
    except Exception:  # noqa: BLE001 - an invalid config (unknown arch) still gets a record
        model = {"name": getattr(cfg.model, "name", None)}
    record = {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "error": strict(error),
        "warnings": warnings,
        "run": run,
        "config": json_safe(dataclasses.asdict(cfg)),
        "model": model,
        "system": strict(system),
        "metrics": values,
    }
    record["run"] = {**run, **identity.record_keys(record)}  # run.setup_key, run.job_key
    return record
