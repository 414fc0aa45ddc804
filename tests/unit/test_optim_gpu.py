"""AdamW's step workspace on a GPU (``python -m pytest -m gpu tests/unit/test_optim_gpu.py``): what
``flopsweep.memory.optimizer_workspace_bytes`` adds for each ``optim.implementation`` is what the CUDA
allocator sees above the states during a step."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from flopsweep.config import OptimConfig
from flopsweep.trainers import build_adamw

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SHAPES = [(32000, 4096)] + [(8192, 4096)] * 6
"""Seven fp32 tensors, 333M elements in a model's order: the embedding-sized largest first, then six
blocks' worth. The for-loop keeps the previous tensor's quotient alive while it computes the next one's
(``denom`` is rebound after the division), so its peak is ``max_i(8 n_i + 4 n_(i-1))`` bytes: 8 B x the
largest tensor's n elements when every other tensor holds at most n/2, as the shipped models' embedding
and LM head do against their block matrices (on the H200, this order with the largest last, after a
block, measured 8 n + 4 n_block, 13% over)."""


def step_workspace(implementation: str, shapes=SHAPES) -> int:
    """Peak bytes allocated during the second ``step()`` above what was allocated before it (the first
    makes the moments)."""
    device = torch.device("cuda")
    params = [torch.nn.Parameter(torch.randn(s, device=device)) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = build_adamw(params, dataclasses.replace(OptimConfig(), implementation=implementation), device)
    optimizer.step()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    optimizer.step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def test_the_workspace_of_each_kernel_is_the_estimates() -> None:
    elements = sum(a * b for a, b in SHAPES)
    largest = max(a * b for a, b in SHAPES)
    assert step_workspace("fused") < 0.01 * 4 * elements  # in place
    assert step_workspace("foreach") == pytest.approx(4 * elements, rel=0.05)
    assert step_workspace("for_loop") == pytest.approx(8 * largest, rel=0.05)
