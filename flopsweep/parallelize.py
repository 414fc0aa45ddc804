"""One ``parallelize()``: the steps that make this rank's module of a run, in one fixed order.

torchtitan's ``parallelize_llama`` (``torchtitan/models/llama3/infra/parallelize.py``) applies tensor
parallel, context parallel, activation checkpointing, ``torch.compile`` and FSDP, in that order, each
step a function of its own config slice. :func:`parallelize` does the same for every backend, the
degrees' steps read from the degree table (:data:`flopsweep.degrees.DEGREE_SPECS`: each spec names
its applier and its phase), so that this module names no degree:

1. the ``model`` phase, each degree's applier in table order: tensor parallel
   (:func:`flopsweep.tensor_parallel.apply_degree`: the family's plan on the ``tp`` sub-mesh), context
   parallel (:func:`flopsweep.context_parallel.apply_degree`: each attention's kernel between
   all-to-alls over the ``cp`` group), and expert parallel (:func:`flopsweep.expert_parallel.apply_degree`:
   each MoE layer's experts split over the ``ep`` group, tokens sent by all-to-all);
2. activation checkpointing (:func:`apply_checkpointing`: the policy wraps each block);
3. compile (:func:`apply_compile`: each wrapped block and the loss head, or with
   ``compile_scope=model`` the whole model: :mod:`flopsweep.compile_levers`);
4. the ``split`` phase: the pipeline (:func:`flopsweep.pipeline.apply_split`: this rank's stage);
5. the ``data`` phase: data parallel (:func:`apply_data_parallel`: the backend's wrapper, :func:`fsdp`
   each block then the root on FSDP2's mesh, HSDP on a 2-D one; :func:`ddp`; DeepSpeed's engine,
   :func:`flopsweep.deepspeed_backend.build_deepspeed`; none for ``single``).

Why this order: the tensor-parallel plan names the whole model's submodules, so it comes first
(torchtitan's too); checkpointing wraps the blocks the plan made, so that the recompute re-runs
their collectives; compile comes after checkpointing so that the recompute sits inside the compiled
graph, where Inductor fuses it; the data-parallel wrapper comes last, its hooks dynamo-disabled (FSDP2's
at a block's edges; ZeRO-3's on every submodule, where they break the block's graph: :func:`apply_compile`).
The pipeline split comes after compile and before FSDP2 (torchtitan splits first): every stage is cut
from a whole model built from the run's seed, tensor-parallel with the whole model's plan, so each stage
holds the same weights and shards as the one-rank model.

An applier takes the model and a :class:`DegreeStep` (the run's config, layout, mesh and family,
the backend's split and data-parallel step, and its own spec) and returns the model; at degree 1
it leaves it as it is. A new degree is a :data:`~flopsweep.degrees.DEGREE_SPECS` line naming its
applier; nothing here changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from flopsweep import checkpointing, fsdp_units
from flopsweep import degrees as fdegrees
from flopsweep import precision as fprecision
from flopsweep.config import CheckpointingConfig, RunConfig
from flopsweep.degrees import DegreeSpec
from flopsweep.layout import Layout
from flopsweep.models import ModelFamily, family
from flopsweep.options import FSDPConfig

DataParallel = Callable[[nn.Module], nn.Module]
"""The last step: a backend's data-parallel wrapper, ``module -> module``."""


