"""The GPU tests' construction code, exercised on the CPU: CI has no GPU, so a refactor that breaks
how a GPU test builds its configs and models would otherwise rot unseen until a GPU run
(issue 30, class 13: ``AttentionConfig(impl=...)`` after ``impl`` moved to ``BlockSparseConfig``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import test_attention_gpu as attention_gpu
import test_fp8_gpu as fp8_gpu
import torch
from helpers import ROOT

from flopsweep.models.gpt2 import GPT


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


@pytest.mark.slow
def test_every_gpu_test_is_collected_without_cuda() -> None:
    """``pytest -m gpu --collect-only`` imports every GPU test module and builds every parameter set
    here, without a GPU: an import or parametrization error fails here rather than on the GPU."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert any("test_model_trains_under_autocast[flex]" in line for line in collected)
    assert "error" not in proc.stdout.splitlines()[-1].lower(), proc.stdout[-2000:]
