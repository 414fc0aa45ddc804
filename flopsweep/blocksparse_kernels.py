"""Block-sparse causal attention (torch): the block layout and its two implementations.

:func:`block_layout` is the single source of every layout tensor: the ``gather`` implementation, the
FlexAttention ``BlockMask`` and the dense reference mask of the tests are all built from it; the
torch-free :func:`flopsweep.blocksparse.row_counts` counts the same blocks for the density.

A sequence whose length is not a multiple of the block size is padded to
``n_blocks * block_size``; the causal rule alone hides the padded keys from every
real query (a padded key lies after every real token), and the padded queries are
cut from the output.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from flopsweep.blocksparse import (  # noqa: F401 - n_blocks with the layout it sizes
    GLOBAL_BLOCKS,
    LAYOUTS,
    RANDOM_BLOCKS,
    STRIDE_BLOCKS,
    WINDOW_BLOCKS,
    n_blocks,
)


def block_layout(
    n: int,
    *,
    layout: str,
    window_blocks: int = WINDOW_BLOCKS,
    global_blocks: int = GLOBAL_BLOCKS,
    random_blocks: int = RANDOM_BLOCKS,
    stride_blocks: int = STRIDE_BLOCKS,
    seed: int = 0,
) -> torch.Tensor:
    """Which (query block, key block) pairs are computed.

    - ``causal``: every block ``j <= i`` (the published runs' layout).
    - ``local``: a sliding window, ``i - window_blocks < j <= i``.
    - ``bigbird`` (Zaheer et al. 2020, made causal): the local window, the first
      ``global_blocks`` key blocks for every query block, every earlier block for the
      first ``global_blocks`` query blocks, and ``random_blocks`` more earlier blocks
      per query row drawn from a generator seeded with ``seed``, so that every rank
      builds the same layout.
    - ``strided``: the "fixed" pattern of Sparse Transformers (Child et al. 2019),
      on blocks: the blocks of ``i``'s own chunk of ``stride_blocks`` blocks (local)
      plus the last block of every earlier chunk (the strided summary).

    Args:
        n: blocks per sequence, ``n_blocks(seq_len, block_size)``.

    Returns:
        BoolTensor ``[n, n]`` on the CPU, lower-triangular with a true diagonal.

    Raises:
        ValueError: for an unknown layout (the config validation catches it first).
    """
    i = torch.arange(n).view(n, 1)
    j = torch.arange(n).view(1, n)
    causal = j <= i
    if layout == "causal":
        keep = causal
    elif layout == "local":
        keep = i - j < window_blocks
    elif layout == "bigbird":
        keep = (i - j < window_blocks) | (j < global_blocks) | (i < global_blocks)
        keep = _add_random_blocks(keep & causal, random_blocks, seed)
    elif layout == "strided":
        keep = (i // stride_blocks == j // stride_blocks) | (j % stride_blocks == stride_blocks - 1)
    else:
        raise ValueError(f"unknown block layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    return (keep & causal) | torch.eye(n, dtype=torch.bool)


def _add_random_blocks(keep: torch.Tensor, random_blocks: int, seed: int) -> torch.Tensor:
    """Per query row, ``random_blocks`` earlier key blocks not yet kept (all of them if fewer)."""
    keep = keep.clone()
    gen = torch.Generator().manual_seed(seed)
    for row in range(keep.size(0)):
        free = (~keep[row, :row]).nonzero().flatten()  # earlier blocks not in the layout yet
        pick = free[torch.randperm(free.numel(), generator=gen)[:random_blocks]]
        keep[row, pick] = True
    return keep


def density(layout: torch.Tensor) -> float:
    """Fraction of the ``n * n`` (query block, key block) pairs that are computed.

    ``causal`` gives ``n (n + 1) / 2 / n^2``; dense attention counts as 1.0.
    """
    n = layout.size(0)
    return layout.sum().item() / (n * n)


def token_mask(layout: torch.Tensor, seq_len: int, block_size: int) -> torch.Tensor:
    """The layout expanded to tokens and made causal: BoolTensor ``[seq_len, seq_len]``.

    Entry ``(t, u)`` is true when query token ``t`` attends to key token ``u``: the
    reference mask the tests compare every implementation against.
    """
    dense = layout.repeat_interleave(block_size, 0).repeat_interleave(block_size, 1)
    dense = dense[:seq_len, :seq_len]
    return dense & torch.ones(seq_len, seq_len, dtype=torch.bool, device=layout.device).tril()


def gather_plan(layout: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Index and mask tensors of the ``gather`` implementation, for one layout and device.

    Returns:
        ``kv_index``: LongTensor ``[n, K]``, the key blocks of each query block padded
        with block 0, where ``K`` is the most key blocks any query block keeps;
        ``allowed``: BoolTensor ``[n, block_size, K * block_size]``, true where query
        token ``(i, r)`` may see key token ``c`` of the gathered row (slot kept and
        causal).
    """
    n = layout.size(0)
    counts = layout.sum(1)
    k_max = int(counts.max())
    # Stable sort puts each row's kept blocks first, in increasing order.
    order = torch.sort(layout.to(torch.int8), dim=1, descending=True, stable=True).indices
    kv_index = order[:, :k_max]
    slot_kept = torch.arange(k_max, device=layout.device).view(1, k_max) < counts.view(n, 1)
    q_pos = torch.arange(n, device=layout.device).view(n, 1) * block_size + torch.arange(
        block_size, device=layout.device
    ).view(1, block_size)  # (n, bs)
    k_pos = kv_index.view(n, k_max, 1) * block_size + torch.arange(block_size, device=layout.device).view(
        1, 1, block_size
    )  # (n, K, bs)
    causal = k_pos.view(n, 1, k_max * block_size) <= q_pos.view(n, block_size, 1)
    kept = slot_kept.repeat_interleave(block_size, 1).view(n, 1, k_max * block_size)
    return kv_index, causal & kept


def gather_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    kv_index: torch.Tensor,
    allowed: torch.Tensor,
    block_size: int,
) -> torch.Tensor:
    """Block-sparse causal attention in plain PyTorch (autograd on CPU and GPU).

    Each query block gathers its ``K`` key and value blocks, takes one softmax over
    the ``K * block_size`` gathered keys (computed in fp32, like the reference) and
    multiplies by the gathered values; the per-block outputs are the output rows of
    their query block. Memory and FLOPs scale with ``K``, not with ``n``.

    Args:
        q, k, v: ``(B, nh, T, hs)``.
        kv_index, allowed: from :func:`gather_plan` for this layout, on q's device.

    Returns:
        ``(B, nh, T, hs)`` in q's dtype.
    """
    B, nh, T, hs = q.shape
    n, k_max = kv_index.shape
    pad = n * block_size - T
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    q, k, v = (t.reshape(B, nh, n, block_size, hs) for t in (q, k, v))
    k = k[:, :, kv_index].reshape(B, nh, n, k_max * block_size, hs)  # (B, nh, n, K*bs, hs)
    v = v[:, :, kv_index].reshape(B, nh, n, k_max * block_size, hs)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, n, bs, K*bs)
    att = att.masked_fill(~allowed, float("-inf"))
    att = F.softmax(att.float(), dim=-1).to(q.dtype)  # every row keeps its own token: no empty row
    y = att @ v  # (B, nh, n, bs, hs)
    return y.reshape(B, nh, n * block_size, hs)[:, :, :T]


def flex_block_mask(layout: torch.Tensor, seq_len: int, block_size: int, device: Any) -> Any:
    """A FlexAttention ``BlockMask`` of the layout: the same blocks, causal inside each.

    Blocks that are entirely visible become FlexAttention's "full" blocks (no
    ``mask_mod`` call); the diagonal blocks stay partial.

    Returns:
        ``torch.nn.attention.flex_attention.BlockMask`` for ``(seq_len, seq_len)``.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    blocks = layout.to(device)

    def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return blocks[q_idx // block_size, kv_idx // block_size] & (kv_idx <= q_idx)

    return create_block_mask(mask_mod, None, None, seq_len, seq_len, device=device, BLOCK_SIZE=block_size)
