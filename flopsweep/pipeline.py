"""Pipeline parallelism (``parallel.pp > 1``) through ``torch.distributed.pipelining``, composed with
FSDP2 on the data-parallel sub-mesh and tensor parallelism on the ``tp`` sub-mesh.

**Split.** The model's blocks split evenly into ``S = pp x v`` stages (``v``:
``parallel.pp_stages_per_rank``, 2 for ``Interleaved1F1B``, else 1); the first stage also embeds, the
last also applies the final norm and the LM head. Stage ``s`` lives on pipeline rank ``s mod pp``
(torch's "loop" placement, :func:`stage_ids`). Every rank builds the whole model from the run's seed
(the same weights as every other backend, as ``build_fsdp`` does), then each of its stages keeps only
its own blocks and parts (torchtitan's ``pipeline_module_split``, without a deep copy: the rest is
dropped and freed). Each stage module is ``fully_shard``-ed as :func:`flopsweep.parallelize.fsdp`
shards the whole model: each block, then the stage, over FSDP2's mesh
(:attr:`flopsweep.mesh.WorldMesh.fsdp`). The split is the ``pp`` degree's applier
(:func:`apply_split`, the ``split`` phase of :func:`flopsweep.parallelize.parallelize`), after
compile and before FSDP2.

**Tied LM head.** GPT-2 and the Llama 3.2 sizes tie the LM head to the token embedding, which the
first stage needs and the last stage needs too. Both keep a copy (same initial values); after the
backward the two gradients are summed between the first and the last pipeline rank (Megatron-LM's
"embedding group"), so both copies get the gradient of the tied weight, take the same AdamW update,
and stay equal: the model is the one-rank model, with its parameter count and FLOPs. The gradient
norm counts the tied weight once.

**Tensor-parallel stages** (``parallel.tp > 1``, torchtitan's composition): each model is
tensor-parallel on the ``tp`` sub-mesh of the same world mesh (the family's plan,
:func:`flopsweep.tensor_parallel.apply_degree`) before the split and before ``fully_shard``,
so the stage's parameters are ``DTensor`` s on the ``(dp, tp)`` sub-mesh. Between stages flows what
flows between blocks under sequence parallelism: the plain local tensor of this rank's sequence shard,
``(B, T / tp, C)``, sent to the pipeline peer of the same ``tp`` coordinate (the ``pp`` sub-mesh's
group), which holds the same shard. The last stage's logits are vocabulary-sharded and the loss
runs under ``loss_parallel`` (the whole schedule step inside the degrees' micro-batch hooks,
:func:`flopsweep.trainers.micro_context`). The tied weight is
vocabulary-sharded alike on the first and last stage, so its two gradients add shard to shard; the
gradient norm is the ``DTensor`` norm over ``(dp, tp)``, then summed over the pipeline group.

**Batch.** Each optimizer step's local batch (``micro_batch_size x grad_accum`` sequences of this
data-parallel rank, the ``grad_accum`` micro batches concatenated) goes through the schedule once,
split into ``parallel.pp_microbatches`` pipeline micro-batches (default ``S``), so a step fills and
drains the pipeline once. FSDP2 reduces the gradients once per step (the schedule's last backward).

**Loss.** The last stage computes the fp32 cross-entropy of each pipeline micro-batch; the step
returns their mean, all-reduced over the pipeline group so that every rank returns it (the worker
averages the ranks' losses).

Counting is unchanged (docs/layouts.md): tokens per step are ``micro batch x grad accum x
dp x seq``; the model FLOPs do not depend on the layout; the bubble is idle time, not FLOPs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from flopsweep import precision as fprecision
from flopsweep import trainers
from flopsweep.annotations import OPTIMIZER_ANNOTATION
from flopsweep.config import RunConfig
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.pipeline_plan import (  # noqa: F401 - the torch-free part, re-exported
    ARCHS,
    INTERLEAVED_STAGES_PER_RANK,
    MULTI_STAGE,
    check,
    microbatches,
    resolve,
    stage_ids,
    stage_layers,
    stages_per_rank,
)


class StageModule(nn.Module):
    """One pipeline stage of a model of :data:`ARCHS`: the embedding (first stage), the stage's
    blocks, the final norm and the LM head (last stage).

    ``forward``: first stage idx LongTensor ``(B, T)``, else hidden states ``(B, T / seq_shards, C)``;
    returns hidden states ``(B, T / seq_shards, C)``, or logits ``(B, T, V)`` on the last stage.
    Parameter names keep the model's block index (``layers.3...``).

    Under tensor parallelism (``seq_shards = tp``) the hidden states between stages are what they
    are between blocks: the plain local tensor of this rank's sequence shard (``Shard(1)`` of the
    sequence-parallel residual stream), so each stage sends and receives a plain tensor of a fixed
    shape to and from the pipeline peer of the same ``tp`` coordinate, which holds the same shard.
    The logits are then a vocabulary-sharded ``DTensor`` (``Shard(-1)``) for ``loss_parallel``.
    """

    def __init__(
        self,
        model: nn.Module,
        layers: dict[int, nn.Module],
        *,
        first: bool,
        last: bool,
        seq_shards: int = 1,
    ) -> None:
        super().__init__()
        self.model, self.first, self.last, self.seq_shards = model, first, last, seq_shards
        self.layers = nn.ModuleDict({str(i): block for i, block in layers.items()})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.size(1) if self.first else x.size(1) * self.seq_shards  # the whole sequence
        positions = self.model.positions(seq_len, x.device)
        if self.first:
            x = self.model.embed(x, positions)  # (B, T) -> (B, T / seq_shards, C)
        extra = self.model.block_args(positions)
        for block in self.layers.values():
            x = block(x, *extra)
        return self.model.logits(x) if self.last else x


def split_stage(
    model: nn.Module, blocks: Sequence[nn.Module], stage: int, n_stages: int, *, seq_shards: int = 1
) -> StageModule:
    """Stage ``stage`` of ``n_stages`` of ``model``, built from ``model`` itself: its blocks list is
    emptied and the children the stage does not use are dropped (the embedding but on the first
    stage, the final norm and head but on the last). ``model`` must be a fresh build per stage:
    the stage takes its parts, it does not copy them. ``seq_shards``: ``parallel.tp`` when
    ``model`` is tensor-parallel (its residual stream sequence-sharded), else 1."""
    first, last = stage == 0, stage == n_stages - 1
    owned = {i: blocks[i] for i in stage_layers(len(blocks), n_stages, stage)}
    keep = set(model.embedding_children if first else ()) | set(model.head_children if last else ())
    for name, child in list(model.named_children()):
        if child is blocks:
            setattr(model, name, nn.ModuleList())
        elif name in (*model.embedding_children, *model.head_children) and name not in keep:
            setattr(model, name, None)
    return StageModule(model, owned, first=first, last=last, seq_shards=seq_shards)


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The models' loss (``head_loss``'s): mean cross-entropy in fp32. logits ``(B, T, V)``,
    targets LongTensor ``(B, T)``."""
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


