"""Typed config schema, its ConfigStore registration and its validation.

``run.py`` converts Hydra's ``DictConfig`` once into :class:`RunConfig` with
``OmegaConf.to_object`` and calls :func:`validate`. Code below this module sees
only these dataclasses. The YAML option files under ``conf/`` fill them; a key
that is not a field here is an error at composition time, not a silent default.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field

ATTENTION_TYPES = ("standard", "sdpa", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math")
BACKENDS = ("single", "ddp", "fsdp", "deepspeed")
PRECISIONS = ("bf16", "fp16", "fp32")
DEVICES = ("auto", "cuda", "cpu")


class ConfigError(ValueError):
    """An impossible or inconsistent config value.

    The message names the key, the value and the fix, in one paragraph, so that
    the sweep process can print it as is, without a stack trace.
    """

    def __init__(self, key: str, value: object, problem: str, fix: str) -> None:
        self.key, self.value = key, value
        super().__init__(f"Invalid config: {key}={value!r}: {problem}. Fix: {fix}.")


@dataclass(kw_only=True)
class ModelConfig:
    """GPT-2-style decoder (DESIGN.md): learned positions, pre-LayerNorm, GELU MLP of 4h."""

    name: str = "gpt-tiny"
    """Label used in tables, e.g. ``gpt-1.3b``."""
    n_layer: int = 2
    """Transformer blocks ``l``."""
    n_embd: int = 128
    """Hidden size ``h``; must divide by ``n_head``."""
    n_head: int = 4
    """Attention heads; head dim is ``n_embd // n_head``."""
    seq_len: int = 128
    """Tokens per sequence ``s``."""
    vocab_size: int = 512
    """Vocabulary ``V``; the LM head is tied to the token embedding."""


@dataclass(kw_only=True)
class AttentionConfig:
    """How attention is computed."""

    name: str = "sdpa"
    """One of ``standard``, ``sdpa``, ``sdpa-flash``, ``sdpa-cudnn``,
    ``sdpa-efficient``, ``sdpa-math``."""


@dataclass(kw_only=True)
class BackendConfig:
    """Distributed strategy and its tuning knobs (each recorded in metrics.json)."""

    name: str = "single"
    """``single`` (one rank), ``ddp``, ``fsdp`` (FSDP2 ``fully_shard``) or ``deepspeed``."""
    zero_stage: int = 3
    """DeepSpeed ZeRO stage, 1 to 3. Ignored by the other backends."""
    reshard_after_forward: bool = True
    """FSDP2: free gathered parameters after forward (ZeRO-3-like) or keep them."""
    reduce_bucket_size: int | None = None
    """DeepSpeed ``reduce_bucket_size`` in elements; ``None`` means ``h^2``."""
    stage3_prefetch_bucket_size: int | None = None
    """DeepSpeed ZeRO-3 prefetch bucket in elements; ``None`` means ``int(0.9 h^2)``."""
    stage3_param_persistence_threshold: int | None = None
    """DeepSpeed ZeRO-3: parameters smaller than this stay unpartitioned; ``None``: ``10 h``."""
    overlap_comm: bool = True
    """DeepSpeed: overlap gradient reduction with backward."""
    contiguous_gradients: bool = True
    """DeepSpeed: copy gradients into one contiguous buffer as they are produced."""


@dataclass(kw_only=True)
class PrecisionConfig:
    """Mixed-precision policy; the backend maps it to autocast, FSDP2 or DeepSpeed."""

    name: str = "bf16"
    """``bf16``, ``fp16`` (with dynamic loss scaling) or ``fp32``."""


@dataclass(kw_only=True)
class BatchConfig:
    """Per-rank batch: ``micro_batch_size`` sequences, ``grad_accum`` micro steps per optimizer step."""

    name: str = "fixed"
    micro_batch_size: int = 4
    """Sequences per rank per forward/backward."""
    grad_accum: int = 1
    """Micro batches accumulated per optimizer step."""


