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

ATTENTION_TYPES = (
    "standard",
    "sdpa",
    "sdpa-flash",
    "sdpa-cudnn",
    "sdpa-efficient",
    "sdpa-math",
    "flex",
    "blocksparse",
    "xformers",
)
BLOCK_LAYOUTS = ("causal", "local", "bigbird", "strided")
BLOCKSPARSE_IMPLS = ("auto", "flex", "gather")
BACKENDS = ("single", "ddp", "fsdp", "deepspeed")
PRECISIONS = ("bf16", "fp16", "fp32")
DEVICES = ("auto", "cuda", "cpu")
BATCH_KINDS = ("fixed", "auto")
FAULT_KINDS = ("none", "oom", "raise", "kill", "hang")
FAULT_PHASES = ("init", "warmup", "measure")
MAX_SEED = 2**32


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
    """One of ``standard``, ``sdpa``, ``sdpa-flash``, ``sdpa-cudnn``, ``sdpa-efficient``,
    ``sdpa-math``, ``flex``, ``blocksparse``, ``xformers``."""
    block_size: int = 128
    """``blocksparse``: tokens per block (query and key blocks alike)."""
    layout: str = "causal"
    """``blocksparse``: ``causal``, ``local``, ``bigbird`` or ``strided`` (flopsweep.blocksparse)."""
    window_blocks: int = 4
    """``blocksparse`` ``local`` and ``bigbird``: blocks in the sliding window, the diagonal included."""
    global_blocks: int = 1
    """``blocksparse`` ``bigbird``: leading blocks that every block sees and that see every block."""
    random_blocks: int = 2
    """``blocksparse`` ``bigbird``: extra earlier blocks per query block, drawn from ``seed``."""
    stride_blocks: int = 4
    """``blocksparse`` ``strided``: blocks per chunk; the last block of each chunk is its summary."""
    impl: str = "auto"
    """``blocksparse``: ``flex`` (FlexAttention BlockMask, CUDA), ``gather`` (plain PyTorch) or
    ``auto`` (flex on CUDA, gather on the CPU). Validation replaces ``auto`` by the one used."""
    seed: int | None = None
    """``blocksparse`` ``bigbird``: seed of the random blocks; null takes the run's ``seed``."""
    density: float | None = None
    """Set by validation, not by hand: the fraction of (query block, key block) pairs computed
    (1.0 for the dense kernels)."""


@dataclass(kw_only=True)
class BackendConfig:
    """Distributed strategy and its tuning knobs (each recorded in metrics.json)."""

    name: str = "single"
    """``single`` (one rank), ``ddp``, ``fsdp`` (FSDP2 ``fully_shard``) or ``deepspeed``."""
    zero_stage: int = 3
    """DeepSpeed ZeRO stage, 1 to 3. Ignored by the other backends."""
    reshard_after_forward: bool = True
    """FSDP2: free gathered parameters after forward (ZeRO-3-like) or keep them."""
    # The three DeepSpeed sizes are typed float so that ``5e8`` parses; validate()
    # turns a whole number into an int and rejects a fraction, so that DeepSpeed's
    # own (pydantic) check never fails inside deepspeed.initialize on every rank.
    reduce_bucket_size: float | None = None
    """DeepSpeed ``reduce_bucket_size`` in elements (a whole number); ``None`` means ``h^2``."""
    stage3_prefetch_bucket_size: float | None = None
    """DeepSpeed ZeRO-3 prefetch bucket in elements (a whole number); ``None`` means ``int(0.9 h^2)``."""
    stage3_param_persistence_threshold: float | None = None
    """DeepSpeed ZeRO-3: parameters with fewer elements stay unpartitioned; ``None``: ``10 h``."""
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
    """``fixed``: use ``micro_batch_size``; ``auto``: search the largest that fits,
    starting from ``micro_batch_size`` (``flopsweep.autobatch``)."""
    micro_batch_size: int = 4
    """Sequences per rank per forward/backward (``auto``: where the search starts)."""
    grad_accum: int = 1
    """Micro batches accumulated per optimizer step."""
    max_micro_batch_size: int = 256
    """``auto`` only: the search never probes above this."""


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
class FaultConfig:
    """Test-only fault injection: make one rank fail on purpose at the start of a phase.

    The failure tests use it to check that every outcome becomes a record. ``kind``
    ``none`` (the default) injects nothing.
    """

    kind: str = "none"
    """``none``; ``oom`` raises ``torch.OutOfMemoryError``; ``raise`` raises ``InjectedFault``
    (a RuntimeError); ``kill`` sends SIGKILL to the rank itself; ``hang`` blocks forever
    (the job's ``timeout_s`` stops it)."""
    rank: int = 0
    """Global rank that fails, ``0 <= rank < world size``."""
    phase: str = "measure"
    """``init`` (before the process group), ``warmup`` or ``measure`` (before the first step)."""


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
    resume: bool = False
    """Skip a job whose directory already holds an ``ok`` metrics.json for the same config;
    move any other old record aside (``metrics.<status>-<run id>.json``) and run again."""
    fail_fast: bool = False
    """Stop the sweep after the first job that is not ``ok`` (that job is recorded first)."""
    fault: FaultConfig = field(default_factory=FaultConfig)
    """Test-only fault injection; see :class:`FaultConfig`."""