@dataclass
class PipelineTrainer:
    """Step loop for a pipeline (a :class:`~flopsweep.trainers.Trainer`): one schedule step over
    the concatenated micro batches, the tied weight's gradient summed between its two stages, the
    gradient norm over every stage (clipping), AdamW.

    Attributes:
        grad_norm: the last step's total gradient norm before clipping (0-d fp32 tensor; every
            rank holds it).
    """

    schedule: Any
    stages: list[StageModule]
    optimizer: torch.optim.Optimizer
    grad_clip: float
    pp_group: Any
    model: nn.Module
    tied: list[nn.Parameter] = field(default_factory=list)
    tie_group: Any = None
    counted: list[nn.Parameter] = field(default_factory=list)
    after_step: Callable[[], None] | None = None
    loss_context: Callable[[Any], contextlib.AbstractContextManager] = contextlib.nullcontext
    """Around the schedule's step (its forwards, losses and backwards), given the step's local
    batch (a :class:`flopsweep.trainers.MicroBatch`): the degrees' micro-batch hooks
    (:func:`flopsweep.trainers.micro_context`; ``loss_parallel`` under tensor parallelism)."""
    grad_norm: torch.Tensor | None = None

    @property
    def has_first(self) -> bool:
        return any(s.first for s in self.stages)

    @property
    def has_last(self) -> bool:
        return any(s.last for s in self.stages)

    def step(self, micro_batches: Sequence[torch.Tensor]) -> torch.Tensor:
        """One optimizer step over ``micro_batches`` (each ``[micro_batch_size, seq_len + 1]``).

        Returns:
            The step's mean loss (0-d, detached), the same on every rank of the pipeline.
        """
        tokens = torch.cat(list(micro_batches))  # the local batch [micro x accum, s + 1]
        idx, targets = tokens[:, :-1], tokens[:, 1:]
        losses: list[torch.Tensor] = []
        args = (idx,) if self.has_first else ()
        with self.loss_context(trainers.MicroBatch(tokens)):
            self.schedule.step(*args, target=targets, losses=losses, return_outputs=False)
        with record_function(OPTIMIZER_ANNOTATION):  # profile=true: the optimizer part
            self._sum_tied_grads()
            self.grad_norm = self._clip()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            if self.after_step is not None:
                self.after_step()
        if self.has_last:  # under loss_parallel each loss is a replicated DTensor: its local value
            mean = torch.stack([_local(loss) for loss in losses]).mean().detach()
        else:
            mean = torch.zeros((), device=idx.device)
        dist.all_reduce(mean, group=self.pp_group)  # only the last stage's rank adds a loss
        return mean

    def _sum_tied_grads(self) -> None:
        """The tied weight's two copies (first and last stage) get the sum of their gradients."""
        for param in self.tied:  # the same placements on both ranks (tp and dp): shard adds to shard
            dist.all_reduce(_local(param.grad), group=self.tie_group)

    def _clip(self) -> torch.Tensor:
        """Clip every gradient of this rank by the norm over all stages and data-parallel shards
        (torchtitan's ``clip_grad_norm_`` with a pipeline); returns that norm."""
        grads = [p.grad for p in self.counted if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads, 2.0, foreach=True)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()  # the data-parallel shards' norm
        squared = norm.float() ** 2
        dist.all_reduce(squared, group=self.pp_group)  # every stage's share
        norm = squared.sqrt()
        if self.grad_clip > 0:  # 0: no clipping (the norm is still computed)
            params = [p for s in self.stages for p in s.parameters()]
            torch.nn.utils.clip_grads_with_norm_(params, self.grad_clip, norm, foreach=True)
        return norm.detach()


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A ``DTensor``'s local shard (a view: in-place ops write through), else ``tensor``."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def apply_split(model: nn.Module, step: Any) -> nn.Module:
    """The ``pp`` degree's applier (:class:`flopsweep.parallelize.DegreeStep` ``step``): this rank's
    stage of ``model``, cut by the split :func:`build_pipeline` hands ``parallelize``
    (:func:`split_stage`); ``model`` as it is without one (no pipeline)."""
    return step.split(model) if step.split is not None else model


