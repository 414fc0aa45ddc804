"""The GPU tests' construction code, exercised on the CPU: CI has no GPU, so a refactor that breaks
how a GPU test builds its configs and models would otherwise rot unseen until a GPU run
(issue 30, class 13: ``AttentionConfig(impl=...)`` after ``impl`` moved to ``BlockSparseConfig``)."""

from __future__ import annotations

import pytest
import torch
from integration import test_attention_gpu as attention_gpu  # it compiles (inductor workers): integration

from flopsweep.models.gpt2 import GPT
from unit import test_fp8_gpu as fp8_gpu
from unit import test_optim_gpu as optim_gpu


@pytest.mark.parametrize("attention", ["flex", "blocksparse"])
def test_gpu_autocast_test_builds_its_models_on_the_meta_device(attention: str) -> None:
    """The models of ``test_attention_gpu.py::test_model_trains_under_autocast``, built without CUDA."""
    options = attention_gpu.autocast_options(attention)
    assert [getattr(o, "name", o) for o in options] == ["sdpa", attention]
    for option in options:
        with torch.device("meta"):
            model = GPT(attention_gpu.AUTOCAST_MODEL, option)
        assert sum(p.numel() for p in model.parameters()) > 0


@pytest.mark.parametrize("shape", list(fp8_gpu.SHAPES))
def test_gpu_fp8_test_builds_its_models_on_the_meta_device(shape: str) -> None:
    """The models of ``test_fp8_gpu.py::test_fp8_first_loss_matches_bf16``, built without CUDA (the
    GPU run of 2026-12-01 found them built with a removed argument)."""
    model = fp8_gpu.build_model(shape, "meta")
    assert sum(p.numel() for p in model.parameters()) > 0


def test_gpu_optim_test_sizes_its_tensors() -> None:
    """``test_optim_gpu.py``'s shapes: 333M elements, the largest the embedding-sized one."""
    assert sum(a * b for a, b in optim_gpu.SHAPES) == 6 * 8192 * 4096 + 32000 * 4096
    assert callable(optim_gpu.step_workspace)