RUN_CONTROL_KEYS = ("timeout_s", "resume", "fail_fast", "fault")
"""Keys that steer a run but do not change what it measures; ``resume`` ignores them
when it compares a job's config with the config of an existing record. (An ``ok``
record always ran without a fault: every injected fault fails its run.)"""


def register_configs() -> None:
    """Register the schema in Hydra's ConfigStore as ``base_config`` (imported by run.py)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=RunConfig)


def _choice(key: str, value: str, allowed: tuple[str, ...], example_key: str | None = None) -> None:
    """Raise unless ``value`` is in ``allowed``; the fix names the group option (``attention=sdpa``)."""
    if value not in allowed:
        example = example_key or key.removesuffix(".name")
        raise ConfigError(
            key,
            value,
            f"must be one of {', '.join(allowed)}",
            f"pick one of those, e.g. {example}={allowed[0]}",
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

    Returns a copy with ``device`` resolved to ``cuda``/``cpu``, ``nproc_per_node``
    resolved to an integer string and the DeepSpeed sizes made ``int``.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    _reject_unknown_keys(cfg)
    _validate_model(cfg.model)
    _choice("attention.name", cfg.attention.name, ATTENTION_TYPES)
    _choice("backend.name", cfg.backend.name, BACKENDS)
    _choice("precision.name", cfg.precision.name, PRECISIONS)
    _choice("batch.name", cfg.batch.name, BATCH_KINDS)
    _choice("device", cfg.device, DEVICES, example_key="device")
    if cfg.backend.zero_stage not in (1, 2, 3):
        raise ConfigError(
            "backend.zero_stage",
            cfg.backend.zero_stage,
            "DeepSpeed ZeRO has stages 1, 2 and 3",
            "set backend.zero_stage=1, 2 or 3",
        )
    backend = _whole_deepspeed_sizes(cfg.backend)
    _validate_sizes(cfg)
    _validate_optim(cfg.optim)
    device = resolve_device(cfg.device)
    nproc = resolve_nproc(cfg.nproc_per_node, device, cfg.backend.name)
    _validate_placement(cfg, device, nproc)
    attention = _validate_attention(cfg, device)
    _validate_fault(cfg.fault, nproc * cfg.nnodes)
    return dataclasses.replace(
        cfg, device=device, nproc_per_node=str(nproc), backend=backend, attention=attention
    )


def _reject_unknown_keys(node: object, prefix: str = "") -> None:
    """Refuse attributes that are not schema fields.

    Hydra's ``+key=value`` and ``++key=value`` add keys past the schema's struct
    check, and ``OmegaConf.to_object`` then sets them as plain attributes: a typo
    such as ``+model.n_layers=3`` would be ignored in silence, and a
    ``+model._target_=...`` would ride along. Both stop here; nothing in flopsweep
    instantiates config values.
    """
    names = [f.name for f in dataclasses.fields(node)]
    for key, value in vars(node).items():
        if key not in names:
            raise ConfigError(
                f"{prefix}{key}",
                value,
                "is not a key of the config schema (a '+' override adds keys without checking them)",
                f"remove it; the keys here are {', '.join(names)}",
            )
        if dataclasses.is_dataclass(value):
            _reject_unknown_keys(value, f"{prefix}{key}.")


def _validate_model(m: ModelConfig) -> None:
    for key in ("n_layer", "n_embd", "n_head", "seq_len", "vocab_size"):
        _positive(f"model.{key}", getattr(m, key), f"set model.{key} to a positive integer")
    if m.n_embd % m.n_head:
        raise ConfigError(
            "model.n_embd",
            m.n_embd,
            f"is not divisible by model.n_head={m.n_head}",
            f"choose n_head that divides n_embd, e.g. model.n_head={math.gcd(m.n_embd, 16) or 1}",
        )


def _whole_deepspeed_sizes(backend: BackendConfig) -> BackendConfig:
    """The DeepSpeed sizes as ``int`` (``5e8`` -> 500000000); a fraction or a negative is an error."""
    sizes = {}
    for key in ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"):
        value = getattr(backend, key)
        if value is None:
            continue
        if not (math.isfinite(value) and value == int(value)):
            whole = f"={int(value)}" if math.isfinite(value) else " to a whole number"
            raise ConfigError(
                f"backend.{key}",
                value,
                "DeepSpeed needs a whole number of elements",
                f"set backend.{key}{whole}, or null for the default",
            )
        if value < 0:
            raise ConfigError(
                f"backend.{key}",
                value,
                "must be >= 0 elements",
                f"set backend.{key}=null for the default or a positive integer",
            )
        sizes[key] = int(value)
    return dataclasses.replace(backend, **sizes)


def _validate_sizes(cfg: RunConfig) -> None:
    _positive("batch.micro_batch_size", cfg.batch.micro_batch_size, "set batch.micro_batch_size>=1")
    _positive("batch.grad_accum", cfg.batch.grad_accum, "set batch.grad_accum>=1")
    if cfg.batch.max_micro_batch_size < cfg.batch.micro_batch_size:
        raise ConfigError(
            "batch.max_micro_batch_size",
            cfg.batch.max_micro_batch_size,
            f"is below batch.micro_batch_size={cfg.batch.micro_batch_size}",
            "raise batch.max_micro_batch_size or lower batch.micro_batch_size",
        )
    _positive("steps.measure", cfg.steps.measure, "set steps.measure>=1")
    _positive("nnodes", cfg.nnodes, "set nnodes=1")
    if cfg.steps.warmup < 0:
        raise ConfigError("steps.warmup", cfg.steps.warmup, "must be >= 0", "set steps.warmup=0 or more")
    if not (cfg.timeout_s > 0 and math.isfinite(cfg.timeout_s)):
        raise ConfigError(
            "timeout_s", cfg.timeout_s, "must be a finite number of seconds > 0", "set e.g. timeout_s=1800"
        )
    if not 0 <= cfg.seed < MAX_SEED:
        raise ConfigError(
            "seed", cfg.seed, "must be in [0, 2**32) (it seeds torch generators)", "set e.g. seed=0"
        )


def _validate_optim(o: OptimConfig) -> None:
    """AdamW settings: finite, with lr, eps and grad_clip > 0, betas in [0, 1), weight decay >= 0."""
    checks = {
        "lr": o.lr > 0,
        "eps": o.eps > 0,
        "grad_clip": o.grad_clip > 0,
        "beta1": 0 <= o.beta1 < 1,
        "beta2": 0 <= o.beta2 < 1,
        "weight_decay": o.weight_decay >= 0,
    }
    examples = {
        "lr": "1e-4",
        "eps": "1e-8",
        "grad_clip": "1.0",
        "beta1": "0.9",
        "beta2": "0.95",
        "weight_decay": "0.1",
    }
    for key, ok in checks.items():
        value = getattr(o, key)
        if not (ok and math.isfinite(value)):
            raise ConfigError(
                f"optim.{key}",
                value,
                "is out of range for AdamW (lr, eps, grad_clip > 0; betas in [0, 1); "
                "weight_decay >= 0; all finite)",
                f"set e.g. optim.{key}={examples[key]}",
            )


def _validate_fault(fault: FaultConfig, world: int) -> None:
    _choice("fault.kind", fault.kind, FAULT_KINDS, example_key="fault.kind")
    _choice("fault.phase", fault.phase, FAULT_PHASES, example_key="fault.phase")
    if fault.kind != "none" and not 0 <= fault.rank < world:
        raise ConfigError(
            "fault.rank",
            fault.rank,
            f"is not a rank of this run (world size {world})",
            f"set fault.rank to 0..{world - 1}",
        )


def _validate_placement(cfg: RunConfig, device: str, nproc: int) -> None:
    world = nproc * cfg.nnodes
    if cfg.nnodes != 1 and os.environ.get("SUBMITIT_EXECUTOR") != "slurm":
        raise ConfigError(
            "nnodes",
            cfg.nnodes,
            "only a Slurm job spans nodes; a local run has one",
            "set nnodes=1, or run the sweep with hydra/launcher=slurm",
        )
    if cfg.batch.name == "auto" and os.environ.get("SUBMITIT_EXECUTOR"):
        raise ConfigError(
            "batch",
            "auto",
            "the micro-batch search spawns local probe workers, which a Slurm task cannot",
            "find the size with a local run first, then set batch=fixed batch.micro_batch_size=N",
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


def _validate_attention(cfg: RunConfig, device: str) -> AttentionConfig:
    """Check that the attention kernel can run on ``device`` at this precision.

    Returns:
        The attention config with ``impl`` (``blocksparse``), ``seed`` and ``density`` resolved.
    """
    a = cfg.attention
    if device == "cpu" and a.name in ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient"):
        raise ConfigError(
            "attention",
            a.name,
            "this SDPA kernel exists only on CUDA",
            "use attention=sdpa, sdpa-math or standard on the CPU",
        )
    if a.name == "sdpa-flash" and cfg.precision.name == "fp32":
        raise ConfigError(
            "attention",
            "sdpa-flash",
            "FlashAttention supports only fp16 and bf16",
            "set precision=bf16, or attention=sdpa-efficient for fp32",
        )
    if a.name == "flex" and device == "cpu":
        raise ConfigError(
            "attention",
            "flex",
            "FlexAttention has no backward pass on the CPU (torch 2.13)",
            "run it with device=cuda, or use attention=blocksparse attention.layout=causal "
            "(impl gather) on the CPU",
        )
    if a.name == "xformers":
        _validate_xformers(device)
    if a.name == "blocksparse":
        a = _validate_blocksparse(a, device, cfg.seed, cfg.model.seq_len)
    elif a.impl != "auto":
        raise ConfigError(
            "attention.impl",
            a.impl,
            "applies only to attention=blocksparse",
            "drop the attention.impl override, or set attention=blocksparse",
        )
    elif a.layout != "causal":
        raise ConfigError(
            "attention.layout",
            a.layout,
            f"applies only to attention=blocksparse (attention={a.name} is dense and causal)",
            f"drop the attention.layout override, or set attention=blocksparse attention.layout={a.layout}",
        )
    from flopsweep.attention import attention_density

    density = attention_density(a, cfg.model.seq_len)
    if a.density is not None and abs(a.density - density) > 1e-12:
        raise ConfigError(
            "attention.density",
            a.density,
            f"is derived from the layout ({density:.6g} here), not set by hand",
            "drop the attention.density override",
        )
    return dataclasses.replace(a, density=density)


def _validate_xformers(device: str) -> None:
    """xformers must be installed and on CUDA; whether its kernels load is probed by each worker."""
    if device == "cpu":
        raise ConfigError(
            "attention",
            "xformers",
            "xformers' memory_efficient_attention has CUDA kernels only",
            "run it with device=cuda, or use attention=sdpa-math or sdpa on the CPU",
        )
    import importlib.util

    if importlib.util.find_spec("xformers") is None:
        raise ConfigError(
            "attention",
            "xformers",
            "the xformers package is not installed",
            "pip install an xformers build that matches this torch and CUDA "
            "(pip install -e '.[xformers]'), or pick another attention",
        )


def _validate_blocksparse(a: AttentionConfig, device: str, run_seed: int, seq_len: int) -> AttentionConfig:
    """Check the layout options and resolve ``impl=auto`` (flex on CUDA, gather on the CPU)."""
    _choice("attention.layout", a.layout, BLOCK_LAYOUTS)
    _choice("attention.impl", a.impl, BLOCKSPARSE_IMPLS)
    for key in ("block_size", "window_blocks", "stride_blocks"):
        _positive(f"attention.{key}", getattr(a, key), f"set attention.{key} to a positive integer")
    for key in ("global_blocks", "random_blocks"):
        if getattr(a, key) < 0:
            raise ConfigError(
                f"attention.{key}", getattr(a, key), "must be >= 0 blocks", f"set attention.{key}=0 or more"
            )
    if a.block_size > seq_len:
        raise ConfigError(
            "attention.block_size",
            a.block_size,
            f"is longer than the sequence (model.seq_len={seq_len}): one padded block, nothing sparse",
            f"set attention.block_size to at most {seq_len}, or attention=sdpa",
        )
    if a.seed is not None and not 0 <= a.seed < MAX_SEED:
        raise ConfigError(
            "attention.seed",
            a.seed,
            "must be in [0, 2**32) (it seeds bigbird's random blocks)",
            "set e.g. attention.seed=0, or null to take the run's seed",
        )
    impl = a.impl if a.impl != "auto" else ("flex" if device == "cuda" else "gather")
    if impl == "flex" and device == "cpu":
        raise ConfigError(
            "attention.impl",
            "flex",
            "FlexAttention has no backward pass on the CPU (torch 2.13)",
            "set attention.impl=gather (or auto) on the CPU, or run with device=cuda",
        )
    if impl == "flex" and a.block_size % 128:
        raise ConfigError(
            "attention.block_size",
            a.block_size,
            "impl=flex needs a multiple of 128 tokens (FlexAttention's sparse block)",
            "set attention.block_size=128 or 256, or attention.impl=gather",
        )
    return dataclasses.replace(a, impl=impl, seed=run_seed if a.seed is None else a.seed)
