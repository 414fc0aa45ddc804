"""Block-sparse causal attention, torch-free: the layouts, their names and their density.

A *block layout* is a boolean matrix ``[n_blocks, n_blocks]``: entry ``(i, j)`` is true when
query block ``i`` attends to key block ``j``. :func:`flopsweep.blocksparse_kernels.block_layout`
builds it (torch) for the ``gather`` implementation, the FlexAttention ``BlockMask`` and the tests'
dense reference mask. This module counts the blocks each query row keeps without building it
(:func:`row_counts`), which is all ``attention.density`` and the FLOPs need: bigbird's random
blocks are drawn per row among the earlier blocks not yet kept, so how many a row gets does not
depend on which (``min(random_blocks, free)``). Validation and the metrics import no torch.

Every layout keeps the diagonal block and is causal: block ``j > i`` is never computed, and inside
a kept block token ``t`` sees only tokens ``<= t``. A sequence whose length is not a multiple of
the block size is padded to ``n_blocks * block_size``.
"""

from __future__ import annotations

import math
from typing import Any

LAYOUTS = ("causal", "local", "bigbird", "strided")


def resolved_impl(impl: str, device: str) -> str:
    """The implementation ``attention.impl`` runs on ``device``: ``auto`` is ``flex`` on CUDA and
    ``gather`` on the CPU (FlexAttention has no backward there); ``flex`` and ``gather`` as given."""
    return impl if impl != "auto" else ("flex" if device == "cuda" else "gather")


def n_blocks(seq_len: int, block_size: int) -> int:
    """Blocks that cover ``seq_len`` tokens: ``ceil(seq_len / block_size)``."""
    return math.ceil(seq_len / block_size)


LAYOUT_KNOBS = ("layout", "window_blocks", "global_blocks", "random_blocks", "stride_blocks")
"""The ``attention=blocksparse`` keys that shape a layout (:func:`row_counts`, ``block_layout``)."""

WINDOW_BLOCKS, GLOBAL_BLOCKS, RANDOM_BLOCKS, STRIDE_BLOCKS = 4, 1, 2, 4
"""The layout knobs' defaults, in blocks, the one place of them: ``BlockSparseConfig``'s
(:mod:`flopsweep.options`), :func:`row_counts`'s and ``flopsweep.blocksparse_kernels.block_layout``'s."""


def layout_knobs(cfg: Any) -> dict[str, Any]:
    """The :data:`LAYOUT_KNOBS` of a ``blocksparse`` config (``BlockSparseConfig``), by name: the
    keyword arguments of :func:`row_counts` and of ``flopsweep.blocksparse_kernels.block_layout``."""
    return {key: getattr(cfg, key) for key in LAYOUT_KNOBS}


def row_counts(
    n: int,
    *,
    layout: str,
    window_blocks: int = WINDOW_BLOCKS,
    global_blocks: int = GLOBAL_BLOCKS,
    random_blocks: int = RANDOM_BLOCKS,
    stride_blocks: int = STRIDE_BLOCKS,
) -> list[int]:
    """The key blocks each of the ``n`` query blocks keeps, as ``block_layout(...).sum(1)`` counts
    them (the layouts are described there), in closed form per row ``i``:

    - ``causal``: ``i + 1``; ``local``: ``min(w, i + 1)``;
    - ``strided``: the row's own chunk up to ``i`` (``i - c s + 1``, ``c = i // s``) plus the last
      block of each of the ``c`` earlier chunks;
    - ``bigbird``: every ``j <= i`` for the first ``g`` rows; else the window ``min(w, i + 1)``, the
      global blocks before the window ``max(0, min(g, i - w + 1))`` and ``min(r, free)`` random
      ones, ``free`` the earlier blocks not yet kept.

    Raises:
        ValueError: for an unknown layout (the config validation catches it first).
    """
    if layout == "causal":
        return [i + 1 for i in range(n)]
    if layout == "local":
        return [min(window_blocks, i + 1) for i in range(n)]
    if layout == "strided":
        s = stride_blocks
        return [i - (i // s) * s + 1 + i // s for i in range(n)]
    if layout == "bigbird":
        w, g = window_blocks, global_blocks
        counts = []
        for i in range(n):
            kept = i + 1 if i < g else min(w, i + 1) + max(0, min(g, i - w + 1))
            counts.append(kept + min(random_blocks, i + 1 - kept))
        return counts
    raise ValueError(f"unknown block layout {layout!r}; expected one of {', '.join(LAYOUTS)}")


def counts_density(counts: list[int]) -> float:
    """Fraction of the ``n * n`` (query block, key block) pairs computed, from :func:`row_counts`
    (``causal`` gives ``n (n + 1) / 2 / n^2``; dense attention counts as 1.0)."""
    n = len(counts)
    return sum(counts) / (n * n)
