"""Activation checkpointing applied to the blocks (torch): the ``apply`` of each policy.

:data:`flopsweep.checkpointing.POLICIES` holds the torch-free facts of each policy (what it
recomputes, what it keeps, its checks) and the name of its function here
(:attr:`~flopsweep.checkpointing.CheckpointPolicy.apply_fn`), loaded on the rank when a backend
wraps the blocks. Each function replaces entries of the model family's block list in place,
before ``backends.wrap_blocks`` compiles each block.
"""

from __future__ import annotations

from collections.abc import MutableSequence
from dataclasses import dataclass
from typing import Any

from torch import nn

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


LOW_PRECISION = ("bfloat16", "float16")
"""``casts``: the dtypes (``torch.<name>``) of the weight casts it recomputes (autocast's compute dtypes)."""


def casts_context_fn() -> Any:
    """A ``context_fn`` for ``torch.utils.checkpoint`` (``casts``, compiled blocks): ``MUST_RECOMPUTE`` for
    each weight cast (:func:`_is_weight_cast`), ``PREFER_SAVE`` for every other op, which the compiler's
    min-cut partitioner reads as no annotation: it saves and recomputes the rest as without checkpointing
    (``must_recompute`` is ``MUST_RECOMPUTE`` or ``PREFER_RECOMPUTE``; only ``MUST_SAVE`` bans recompute).
    Eager blocks do not use it: eager selective checkpointing caches the output of every op it saves."""
    import torch
    from torch.utils.checkpoint import CheckpointPolicy as Decision
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    def decide(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Decision:
        if func in (torch.ops.aten._to_copy.default, torch.ops.prims.convert_element_type.default):
            src = args[0] if args else None
            dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
            if (
                isinstance(src, torch.Tensor)
                and src.dtype == torch.float32
                and src.dim() == 2
                and str(dtype).removeprefix("torch.") in LOW_PRECISION
            ):
                return Decision.MUST_RECOMPUTE
        return Decision.PREFER_SAVE

    return create_selective_checkpoint_contexts(decide)


@dataclass(frozen=True)
class Recast:
    """``casts`` (eager): what a block saves instead of a weight's low-precision cast (or a view of it):
    the fp32 weight, the dtype, and the view's shape, strides and storage offset."""

    weight: Any
    dtype: Any
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int

    def tensor(self) -> Any:
        """The cast again (outside autocast: backward runs after it exits), viewed as it was saved."""
        return self.weight.detach().to(self.dtype).as_strided(self.shape, self.stride, self.offset)


def weight_cast(t: Any) -> Recast | None:
    """``casts`` (eager): the :class:`Recast` of ``t`` when it is a bf16/fp16 cast of a whole fp32 leaf
    (a weight's autocast copy, ``ToCopyBackward0`` of the leaf's ``AccumulateGrad``), or a transpose or
    view of one (``linear`` saves the transposed cast); else None."""
    import torch

    fn = t.grad_fn
    while fn is not None and type(fn).__name__ in ("TBackward0", "ViewBackward0", "TransposeBackward0"):
        fn = fn.next_functions[0][0]
    if fn is None or type(fn).__name__ != "ToCopyBackward0":
        return None
    leaf = getattr(fn.next_functions[0][0], "variable", None)
    if (
        isinstance(leaf, torch.Tensor)
        and leaf.dtype == torch.float32
        and str(t.dtype).removeprefix("torch.") in LOW_PRECISION
        and leaf.numel() * t.element_size() == t.untyped_storage().nbytes()
    ):
        return Recast(leaf, t.dtype, tuple(t.shape), tuple(t.stride()), t.storage_offset())
    return None


class RecastWeights(nn.Module):
    """``casts``: a block whose weights' bf16 casts backward computes again from the fp32 weights instead
    of keeping them (2 bytes a parameter). Eager: the block's forward runs with autocast's weight cache
    off (each weight is cast once a forward anyway) under saved-tensor hooks that store a cast weight as
    its fp32 leaf (:func:`weight_cast`) and cast it again when backward unpacks it; any other saved
    tensor goes to the hooks set around the block, if any (torch's top default hooks). Compiled (the block's
    ``forward`` traced by ``torch.compile``): non-reentrant ``torch.utils.checkpoint`` with
    :func:`casts_context_fn`, whose tags the partitioner honours. Every other saved tensor is as under
    ``none``."""

    def __init__(self, block: Any) -> None:
        super().__init__()
        self._checkpoint_wrapped_module = block  # torch's checkpoint_wrapper's name: code that
        # looks through that wrapper (``hf_nn``'s block class names) looks through this one

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        if torch.compiler.is_compiling():
            from torch.utils.checkpoint import checkpoint

            return checkpoint(
                self._checkpoint_wrapped_module, *args, use_reentrant=False, preserve_rng_state=False,
                context_fn=casts_context_fn, **kwargs,
            )  # fmt: skip
        # hooks already set around the block (a profiler's, a count's) see every tensor it still saves
        outer = torch._C._autograd._top_saved_tensors_default_hooks(False)
        outer_pack, outer_unpack = outer if outer else (lambda t: t, lambda t: t)

        def pack(t: Any) -> Any:
            recast = weight_cast(t)
            return recast if recast is not None else outer_pack(t)

        def unpack(packed: Any) -> Any:
            return packed.tensor() if isinstance(packed, Recast) else outer_unpack(packed)

        cache = torch.is_autocast_cache_enabled()
        torch.set_autocast_cache_enabled(False)  # else autocast's cache holds each copy until it exits
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                return self._checkpoint_wrapped_module(*args, **kwargs)
        finally:
            torch.set_autocast_cache_enabled(cache)


def apply_casts(blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
    """Wrap each block in :class:`RecastWeights`: every activation saved as under ``none``, the weights'
    bf16 autocast casts recomputed in backward."""
    for i, block in enumerate(blocks):
        blocks[i] = RecastWeights(block)
