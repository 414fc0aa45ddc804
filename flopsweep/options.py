"""The option schemas: each option's own subclass of its group's base, torch-free.

An option with knobs of its own (``attention=blocksparse``, ``backend=fsdp``, ...) has a
schema here that subclasses its group's base class (:mod:`flopsweep.config`); the registries
(``flopsweep.attention.KERNELS``, ``flopsweep.backends.BACKENDS``, ``flopsweep.precision.PRECISIONS``,
``flopsweep.plan.BATCHES``) name these classes as their spec's ``config``, and
:data:`OPTION_SCHEMAS` lists them by group and registry key, so that
what needs only the schema (Hydra's ConfigStore, ``run.py``'s refusals, the analysis's
column declaration :mod:`flopsweep.columns`) never imports torch. ``tests/unit/test_config.py``
checks that :data:`OPTION_SCHEMAS` is exactly what the registries name.

A model family declares its schema in its own torch-free shape module (``GPT2Config`` in
:mod:`flopsweep.models.gpt2`, ``LlamaConfig``, ``HFConfig``): the ``model`` group's line here is read
from :data:`flopsweep.models.MODELS`, so a new family edits nothing here.

This module imports nothing of flopsweep but :mod:`flopsweep.config` and the torch-free
:mod:`flopsweep.models` (the families' shape modules).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from flopsweep.blocksparse import GLOBAL_BLOCKS, RANDOM_BLOCKS, STRIDE_BLOCKS, WINDOW_BLOCKS
from flopsweep.config import (
    AttentionConfig,
    BackendConfig,
    BatchConfig,
    CheckpointingConfig,
    ModelConfig,
    PrecisionConfig,
)
from flopsweep.models import MODELS


@dataclass(kw_only=True)
class BlockSparseConfig(AttentionConfig):
    """``attention=blocksparse``: only the (query block, key block) pairs of ``layout`` are computed."""

    name: str = "blocksparse"
    block_size: int = 128
    """Tokens per block (query and key blocks alike)."""
    layout: str = "causal"
    """``causal``, ``local``, ``bigbird`` or ``strided`` (flopsweep.blocksparse)."""
    window_blocks: int = WINDOW_BLOCKS
    """``local`` and ``bigbird``: blocks in the sliding window, the diagonal included."""
    global_blocks: int = GLOBAL_BLOCKS
    """``bigbird``: leading blocks that every block sees and that see every block."""
    random_blocks: int = RANDOM_BLOCKS
    """``bigbird``: extra earlier blocks per query block, drawn from ``seed``."""
    stride_blocks: int = STRIDE_BLOCKS
    """``strided``: blocks per chunk; the last block of each chunk is its summary."""
    impl: str = "auto"
    """``flex`` (FlexAttention BlockMask, CUDA), ``gather`` (plain PyTorch) or ``auto`` (flex on
    CUDA, gather on the CPU). Validation replaces ``auto`` by the one used."""
    seed: int | None = None
    """``bigbird``: seed of the random blocks; null takes the run's ``seed``."""


@dataclass(kw_only=True)
class FSDPConfig(BackendConfig):
    """``backend=fsdp``: FSDP2 ``fully_shard`` per block, then the root."""

    name: str = "fsdp"
    reshard_after_forward: bool = True
    """Free gathered parameters after forward (ZeRO-3-like) or keep them until backward."""
    cpu_offload: bool = False
    """FSDP2 ``CPUOffloadPolicy``: the sharded fp32 parameters, their gradients and the AdamW states
    live on the host; each block's shard is copied to the device for its all-gather, and the
    optimizer step runs on the CPU."""
    end_units: bool = False
    """The token embedding, and the final norm with the LM head, as FSDP2 units of their own
    (torchtitan's ``apply_fsdp``) instead of in the root's group, which stays gathered from forward
    to the end of backward: the embedding resharded after forward, the head's gradients
    reduce-scattered early in backward (:mod:`flopsweep.fsdp_units`; an untied llama model, no
    ``loss.chunk_tokens``, ``parallel.pp`` or ``parallel.tp``)."""


