"""From a typed config to a run plan: every rule, checked before any worker starts.

:func:`validate` checks what the config alone decides (choices, sizes, which keys
belong to which option) and depends on nothing else. :func:`resolve` adds the
machine (:class:`Environment`: GPUs, compute capability, Slurm) and asks each
registry whether its option can run there: ``flopsweep.models.MODELS``,
``flopsweep.attention.KERNELS``, ``flopsweep.backends.BACKENDS`` and
``flopsweep.precision.PRECISIONS``. It returns a :class:`Plan` with the device
and rank counts as ints, which launch, worker and metrics take.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from flopsweep import (
    attention,
    backends,
    checkpointing,
    hostmem,
    memory,
    objective,
    pipeline,
    precision,
    rules,
)
from flopsweep.config import (  # the bounds live in config, which the model families may import
    FAULT_KINDS,
    FAULT_PHASES,
    MAX_BY_KEY,
    MAX_FLOAT,
    MAX_INT,
    MAX_REPEATS,
    MAX_SEED,
    BatchConfig,
    ConfigError,
    OptimConfig,
    RunConfig,
    require_choice,
    require_positive,
)
from flopsweep.layout import Layout, Plan, check_built, grad_accum_for
from flopsweep.models import MODELS
from flopsweep.options import HF_ATTENTION, AutoBatchConfig, owners
from flopsweep.peaks import PeakRow
from flopsweep.text import plural

DEVICES = ("auto", "cuda", "cpu")
BATCHES = {"fixed": BatchConfig, "auto": AutoBatchConfig}
"""Batch options by ``batch.name`` and their schemas."""

MAX_CPU_RANKS_PER_CORE = 4
"""CPU ranks beyond this many per core are refused: they only thrash."""


CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
"""The checkout's Hydra config directory: one YAML file per option of each group."""


def option_names(group: str) -> list[str]:
    """The options a user picks for ``group`` (``model`` -> ``gpt-1.3b``, ..., ``gpt-tiny``, ...):
    the YAML files of ``conf/<group>/``, sorted. The schema nodes ``<group>/base_<option>`` that
    those files extend (:mod:`flopsweep.store`) are not options."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def option_schemas() -> dict[str, dict[str, type]]:
    """Every group's options and their schema classes, from the registries (which import torch;
    :data:`flopsweep.options.OPTION_SCHEMAS` is the torch-free list of those with knobs of their own)."""
    return {
        "model": {arch: fam.config for arch, fam in MODELS.items()},
        "attention": {name: spec.config for name, spec in attention.KERNELS.items()},
        "backend": {name: spec.config for name, spec in backends.BACKENDS.items()},
        "precision": {name: spec.config for name, spec in precision.PRECISIONS.items()},
        "batch": dict(BATCHES),
        "activation_checkpointing": {name: spec.config for name, spec in checkpointing.POLICIES.items()},
    }


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
    """This process is a task that the Slurm launcher started (:func:`launcher_task`): Slurm decides
    which GPUs and cores it sees, so the GPU count and the CPU-rank cap are not checked here. An
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
    (``plan_gpu``: :func:`flopsweep.job.plan_environment`, which sets ``capability`` and
    ``bf16_supported`` from it); its attention kernels' hardware rules are checked here
    (:func:`flopsweep.attention.hardware_problem`). None: this machine's GPU, whose start-up probe
    checks them."""

    @classmethod
    def detect(cls) -> Environment:
        import torch

        cuda = torch.cuda.is_available()
        return cls(
            cuda_available=cuda,
            gpu_count=torch.cuda.device_count() if cuda else 0,
            bf16_supported=cuda and torch.cuda.is_bf16_supported(),
            capability=torch.cuda.get_device_capability(0) if cuda else None,
            cpu_count=os.cpu_count() or 1,
            in_submitit=bool(os.environ.get("SUBMITIT_EXECUTOR")),
            under_slurm=os.environ.get("SUBMITIT_EXECUTOR") == "slurm",
            slurm_job=launcher_task(os.environ),
            host_memory_bytes=hostmem.total_bytes(),
        )


def launcher_task(environ: Mapping[str, str]) -> bool:
    """True in a Slurm task that submitit started (the ``slurm`` launcher): ``SUBMITIT_EXECUTOR=slurm``,
    which submitit's batch script exports, with the job and the task that ``srun`` gives it
    (``SLURM_JOB_ID``, ``SLURM_PROCID``). ``SLURM_JOB_ID`` alone, as in every ``salloc`` shell, is not."""
    return (
        environ.get("SUBMITIT_EXECUTOR") == "slurm"
        and bool(environ.get("SLURM_JOB_ID"))
        and bool(environ.get("SLURM_PROCID", "").isdigit())
    )


def validate(cfg: RunConfig, choices: Mapping[str, str] | None = None) -> RunConfig:
    """Check every value and combination that the config alone decides.

    Depends on nothing but ``cfg`` and Hydra's ``choices`` (no torch, no environment). Returns
    ``cfg`` unchanged.

    Args:
        choices: the option picked in each config group, as Hydra records it
            (``HydraConfig.get().runtime.choices``: ``{"backend": "zero2", ...}``); the typed config
            keeps only the option's registry key (``backend.name=deepspeed``). None when unknown.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    check_choices(cfg, choices or {})
    _reject_unknown_keys(cfg)
    _check_options(cfg)
    MODELS[cfg.model.arch].check(cfg.model)
    checkpointing.policy(cfg.activation_checkpointing).check(cfg.activation_checkpointing)
    require_choice("device", cfg.device, DEVICES, "device")
    check_bounds(cfg)
    _validate_sizes(cfg)
    check_built(cfg.parallel, cfg.backend.name)
    _validate_optim(cfg.optim)
    _validate_cost(cfg)
    _validate_predict(cfg)
    require_choice("fault.kind", cfg.fault.kind, FAULT_KINDS, "fault.kind")
    require_choice("fault.phase", cfg.fault.phase, FAULT_PHASES, "fault.phase")
    objective.spec_of(cfg.objective)
    check_repeats(cfg)
    rules.check(cfg)  # the cross-axis rules (flopsweep.rules.RULES)
    memory.planned_gpu_bytes(cfg.plan_gpu, cfg.plan_gpu_memory_gib)  # a device name plan=true knows
    return cfg


