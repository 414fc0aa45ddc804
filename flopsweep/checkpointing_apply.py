"""Activation checkpointing applied to the blocks (torch): the ``apply`` of each policy.

:data:`flopsweep.checkpointing.POLICIES` holds the torch-free facts of each policy (what it
recomputes, what it keeps, its checks) and the name of its function here
(:attr:`~flopsweep.checkpointing.CheckpointPolicy.apply_fn`), loaded on the rank when a backend
wraps the blocks. Each function replaces entries of the model family's block list in place,
before ``backends.wrap_blocks`` compiles each block.
"""

from __future__ import annotations

from collections.abc import MutableSequence
from typing import Any

from flopsweep.checkpointing import SAC_MATMULS, SAC_SAVED_ATTENTION, checkpointed_blocks
from flopsweep.config import CheckpointingConfig


def apply_none(blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
    """Keep every block as it is."""


def apply_full(blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
    """Wrap each block in torch's non-reentrant ``checkpoint_wrapper``: backward re-runs the
    block's forward from its saved input. ``preserve_rng_state=False``: no block draws random
    numbers (no dropout), and saving the RNG state costs a device sync per block."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for i, block in enumerate(blocks):
        blocks[i] = checkpoint_wrapper(block, preserve_rng_state=False)


def sac_context_fn() -> Any:
    """A ``context_fn`` for ``torch.utils.checkpoint``: one block's forward and its recompute each
    count their own matmuls (the counts restart per block, as torchtitan's do), saving the attention
    ops and every odd matmul (``MUST_SAVE``) and recomputing the rest (``PREFER_RECOMPUTE``)."""
    from collections import defaultdict

    import torch
    from torch.utils.checkpoint import CheckpointPolicy as Decision
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    aten = torch.ops.aten
    attention = {getattr(aten, n).default for n in SAC_SAVED_ATTENTION if hasattr(aten, n)}
    matmuls = {getattr(aten, n).default for n in SAC_MATMULS}
    counts: defaultdict[bool, int] = defaultdict(int)

    def decide(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Decision:
        if func in attention:
            return Decision.MUST_SAVE
        if func in matmuls:
            counts[ctx.is_recompute] += 1
            if counts[ctx.is_recompute] % 2 == 1:
                return Decision.MUST_SAVE
        return Decision.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(decide)


def apply_selective(blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
    """Wrap each block in non-reentrant ``checkpoint_wrapper`` with torch's per-operator selective
    checkpointing (``create_selective_checkpoint_contexts``, torchtitan's ``SelectiveAC`` op mode):
    backward recomputes only the ops that :func:`sac_context_fn` does not save."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for i, block in enumerate(blocks):
        blocks[i] = checkpoint_wrapper(block, preserve_rng_state=False, context_fn=sac_context_fn)


def apply_every_n(blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
    """``full`` (non-reentrant ``checkpoint_wrapper``) on every ``every``-th block only."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for i in checkpointed_blocks(cfg, len(blocks)):
        blocks[i] = checkpoint_wrapper(blocks[i], preserve_rng_state=False)


def apply_memory_budget(blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
    """Nothing on the blocks: the compiler's min-cut partitioner decides what each compiled block
    saves under ``torch._functorch.config.activation_memory_budget`` (:func:`compiler_settings`,
    which ``backends.wrap_blocks`` sets for the rank's process)."""


def apply_offload(blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
    """Wrap each block in torch's ``offload_wrapper``: its forward runs under
    ``torch.autograd.graph.save_on_cpu(pin_memory=True)``, so every tensor autograd saves for backward
    is copied to (pinned, on CUDA) host memory and brought back when backward needs it."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import offload_wrapper

    for i, block in enumerate(blocks):
        blocks[i] = offload_wrapper(block)