def build_pipeline(
    cfg: RunConfig,
    device: torch.device,
    layout: Layout,
    mesh: Any,
    *,
    build_stage: Callable[[Callable[[nn.Module], StageModule]], StageModule],
    build_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer],
) -> PipelineTrainer:
    """The pipeline of ``cfg`` on this rank: its stages (FSDP2 over the data-parallel sub-mesh), the
    schedule ``parallel.pp_schedule`` and the trainer.

    Args:
        mesh: the world mesh (:func:`flopsweep.mesh.build_mesh` of ``layout``, a
            :class:`~flopsweep.mesh.WorldMesh`).
        build_stage: ``split -> stage``: :func:`flopsweep.parallelize.parallelize` of a whole model
            built from the run's seed on ``device``, with ``split`` (this module's, which cuts one
            stage, :func:`split_stage`) as its pipeline step and FSDP2 as its data-parallel step;
            called once per local stage.
        build_optimizer: AdamW over the given parameters (:func:`flopsweep.trainers.build_adamw`).
    """
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import get_schedule_class

    pipe = mesh["pp"]
    p = cfg.parallel
    per_rank = stages_per_rank(p.pp_schedule, p.pp_stages_per_rank)
    n_stages = layout.pp * per_rank
    ids = stage_ids(pipe.get_local_rank(), layout.pp, per_rank)
    modules, tied, counted = [], [], []
    for stage in ids:
        tied_names: set[str] = set()

        def split(model: nn.Module, stage: int = stage, tied_names: set[str] = tied_names) -> StageModule:
            tied_names |= _tied_names(model, cfg)  # named on the whole model, before the cut
            return split_stage(model, family(cfg.model).blocks(model), stage, n_stages, seq_shards=layout.tp)

        module = build_stage(split)
        modules.append(module)
        for name, param in module.named_parameters():
            shared = name.removeprefix("model.") in tied_names
            if shared and (module.first or module.last) and n_stages > 1:
                tied.append(param)
            if not (shared and module.last and not module.first):
                counted.append(param)  # the tied weight counts once, on the first stage
    group = pipe.get_group()
    stages = [PipelineStage(m, s, n_stages, device, group=group) for m, s in zip(modules, ids, strict=True)]
    schedule_class = get_schedule_class(p.pp_schedule)
    schedule = schedule_class(
        stages if p.pp_schedule in MULTI_STAGE else stages[0],
        n_microbatches=microbatches(cfg),
        loss_fn=loss_fn,
    )
    params = [q for m in modules for q in m.parameters()]
    return PipelineTrainer(
        schedule=schedule,
        stages=modules,
        optimizer=build_optimizer(params),
        grad_clip=cfg.optim.grad_clip,
        pp_group=group,
        model=modules[0].model,
        tied=tied,
        tie_group=_tie_group(mesh, layout) if tied_names else None,  # collective: every rank or none
        counted=counted,
        after_step=_after_step(modules, cfg),
        loss_context=trainers.micro_context(layout, mesh),
    )


