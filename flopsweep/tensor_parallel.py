"""Tensor parallelism with sequence parallelism (Megatron-LM's, in torchtitan's form).

Each model family states its plan (``ModelFamily.tensor_parallel_plan``, the module's
``TENSOR_PARALLEL_PLAN``: submodule name, ``*`` wildcards allowed, to a ``ParallelStyle`` of
``torch.distributed.tensor.parallel``), as torchtitan's per-model ``parallelize.py`` does; this
module applies it on the ``tp`` sub-mesh (:func:`flopsweep.mesh.tp_mesh`) and owns what every plan
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

Only :mod:`flopsweep.backends` imports this module, on the ranks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from flopsweep.models import ModelFamily


def apply(model: nn.Module, fam: ModelFamily, tp_mesh: Any) -> nn.Module:
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