OFFLOAD_DEVICES = ("none", "cpu", "nvme")
"""Values of ``backend.offload_optimizer`` and ``backend.offload_param`` (DeepSpeed's ``device``)."""

OPTIMIZER_IMPLS = ("fused", "torch")
"""Values of ``backend.optimizer_impl``: DeepSpeed's ``FusedAdam``, or ``torch.optim.AdamW``."""


@dataclass(kw_only=True)
class DeepSpeedConfig(BackendConfig):
    """``backend=deepspeed`` (and the ``zero1``/``zero2``/``zero3`` shorthands): DeepSpeed ZeRO."""

    name: str = "deepspeed"
    zero_stage: int = 3
    """ZeRO stage, 1 to 3."""
    # The three sizes are typed float so that ``5e8`` parses; the backend check turns a whole
    # number into an int and rejects a fraction, so that DeepSpeed's own (pydantic) check
    # never fails inside deepspeed.initialize on every rank.
    reduce_bucket_size: float | None = None
    """``reduce_bucket_size`` in elements (a whole number); ``None`` means ``h^2``."""
    stage3_prefetch_bucket_size: float | None = None
    """ZeRO-3 prefetch bucket in elements (a whole number); ``None`` means ``int(0.9 h^2)``."""
    stage3_param_persistence_threshold: float | None = None
    """ZeRO-3: parameters with fewer elements stay unpartitioned; ``None``: ``10 h``."""
    overlap_comm: bool = True
    """Overlap gradient reduction with backward."""
    contiguous_gradients: bool = True
    """Copy gradients into one contiguous buffer as they are produced."""
    stage3_max_live_parameters: float | None = None
    """ZeRO-3: most parameters (elements) gathered at once before release; ``None``: DeepSpeed's 1e9."""
    stage3_max_reuse_distance: float | None = None
    """ZeRO-3: keep a gathered parameter when it is reused within this many elements; ``None``: 1e9."""
    sub_group_size: float | None = None
    """ZeRO-3: the optimizer steps over sub-groups of this many elements; ``None``: DeepSpeed's 1e9."""
    optimizer_impl: str = "fused"
    """``fused``: DeepSpeed's FusedAdam (CUDA); ``torch``: ``torch.optim.AdamW`` (always on the CPU)."""
    offload_optimizer: str = "none"
    """ZeRO-Offload (:data:`OFFLOAD_DEVICES`): ``cpu`` keeps the fp32 master weights, gradients and
    AdamW states on the host and steps there (DeepSpeedCPUAdam, or ``torch.optim.AdamW`` with
    ``optimizer_impl=torch``); ``nvme`` keeps them under ``nvme_path`` (ZeRO-Infinity, stage 3)."""
    offload_param: str = "none"
    """ZeRO-3 only (:data:`OFFLOAD_DEVICES`): the 16-bit parameter partitions on the host (``cpu``) or
    under ``nvme_path`` (``nvme``), fetched for each gather."""
    nvme_path: str | None = None
    """A folder on an NVMe drive for ``nvme`` offload; required by it."""
    deepcompile: bool = False
    """DeepCompile (DeepSpeed >= 0.16.6): ``compile: {deepcompile: true}`` and ``engine.compile()``,
    which compiles the whole model with ZeRO's gathers and reductions in the graph. CUDA, ZeRO-1
    or 3; replaces ``compile=true`` (the per-block compile), so the two are not combined."""
    zero_hpz_partition_size: int = 1
    """ZeRO++ hpZ (ZeRO-3): ranks of each secondary partition of the weights, usually the GPUs of a
    node, so that the backward all-gathers stay inside a node; 1: off. Must divide the world size."""
    zero_quantized_weights: bool = False
    """ZeRO++ qwZ (ZeRO-3): all-gather the weights quantized to int8."""
    zero_quantized_gradients: bool = False
    """ZeRO++ qgZ (ZeRO-3): reduce-scatter the gradients quantized to int4 (all-to-all based)."""


