"""``optim.overlap_forward``: the optimizer step on a second CUDA stream, overlapped with the next forward.

The step after backward (clip, then AdamW) reads and writes every fp32 parameter, gradient and moment:
memory-bound work (Llama 3.1 8B on one H200: 93 ms of a 597 ms step, 15.5%, while the matmuls run at
718 TFLOP/s), which on one stream waits for backward's end and holds up the next forward. Here the
parameters are split into units in the order the next forward reads them: the *root* (every parameter
outside the family's blocks: the embedding, the final norm, the LM head) and then each block. After the
clip, which still needs every gradient and runs first on the main stream, each unit's AdamW (the run's
optimizer over that unit's parameters, :func:`flopsweep.trainers.build_adamw`) is enqueued on a side
stream, root first, each followed by an event. A forward pre-hook on the model waits for the root's
event, and one on each block for its block's: block ``i``'s forward runs while blocks ``i+1..`` are
still being stepped. The arithmetic is the same AdamW, applied elementwise per tensor, so the
parameters after each step equal those of the one-stream step (``tests/*/test_optim_overlap*.py``).

Memory: each gradient is freed when its unit is stepped (``Tensor.record_stream`` on the side stream,
then ``grad = None``): the caching allocator reuses it once the side stream has passed it. The next
forward's peak is at its end, when every unit has been stepped, so the estimate is the one-stream
step's (to be measured). Time: the step-time model hides the blocks' share of the optimizer behind
the forward (:func:`flopsweep.compute_time.exposed_optimizer_s`).

Timing stays honest: the measured window's marks are events on the main stream, and the next step's
forward waits for the units it reads, so each step's interval holds what the overlap did not hide;
before the last mark the main stream waits for the side stream (:meth:`OverlappedOptimizer.drain`),
so the last step's optimizer is counted too. Warm-up synchronises the device after each step.

Refused in one line (:func:`flopsweep.overlap_forward.check`): off CUDA, on backends other than
``single``, with ``optim.in_backward``, fp16's ``GradScaler`` and CUDA graphs (untested).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle


@dataclass(kw_only=True)
class Unit:
    """One group the side stream steps: its optimizer, its parameters and the event that says it is done."""

    name: str
    optimizer: torch.optim.Optimizer
    params: list[nn.Parameter]
    event: Any = None  # torch.cuda.Event, recorded on the side stream after each step


@dataclass(kw_only=True)
class OverlappedOptimizer:
    """The units' optimizers, the side stream and the forward pre-hooks (:func:`attach` makes one).

    ``step()`` and ``zero_grad()`` stand in for an optimizer's in :class:`flopsweep.trainers.TorchTrainer`.

    Attributes:
        units: root first, then each block, in forward order.
        stream: the side CUDA stream the steps run on.
        handles: the forward pre-hooks, held as long as the trainer.
    """

    units: list[Unit]
    stream: Any
    handles: list[RemovableHandle] = field(default_factory=list)

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [u.optimizer for u in self.units]

    def step(self) -> None:
        """Enqueue every unit's AdamW step on the side stream after the main stream's work so far (the
        clip), each followed by its event, and free each unit's gradients once the side stream has used
        them. Returns without waiting."""
        main = torch.cuda.current_stream()
        self.stream.wait_stream(main)
        with torch.cuda.stream(self.stream):
            for unit in self.units:
                unit.optimizer.step()
                unit.event.record(self.stream)
                for param in unit.params:
                    if param.grad is not None:
                        param.grad.record_stream(self.stream)
                        param.grad = None

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to do: :meth:`step` has freed every gradient."""

    def drain(self) -> None:
        """The main stream waits for every step enqueued so far (before the measured window's last mark)."""
        torch.cuda.current_stream().wait_stream(self.stream)


def split_units(model: nn.Module, blocks: Sequence[nn.Module]) -> list[tuple[str, list[nn.Parameter]]]:
    """``[("root", P0), ("block 0", P1), ...]``: the trainable parameters of each block, and before them
    every trainable parameter of ``model`` in no block; each parameter once (a parameter shared with a
    block counts as the block's).

    Raises:
        ValueError: ``blocks`` is empty (nothing to overlap), or a block has no trainable parameter.
    """
    if not blocks:
        raise ValueError("optim.overlap_forward: the model has no blocks to step in forward order")
    seen: set[int] = set()
    units: list[tuple[str, list[nn.Parameter]]] = []
    for i, block in enumerate(blocks):
        params = _fresh(block.parameters(), seen)
        if not params:
            raise ValueError(f"optim.overlap_forward: block {i} has no trainable parameter of its own")
        units.append((f"block {i}", params))
    root = _fresh(model.parameters(), seen)
    return [("root", root)] * bool(root) + units


def attach(
    model: nn.Module,
    blocks: Sequence[nn.Module],
    build_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer],
) -> OverlappedOptimizer:
    """One optimizer per unit (:func:`split_units`), a side stream on the current CUDA device, and
    forward pre-hooks: ``model``'s waits for the root (or the first block) and each block's for its own.

    Args:
        model: the module the trainer calls (its forward computes the loss).
        blocks: the family's blocks as the model calls them (checkpoint-wrapped, compiled in place).
        build_optimizer: the run's optimizer for a list of parameters (called once per unit).
    """
    units = [
        Unit(name=name, optimizer=build_optimizer(params), params=params, event=torch.cuda.Event())
        for name, params in split_units(model, blocks)
    ]
    result = OverlappedOptimizer(units=units, stream=torch.cuda.Stream())
    # model: the root's event (or block 0's), read from the forward's start (the embedding); a block: its own
    events = {id(model): units[0].event} | {
        id(b): u.event for b, u in zip(blocks, units[-len(blocks) :], strict=True)
    }
    wait = _waiter(events)  # one function for every block: a compiled block's guards see the same hook
    result.handles += [m.register_forward_pre_hook(wait) for m in (model, *blocks)]
    return result


def _fresh(params: Iterable[nn.Parameter], seen: set[int]) -> list[nn.Parameter]:
    out = []
    for param in params:
        if param.requires_grad and id(param) not in seen:
            seen.add(id(param))
            out.append(param)
    return out


def _waiter(events: dict[int, Any]) -> Callable[..., None]:
    """A forward pre-hook making the main stream wait for the event of the module it is called for
    (``events`` by ``id(module)``). Run eagerly: a compiled block's hooks run inside its compiled call,
    and ``torch.compiler.disable`` keeps this one out of the graph, as FSDP2's hooks are kept."""

    @torch.compiler.disable
    def wait(module: nn.Module, args: Any) -> None:
        torch.cuda.current_stream().wait_event(events[id(module)])

    return wait
