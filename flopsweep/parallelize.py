"""One ``parallelize()``: the steps that make this rank's module of a run, in one fixed order.

torchtitan's ``parallelize_llama`` (``torchtitan/models/llama3/infra/parallelize.py``) applies tensor
parallel, context parallel, activation checkpointing, ``torch.compile`` and FSDP, in that order, each
step a function of its own config slice. :func:`parallelize` does the same for every backend:

1. tensor parallel (:func:`apply_tensor_parallel`: the family's plan on the ``tp`` sub-mesh);
2. context parallel (:func:`apply_context_parallel`: not built, ``parallel.cp > 1`` is refused before launch);
3. expert parallel (:func:`apply_expert_parallel`: not built, ``parallel.ep > 1`` is refused before launch);
4. activation checkpointing (:func:`apply_checkpointing`: the policy wraps each block);
5. compile (:func:`apply_compile`: each wrapped block, and the loss head);
6. the pipeline split (``parallel.pp > 1``: this rank's stage, :func:`flopsweep.pipeline.split_stage`);
7. data parallel: the backend's wrapper (:func:`fsdp` each block then the root, HSDP on a 2-D mesh;
   :func:`ddp`; DeepSpeed's engine, :func:`flopsweep.deepspeed_backend.build_deepspeed`; none for
   ``single``).

Why this order: the tensor-parallel plan names the whole model's submodules, so it comes first
(torchtitan's too); checkpointing wraps the blocks the plan made, so that the recompute re-runs
their collectives; compile comes after checkpointing so that the recompute sits inside the compiled
graph, where Inductor fuses it; FSDP2's and ZeRO-3's hooks stay outside the compiled regions, so the
data-parallel wrapper comes last. The pipeline split comes after compile and before FSDP2 (torchtitan
splits first): every stage is cut from a whole model built from the run's seed, tensor-parallel with
the whole model's plan, so each stage holds the same weights and shards as the one-rank model.

Each step takes the slice of the config or layout it needs, and a step whose degree is 1 leaves the
model as it is. A new degree is one more step here (and a :data:`flopsweep.layout.DEGREE_SPECS` line).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from flopsweep import checkpointing, tensor_parallel
from flopsweep import precision as fprecision
from flopsweep.config import CheckpointingConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.models import ModelFamily, family
from flopsweep.options import FSDPConfig

DataParallel = Callable[[nn.Module], nn.Module]
"""The last step: a backend's data-parallel wrapper, ``module -> module``."""


def parallelize(
    model: nn.Module,
    cfg: RunConfig,
    layout: Layout,
    *,
    mesh: Any = None,
    split: Callable[[nn.Module], nn.Module] | None = None,
    data_parallel: DataParallel | None = None,
) -> nn.Module:
    """``model`` (built by :func:`make_model`) with every step of the module docstring applied, in order.

    Args:
        layout: the run's degrees; ``tp``, ``cp`` and ``ep`` pick the model-parallel steps.
        mesh: the world mesh (:func:`flopsweep.mesh.build_mesh`); needed when ``layout.tp > 1``.
        split: the pipeline step, ``model -> this rank's stage`` (``layout.pp > 1``); None: no pipeline.
        data_parallel: the backend's data-parallel wrapper (:func:`fsdp`, :func:`ddp`); None: none.

    Returns:
        The module this rank trains (or its pipeline stage), possibly ``model`` itself.
    """
    fam = family(cfg.model)
    model = apply_tensor_parallel(model, fam, mesh, tp=layout.tp)
    model = apply_context_parallel(model, cp=layout.cp)
    model = apply_expert_parallel(model, ep=layout.ep)
    model = wrap_blocks(model, cfg)
    if split is not None:
        model = split(model)
    return data_parallel(model) if data_parallel is not None else model


def make_model(cfg: RunConfig, device: torch.device | None) -> nn.Module:
    """The bare model of ``cfg.model``'s family in fp32, initialised from ``cfg.seed`` (the same
    weights on every rank), converted for fp8 when the precision asks for it; before any step.

    ``device=None`` builds without a device context, as ``deepspeed.zero.Init`` wants (it places
    each parameter partition on the accelerator itself)."""
    torch.manual_seed(cfg.seed)
    with device if device is not None else contextlib.nullcontext():
        model = family(cfg.model).build(cfg.model, cfg.attention)
    fprecision.prepare_model(model, cfg.precision)
    return model


def build_model(cfg: RunConfig, device: torch.device | None) -> nn.Module:
    """:func:`make_model`, then checkpointed and compiled per block (:func:`wrap_blocks`): the
    one-rank model as ``single`` trains it."""
    return wrap_blocks(make_model(cfg, device), cfg)


def wrap_blocks(model: nn.Module, cfg: RunConfig) -> nn.Module:
    """Steps 4 and 5: :func:`apply_checkpointing`, then :func:`apply_compile`, on the family's blocks
    as found before the policy wraps them (``hf`` finds its blocks by their class)."""
    blocks = family(cfg.model).blocks(model)
    apply_checkpointing(blocks, cfg.activation_checkpointing)
    return apply_compile(model, blocks, enabled=cfg.compile)