@dataclass(kw_only=True)
class StepsConfig:
    warmup: int = 2
    """Unmeasured optimizer steps (compilation, allocator warm-up)."""
    measure: int = 5
    """Measured optimizer steps."""


@dataclass(kw_only=True)
class OptimConfig:
    """AdamW settings, the same for every backend."""

    lr: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    """Max global gradient L2 norm."""


@dataclass(kw_only=True)
class RunConfig:
    """One sweep point: the root of the Hydra config (``conf/config.yaml``)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    steps: StepsConfig = field(default_factory=StepsConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    nproc_per_node: str = "auto"
    """Ranks per node: an int, or ``auto`` (the GPU count, else 1)."""
    nnodes: int = 1
    """Nodes (Slurm)."""
    device: str = "auto"
    """``auto`` (cuda when available), ``cuda`` or ``cpu``."""
    activation_checkpointing: bool = False
    """Recompute each block's forward in backward."""
    compile: bool = False
    """``torch.compile`` each transformer block."""
    seed: int = 0
    """Seeds the weights and the synthetic batch."""
    timeout_s: float = 1800.0
    """Seconds a job's workers may run before they are stopped (error: timeout)."""
    tag: str = ""
    """Free-form label copied into the record."""


def register_configs() -> None:
    """Register the schema in Hydra's ConfigStore as ``base_config`` (imported by run.py)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=RunConfig)


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        group = key.split(".")[0]
        raise ConfigError(
            key,
            value,
            f"must be one of {', '.join(allowed)}",
            f"pick one of those, e.g. {group}={allowed[0]}",
        )


def _positive(key: str, value: int, fix: str) -> None:
    if value < 1:
        raise ConfigError(key, value, "must be a positive integer", fix)


def resolve_device(device: str) -> str:
    """Return ``cuda`` or ``cpu`` for a ``device`` setting (``auto``: cuda when available)."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_nproc(nproc_per_node: str, device: str, backend: str = "ddp") -> int:
    """Ranks per node for ``nproc_per_node`` (``auto``: the GPU count on cuda, else 1;
    always 1 for ``backend=single``).

    Raises:
        ConfigError: when the value is neither ``auto`` nor a positive integer.
    """
    if nproc_per_node == "auto":
        if device == "cuda" and backend != "single":
            import torch

            return max(1, torch.cuda.device_count())
        return 1
    try:
        n = int(nproc_per_node)
    except ValueError:
        raise ConfigError(
            "nproc_per_node",
            nproc_per_node,
            "is not an integer",
            "set nproc_per_node=auto or a positive integer such as 2",
        ) from None
    _positive("nproc_per_node", n, "set nproc_per_node=auto or a positive integer such as 2")
    return n


