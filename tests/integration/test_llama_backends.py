"""The Llama family on every backend and every CPU attention kernel (two gloo ranks, fp32)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import LLAMA_TINY_TWO_RANKS, ok_sweep


@pytest.mark.slow
def test_llama_tiny_first_step_loss_is_the_same_on_every_backend(tmp_path: Path) -> None:
    """Same seed, same data: DDP, FSDP2 and ZeRO 1-3 (tied embedding registered for ZeRO-3)
    give the same first-step loss within 1e-4."""
    recs = ok_sweep(tmp_path, *LLAMA_TINY_TWO_RANKS, "backend=ddp,fsdp,zero1,zero2,zero3")
    assert len(recs) == 5
    losses = [r["metrics"]["loss_first"] for r in recs]
    assert max(losses) - min(losses) < 1e-4, losses
    for r in recs:
        assert (
            r["model"]["arch"] == "llama" and r["metrics"]["tflops_per_device"] is None
        )  # eq. 3 is GPT-only
        assert r["metrics"]["model_flops_per_iteration"] > 0
