"""What an attention kernel's own tensors cost in memory, torch-free: the term of a kernel whose
:attr:`flopsweep.attention.KernelSpec.memory` gives one (:class:`KernelMemory`), which
:mod:`flopsweep.activation_memory` adds to the estimate of :mod:`flopsweep.memory` in place of the fused
kernels' logsumexp. ``blocksparse impl=gather`` is the one (:func:`blocksparse_memory`); ``standard`` and
``sdpa-math`` keep their bytes per score by compute dtype
(:data:`flopsweep.activation_memory.ATTENTION_SAVED`), the fused kernels a logsumexp per query and head.

``impl=gather`` (:func:`flopsweep.blocksparse_kernels.gather_attention`, read with torch 2.13's autograd,
and checked tensor by tensor against what autograd saves in ``tests/unit/test_kernel_memory.py``) gathers,
for every query block, the ``K`` key and value blocks of the widest row of the layout (every row is
padded to ``K``, :func:`flopsweep.blocksparse.row_counts`), and takes one softmax over ``K bs`` keys. For
one call of ``B`` sequences of ``s`` tokens, ``h`` query heads (the key and value heads are repeated to
``h`` first), head dim ``d``, ``n = ceil(s / bs)`` blocks, ``P = n bs`` padded tokens and ``c`` bytes of
the compute dtype, one layer keeps for backward:

- the scores' softmax, fp32, and its cast to the compute dtype that the second matmul reads:
  ``(4 + c) B h P K bs`` bytes (fp32: the cast is the softmax's own tensor, 4 bytes a score);
- the gathered key and value blocks, ``(B, h, n, K bs, d)`` each, which the two matmuls save:
  ``2 c B h n K bs d``;
- the queries, padded, or copied whole because their heads are strided in the projection's output
  and the batched matmul cannot view them: ``c B h P d``;
- the mask the scores are filled with, bool ``(n, bs, K bs)``, saved by ``masked_fill``;

and it does not keep the queries, keys and values that the family's ``other`` counts for a kernel that
saves them (gpt2's QKV output, Llama's ``q`` and ``k`` after the rotary embedding and ``v``): the gather's
index backward saves only the indices. Each layer's kernel also holds its plan from the first step on
(``allowed``, bool ``(n, bs, K bs)``, and ``kv_index``, int64 ``(n, K)``). While a recomputed layer
(``full`` checkpointing) runs its backward, its scores take ``RECOMPUTED_SCORE_BYTES`` as ``standard``'s
do (the same operations on ``B h P K bs`` scores instead of ``B h s s``) and one gathered block tensor's
gradient, ``c B h n K bs d``, is made beside the kept ones (derived, not measured: no checkpointed
``gather`` record). The H200 records of gpt-1.3b without checkpointing (2048 tokens, micro batch 8:
``local``, ``bigbird``, ``strided``; 8192, micro batch 1: ``local``, ``bigbird``) are within 0.3% (were
34% to 68% low), and the four that ran out of memory are estimated at 159 to 277 GiB.

Not derived: one query head per rank (``n_head / tp = 1``) with ``s`` a whole number of blocks, where
the queries are a view, not a copy, and keep the projection's output alive (gpt2: ``2 h`` elements more a
token); ``compile=true``, whose partitioner chooses what to save (the eager term is counted). Left
approximate: under ``tp`` the saved mask, whole on every rank, is divided over ``tp`` with the rest, and
on the CPU ``kv_index`` is a view of the ``n x n`` sort order (``8 n^2`` bytes, not ``8 n K``): kilobytes
to megabytes a layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopsweep import blocksparse

MASK_BYTES = 1
"""Bytes per element of a bool mask."""
INDEX_BYTES = 8
"""Bytes per element of an int64 index."""
SOFTMAX_BYTES = 4
"""Bytes per score of the fp32 softmax the ``gather`` kernel saves."""


@dataclass(frozen=True, kw_only=True)
class KernelShape:
    """The attention call a kernel's memory term is computed for: ``sequences`` sequences of ``seq_len``
    tokens, ``heads`` query heads and ``kv_heads`` key/value heads of ``head_dim``, ``compute`` bytes
    per element of the compute dtype (2 for bf16/fp16 autocast, 4 for fp32), on ``device`` (``cuda``,
    ``cpu``)."""

    sequences: int
    seq_len: int
    heads: int
    kv_heads: int
    head_dim: int
    compute: int
    device: str = "cuda"

    @property
    def inputs(self) -> int:
        """Bytes of the call's queries, keys and values in the compute dtype: ``c B s (h + 2 h_kv) d``."""
        return self.compute * self.sequences * self.seq_len * (self.heads + 2 * self.kv_heads) * self.head_dim


@dataclass(frozen=True, kw_only=True)
class KernelMemory:
    """One layer's memory term for one call of a :class:`KernelShape`, in bytes unless said."""

    saved: int
    """What autograd saves for the layer's backward, the kernel's own tensors."""
    inputs: int
    """Of the family's ``other`` elements, the bytes of the queries, keys and values that the kernel does
    not keep (the estimate subtracts them from :attr:`saved`)."""
    scores: int
    """Scores the layer materialises (elements, padding included)."""
    score_bytes: int
    """Of :attr:`saved`, the bytes per score."""
    recompute_extra: int
    """Live beside the scores' ``RECOMPUTED_SCORE_BYTES`` while a recomputed layer runs its backward."""
    held: int
    """What the layer's kernel holds from its first call on, whatever the checkpointing (its plan)."""


def gather_memory(cfg: Any, shape: KernelShape) -> KernelMemory:
    """The term of ``blocksparse impl=gather`` (see the module docstring for each tensor) for the layout of
    ``cfg`` (a ``BlockSparseConfig``) at ``shape.seq_len``.

    Example: ``block_size=32``, ``local`` with 2 blocks, 2 sequences of 256 tokens, 4 heads of 32, bf16:
    ``n = 8``, ``K = 2``, ``B h P K bs = 131072`` scores at 6 bytes, the gathered blocks ``2 x 262144``,
    the queries ``131072``, the mask ``16384``: 1,458,176 bytes saved."""
    c, B, h, d = shape.compute, shape.sequences, shape.heads, shape.head_dim
    bs = cfg.block_size
    counts = blocksparse.row_counts(blocksparse.n_blocks(shape.seq_len, bs), **blocksparse.layout_knobs(cfg))
    n, k = len(counts), max(counts)
    padded = n * bs
    scores = B * h * padded * k * bs
    score_bytes = SOFTMAX_BYTES + (c if c != SOFTMAX_BYTES else 0)
    gathered = c * B * h * n * k * bs * d  # one of the key and value tensors
    mask = MASK_BYTES * n * bs * k * bs
    return KernelMemory(
        saved=score_bytes * scores + 2 * gathered + c * B * h * padded * d + mask,
        inputs=shape.inputs,
        scores=scores,
        score_bytes=score_bytes,
        recompute_extra=gathered,
        held=mask + INDEX_BYTES * n * k,
    )


def blocksparse_memory(cfg: Any, shape: KernelShape) -> KernelMemory | None:
    """``attention=blocksparse``'s term: :func:`gather_memory` for ``impl=gather`` (``auto`` as it resolves
    on ``shape.device``, :func:`flopsweep.blocksparse.resolved_impl`); None for ``flex``, a fused kernel
    (its logsumexp)."""
    if blocksparse.resolved_impl(cfg.impl, shape.device) != "gather":
        return None
    return gather_memory(cfg, shape)
