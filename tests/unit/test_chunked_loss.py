"""``loss.chunk_tokens``: the LM head fused with its cross-entropy, chunk by chunk.

The fused loss gives the unfused loss and gradients (fp32, 1e-5) for every head the built-in
families have (GPT-2's tied, Llama's tied and untied), at chunks that do and do not divide the
tokens; what cannot fuse is refused before launch; the memory estimate counts a chunk instead of
the whole logits; and real runs (``single``, FSDP2 and ZeRO-3 over two gloo ranks) train the same
losses with and without it.
"""

from __future__ import annotations

import copy

import pytest
import torch

from flopsweep.config import AttentionConfig, ConfigError, RunConfig
from flopsweep.models import MODELS
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.models.llama import LlamaConfig

HEADS = {
    "gpt2-tied": ("gpt2", GPT2Config()),
    "llama-tied": ("llama", LlamaConfig()),
    "llama-untied": ("llama", LlamaConfig(tie_embeddings=False)),
}


@pytest.mark.parametrize("chunk", [1, 100, 128, 10_000])
@pytest.mark.parametrize("head", list(HEADS))
def test_fused_loss_and_gradients_are_the_unfused_ones(head: str, chunk: int) -> None:
    """Chunks of 1 token, of 100 (not dividing the 384 tokens), of 128 and of more than all: the
    same loss and the same gradient of every parameter as the whole logits, in fp32."""
    arch, cfg = HEADS[head]
    torch.manual_seed(0)
    whole = MODELS[arch].build(cfg, AttentionConfig())
    fused = copy.deepcopy(whole)
    fused.loss_chunk_tokens = chunk
    tokens = torch.randint(
        0, cfg.vocab_size, (3, cfg.seq_len + 1), generator=torch.Generator().manual_seed(1)
    )
    expected, got = whole(tokens), fused(tokens)
    expected.backward()
    got.backward()
    assert got.item() == pytest.approx(expected.item(), abs=1e-5)
    for (name, p), q in zip(whole.named_parameters(), fused.parameters(), strict=True):
        assert q.grad is not None and torch.allclose(q.grad, p.grad, atol=1e-6, rtol=1e-4), name


def test_fused_loss_under_bf16_autocast_is_close_to_the_unfused_one() -> None:
    """Under autocast the chunk's logits are bf16 products upcast to fp32, as the unfused head's."""
    torch.manual_seed(0)
    whole = MODELS["llama"].build(LlamaConfig(tie_embeddings=False), AttentionConfig())
    fused = copy.deepcopy(whole)
    fused.loss_chunk_tokens = 64
    tokens = torch.randint(0, 512, (2, 129), generator=torch.Generator().manual_seed(2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected, got = whole(tokens), fused(tokens)
    assert got.dtype == torch.float32
    assert got.item() == pytest.approx(expected.item(), rel=1e-3)


REFUSED = {
    "tp": (["parallel.tp=2", "backend=fsdp", "nproc_per_node=2"], "parallel.tp=1"),
    "pp": (["parallel.pp=2", "backend=fsdp", "nproc_per_node=2", "model.n_layer=2"], "parallel.pp=1"),
    "hf": (["model=hf"], "model=gpt-tiny, llama-tiny, llama3.1-8b"),
    "negative": (["loss.chunk_tokens=-4"], "e.g. loss.chunk_tokens=4096"),
}


@pytest.mark.parametrize("case", list(REFUSED.values()), ids=list(REFUSED))
def test_what_cannot_fuse_is_refused_in_one_line(hydra_compose, case) -> None:
    """Each refusal names ``loss.chunk_tokens``, its value and the fix, on one line."""
    from flopsweep.plan import validate

    overrides, fix = case
    chunk = [] if any(o.startswith("loss.chunk_tokens") for o in overrides) else ["loss.chunk_tokens=64"]
    with pytest.raises(ConfigError) as err:
        validate(hydra_compose(["model=llama-tiny", "device=cpu", *overrides, *chunk]))
    assert err.value.key == "loss.chunk_tokens" and fix in str(err.value)
    assert "loss.chunk_tokens=0" in str(err.value) and "\n" not in str(err.value)


def test_memory_counts_one_chunk_and_the_kept_gradients() -> None:
    """The estimate's logits term: one chunk of logits, the hidden states' and the head weight's fp32
    gradients, instead of the whole logits; the activations are unchanged."""
    from flopsweep.memory import CHUNK_LOGIT_BYTES, LOGIT_BYTES, activation_bytes

    m = LlamaConfig(
        n_layer=2, n_embd=1024, n_head=8, n_kv_head=2, ffn_dim=2048, vocab_size=128_256, seq_len=2048
    )
    cfg = RunConfig(model=m)
    cfg.batch.micro_batch_size = 3
    tokens = 3 * 2048
    acts, whole = activation_bytes(cfg)
    assert whole == LOGIT_BYTES[False] * tokens * m.vocab_size
    cfg.loss.chunk_tokens = 1024
    acts_fused, fused = activation_bytes(cfg)
    assert acts_fused == acts
    assert (
        fused == CHUNK_LOGIT_BYTES * 1024 * m.vocab_size + 4 * m.vocab_size * m.n_embd + 4 * tokens * m.n_embd
    )
    assert fused < whole / 3
    cfg.loss.chunk_tokens = 10**6  # a chunk above the micro batch holds the micro batch's tokens
    assert (
        activation_bytes(cfg)[1]
        == (CHUNK_LOGIT_BYTES * tokens + 4 * m.n_embd) * m.vocab_size + 4 * tokens * m.n_embd
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fused_loss_on_cuda_under_bf16_autocast_matches_the_unfused_one() -> None:
    """On the GPU, bf16 autocast: the fused loss and the head weight's gradient are the unfused
    ones within bf16's rounding (the chunk's products are bf16, summed in fp32)."""
    torch.manual_seed(0)
    with torch.device("cuda"):
        whole = MODELS["llama"].build(LlamaConfig(tie_embeddings=False, vocab_size=4096), AttentionConfig())
    fused = copy.deepcopy(whole)
    fused.loss_chunk_tokens = 100
    tokens = torch.randint(0, 4096, (4, 129), device="cuda", generator=torch.Generator("cuda").manual_seed(3))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        expected, got = whole(tokens), fused(tokens)
    expected.backward()
    got.backward()
    assert got.item() == pytest.approx(expected.item(), rel=2e-3)
    g_whole, g_fused = whole.output.weight.grad, fused.output.weight.grad
    assert (g_fused - g_whole).norm() <= 0.02 * g_whole.norm()