def validate(cfg: RunConfig) -> RunConfig:
    """Check every value and combination before any worker starts.

    Returns a copy with ``device`` resolved to ``cuda``/``cpu`` and
    ``nproc_per_node`` resolved to an integer string.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    m = cfg.model
    for key in ("n_layer", "n_embd", "n_head", "seq_len", "vocab_size"):
        _positive(f"model.{key}", getattr(m, key), f"set model.{key} to a positive integer")
    if m.n_embd % m.n_head:
        raise ConfigError(
            "model.n_embd",
            m.n_embd,
            f"is not divisible by model.n_head={m.n_head}",
            f"choose n_head that divides n_embd, e.g. model.n_head={math.gcd(m.n_embd, 16) or 1}",
        )
    _choice("attention.name", cfg.attention.name, ATTENTION_TYPES)
    _choice("backend.name", cfg.backend.name, BACKENDS)
    _choice("precision.name", cfg.precision.name, PRECISIONS)
    _choice("device", cfg.device, DEVICES)
    if cfg.backend.zero_stage not in (1, 2, 3):
        raise ConfigError(
            "backend.zero_stage",
            cfg.backend.zero_stage,
            "DeepSpeed ZeRO has stages 1, 2 and 3",
            "set backend.zero_stage=1, 2 or 3",
        )
    _validate_sizes(cfg)
    device = resolve_device(cfg.device)
    nproc = resolve_nproc(cfg.nproc_per_node, device, cfg.backend.name)
    _validate_placement(cfg, device, nproc)
    return dataclasses.replace(cfg, device=device, nproc_per_node=str(nproc))


def _validate_sizes(cfg: RunConfig) -> None:
    _positive("batch.micro_batch_size", cfg.batch.micro_batch_size, "set batch.micro_batch_size>=1")
    _positive("batch.grad_accum", cfg.batch.grad_accum, "set batch.grad_accum>=1")
    _positive("steps.measure", cfg.steps.measure, "set steps.measure>=1")
    _positive("nnodes", cfg.nnodes, "set nnodes>=1")
    if cfg.steps.warmup < 0:
        raise ConfigError("steps.warmup", cfg.steps.warmup, "must be >= 0", "set steps.warmup=0 or more")
    if not cfg.timeout_s > 0:
        raise ConfigError("timeout_s", cfg.timeout_s, "must be > 0 seconds", "set e.g. timeout_s=1800")
    o = cfg.optim
    if not (o.lr > 0 and 0 <= o.beta1 < 1 and 0 <= o.beta2 < 1 and o.eps > 0 and o.grad_clip > 0):
        raise ConfigError(
            "optim",
            dataclasses.asdict(o),
            "needs lr>0, 0<=betas<1, eps>0, grad_clip>0",
            "correct the optim.* value that breaks this",
        )
    for key in ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"):
        value = getattr(cfg.backend, key)
        if value is not None and value < 0:
            raise ConfigError(
                f"backend.{key}",
                value,
                "must be >= 0 elements",
                f"set backend.{key}=null for the default or a positive integer",
            )


def _validate_placement(cfg: RunConfig, device: str, nproc: int) -> None:
    world = nproc * cfg.nnodes
    if cfg.nnodes > 1 and os.environ.get("SUBMITIT_EXECUTOR") != "slurm":
        raise ConfigError(
            "nnodes",
            cfg.nnodes,
            "only a Slurm job spans nodes; a local run has one",
            "set nnodes=1, or run the sweep with hydra/launcher=slurm",
        )
    if cfg.backend.name == "single" and world != 1:
        raise ConfigError(
            "backend",
            "single",
            f"runs one rank but nproc_per_node x nnodes = {world}",
            "set nproc_per_node=1, or pick backend=ddp, fsdp or deepspeed",
        )
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(
                "device", "cuda", "no CUDA GPU is visible", "run on a GPU machine or set device=cpu"
            )
        visible = torch.cuda.device_count()
        if nproc > visible and not os.environ.get("SLURM_JOB_ID"):
            raise ConfigError(
                "nproc_per_node",
                nproc,
                f"asks for more ranks than the {visible} visible GPU(s); two ranks must not share a GPU",
                f"set nproc_per_node={visible} or nproc_per_node=auto",
            )
        if cfg.precision.name == "bf16" and not torch.cuda.is_bf16_supported():
            raise ConfigError(
                "precision", "bf16", "this GPU has no bf16 support", "set precision=fp16 or precision=fp32"
            )
    if device == "cpu" and cfg.precision.name == "fp16":
        raise ConfigError(
            "precision",
            "fp16",
            "fp16 loss scaling needs CUDA (no CPU kernels for it)",
            "use precision=bf16 or fp32 on the CPU, or device=cuda",
        )
    if device == "cpu" and cfg.attention.name in ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient"):
        raise ConfigError(
            "attention",
            cfg.attention.name,
            "this SDPA kernel exists only on CUDA",
            "use attention=sdpa, sdpa-math or standard on the CPU",
        )
    if cfg.attention.name == "sdpa-flash" and cfg.precision.name == "fp32":
        raise ConfigError(
            "attention",
            "sdpa-flash",
            "FlashAttention supports only fp16 and bf16",
            "set precision=bf16, or attention=sdpa-efficient for fp32",
        )
