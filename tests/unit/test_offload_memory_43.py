"""``activation_checkpointing=offload``'s device memory (reliability row 1080): torch's ``save_on_cpu``
keeps only host copies of what the blocks save, autocast's bf16 weight copies among them, so the start of
backward holds neither the blocks' weight copies nor a block's activations beside the loss's bytes.
Session 43's Llama 3.2 1B eager micro batch 7 on one H100 (``benchmarks/results/h100/session43/probe/a7``)
measured 35.08 GiB: 38.22 predicted before, 34.85 now."""

from __future__ import annotations

import dataclasses

from flopsweep.config import BatchConfig, CheckpointingConfig, PrecisionConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.memory import GIB, autocast_cached, estimate, forward_autocast_cached, forward_end_bytes
from flopsweep.models import family
from flopsweep.models.llama import LlamaConfig

LLAMA_1B = LlamaConfig(
    name="llama3.2-1b", n_layer=16, n_embd=2048, n_head=32, n_kv_head=8, ffn_dim=8192,
    seq_len=2048, vocab_size=128256, tie_embeddings=True,
)  # fmt: skip


def _cfg(policy: str) -> RunConfig:
    return dataclasses.replace(
        RunConfig(),
        model=LLAMA_1B,
        precision=PrecisionConfig(name="bf16"),
        batch=BatchConfig(micro_batch_size=7),
        activation_checkpointing=CheckpointingConfig(name=policy),
        device="cuda",
    )


def test_offload_keeps_only_the_heads_autocast_copy() -> None:
    """The blocks' bf16 copies backward keeps are host copies: only the head's ``V h`` stays on the device
    past the loss; autocast's cache still holds every block's until forward ends."""
    cfg = _cfg("offload")
    head = LLAMA_1B.vocab_size * LLAMA_1B.n_embd
    assert autocast_cached(cfg, Layout()) == head
    assert forward_autocast_cached(cfg, Layout()) == family(LLAMA_1B).n_params(LLAMA_1B)
    assert autocast_cached(_cfg("none"), Layout()) == family(LLAMA_1B).n_params(LLAMA_1B)


def test_offload_keeps_no_activation_on_the_device_when_forward_ends() -> None:
    assert forward_end_bytes(_cfg("offload"), Layout()) == 0
    assert forward_end_bytes(_cfg("none"), Layout()) > 0


def test_offload_start_of_backward_is_states_and_the_loss() -> None:
    """The peak is the start of backward: 14 P of states less the blocks' 2-byte copies, and the eager
    loss's 12 bytes a logit; no block's activations beside them (34.85 GiB, 35.08 measured)."""
    est = estimate(_cfg("offload"), Layout())
    p = family(LLAMA_1B).n_params(LLAMA_1B)
    head = LLAMA_1B.vocab_size * LLAMA_1B.n_embd
    logits = 12 * 7 * 2048 * LLAMA_1B.vocab_size
    assert est.on_host and est.model_states == 12 * p + 2 * head
    assert est.logits == logits
    assert est.backward_start == est.model_states + logits
    assert est.total == est.backward_start
    assert round(est.total_gib, 2) == 34.85
    assert abs(est.total / (35.08 * GIB) - 1) < 0.01
    # every other policy still counts what it did: none keeps every block's activations beside the loss
    none = estimate(_cfg("none"), Layout())
    assert not none.on_host and none.backward_start == none.model_states + none.activations + logits