def check_choices(cfg: RunConfig, choices: Mapping[str, str]) -> None:
    """The options Hydra composed say what the config holds. (A schema node is no option: it is
    stored outside the group, :mod:`flopsweep.store`, so Hydra refuses ``model=base_gpt2`` itself.)

    - ``backend=zero1``/``zero2``/``zero3`` fix the ZeRO stage
      (:data:`flopsweep.backends.ZERO_SHORTHANDS`); a ``backend.zero_stage`` that differs would
      run another stage under the option's name. ``backend=deepspeed`` leaves it free.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    choice = str(choices.get("backend") or "")
    stage = backends.ZERO_SHORTHANDS.get(choice)
    value = getattr(cfg.backend, "zero_stage", stage)
    if stage is not None and value != stage:
        other = f"backend=zero{value}, or " if f"zero{value}" in backends.ZERO_SHORTHANDS else ""
        raise ConfigError(
            "backend.zero_stage",
            value,
            f"contradicts backend={choice}, which is ZeRO stage {stage}",
            f"drop the backend.zero_stage override (backend={choice} sets it), or pick {other}"
            f"backend=deepspeed backend.zero_stage={value}",
        )


def _check_options(cfg: RunConfig) -> None:
    """Each group's option exists, and the config node has that option's schema.

    A node of another option's schema means the name was changed by hand
    (``attention.name=blocksparse`` on ``attention=sdpa``): the option's knobs and
    defaults would be missing, so the option must be picked as a group option.
    """
    groups = option_schemas()
    for group, key in (("model", "arch"), ("attention", "name"), ("backend", "name")):
        value = getattr(getattr(cfg, group), key)
        require_choice(f"{group}.{key}", value, list(groups[group]), group if key == "name" else None)
    require_choice("precision.name", cfg.precision.name, list(groups["precision"]))
    require_choice("batch.name", cfg.batch.name, list(groups["batch"]))
    ac = cfg.activation_checkpointing.name
    require_choice("activation_checkpointing.name", ac, list(groups["activation_checkpointing"]))
    for group in groups:
        node = getattr(cfg, group)
        value = node.arch if group == "model" else node.name
        own = {f.name for f in dataclasses.fields(groups[group][value])}
        missing = sorted(own - {f.name for f in dataclasses.fields(node)})
        if missing:
            key = "arch" if group == "model" else "name"
            pick = (
                "a model option of that family, e.g. model=llama3.2-1b"
                if group == "model"
                else f"{group}={value}"
            )
            raise ConfigError(
                f"{group}.{key}",
                value,
                f"was set by hand on an option of another kind, so its own keys ({', '.join(missing)}) "
                "and their defaults are missing",
                f"pick the option itself: {pick}",
            )


def _reject_unknown_keys(node: object, prefix: str = "") -> None:
    """Refuse attributes that are not fields of the node's schema.

    Hydra's ``+key=value`` and ``++key=value`` add keys past the schema's struct
    check, and ``OmegaConf.to_object`` then sets them as plain attributes: a typo
    such as ``+model.n_layers=3`` would be ignored in silence, and a
    ``+model._target_=...`` would ride along. A key of another option
    (``+attention.window_blocks=2`` on ``attention=sdpa``) names that option.
    """
    names = [f.name for f in dataclasses.fields(node)]
    for key, value in vars(node).items():
        if key not in names:
            group = prefix.rstrip(".")
            if group in option_schemas() and owners(group, key):
                own = " or ".join(f"{group}={o}" for o in owners(group, key))
                raise ConfigError(
                    f"{prefix}{key}",
                    value,
                    f"belongs to {own}, not to {group}={getattr(node, 'name', getattr(node, 'arch', '?'))}",
                    f"drop the override, or pick {own}",
                )
            raise ConfigError(
                f"{prefix}{key}",
                value,
                "is not a key of the config schema (a '+' override adds keys without checking them)",
                f"remove it; the keys here are {', '.join(names)}",
            )
        if dataclasses.is_dataclass(value):
            _reject_unknown_keys(value, f"{prefix}{key}.")


MAX_NPROC_PER_NODE = 10**6
"""The most ranks per node ``nproc_per_node`` may name before any machine is asked (a GPU node has
8; :func:`resolve` then caps CPU ranks at a multiple of the cores and GPU ranks at the GPUs)."""


def check_repeats(cfg: RunConfig) -> None:
    """``repeats`` within 1..:data:`~flopsweep.config.MAX_REPEATS` and ``repeat`` one of its rounds
    (0 .. repeats - 1).

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    if not 1 <= cfg.repeats <= MAX_REPEATS:
        raise ConfigError(
            "repeats", cfg.repeats, f"must be 1 to {MAX_REPEATS}", f"set repeats=3 (at most {MAX_REPEATS})"
        )
    if not 0 <= cfg.repeat < cfg.repeats:
        raise ConfigError(
            "repeat",
            cfg.repeat,
            f"must be a round of repeats={cfg.repeats} (0 to {cfg.repeats - 1})",
            "drop repeat=: the sweeper sets it from repeats=",
        )


