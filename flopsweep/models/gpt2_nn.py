"""The GPT-2 module (torch), built from :mod:`flopsweep.models.layers`; its shape is :mod:`.gpt2`.

Learned positions, pre-LayerNorm blocks, a GELU MLP of 4h, and an LM head tied to the token
embedding. Loaded on the rank through ``ModelFamily.torch_module``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flopsweep.attention_kernels import build_attention_fn
from flopsweep.config import AttentionConfig
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.models.layers import CausalLM, Embedding, GeluMLP, Linear, PreNormBlock, SelfAttention

INIT_STD = 0.02
MLP = GeluMLP


class CausalSelfAttention(SelfAttention):
    """Causal multi-head self-attention with one fused QKV projection.

    The fused projection's output features are laid out head by head, ``[q_0 k_0 v_0 q_1 k_1 v_1
    ...]`` (each ``hs`` wide), as Megatron-LM lays out its fused QKV, so that a column-wise split
    into ``tp`` equal parts gives each tensor-parallel rank whole heads with their own q, k and v.
    """

    OUTPUT = "c_proj"

    def __init__(self, cfg: GPT2Config, attention: str | AttentionConfig) -> None:
        super().__init__()
        self.head_dim = cfg.n_embd // cfg.n_head
        self.c_attn = Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = Linear(cfg.n_embd, cfg.n_embd)
        self.attn_fn = build_attention_fn(attention)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, T, _ = x.shape
        qkv = self.c_attn(x).view(B, T, -1, 3, self.head_dim)  # (B, T, nh_local, 3, hs)
        return qkv.unbind(dim=3)  # each (B, T, nh_local, hs)


class Block(PreNormBlock):
    """Pre-LayerNorm transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    NAMES = ("ln_1", "attn", "ln_2", "mlp")

    def __init__(self, cfg: GPT2Config, attention: str | AttentionConfig) -> None:
        h = cfg.n_embd
        super().__init__(
            nn.LayerNorm(h), CausalSelfAttention(cfg, attention), nn.LayerNorm(h), GeluMLP(h, 4 * h)
        )


class GPT(CausalLM):
    """GPT of DESIGN.md; ``forward(tokens[B, s + 1])`` returns the mean next-token cross-entropy.

    Args:
        cfg: sizes ``n_layer``, ``n_embd``, ``n_head``, ``seq_len``, ``vocab_size``.
        attention: attention option, a name or an ``AttentionConfig`` (``flopsweep.attention``).
    """

    BLOCKS = "h"
    embedding_children: tuple[str, ...] = ("wte", "wpe")
    """Children the embedding uses (the first pipeline stage keeps them)."""
    head_children: tuple[str, ...] = ("ln_f", "wte")
    """Children the LM head uses (the last pipeline stage keeps them): the tied token embedding."""

    def __init__(self, cfg: GPT2Config, attention: str | AttentionConfig = "sdpa") -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = Embedding(cfg.seq_len, cfg.n_embd)
        self.h = nn.ModuleList(Block(cfg, attention) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)

    def embed(self, idx: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Token plus learned position embeddings: idx LongTensor ``(B, T)`` at ``positions`` ``(T,)``
        -> ``(B, T, C)``."""
        return self.wte(idx) + self.wpe(positions)

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        """The final LayerNorm ``ln_f``."""
        return self.ln_f(x)

    def head_weight(self) -> torch.Tensor:
        """The tied LM head: the token embedding ``wte.weight`` ``(V, C)``."""
        return self.wte.weight

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Final LayerNorm and tied LM head: ``(B, T, C)`` -> logits ``(B, T, V)``."""
        return F.linear(self.ln_f(x), self.wte.weight)


def build(cfg: GPT2Config, attention: AttentionConfig) -> GPT:
    """The GPT in fp32 on the current default device (see :class:`GPT`)."""
    return GPT(cfg, attention)


def blocks(model: GPT) -> nn.ModuleList:
    """The transformer blocks, in order."""
    return model.h


def tied_parameters(model: GPT) -> list[nn.Parameter]:
    """The token embedding, which the LM head also uses outside ``wte``'s forward."""
    return [model.wte.weight]


def tensor_parallel_plan(model: GPT | None) -> dict[str, Any]:
    """The tensor- and sequence-parallel plan (:mod:`flopsweep.tensor_parallel`), Megatron-LM's:
    the fused QKV projection and ``c_fc`` column-wise (whole heads per rank: see
    :class:`CausalSelfAttention`), ``c_proj`` row-wise, reduce-scattered to the sequence-sharded
    residual stream; LayerNorms sequence-parallel; the token embedding vocabulary-parallel and the
    position embedding position-parallel (their sum sequence-sharded); the tied head reads the
    vocabulary-sharded embedding weight, so ``ln_f``'s output is gathered (replicated) first."""
    from flopsweep.tensor_parallel import Sublayer, sequence_parallel_plan

    return sequence_parallel_plan(
        embedding="wte",
        positions="wpe",
        blocks="h.*",
        sublayers=[
            Sublayer(norm="ln_1", module="attn", colwise=("c_attn",), rowwise=("c_proj",)),
            Sublayer(norm="ln_2", module="mlp", colwise=("c_fc",), rowwise=("c_proj",)),
        ],
        norm="ln_f",
        head=None,  # tied to wte
    )


TENSOR_PARALLEL_PLAN = tensor_parallel_plan
