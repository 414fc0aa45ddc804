"""Tensor parallelism with sequence parallelism (Megatron-LM's, in torchtitan's form).

Each model family states its plan (``ModelFamily.tensor_parallel_plan``, the module's
``TENSOR_PARALLEL_PLAN``: submodule name, ``*`` wildcards allowed, to a ``ParallelStyle`` of
``torch.distributed.tensor.parallel``), as torchtitan's per-model ``parallelize.py`` does; this
module applies it on the ``tp`` sub-mesh of the world mesh (:mod:`flopsweep.mesh`) and owns what every plan
shares:

- the residual stream between blocks is sharded on the sequence dimension (``Shard(1)``), the norms
  run as ``SequenceParallel``; each block all-gathers the sequence before its column-wise
  projections and reduce-scatters after its row-wise ones;
- the token embedding is vocabulary-parallel (``RowwiseParallel``), the LM head column-wise over the
  vocabulary, and the cross-entropy runs on the vocabulary-sharded logits under
  ``torch.distributed.tensor.parallel.loss_parallel`` (no all-gather of ``(B, T, V)`` logits);
- a tied LM head (GPT-2, Llama 3.2) keeps its tie: the embedding weight is sharded ``Shard(0)``
  (over the vocabulary) for the lookup and for the head alike, so the model is the same model as
  on one rank (torchtitan's models untie instead, which would change the parameter count).

A plan value may be a tuple of styles, applied one after the other to the same submodule (a norm
that is ``SequenceParallel`` and whose output the tied head needs replicated).

The families build their plans with :func:`sequence_parallel_plan` from their submodule names
(:class:`Sublayer`), so the styles and layouts above are written once, here.

It is the ``tp`` degree's module (:data:`flopsweep.degrees.DEGREE_SPECS` names its three functions):
its applier :func:`apply_degree` (step 1 of :func:`flopsweep.parallelize.parallelize`), its
micro-batch hook :func:`micro_context` (``loss_parallel``) and its step-time term :func:`transfers`.
Torch is imported inside the functions that use it, so that the step-time model (and the analysis's
``--predict``) can load the term without torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn


class PlannedFamily(Protocol):
    """What :func:`apply` needs of a :class:`flopsweep.models.ModelFamily` (a protocol, so that this
    module, which the families' plans import, does not import :mod:`flopsweep.models` back)."""

    tensor_parallel_plan: Callable[[Any], dict[str, Any]] | None


@dataclass(frozen=True, kw_only=True)
class Sublayer:
    """One pre-norm residual branch of a block, ``x + module(norm(x))``, by submodule names relative
    to the block: the module's inputs are all-gathered over the sequence, its column-wise
    projections come first and its row-wise ones last (Megatron-LM's pairing, one all-gather and
    one reduce-scatter per branch)."""

    norm: str
    """The branch's norm (LayerNorm, RMSNorm), run ``SequenceParallel``."""
    module: str
    """The branch (attention, MLP), whose first input arrives sequence-sharded and is gathered."""
    colwise: tuple[str, ...]
    """Its input projections, split ``ColwiseParallel`` (output features: heads, MLP width)."""
    rowwise: tuple[str, ...]
    """Its output projections, split ``RowwiseParallel`` and reduce-scattered to ``Shard(1)``."""
    extra_inputs: int = 0
    """Positional inputs after ``x`` that pass as they are (Llama's ``freqs_cis``)."""


def sequence_parallel_plan(
    *,
    embedding: str,
    blocks: str,
    sublayers: Sequence[Sublayer],
    norm: str,
    head: str | None,
    positions: str | None = None,
) -> dict[str, Any]:
    """A family's tensor- and sequence-parallel plan from its submodule names (the module docstring
    says what each part does), in the order ``parallelize_module`` applies it.

    Args:
        embedding: the token embedding, vocabulary-parallel (``RowwiseParallel``, replicated token
            ids in, the sequence-sharded residual stream ``(B, T, C)`` ``Shard(1)`` out).
        blocks: the blocks' names with a wildcard, e.g. ``"h.*"``.
        sublayers: each block's residual branches, in order.
        norm: the final norm, ``SequenceParallel``.
        head: the separate LM head, column-wise over the vocabulary (vocabulary-sharded logits
            ``Shard(-1)`` for loss parallelism); None for a tied head, which reads the
            vocabulary-sharded embedding weight, so the final norm's output is gathered (replicated).
        positions: a learned position embedding ``(T, C)`` (GPT-2's ``wpe``), position-parallel
            (its rows ``Shard(0)``, added to the sequence-sharded token embedding); None for none.
    """
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        PrepareModuleOutput,
        RowwiseParallel,
        SequenceParallel,
    )

    seq, rep = Shard(1), Replicate()
    plan: dict[str, Any] = {embedding: RowwiseParallel(input_layouts=rep, output_layouts=seq)}
    if positions is not None:
        plan[positions] = RowwiseParallel(input_layouts=rep, output_layouts=Shard(0))
    for sub in sublayers:
        rest = (None,) * sub.extra_inputs
        plan[f"{blocks}.{sub.norm}"] = SequenceParallel()
        plan[f"{blocks}.{sub.module}"] = PrepareModuleInput(
            input_layouts=(seq, *rest), desired_input_layouts=(rep, *rest)
        )
        plan.update({f"{blocks}.{sub.module}.{name}": ColwiseParallel() for name in sub.colwise})
        plan.update(
            {f"{blocks}.{sub.module}.{name}": RowwiseParallel(output_layouts=seq) for name in sub.rowwise}
        )
    if head is None:
        gather = PrepareModuleOutput(output_layouts=seq, desired_output_layouts=rep, use_local_output=False)
        return {**plan, norm: (SequenceParallel(), gather)}
    plan[norm] = SequenceParallel()
    plan[head] = ColwiseParallel(input_layouts=seq, output_layouts=Shard(-1), use_local_output=False)
    return plan