def check_bounds(cfg: RunConfig) -> None:
    """Every number of the config within bounds: :data:`MAX_BY_KEY` for the keys it names,
    :data:`MAX_INT` or :data:`MAX_FLOAT` (and finite) for the others; ``nproc_per_node`` at most
    :data:`MAX_NPROC_PER_NODE`. Lower bounds stay with each key's own check.

    Raises:
        ConfigError: naming the key, the value (shortened when long), the bound and the fix.
    """
    for key, value in _numbers(cfg):
        limit = MAX_BY_KEY.get(key, MAX_INT if isinstance(value, int) else MAX_FLOAT)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(key, value, "must be a finite number", f"set {key} to a finite value")
        if abs(value) > limit:
            bound = (
                f"{limit:.0f}" if limit < 1e9 else f"{limit:.3g}"
            )  # no 1,000 separators: Hydra would read a list
            raise ConfigError(key, value, f"is beyond the bound of {bound}", f"set {key} to at most {bound}")
    nproc = str(cfg.nproc_per_node)
    if nproc.isdigit() and (len(nproc) > 7 or int(nproc) > MAX_NPROC_PER_NODE):
        raise ConfigError(
            "nproc_per_node",
            nproc,
            f"is beyond the bound of {MAX_NPROC_PER_NODE} ranks per node",
            "set nproc_per_node=auto or the ranks of one node",
        )


