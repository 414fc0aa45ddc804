"""The Llama family on every backend and every CPU attention kernel (two gloo ranks, fp32)."""

from __future__ import annotations

import pytest
import torch

from flopsweep.attention import BlockSparseConfig, check_support
from flopsweep.config import AttentionConfig
from flopsweep.models.llama import Llama, LlamaConfig

KERNELS_ON_CPU = [
    AttentionConfig(name="sdpa"),
    AttentionConfig(name="sdpa-math"),
    BlockSparseConfig(layout="causal", block_size=16),
]


@pytest.mark.parametrize("n_kv_head", [1, 2, 4])
@pytest.mark.parametrize("attention", KERNELS_ON_CPU, ids=lambda a: a.name)
def test_every_cpu_kernel_matches_standard(attention: AttentionConfig, n_kv_head: int) -> None:
    """Same weights, same tokens: every kernel that runs on the CPU gives standard's loss and
    gradients (fp32, 1e-5), with GQA at 1, 2 and 4 KV heads."""
    cfg = LlamaConfig(n_kv_head=n_kv_head, seq_len=64)
    attention = check_support(attention, device="cpu", precision="fp32", run_seed=0, seq_len=cfg.seq_len)
    tokens = torch.randint(
        0, cfg.vocab_size, (2, cfg.seq_len + 1), generator=torch.Generator().manual_seed(1)
    )
    results = []
    for attn in (AttentionConfig(name="standard"), attention):
        torch.manual_seed(0)
        model = Llama(cfg, attn)
        loss = model(tokens)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (ref_loss, ref_grads), (loss, grads) = results
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    for g, ref in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, ref, atol=1e-5, rtol=1e-4)