@dataclass(kw_only=True)
class Fp8Config(PrecisionConfig):
    """``precision=fp8`` / ``fp8-rowwise``: torchao float8 training on top of bf16."""

    name: str = "fp8"
    fp8_all_gather: bool = False
    """FSDP2 only, tensorwise only: all-gather the parameters in float8 (half the bytes of bf16)
    and precompute their dynamic scales after each optimizer step."""


@dataclass(kw_only=True)
class AutoBatchConfig(BatchConfig):
    """``batch=auto``: search the largest micro batch that fits, starting at ``micro_batch_size``."""

    name: str = "auto"
    micro_batch_size: int = 1
    max_micro_batch_size: int = 256
    """The search never probes above this."""


@dataclass(kw_only=True)
class EveryNConfig(CheckpointingConfig):
    """``activation_checkpointing=every_n``: ``full`` on every ``every``-th block (blocks
    ``every - 1``, ``2 every - 1``, ... counted from 0), the others keep their activations."""

    name: str = "every_n"
    every: int = 2
    """Checkpoint one block in ``every`` (a whole number >= 1; 1 is ``full``)."""


@dataclass(kw_only=True)
class MemoryBudgetConfig(CheckpointingConfig):
    """``activation_checkpointing=memory_budget``: ``torch._functorch.config.activation_memory_budget``
    while compiled blocks compile (``compile=true`` only)."""

    name: str = "memory_budget"
    budget: float = 0.5
    """Share of the default partitioner's activation memory to keep, 0..1 (0: recompute all it can,
    as full checkpointing; 1: the default, no extra recompute)."""


GROUP_BASES: dict[str, type] = {
    "model": ModelConfig,
    "attention": AttentionConfig,
    "backend": BackendConfig,
    "precision": PrecisionConfig,
    "batch": BatchConfig,
    "activation_checkpointing": CheckpointingConfig,
}
"""The config groups whose options are picked as ``group=option``, and each group's base schema."""

GROUP_KEY: dict[str, str] = {"model": "arch"}
"""The key of a group's node that names its registry entry: ``model.arch``; ``<group>.name`` elsewhere."""

OPTION_SCHEMAS: dict[str, dict[str, type]] = {
    "model": {arch: family.config for arch, family in MODELS.items()},  # each family declares its own
    "attention": {"blocksparse": BlockSparseConfig},
    "backend": {"fsdp": FSDPConfig, "deepspeed": DeepSpeedConfig},
    "precision": {"fp8": Fp8Config, "fp8-rowwise": Fp8Config},
    "batch": {"auto": AutoBatchConfig},
    "activation_checkpointing": {"every_n": EveryNConfig, "memory_budget": MemoryBudgetConfig},
}
"""Each group's registry keys whose schema is not the group's base (:data:`GROUP_BASES`): the
options with knobs of their own. Every other option of the group has the base schema."""


def base_keys(group: str) -> set[str]:
    """The keys every option of ``group`` has: its base schema's fields."""
    return {f.name for f in dataclasses.fields(GROUP_BASES[group])}


def owners(group: str, key: str) -> list[str]:
    """The registry keys of the options of ``group`` with a schema of their own that has ``key``
    (``attention``, ``window_blocks`` -> ``["blocksparse"]``); empty for a key of the group's
    base (every option has it) and for a key no option has."""
    if key in base_keys(group):
        return []
    return [
        name
        for name, schema in OPTION_SCHEMAS[group].items()
        if key in {f.name for f in dataclasses.fields(schema)}
    ]


def schema_nodes() -> dict[tuple[str, str], type]:
    """``{(group, "base_<option>"): schema}``: each distinct option schema once, named after the
    first registry key that has it (``precision``'s ``fp8`` and ``fp8-rowwise`` share ``base_fp8``)."""
    nodes: dict[tuple[str, str], type] = {}
    for group, options in OPTION_SCHEMAS.items():
        seen: set[type] = set()
        for name, schema in options.items():
            if schema not in seen:
                seen.add(schema)
                nodes[(group, f"base_{name}")] = schema
    return nodes