def _tied_names(model: nn.Module, cfg: RunConfig) -> set[str]:
    """Names of the family's tied parameters in ``model`` (``wte.weight``)."""
    tied = family(cfg.model).tied_parameters(model)
    return {name for name, param in model.named_parameters() if any(param is t for t in tied)}


def _tie_group(mesh: Any, layout: Layout) -> Any:
    """The process group of this rank and its peer that holds the other copy of the tied weight:
    the first and the last pipeline rank of the same data-parallel (and other) coordinates. Every
    rank makes every such group (``new_group`` is collective)."""
    if layout.pp == 2:
        return mesh["pp"].get_group()
    grid = mesh.mesh.reshape(layout.pp, -1)  # (pp, every other coordinate)
    mine = None
    for column in range(grid.shape[1]):
        ranks = [int(grid[0, column]), int(grid[-1, column])]
        group = dist.new_group(ranks)
        if dist.get_rank() in ranks:
            mine = group
    return mine


def _after_step(modules: list[StageModule], cfg: RunConfig) -> Callable[[], None] | None:
    """Each stage's after-step hook (fp8 all-gather's scale precompute), or None."""
    hooks = [h for m in modules if (h := fprecision.after_optimizer_step(m, cfg.precision)) is not None]
    if not hooks:
        return None

    def run() -> None:
        for hook in hooks:
            hook()

    return run