def _numbers(node: object, prefix: str = "") -> list[tuple[str, int | float]]:
    """``(key, value)`` of every int and float field of ``node`` and its sub-configs (not bools)."""
    found: list[tuple[str, int | float]] = []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            found.extend(_numbers(value, f"{prefix}{f.name}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            found.append((f"{prefix}{f.name}", value))
    return found


def _validate_sizes(cfg: RunConfig) -> None:
    require_positive("batch.micro_batch_size", cfg.batch.micro_batch_size, "set batch.micro_batch_size>=1")
    require_positive("batch.grad_accum", cfg.batch.grad_accum, "set batch.grad_accum>=1")
    _validate_global_batch(cfg.batch)
    limit = getattr(cfg.batch, "max_micro_batch_size", None)
    if limit is not None and limit < cfg.batch.micro_batch_size:
        raise ConfigError(
            "batch.max_micro_batch_size",
            limit,
            f"is below batch.micro_batch_size={cfg.batch.micro_batch_size}",
            "raise batch.max_micro_batch_size or lower batch.micro_batch_size",
        )
    require_positive("steps.measure", cfg.steps.measure, "set steps.measure>=1")
    require_positive("nnodes", cfg.nnodes, "set nnodes=1")
    for key in ("warmup", "max_extra_warmup"):
        if getattr(cfg.steps, key) < 0:
            raise ConfigError(
                f"steps.{key}", getattr(cfg.steps, key), "must be >= 0", f"set steps.{key}=0 or more"
            )
    if not (cfg.timeout_s > 0 and math.isfinite(cfg.timeout_s)):
        raise ConfigError(
            "timeout_s", cfg.timeout_s, "must be a finite number of seconds > 0", "set e.g. timeout_s=1800"
        )
    if not 0 <= cfg.seed < MAX_SEED:
        raise ConfigError(
            "seed", cfg.seed, "must be in [0, 2**32) (it seeds torch generators)", "set e.g. seed=0"
        )


def _validate_global_batch(batch: BatchConfig) -> None:
    """``batch.global_batch_size`` is positive and divides by the micro batch (the data-parallel
    degree is checked by :func:`resolve`), and needs ``batch=fixed``: ``batch=auto`` changes the
    micro batch after validation."""
    total = batch.global_batch_size
    if total is None:
        return
    if batch.name == "auto":
        raise ConfigError(
            "batch.global_batch_size",
            total,
            "batch=auto searches the micro batch after validation, so grad_accum cannot be set from it",
            "use batch=fixed with batch.micro_batch_size, or drop batch.global_batch_size",
        )
    if total < 1 or total % batch.micro_batch_size:
        raise ConfigError(
            "batch.global_batch_size",
            total,
            f"is not a positive multiple of batch.micro_batch_size={batch.micro_batch_size}",
            f"set batch.global_batch_size to a multiple of {batch.micro_batch_size}",
        )


def _validate_cost(cfg: RunConfig) -> None:
    """``cost.usd_per_gpu_hour`` null or >= 0; ``budget.tokens`` null or > 0 (bounds:
    :func:`check_bounds`)."""
    price, tokens = cfg.cost.usd_per_gpu_hour, cfg.budget.tokens
    if price is not None and price < 0:
        raise ConfigError("cost.usd_per_gpu_hour", price, "must be >= 0 US dollars", "set e.g. 2.5, or null")
    if tokens is not None and tokens <= 0:
        raise ConfigError(
            "budget.tokens", tokens, "must be a positive token count", "set e.g. 15e12, or null"
        )


def _validate_predict(cfg: RunConfig) -> None:
    """``predict.*``: positive node and GPU counts and bandwidths, overlap in [0, 1], a positive
    ``compute_scale`` (bounds: :func:`check_bounds`)."""
    p = cfg.predict
    for key in ("gpus_per_node", "nnodes"):
        if (value := getattr(p, key)) is not None:
            require_positive(f"predict.{key}", value, f"set predict.{key}=8, or null for the run's own")
    for key in ("intra_node_gbps", "inter_node_gbps", "compute_scale"):
        if (value := getattr(p, key)) is not None and not value > 0:
            raise ConfigError(
                f"predict.{key}", value, "must be a positive number", f"set e.g. predict.{key}=1"
            )
    if p.overlap is not None and not 0 <= p.overlap <= 1:
        raise ConfigError("predict.overlap", p.overlap, "must be a share in [0, 1]", "set e.g. 0.8, or null")


def _validate_optim(o: OptimConfig) -> None:
    """AdamW settings: finite, with lr and eps > 0, grad_clip >= 0 (0: no clipping), betas in [0, 1),
    weight decay >= 0."""
    checks = {
        "lr": (o.lr > 0, "1e-4"),
        "eps": (o.eps > 0, "1e-8"),
        "grad_clip": (o.grad_clip >= 0, "1.0"),
        "beta1": (0 <= o.beta1 < 1, "0.9"),
        "beta2": (0 <= o.beta2 < 1, "0.95"),
        "weight_decay": (o.weight_decay >= 0, "0.1"),
    }
    for key, (ok, example) in checks.items():
        value = getattr(o, key)
        if not (ok and math.isfinite(value)):
            raise ConfigError(
                f"optim.{key}",
                value,
                "is out of range for AdamW (lr, eps > 0; grad_clip >= 0; betas in [0, 1); "
                "weight_decay >= 0; all finite)",
                f"set e.g. optim.{key}={example}",
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
        one_rank = backends.BACKENDS[backend].max_ranks == 1
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
    device = resolve_device(cfg.device, env)
    nproc = resolve_nproc(cfg.nproc_per_node, device, cfg.backend.name, env)
    world = nproc * cfg.nnodes
    layout = Layout.resolve(cfg.parallel, world).for_backend(cfg.backend.name)
    cfg = dataclasses.replace(
        cfg, batch=dataclasses.replace(cfg.batch, grad_accum=grad_accum_for(cfg.batch, layout))
    )
    rules.optimizer_in_backward(cfg)  # again: batch.global_batch_size may have set grad_accum
    cfg = pipeline.resolve(cfg)  # the local batch splits into the pipeline micro-batches
    _check_placement(cfg, device, nproc, env)
    _check_host_memory(cfg, device, nproc, layout, env)
    _check_search_budget(cfg, layout)
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
    if device == "cuda" and env.planned_gpu is not None:
        _check_planned_kernel(cfg, env.planned_gpu)
    backend = backends.check_support(
        cfg.backend,
        world_size=world,
        device=device,
        precision=cfg.precision.name,
        compile_blocks=cfg.compile,
        paths_here=env.paths_here,
    )
    if cfg.fault.kind != "none" and not 0 <= cfg.fault.rank < world:
        raise ConfigError(
            "fault.rank",
            cfg.fault.rank,
            f"is not a rank of this run (world size {world})",
            f"set fault.rank to 0..{world - 1}",
        )
    resolved = dataclasses.replace(
        cfg, device=device, nproc_per_node=str(nproc), attention=attn, backend=backend
    )
    return Plan(cfg=resolved, device=device, nproc_per_node=nproc, nnodes=cfg.nnodes, layout=layout)


def _check_search_budget(cfg: RunConfig, layout: Layout) -> None:
    """Refuse ``search.model=largest`` under a ``search.memory_budget_gib`` below the estimated peak
    per rank (:func:`flopsweep.memory.estimate`) of the smallest size it would try
    (``search.min_n_layer`` blocks): nothing can fit, so nothing is launched (status ``invalid``,
    not the ``oom`` of a probe). The fix names that estimate, rounded up to the MiB.

    Raises:
        ConfigError: naming ``search.memory_budget_gib``, its value and the smallest estimate.
    """
    search = cfg.search
    if search.model != "largest" or search.memory_budget_gib is None:
        return
    smallest = dataclasses.replace(cfg.model, n_layer=search.min_n_layer)
    need = memory.estimate(dataclasses.replace(cfg, model=smallest), layout).total / memory.GIB
    if search.memory_budget_gib < need:
        least = math.ceil(need * 1024) / 1024
        raise ConfigError(
            "search.memory_budget_gib",
            search.memory_budget_gib,
            f"is below the estimated peak of the smallest model searched, n_layer={search.min_n_layer} "
            f"({need:.4g} GiB per rank): nothing can fit",
            f"set search.memory_budget_gib={least:g} or more, or null for the device's memory",
        )


def _check_host_memory(cfg: RunConfig, device: str, nproc: int, layout: Layout, env: Environment) -> None:
    """On the CPU, refuse a run whose ranks on this machine hold more fp32 weights, gradients and
    AdamW states alone (:func:`flopsweep.memory.model_states_floor`, a lower bound) than the machine
    has memory: it cannot fit, and trying swaps the machine or ends in the OOM killer's SIGKILL,
    not in an ``oom`` status. A run that may fit the machine but whose estimated peak
    (:func:`flopsweep.memory.peak_bytes`) exceeds the memory free now is refused at launch, before
    any worker starts (``flopsweep.job.check_free_host_memory``). A GPU run is not refused here:
    its out-of-memory error becomes the ``oom`` status."""
    if env.host_memory_bytes is None:
        return
    _check_offload_host_memory(cfg, nproc, layout, env.host_memory_bytes, device=device)
    if device != "cpu":
        return
    need = memory.model_states_floor(cfg, layout) * nproc
    if need <= env.host_memory_bytes:
        return
    # Sharding helps only where the ranks hold copies and one copy fits: all ranks share this host.
    one_copy = need // nproc if cfg.backend.name == "ddp" else need
    helps = nproc > 1 and one_copy <= env.host_memory_bytes
    shard = ", backend=fsdp to shard it over the ranks" if helps else ""
    raise ConfigError(
        "model",
        cfg.model.name,
        f"on the CPU the fp32 weights, gradients and AdamW states of {plural(nproc, 'rank')} take at "
        f"least {need / 2**30:.1f} GiB, more than {_host_phrase(env.host_memory_bytes)}",
        f"pick a smaller model (e.g. model=gpt-tiny){shard}, or run on GPUs with device=cuda",
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
    cfg: RunConfig, nproc: int, layout: Layout, host_bytes: int, *, device: str = "cuda"
) -> None:
    """Refuse, on any device, a run whose ranks on this machine offload more bytes to the host
    (:func:`flopsweep.memory.offload_host_bytes`, a lower bound, times the ranks of the node) than the
    machine may use (:func:`flopsweep.hostmem.total_bytes`): it would swap or meet the OOM killer,
    not an ``oom`` status.

    Raises:
        ConfigError: naming the offload key that is on.
    """
    need = memory.offload_host_bytes(cfg, layout) * nproc
    if need <= host_bytes:
        return
    key = next(k for k in OFFLOAD_KEYS if getattr(cfg.backend, k, False) in (True, "cpu"))
    value = getattr(cfg.backend, key)
    raise ConfigError(
        f"backend.{key}",
        value,
        f"offload puts at least {need / 2**30:.1f} GiB of model states of {plural(nproc, 'rank')} in host "
        f"memory, more than {_host_phrase(host_bytes)}",
        "pick a smaller model (e.g. model=gpt-tiny); to ask whether it fits GPUs that are not here, "
        "add plan=true plan_gpu=H100 (offloading on the CPU moves the states nowhere)"
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
    return f"set {picks} {there}" + (", or device=cuda" if device == "cpu" else "")


def _check_placement(cfg: RunConfig, device: str, nproc: int, env: Environment) -> None:
    if cfg.nnodes != 1 and not env.under_slurm:
        raise ConfigError(
            "nnodes",
            cfg.nnodes,
            "only a Slurm job spans nodes; a local run has one",
            "set nnodes=1, or run the sweep with hydra/launcher=slurm; to plan it here add plan=true "
            "(predict.nnodes= and predict.gpus_per_node= predict its step on another cluster)",
        )
    if cfg.batch.name == "auto" and env.in_submitit:
        raise ConfigError(
            "batch",
            "auto",
            "the micro-batch search spawns local probe workers, which a Slurm task cannot",
            "find the size with a local run first, then set batch=fixed batch.micro_batch_size=N",
        )
    if cfg.search.model != "none" and env.in_submitit:
        raise ConfigError(
            "search.model",
            cfg.search.model,
            "the model search spawns local probe workers, which a Slurm task cannot",
            "find the size with a local run first, then set model.n_layer=N search.model=none",
        )
    if device == "cuda":
        if not env.cuda_available:
            raise ConfigError(
                "device", "cuda", "no CUDA GPU is visible", "run on a GPU machine or set device=cpu"
            )
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
