"""``optim.in_backward``: the optimizer step fused into the backward pass.

One optimizer per parameter (the run's AdamW, the same hyper-parameters and fused/for-each choice,
:func:`flopsweep.trainers.build_adamw`), stepped by the parameter's post-accumulate-grad hook
(``Tensor.register_post_accumulate_grad_hook``), which then sets its gradient to None. The fp32
gradients then never exist all at once: a training step holds the largest parameter's gradient
(``single``) or one FSDP2 unit's reduce-scatter output (``fsdp``: FSDP2's ``foreach_reduce`` calls
the hooks of each sharded parameter after assigning its gradient, a view into the unit's flat output),
not ``4 P`` bytes. This is PyTorch's tutorial "How to save memory by fusing the optimizer step into
the backward pass" and torchtitan's ``OptimizersInBackwardContainer``
(``optimizer.early_step_in_backward``).

What it costs the step: no global gradient norm (a clip needs every gradient at once, so
:func:`flopsweep.rules.optimizer_in_backward` refuses ``optim.grad_clip > 0``), no accumulation over
micro batches (each backward steps), and one small optimizer call per parameter instead of one
multi-tensor call (Llama 3.1 8B: 291 parameters). No host sync is added: the fused (CUDA) AdamW keeps
its step count on the device, and the CPU's for-loop AdamW keeps it on the host.

There is no learning-rate schedule in flopsweep (a constant ``optim.lr``); a scheduler would have to
step every per-parameter optimizer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.profiler import record_function
from torch.utils.hooks import RemovableHandle

from flopsweep.annotations import OPTIMIZER_ANNOTATION


@dataclass(kw_only=True)
class OptimizerInBackward:
    """The per-parameter optimizers and their hooks (:func:`attach` makes one).

    Attributes:
        optimizers: one optimizer per trainable parameter, in ``model.parameters()`` order.
        handles: the post-accumulate-grad hooks, one per optimizer (:meth:`remove` detaches them).
    """

    optimizers: list[torch.optim.Optimizer]
    handles: list[RemovableHandle] = field(default_factory=list)

    def remove(self) -> None:
        """Detach every hook: the parameters' gradients stay after backward from then on."""
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


def attach(
    params: Iterable[nn.Parameter],
    build_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer],
) -> OptimizerInBackward:
    """Give each trainable parameter its own optimizer, stepped in backward.

    Args:
        params: the model's parameters (FSDP2's sharded ``DTensor`` parameters under ``fsdp``: the
            objects whose ``_post_accumulate_grad_hooks`` FSDP2 calls).
        build_optimizer: the run's optimizer for a list of parameters (called once per parameter).

    Returns:
        The optimizers and hook handles. After each backward every hooked parameter has been stepped
        once and its ``grad`` is None.
    """
    result = OptimizerInBackward(optimizers=[])
    for param in params:
        if not param.requires_grad:
            continue
        optimizer = build_optimizer([param])
        result.optimizers.append(optimizer)
        result.handles.append(param.register_post_accumulate_grad_hook(functools.partial(_step, optimizer)))
    return result


def _step(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> None:
    """The hook: step ``param``'s optimizer with the gradient just accumulated, then free it
    (``profile=true`` counts these kernels as the optimizer part of the step)."""
    with record_function(OPTIMIZER_ANNOTATION):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