@dataclass(frozen=True, kw_only=True)
class DegreeStep:
    """What a degree's applier gets beside the model: the run, the layout, the world mesh, the
    family, the backend's pipeline split and data-parallel step, and its own spec."""

    cfg: RunConfig
    layout: Layout
    mesh: Any = None
    """The world mesh (:class:`flopsweep.mesh.WorldMesh`); None for a backend without one."""
    family: ModelFamily
    split: Callable[[nn.Module], nn.Module] | None = None
    """The pipeline step, ``model -> this rank's stage``; None: no pipeline."""
    data_parallel: DataParallel | None = None
    """The backend's data-parallel wrapper; None: none (``single``)."""
    spec: DegreeSpec | None = None
    """The degree being applied."""

    @property
    def size(self) -> int:
        """This degree's value in the layout (1 for a degree the layout has no field for)."""
        return int(getattr(self.layout, self.spec.name, 1)) if self.spec else 1


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
        layout: the run's degrees; each degree's applier reads its own.
        mesh: the world mesh (:func:`flopsweep.mesh.build_mesh`); needed when a model-parallel
            degree is above 1.
        split: the pipeline step, ``model -> this rank's stage`` (``layout.pp > 1``); None: no pipeline.
        data_parallel: the backend's data-parallel wrapper (:func:`fsdp`, :func:`ddp`); None: none.

    Returns:
        The module this rank trains (or its pipeline stage), possibly ``model`` itself.

    Raises:
        NotImplementedError: a degree above 1 that is not built (validation refuses it first).
    """
    step = DegreeStep(
        cfg=cfg, layout=layout, mesh=mesh, family=family(cfg.model), split=split, data_parallel=data_parallel
    )
    model = apply_phase("model", model, step)
    model = wrap_blocks(model, cfg)
    model = apply_phase("split", model, step)
    return apply_phase("data", model, step)


def apply_phase(phase: str, model: nn.Module, step: DegreeStep) -> nn.Module:
    """Every degree of ``phase`` (:data:`flopsweep.degrees.PHASES`) applied to ``model``, in the
    order of :data:`flopsweep.degrees.DEGREE_SPECS` as it is now.

    Raises:
        NotImplementedError: a degree of the phase above 1 that is not built.
    """
    for spec in fdegrees.DEGREE_SPECS:
        if spec.phase != phase:
            continue
        here = dataclasses.replace(step, spec=spec)
        if not spec.built and here.size > 1:
            raise NotImplementedError(f"{spec.what} (parallel.{spec.name} > 1) is not built")
        applier = spec.resolve("apply")
        if applier is not None:
            model = applier(model, here)
    return model


def make_model(cfg: RunConfig, device: torch.device | None) -> nn.Module:
    """The bare model of ``cfg.model``'s family in fp32, initialised from ``cfg.seed`` (the same
    weights on every rank), converted for fp8 when the precision asks for it; before any step.

    ``device=None`` builds without a device context, as ``deepspeed.zero.Init`` wants (it places
    each parameter partition on the accelerator itself)."""
    torch.manual_seed(cfg.seed)
    with device if device is not None else contextlib.nullcontext():
        model = family(cfg.model).build(cfg.model, cfg.attention)
    if cfg.loss.chunk_tokens:  # the head fused with its loss (rules.chunked_loss: a CausalLM family)
        model.loss_chunk_tokens = cfg.loss.chunk_tokens
    fprecision.prepare_model(model, cfg.precision)
    return model


def build_model(cfg: RunConfig, device: torch.device | None) -> nn.Module:
    """:func:`make_model`, then checkpointed and compiled per block (:func:`wrap_blocks`): the
    one-rank model as ``single`` trains it."""
    return wrap_blocks(make_model(cfg, device), cfg)


def wrap_blocks(model: nn.Module, cfg: RunConfig) -> nn.Module:
    """Steps 2 and 3: :func:`apply_checkpointing`, then :func:`apply_compile`, on the family's blocks
    as found before the policy wraps them (``hf`` finds its blocks by their class)."""
    blocks = family(cfg.model).blocks(model)
    apply_checkpointing(blocks, cfg.activation_checkpointing)
    return apply_compile(
        model,
        blocks,
        enabled=cfg.compile,
        scope=getattr(cfg, "compile_scope", "block"),
        mode=getattr(cfg, "compile_mode", "default"),
    )


def apply_checkpointing(blocks: Any, policy: CheckpointingConfig) -> None:
    """Step 2: the activation checkpointing policy wraps ``blocks``, the family's ``ModuleList``
    (:mod:`flopsweep.checkpointing`; ``full``: non-reentrant ``checkpoint_wrapper`` per block).
    ``memory_budget`` sets ``torch._functorch.config.activation_memory_budget`` for the process
    instead of wrapping: the
    partitioner reads it when a block compiles, at the first step; a rank is its own process, so
    the setting stays for the run (the rules refuse it without compile)."""
    checkpointing.policy(policy).apply(blocks, policy)  # replaces the entries of ``blocks``
    for key, value in checkpointing.compiler_settings(policy).items():
        import torch._functorch.config as functorch_config

        setattr(functorch_config, key, value)


def apply_compile(
    model: nn.Module, blocks: Any, *, enabled: bool, scope: str = "block", mode: str = "default"
) -> nn.Module:
    """Step 3 (``compile=true``), in torch.compile's ``mode`` (``compile_mode``,
    :func:`flopsweep.compile_levers.torch_mode`). ``scope="block"``: ``torch.compile`` each of
    ``blocks``, as wrapped by step 2, and the loss head, as torchtitan does: the recompute sits inside
    the compiled graph and identical blocks share one compiled graph. ``Module.compile`` compiles the
    block's ``_call_impl``, so the hooks step 5 registers later run inside it; how much of the block stays
    one graph is the data-parallel wrapper's: FSDP2's pre- and post-forward hooks sit on the block alone
    and are dynamo-disabled (``_fully_shard._fsdp_common._dynamo_disable``): they run eagerly at its
    entry and exit and its forward is one graph. DeepSpeed ZeRO-3 (0.19.8,
    ``runtime/zero/parameter_offload.py``, ``_register_deepspeed_module``) registers on every submodule
    below the engine's module (a ``z3_leaf_module``'s children aside) a pre-forward hook that gathers its
    parameters and one for its backward, both ``@torch.compiler.disable``: the compiled block breaks its
    graph at each submodule's call, and the compiled regions are the pieces between them
    (docs/memory-residuals.md). ``scope="model"``: ``model.compile()``, the whole module's ``__call__``
    (its forward computes the loss), the blocks' checkpoint wrappers traced inside it. (Outside
    ``deepspeed.zero.Init``: its module hooks do not know the wrapper.)"""
    if not enabled:
        return model
    from flopsweep.compile_levers import torch_mode

    kwargs = {"mode": torch_mode(mode)}
    if scope == "model":
        model.compile(**kwargs)
        return model
    for block in blocks:
        block.compile(**kwargs)
    if not getattr(model, "loss_chunk_tokens", 0):  # the fused head and loss stay eager
        model.head_loss = torch.compile(model.head_loss, **kwargs)
    return model


def apply_data_parallel(model: nn.Module, step: DegreeStep) -> nn.Module:
    """Step 5, ``dp_shard``'s applier: the backend's data-parallel wrapper (``step.data_parallel``),
    at every degree (FSDP2 shards a tensor-parallel model over one data-parallel rank too); none
    for ``single``."""
    return step.data_parallel(model) if step.data_parallel is not None else model


def fsdp(cfg: RunConfig, dp_mesh: Any) -> DataParallel:
    """Step 5 of ``backend=fsdp``: ``fully_shard`` each block, then the root, over ``dp_mesh``
    (FSDP2's mesh, :attr:`flopsweep.mesh.WorldMesh.fsdp`: 1-D over the state-shard degrees, or 2-D
    ``(dp_replicate, dp_shard)``: HSDP) with one ``MixedPrecisionPolicy``
    (params in the run's precision, gradients reduced in fp32) and ``backend.cpu_offload``'s policy;
    with ``backend.end_units`` the embedding and the final norm with the head as units of their own
    (:mod:`flopsweep.fsdp_units`).
    The blocks are the family's, or a pipeline stage's own (:class:`flopsweep.pipeline.StageModule`).
    A module carrying its own mesh (:data:`flopsweep.expert_parallel.MESH_ATTR`: expert parallel's
    experts, over ``mesh["ep_rest"]``) is sharded first, on it (torchtitan's order)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from flopsweep.expert_parallel import MESH_ATTR
    from flopsweep.pipeline import StageModule

    mp = MixedPrecisionPolicy(param_dtype=fprecision.DTYPES[cfg.precision.name], reduce_dtype=torch.float32)
    offload = _fsdp_offload(cfg.backend, dp_mesh.device_type)
    reshard = cfg.backend.reshard_after_forward

    def shard(model: nn.Module) -> nn.Module:
        stage = isinstance(model, StageModule)
        blocks = list(model.layers.values()) if stage else family(cfg.model).blocks(model)
        for module in list(model.modules()):  # a module on a mesh of its own (the ep ranks' experts) first
            own = getattr(module, MESH_ATTR, None)
            if own is not None:
                fully_shard(
                    module, mesh=own, mp_policy=mp, offload_policy=offload, reshard_after_forward=reshard
                )
        ends = fsdp_units.enabled(cfg) and not stage  # backend.end_units: torchtitan's units
        if ends:
            embedding, head = fsdp_units.end_modules(model)
            fully_shard(
                embedding, mesh=dp_mesh, mp_policy=mp, offload_policy=offload, reshard_after_forward=reshard
            )
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
        if ends:  # its backward comes first: kept after forward, as the last block is (torchtitan's)
            fully_shard(head, mesh=dp_mesh, mp_policy=mp, offload_policy=offload, reshard_after_forward=False)
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
    """Step 5 of ``backend=ddp``: ``DistributedDataParallel`` over every rank (gradient buckets as
    views of the gradients); the trainer adds ``no_sync`` on all but the last micro batch."""
    from torch.nn.parallel import DistributedDataParallel

    def wrap(model: nn.Module) -> nn.Module:
        return DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True
        )

    return wrap
