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

SHAPES = [(8192, 4096)] * 6 + [(32000, 4096)]
"""Seven fp32 tensors, 333M elements: six blocks' worth and one embedding-sized largest tensor."""


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
