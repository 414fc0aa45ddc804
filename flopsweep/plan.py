"""From a typed config to a run plan: every rule, checked before any worker starts.

:func:`flopsweep.checks.validate` checks what the config alone decides (choices, sizes, which keys
belong to which option) and depends on nothing else. :func:`resolve` adds the
machine (:class:`Environment`: GPUs, compute capability, Slurm) and asks each
registry whether its option can run there: ``flopsweep.models.MODELS``,
``flopsweep.attention.KERNELS``, ``flopsweep.backend_specs.BACKEND_SPECS`` and
``flopsweep.precision.PRECISIONS``. It returns a :class:`Plan` with the device
and rank counts as ints, which launch, worker and metrics take. :func:`plan` is both.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from flopsweep import (
    attention,
    compile_levers,
    hostmem,
    memory,
    overlap_forward,
    pipeline_plan,
    precision,
    rules,
    search_rules,
)
from flopsweep.backend_checks import check_support
from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.cache_home import cache_problem
from flopsweep.checks import (  # re-exported: validation's names, as callers import them from plan
    BATCHES,
    CONF_DIR,
    DEVICES,
    MAX_NPROC_PER_NODE,
    check_bounds,
    check_choices,
    check_repeats,
    option_names,
    option_schemas,
    validate,
)
from flopsweep.clusters import example_gpu, set_plan_gpu
from flopsweep.config import ConfigError, RunConfig, require_positive, typed_form
from flopsweep.layout import Layout, Plan, grad_accum_for
from flopsweep.models.hf import HF_ATTENTION
from flopsweep.peak_row import PeakRow
from flopsweep.text import figure, plural

__all__ = [
    "BATCHES",
    "CONF_DIR",
    "DEVICES",
    "MAX_CPU_RANKS_PER_CORE",
    "MAX_NPROC_PER_NODE",
    "OFFLOAD_KEYS",
    "NoGpuError",
    "Environment",
    "Plan",
    "check_bounds",
    "check_choices",
    "check_repeats",
    "fixed_nproc",
    "option_names",
    "option_schemas",
    "plan",
    "resolve",
    "resolve_device",
    "resolve_nproc",
    "validate",
]

MAX_CPU_RANKS_PER_CORE = 4
"""CPU ranks beyond this many per core are refused: they only thrash."""


@dataclass(frozen=True)
class Environment:
    """What :func:`resolve` needs to know about the machine; :meth:`detect` reads it once."""

    cuda_available: bool = False
    gpu_count: int = 0
    bf16_supported: bool = False
    capability: tuple[int, int] | None = None
    cpu_count: int = 1
    in_submitit: bool = False
    """``SUBMITIT_EXECUTOR`` is set: this process is a Slurm (or submitit_local) task."""
    under_slurm: bool = False
    """``SUBMITIT_EXECUTOR=slurm``: a Slurm job, which may span nodes."""
    slurm_job: bool = False
    """This job's config names the Slurm launcher (:func:`flopsweep.launcher_choice.job_launcher`):
    Slurm decides which GPUs and cores it sees, so the GPU count and the CPU-rank cap are not checked here. An
    ``salloc`` shell (``SLURM_JOB_ID`` alone) is not one: the limits hold there."""
    host_memory_bytes: int | None = None
    """The host memory this process may use (:func:`flopsweep.hostmem.total_bytes`: the machine's,
    or its cgroup's limit when smaller, as in a container or a Slurm job with ``--mem``); None: not
    checked."""
    paths_here: bool = True
    """The config's paths (``backend.nvme_path``) are on this machine and are checked here; False
    for a plan of GPUs that are not here (``plan_gpu``): the path is the target machine's, checked
    when the run launches there."""
    planned_gpu: PeakRow | None = None
    """The peak-table row of the GPU ``plan=true`` places the job on instead of this machine's
    (``plan_gpu``: :func:`flopsweep.job.placement.plan_environment`, which sets ``capability`` and
    ``bf16_supported`` from it); its attention kernels' hardware rules are checked here
    (:func:`flopsweep.attention.hardware_problem`). None: this machine's GPU, whose start-up probe
    checks them."""

    @classmethod
    def detect(cls, no_gpu: bool = False) -> Environment:
        """This machine as torch sees it. ``no_gpu``: no CUDA GPU is usable, known without torch
        (:func:`flopsweep.local_gpus.no_gpu_here`), so torch is not imported (a sweep's check before its
        first job, ``hydra_plugins.flopsweep_repeats.once``: 2 s of CPU where the jobs run elsewhere)."""
        from flopsweep.launcher_choice import job_launcher

        cuda, count, bf16, capability = False, 0, False, None
        if not no_gpu:
            import torch

            cuda = torch.cuda.is_available()
            if cuda:
                count, bf16 = torch.cuda.device_count(), torch.cuda.is_bf16_supported()
                capability = torch.cuda.get_device_capability(0)
        launcher = job_launcher()  # the job's config names its launcher
        return cls(
            cuda_available=cuda,
            gpu_count=count,
            bf16_supported=bf16,
            capability=capability,
            cpu_count=os.cpu_count() or 1,
            in_submitit=launcher != "local",
            under_slurm=launcher == "slurm",
            slurm_job=launcher == "slurm",
            host_memory_bytes=hostmem.total_bytes(),
        )


def resolve_device(device: str, env: Environment) -> str:
    """``cuda`` or ``cpu`` for a ``device`` setting (``auto``: cuda when available)."""
    if device != "auto":
        return device
    return "cuda" if env.cuda_available else "cpu"


def fixed_nproc(nproc_per_node: str) -> int | None:
    """``nproc_per_node`` as a positive int, or None for ``auto`` (or anything else): for code that
    has only a config, not a :class:`Plan` (the sweep process's record of a lost Slurm job, the
    plan of a GPU job made on a machine without GPUs). Everything after :func:`resolve` reads
    :attr:`Plan.nproc_per_node`."""
    text = str(nproc_per_node)
    return int(text) if text.isdigit() and int(text) >= 1 else None


def resolve_nproc(nproc_per_node: str, device: str, backend: str, env: Environment) -> int:
    """Ranks per node for ``nproc_per_node`` (``auto``: the GPU count on cuda, else 1;
    always 1 for a backend that runs one rank).

    Raises:
        ConfigError: when the value is neither ``auto`` nor a positive integer.
    """
    fix = "set nproc_per_node=auto or a positive integer such as 2"
    if nproc_per_node == "auto":
        one_rank = BACKEND_SPECS[backend].max_ranks == 1
        return max(1, env.gpu_count) if device == "cuda" and not one_rank else 1
    try:
        n = int(nproc_per_node)
    except ValueError:
        raise ConfigError("nproc_per_node", nproc_per_node, "is not an integer", fix) from None
    require_positive("nproc_per_node", n, fix)
    return n


def resolve(cfg: RunConfig, env: Environment) -> Plan:
    """Place a validated config on this machine and check each option can run here.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    given, device = cfg, resolve_device(cfg.device, env)
    # Every check below sees the placed device (``auto`` resolved): the memory estimate reads it
    # (DeepSpeed's optimizer on the CPU, SDPA's math fallback on CUDA: :mod:`flopsweep.memory`).
    cfg = dataclasses.replace(cfg, device=device)
    nproc = resolve_nproc(cfg.nproc_per_node, device, cfg.backend.name, env)
    world = nproc * cfg.nnodes
    layout = Layout.resolve(cfg.parallel, world).for_backend(cfg.backend.name)
    cfg = dataclasses.replace(
        cfg, batch=dataclasses.replace(cfg.batch, grad_accum=grad_accum_for(cfg.batch, layout))
    )
    rules.optimizer_in_backward(cfg)  # again: batch.global_batch_size may have set grad_accum
    compile_levers.check_placed(cfg, device)  # CUDA graphs: device=auto resolved, grad_accum as set
    overlap_forward.check_placed(cfg, device)  # optim.overlap_forward: device=auto resolved
    cfg = pipeline_plan.resolve(cfg)  # the local batch splits into the pipeline micro-batches
    _check_placement(cfg, device, nproc, env, given)
    problem = precision.problem(
        cfg.precision, device=device, capability=env.capability, bf16=env.bf16_supported
    )
    if problem:
        raise ConfigError("precision", cfg.precision.name, problem, _precision_fix(device, env))
    attn = attention.check_support(
        cfg.attention,
        device=device,
        precision=cfg.precision.name,
        run_seed=cfg.seed,
        seq_len=cfg.model.seq_len,
        kernels=HF_ATTENTION if cfg.model.arch == "hf" else None,
        installed_here=env.paths_here,  # plan_gpu: the target's packages, not this machine's
    )
    cfg = dataclasses.replace(cfg, attention=attn)  # the memory estimate reads the layout and its impl
    _check_host_memory(cfg, device, nproc, layout, env, given=given.device)
    _check_search_budget(cfg, layout)
    if device == "cuda" and env.planned_gpu is not None:
        _check_planned_kernel(cfg, env.planned_gpu)
    backend = check_support(
        cfg.backend,
        world_size=world,
        device=device,
        precision=cfg.precision.name,
        compile_blocks=cfg.compile,
        paths_here=env.paths_here,
    )
    if (
        env.paths_here
        and not cfg.plan
        and (problem := cache_problem(backend=cfg.backend.name, device=device, compile_blocks=cfg.compile))
    ):
        raise problem  # HOME=/proc/nohome: every rank's mkdir failed after launch
    if cfg.fault.kind != "none" and not 0 <= cfg.fault.rank < world:
        from flopsweep.key_needs import given_of, needed

        more = needed("fault.rank", str(cfg.fault.rank), given_of(cfg)) if cfg.fault.rank > 0 else []
        raise ConfigError(
            "fault.rank",
            cfg.fault.rank,
            f"is not a rank of this run (world size {world})",
            f"set fault.rank={0 if cfg.fault.rank < 0 else world - 1} (a rank of 0..{world - 1})"
            + (f", or {' '.join(more)} fault.rank={cfg.fault.rank}" if more else ""),
        )
    resolved = dataclasses.replace(cfg, nproc_per_node=str(nproc), attention=attn, backend=backend)
    return Plan(
        cfg=resolved,
        device=device,
        nproc_per_node=nproc,
        nnodes=cfg.nnodes,
        layout=layout,
        device_given=given.device,
    )


def _check_search_budget(cfg: RunConfig, layout: Layout) -> None:
    """Refuse ``search.model=largest`` under a ``search.memory_budget_gib`` below the estimated peak
    per rank (:func:`flopsweep.memory.estimate`) of the smallest size it would try
    (``search.min_n_layer`` blocks, or ``search.grow=seq_len``'s first length): nothing can fit, so
    nothing is launched (status ``invalid``, not the ``oom`` of a probe).
    The fix names that estimate, rounded up to the MiB.

    Raises:
        ConfigError: naming ``search.memory_budget_gib``, its value and the smallest estimate.
    """
    search = cfg.search
    if search.model != "largest" or search.memory_budget_gib is None:
        return
    if search.grow == "seq_len":
        first = search_rules.seq_len_bounds(cfg)[0]
        smallest, what = (
            dataclasses.replace(cfg.model, seq_len=first),
            f"shortest sequence searched, seq_len={first}",
        )
    else:
        smallest = dataclasses.replace(cfg.model, n_layer=search.min_n_layer)
        what = f"smallest model searched, n_layer={search.min_n_layer}"
    need = memory.estimate(dataclasses.replace(cfg, model=smallest), layout).total / memory.GIB
    if search.memory_budget_gib < need:
        least = math.ceil(need * 1024) / 1024
        raise ConfigError(
            "search.memory_budget_gib",
            search.memory_budget_gib,
            f"is below the estimated peak of the {what} ({figure(need, 4)} GiB per rank): nothing can fit",
            f"set search.memory_budget_gib={typed_form(least)} or more, or null for the device's memory",
        )


def _check_host_memory(
    cfg: RunConfig, device: str, nproc: int, layout: Layout, env: Environment, *, given: str = "auto"
) -> None:
    """On the CPU, refuse a run whose ranks on this machine hold more fp32 weights, gradients and
    AdamW states alone (:func:`flopsweep.memory.model_states_floor`, a lower bound) than the machine
    has memory: it cannot fit, and trying swaps the machine or ends in the OOM killer's SIGKILL,
    not in an ``oom`` status. A run that may fit the machine but whose estimated peak
    (:func:`flopsweep.memory.peak_bytes`) exceeds the memory free now is refused at launch, before
    any worker starts (``flopsweep.job.hostcheck.check_free_host_memory``). A GPU run is not refused here:
    its out-of-memory error becomes the ``oom`` status. ``given``: ``device`` as the command gave it,
    whose fixes say ``drop device=cpu`` only where it was given (:func:`flopsweep.clusters.set_plan_gpu`)."""
    if env.host_memory_bytes is None:
        return
    _check_offload_host_memory(cfg, nproc, layout, env.host_memory_bytes, device=device, given=given)
    if device != "cpu":
        return
    need = memory.model_states_floor(cfg, layout) * nproc
    if need <= env.host_memory_bytes:
        return
    # Sharding helps only where the ranks hold copies and one copy fits: all ranks share this host.
    one_copy = need // nproc if cfg.backend.name == "ddp" else need
    helps = nproc > 1 and one_copy <= env.host_memory_bytes
    raise states_error(
        cfg.model.name,
        need,
        nproc,
        env.host_memory_bytes,
        plan=cfg.plan,
        shard=helps,
        gpu=env.cuda_available,
        device_given=given,
    )


def states_error(
    name: str,
    need: int,
    nproc: int,
    host_bytes: int,
    *,
    plan: bool,
    shard: bool,
    changes: str = "",
    gpu: bool = True,
    device_given: str = "auto",
) -> ConfigError:
    """The refusal of ``model=name`` on the CPU whose ``nproc`` ranks' fp32 weights, gradients and AdamW
    states (``need`` bytes) exceed ``host_bytes``: the job's (:func:`resolve`) and ``run.py``'s before
    Hydra (:func:`flopsweep.plan_command_line.cpu_plan_problem`). A plan's fix names a GPU to plan
    for (``plan_gpu=H100``, ``plan_clusters=[H100:8]``); a run's, a smaller model or ``device=cuda``
    (``shard``: and ``backend=fsdp``, where one copy would fit; ``device=cuda`` only where ``gpu``, a GPU
    is visible: :mod:`flopsweep.job.device_fix`). ``changes``: the command line's
    ``model.*`` overrides that sized it (``model.n_layer=40``), named after the model (``model=llama3.1-8b
    with model.n_layer=40``); a smaller model is suggested only where it is another than ``name``.
    ``device_given``: ``device`` as the command gave it; ``cpu``: the plan's fix drops it first
    (``device=cpu plan_gpu=H100`` is refused: :func:`flopsweep.rules.planned_gpu_on_the_cpu`)."""
    sharding = ", backend=fsdp to shard it over the ranks" if shard else ""
    smaller = "smaller model.* values" if name == "gpt-tiny" else "a smaller model (e.g. model=gpt-tiny)"
    return ConfigError(
        "model",
        name,
        f"on the CPU the fp32 weights, gradients and AdamW states of {plural(nproc, 'rank')} take at "
        f"least {need / 2**30:.1f} GiB, more than {_host_phrase(host_bytes)}",
        f"{'drop device=cpu and ' if device_given == 'cpu' else ''}add plan_gpu=H100 or "
        f"plan_clusters=[H100:8] to plan for GPUs that are not here, or pick {smaller}"
        if plan
        else f"pick {smaller}{sharding}" + (", or run on GPUs with device=cuda" if gpu else ""),
        f"{name} with {changes}" if changes else None,
    )


OFFLOAD_KEYS = ("cpu_offload", "offload_optimizer", "offload_param")
"""The backend keys that put model states in host memory (:func:`flopsweep.memory.offload_host_bytes`)."""


def _host_phrase(host_bytes: int) -> str:
    """``the N GiB this machine lets a process use (...)``: the host memory of the checks, which is
    the cgroup's limit where that is smaller (:func:`flopsweep.hostmem.total_bytes`)."""
    return (
        f"the {host_bytes / 2**30:.1f} GiB this machine lets a process use (its memory, or its cgroup's "
        "limit if smaller)"
    )


def _check_offload_host_memory(
    cfg: RunConfig, nproc: int, layout: Layout, host_bytes: int, *, device: str = "cuda", given: str = "auto"
) -> None:
    """Refuse, on any device, a run whose ranks on this machine offload more bytes to the host
    (:func:`flopsweep.memory.offload_host_bytes`, a lower bound, times the ranks of the node: model
    states and ``activation_checkpointing=offload``'s activations) than the machine may use
    (:func:`flopsweep.hostmem.total_bytes`): it would swap or meet the OOM killer,
    not an ``oom`` status. On the CPU the fix names ``plan_gpu`` (``drop device=cpu and`` first only where
    ``given``, the command's ``device``, is ``cpu``: :func:`flopsweep.clusters.set_plan_gpu`).

    Raises:
        ConfigError: naming the offload key that is on (``activation_checkpointing`` when only it is).
    """
    need = memory.offload_host_bytes(cfg, layout) * nproc
    if need <= host_bytes:
        return
    keys = [k for k in OFFLOAD_KEYS if getattr(cfg.backend, k, False) in (True, "cpu")]
    if not keys:  # only the saved activations (activation_checkpointing=offload) go to the host
        raise ConfigError(
            "activation_checkpointing",
            "offload",
            f"puts at least {memory.activation_host_bytes(cfg, layout) * nproc / 2**30:.1f} GiB of saved "
            f"activations of {plural(nproc, 'rank')} in host memory, more than {_host_phrase(host_bytes)}",
            "shorten model.seq_len or the micro batch, or pick activation_checkpointing=full",
        )
    key = keys[0]
    value = getattr(cfg.backend, key)
    raise ConfigError(
        f"backend.{key}",
        value,
        f"offload puts at least {need / 2**30:.1f} GiB of model states and activations of "
        f"{plural(nproc, 'rank')} in host memory, more than {_host_phrase(host_bytes)}",
        "pick a smaller model (e.g. model=gpt-tiny); to ask whether it fits GPUs that are not here, "
        f"add plan=true and {set_plan_gpu('NAME', given)} (e.g. "
        f"{set_plan_gpu(example_gpu(cfg.plan_clusters), given)}; offloading on the CPU "
        "moves the states nowhere)"
        if device == "cpu"
        else "pick a smaller model, shard over more nodes, offload to nvme (DeepSpeed ZeRO-3), or turn "
        "offload off",
    )


def _check_planned_kernel(cfg: RunConfig, gpu: PeakRow) -> None:
    """Refuse an attention kernel that the GPU ``plan=true`` plans for cannot run
    (:func:`flopsweep.attention.hardware_problem`: flash and cuDNN attention below capability 8.0,
    cuDNN on AMD), which a run there would find in its start-up probe.

    Raises:
        ConfigError: naming ``attention``, the kernel, the GPU and the kernels that run on it.
    """
    where = dict(capability=gpu.capability, vendor=gpu.vendor, gpu=gpu.name)
    problem = attention.hardware_problem(cfg.attention.name, **where)
    if problem is None:
        return
    kernels = HF_ATTENTION if cfg.model.arch == "hf" else attention.KERNELS
    runs = [
        n
        for n in kernels
        if "cuda" in attention.KERNELS[n].devices and not attention.hardware_problem(n, **where)
    ]
    picks = " or ".join(f"attention={n}" for n in runs[:3])
    raise ConfigError("attention", cfg.attention.name, problem, f"pick {picks} for the {gpu.name}")


def _precision_fix(device: str, env: Environment) -> str:
    """``set precision=bf16 or fp32 ...``: the precisions that run on this device."""
    runs = [
        name
        for name, spec in precision.PRECISIONS.items()
        if not precision.problem(
            spec.config(name=name), device=device, capability=env.capability, bf16=env.bf16_supported
        )
    ]
    there = "on the CPU" if device == "cpu" else "on this GPU"
    picks = " or ".join(f"precision={name}" for name in runs) or "device=cpu precision=fp32"
    return f"set {picks} {there}" + (", or device=cuda" if device == "cpu" and env.cuda_available else "")


class NoGpuError(ConfigError):
    """``device=cuda`` where no CUDA GPU is visible. Its fix here, ``run on a GPU machine``, needs no proof;
    the job (:func:`flopsweep.job.lifecycle.planned`) replaces it by
    :func:`flopsweep.job.device_fix.no_gpu_error`'s, which offers ``device=cpu`` only where the CPU takes
    the run (the plan's checks and the launch's free host memory), else ``plan=true``. Was: ``set
    device=cpu`` always, whose CPU run the host-memory check could refuse with ``set device=cuda``.
    ``given``: the config as :func:`resolve` got it (validated)."""

    def __init__(self, given: RunConfig) -> None:
        super().__init__("device", "cuda", NO_GPU, "run on a GPU machine")
        self.given = given


NO_GPU = "no CUDA GPU is visible"
"""The problem of ``device=cuda`` on a machine without one (:class:`NoGpuError`)."""


def _check_placement(
    cfg: RunConfig, device: str, nproc: int, env: Environment, given: RunConfig | None = None
) -> None:
    """The machine's own limits: nodes outside Slurm, a GPU where ``device=cuda`` (:class:`NoGpuError`,
    which keeps ``given``, the config as :func:`resolve` got it), GPUs per rank, CPU ranks per core."""
    if cfg.nnodes != 1 and not env.under_slurm:
        raise ConfigError(
            "nnodes",
            cfg.nnodes,
            "only a Slurm job spans nodes; a local run has one",
            "set nnodes=1, or run the sweep with -m hydra/launcher=slurm; to plan it here add plan=true "
            "(predict.nnodes= and predict.gpus_per_node= predict its step on another cluster)",
        )
    if device == "cuda":
        if not env.cuda_available:  # the job proves its fix: flopsweep.job.device_fix
            raise NoGpuError(given or cfg)
        if nproc > env.gpu_count and not env.slurm_job:
            raise ConfigError(
                "nproc_per_node",
                nproc,
                f"asks for more ranks than the {plural(env.gpu_count, 'visible GPU')}; "
                "two ranks must not share a GPU",
                f"set nproc_per_node={env.gpu_count} or nproc_per_node=auto",
            )
    elif nproc > MAX_CPU_RANKS_PER_CORE * env.cpu_count and not env.slurm_job:
        cap = MAX_CPU_RANKS_PER_CORE * env.cpu_count
        raise ConfigError(
            "nproc_per_node",
            nproc,
            f"starts more CPU ranks than {MAX_CPU_RANKS_PER_CORE} per core "
            f"({plural(env.cpu_count, 'core')} here)",
            f"set nproc_per_node to at most {cap}",
        )


def plan(cfg: RunConfig, env: Environment | None = None, *, choices: Mapping[str, str] | None = None) -> Plan:
    """:func:`validate` (with Hydra's group ``choices`` when known), then :func:`resolve` on
    ``env`` (detected when None)."""
    return resolve(validate(cfg, choices), env or Environment.detect())