def apply_tensor_parallel(model: nn.Module, fam: ModelFamily, mesh: Any, *, tp: int) -> nn.Module:
    """Step 1: the family's tensor- and sequence-parallel plan on ``mesh["tp"]`` when ``tp > 1``
    (:func:`flopsweep.tensor_parallel.apply`); ``model`` unchanged otherwise."""
    if tp == 1:
        return model
    from flopsweep import mesh as fmesh

    return tensor_parallel.apply(model, fam, fmesh.tp_mesh(mesh))


def apply_context_parallel(model: nn.Module, *, cp: int) -> nn.Module:
    """Step 2: context parallelism, not built (``parallel.cp > 1`` is refused before launch,
    :func:`flopsweep.layout.check_built`).

    Raises:
        NotImplementedError: when ``cp > 1`` reaches a rank anyway.
    """
    if cp > 1:
        raise NotImplementedError("context parallelism (parallel.cp > 1) is not built")
    return model


def apply_expert_parallel(model: nn.Module, *, ep: int) -> nn.Module:
    """Step 3: expert parallelism, not built (``parallel.ep > 1`` is refused before launch,
    :func:`flopsweep.layout.check_built`).

    Raises:
        NotImplementedError: when ``ep > 1`` reaches a rank anyway.
    """
    if ep > 1:
        raise NotImplementedError("expert parallelism (parallel.ep > 1) is not built")
    return model


def apply_checkpointing(blocks: Any, policy: CheckpointingConfig) -> None:
    """Step 4: the activation checkpointing policy wraps ``blocks``, the family's ``ModuleList``
    (:mod:`flopsweep.checkpointing`; ``full``: non-reentrant ``checkpoint_wrapper`` per block).
    ``memory_budget`` sets ``torch._functorch.config.activation_memory_budget`` for the process
    instead of wrapping: the
    partitioner reads it when a block compiles, at the first step; a rank is its own process, so
    the setting stays for the run (the rules refuse it without compile)."""
    checkpointing.policy(policy).apply(blocks, policy)  # replaces the entries of ``blocks``
    for key, value in checkpointing.compiler_settings(policy).items():
        import torch._functorch.config as functorch_config

        setattr(functorch_config, key, value)


def apply_compile(model: nn.Module, blocks: Any, *, enabled: bool) -> nn.Module:
    """Step 5 (``compile=true``): ``torch.compile`` each of ``blocks``, as wrapped by step 4, and the loss
    head, as torchtitan does: the recompute sits inside the compiled graph, identical blocks share
    one compiled graph, and FSDP2/ZeRO-3 hooks stay outside the compiled regions. (Outside
    ``deepspeed.zero.Init``: its module hooks do not know the wrapper.)"""
    if not enabled:
        return model
    for block in blocks:
        block.compile()
    model.head_loss = torch.compile(model.head_loss)
    return model


def fsdp(cfg: RunConfig, dp_mesh: Any) -> DataParallel:
    """Step 7 of ``backend=fsdp``: ``fully_shard`` each block, then the root, over ``dp_mesh`` (1-D
    ``dp_shard``, or 2-D ``(dp_replicate, dp_shard)``: HSDP) with one ``MixedPrecisionPolicy``
    (params in the run's precision, gradients reduced in fp32) and ``backend.cpu_offload``'s policy.
    The blocks are the family's, or a pipeline stage's own (:class:`flopsweep.pipeline.StageModule`)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from flopsweep.pipeline import StageModule

    mp = MixedPrecisionPolicy(param_dtype=fprecision.DTYPES[cfg.precision.name], reduce_dtype=torch.float32)
    offload = _fsdp_offload(cfg.backend, dp_mesh.device_type)
    reshard = cfg.backend.reshard_after_forward

    def shard(model: nn.Module) -> nn.Module:
        stage = isinstance(model, StageModule)
        blocks = list(model.layers.values()) if stage else family(cfg.model).blocks(model)
        for i, block in enumerate(blocks):
            # The last block's backward runs right after forward: keeping it unsharded
            # saves one all-gather per step (torchtitan does the same).
            last = i == len(blocks) - 1
            fully_shard(
                block,
                mesh=dp_mesh,
                mp_policy=mp,
                offload_policy=offload,
                reshard_after_forward=reshard and not last,
            )
        fully_shard(model, mesh=dp_mesh, mp_policy=mp, offload_policy=offload, reshard_after_forward=reshard)
        return model

    return shard


def shard_data_parallel(model: nn.Module, cfg: RunConfig, dp_mesh: Any) -> nn.Module:
    """:func:`fsdp`'s step applied to ``model`` (FSDP2; HSDP on a 2-D mesh)."""
    return fsdp(cfg, dp_mesh)(model)


def _fsdp_offload(backend: FSDPConfig, device_type: str) -> Any:
    """FSDP2's ``CPUOffloadPolicy`` for ``backend.cpu_offload`` (pinned host memory on CUDA: a CPU-only
    torch cannot pin), else the no-offload ``OffloadPolicy``."""
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy

    if not getattr(backend, "cpu_offload", False):
        return OffloadPolicy()
    return CPUOffloadPolicy(pin_memory=device_type == "cuda")


def ddp(device: torch.device) -> DataParallel:
    """Step 7 of ``backend=ddp``: ``DistributedDataParallel`` over every rank (gradient buckets as
    views of the gradients); the trainer adds ``no_sync`` on all but the last micro batch."""
    from torch.nn.parallel import DistributedDataParallel

    def wrap(model: nn.Module) -> nn.Module:
        return DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True
        )

    return wrap