def apply(model: nn.Module, fam: PlannedFamily, tp_mesh: Any) -> nn.Module:
    """Parallelize ``model`` in place with its family's plan over ``tp_mesh`` (1-D).

    The model's output (its loss, a replicated ``DTensor`` under loss parallelism) comes back as a
    plain tensor, so that the trainers see what they see without tensor parallelism.

    Raises:
        ValueError: when the family has no plan (validation refuses ``parallel.tp > 1`` for it first).
    """
    from torch.distributed.tensor.parallel import parallelize_module

    if fam.tensor_parallel_plan is None:
        raise ValueError(f"the {type(model).__name__} family has no tensor-parallel plan")
    for plan in _passes(fam.tensor_parallel_plan(model)):
        parallelize_module(model, tp_mesh, plan)
    model.register_forward_hook(_plain_output)
    return model


def _passes(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The plan as successive ``parallelize_module`` plans: a tuple value's n-th style in pass n."""
    depth = max((len(v) for v in plan.values() if isinstance(v, tuple)), default=1)
    passes: list[dict[str, Any]] = [{} for _ in range(depth)]
    for name, styles in plan.items():
        for i, style in enumerate(styles if isinstance(styles, tuple) else (styles,)):
            passes[i][name] = style
    return passes


def _plain_output(module: nn.Module, args: Any, output: Any) -> Any:
    from torch.distributed.tensor import DTensor

    return output.full_tensor() if isinstance(output, DTensor) else output


def apply_degree(model: nn.Module, step: Any) -> nn.Module:
    """The ``tp`` degree's applier (:class:`flopsweep.parallelize.DegreeStep` ``step``): the family's
    plan on the mesh's ``tp`` sub-mesh (:func:`apply`) when ``tp > 1``; ``model`` as it is otherwise."""
    if step.size == 1:
        return model
    return apply(model, step.family, step.mesh[step.spec.name])


def micro_context(layout: Any, mesh: Any) -> Callable[[Any], contextlib.AbstractContextManager] | None:
    """The ``tp`` degree's micro-batch hook: ``loss_parallel()`` around each micro batch's forward and
    backward when ``layout.tp > 1`` (:func:`loss_context`), else None."""
    if layout.tp == 1:
        return None
    context = loss_context(layout.tp)
    return lambda batch: context()


def transfers(w: Any, *, gpus_per_node: int) -> list[Any]:
    """The ``tp`` degree's communication per optimizer step (:func:`flopsweep.steptime.transfers`), none
    at ``tp`` 1: sequence parallelism's all-gather and reduce-scatter of ``micro x s x h x b`` per
    projection pair (the volume of one all-reduce), per layer and micro batch two in forward, two in
    backward and two more for the recomputed forward (Megatron-LM's count;
    :attr:`~flopsweep.steptime.Workload.recompute_share`), never overlapped."""
    from flopsweep.degrees import span
    from flopsweep.workload import Transfer

    tp = w.degree("tp")
    if tp == 1:
        return []
    per_layer = 4 + 2 * w.recompute_share
    return [
        Transfer(
            what="tensor-parallel activation all-gather and reduce-scatter",
            collective="all_reduce",
            bytes=w.micro_batch_size * w.seq_len * w.n_embd * w.param_bytes,
            count=round(per_layer * (w.n_layer // w.degree("pp")) * w.grad_accum),
            group=tp,
            across_nodes=span(w.degrees, "tp") > gpus_per_node,
            overlappable=False,
        )
    ]


def loss_context(tp: int) -> Callable[[], contextlib.AbstractContextManager]:
    """The context each micro batch's forward and backward run in: ``loss_parallel()`` when
    ``tp > 1`` (the cross-entropy of vocabulary-sharded logits, forward and backward), else none."""
    if tp == 1:
        return contextlib.nullcontext
    from torch.distributed.tensor.parallel import loss_parallel

    return loss_parallel


def grad_norm(value: torch.Tensor) -> float:
    """A gradient norm as a float (``clip_grad_norm_``'s result is a ``DTensor`` on a mesh)."""
    from torch.distributed.tensor import DTensor

    return float(value.full_tensor() if isinstance(value, DTensor) else value)
