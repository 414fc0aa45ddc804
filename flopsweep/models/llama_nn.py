"""The Llama-3 module (torch), built from :mod:`flopsweep.models.layers`; its shape is :mod:`.llama`.

Pre-RMSNorm blocks, rotary position embeddings (RoPE, no learned positions), grouped-query
attention, a SwiGLU MLP, no biases, and an LM head tied to the token embedding or separate (see
:mod:`flopsweep.models.llama` for the differences from Meta's reference, none of which changes a
shape or a FLOP count). The module holds no buffers: RoPE's rotations are computed in ``forward``,
so that construction on the meta device followed by ``to_empty`` (FSDP2) loses nothing.

Attention kernels get ``q (B, n_head, T, hd)`` and ``k, v (B, n_kv_head, T, hd)`` *unrepeated*:
query head ``i`` attends with key/value head ``i // (n_head // n_kv_head)`` (SDPA's ``enable_gqa``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flopsweep.attention_kernels import build_attention_fn
from flopsweep.config import AttentionConfig
from flopsweep.models.layers import CausalLM, Embedding, Linear, PreNormBlock, SelfAttention, SwiGLU, norm
from flopsweep.models.llama import LlamaConfig

INIT_STD = 0.02
FeedForward = SwiGLU


class RotaryEmbedding(nn.Module):
    """RoPE rotations (Su et al. 2021, "RoFormer"), no parameters and no buffers.

    ``forward(positions) -> freqs_cis``: complex64 ``(T, hd/2)`` for LongTensor ``positions``
    ``(T,)``, the unit rotation ``exp(i t theta^(-2j/hd))`` of position ``t`` for the channel pair
    ``(2j, 2j + 1)``, as Meta's reference and torchtitan compute it.
    """

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.head_dim, self.theta = head_dim, theta

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        device = positions.device
        exponent = torch.arange(0, self.head_dim, 2, device=device, dtype=torch.float32) / self.head_dim
        inv_freq = 1.0 / (self.theta**exponent)  # (hd/2,)
        pos = positions.to(torch.float32)
        angles = torch.outer(pos, inv_freq)  # (T, hd/2)
        return torch.polar(torch.ones_like(angles), angles)


def apply_rotary(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Rotate each channel pair ``(2j, 2j + 1)`` of every head by its position's angle, in fp32.

    One complex multiply (torchtitan's form): fewer passes over ``x`` than the rotate-half
    form, which matters in eager mode, where every pass is its own kernel.

    Args:
        x: ``(B, T, nh, hd)``; freqs_cis: ``(T, hd/2)`` complex from :class:`RotaryEmbedding`.

    Returns:
        ``x`` rotated, in ``x``'s dtype, same shape.
    """
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (B, T, nh, hd/2)
    out = torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(3)
    return out.type_as(x)


class Attention(SelfAttention):
    """Causal grouped-query self-attention with RoPE on queries and keys; no biases."""

    OUTPUT = "wo"

    def __init__(self, cfg: LlamaConfig, attention: str | AttentionConfig) -> None:
        super().__init__()
        self.n_head, self.n_kv_head = cfg.n_head, cfg.n_kv_head
        self.head_dim = hd = cfg.n_embd // cfg.n_head
        self.wq = Linear(cfg.n_embd, cfg.n_head * hd, bias=False)
        self.wk = Linear(cfg.n_embd, cfg.n_kv_head * hd, bias=False)
        self.wv = Linear(cfg.n_embd, cfg.n_kv_head * hd, bias=False)
        self.wo = Linear(cfg.n_head * hd, cfg.n_embd, bias=False)
        self.attn_fn = build_attention_fn(attention)

    def project(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> tuple[torch.Tensor, ...]:
        B, T, _ = x.shape
        hd = self.head_dim
        # -1: the local head counts (n_head / tp, n_kv_head / tp) under tensor parallelism.
        q = apply_rotary(self.wq(x).view(B, T, -1, hd), freqs_cis)  # (B, T, nh, hd)
        k = apply_rotary(self.wk(x).view(B, T, -1, hd), freqs_cis)  # (B, T, n_kv, hd)
        return q, k, self.wv(x).view(B, T, -1, hd)


class TransformerBlock(PreNormBlock):
    """Pre-RMSNorm block: ``x + attention(attention_norm(x), freqs_cis)``, then
    ``x + feed_forward(ffn_norm(x))``."""

    NAMES = ("attention_norm", "attention", "ffn_norm", "feed_forward")

    def __init__(self, cfg: LlamaConfig, attention: str | AttentionConfig) -> None:
        h, eps = cfg.n_embd, cfg.norm_eps
        super().__init__(
            norm("rmsnorm", h, eps),
            Attention(cfg, attention),
            norm("rmsnorm", h, eps),
            SwiGLU(h, cfg.ffn_dim),
        )


class Llama(CausalLM):
    """Llama 3; ``forward(tokens[B, s + 1])`` returns the mean next-token cross-entropy.

    Parameter names follow Meta's reference and torchtitan (``tok_embeddings``,
    ``layers.i.attention.wq``, ``layers.i.feed_forward.w1``, ``norm``, ``output``).

    Args:
        cfg: the shape (:class:`LlamaConfig`).
        attention: attention option, a name or an ``AttentionConfig`` (``flopsweep.attention``);
            the kernel must accept fewer key/value heads than query heads.
    """

    BLOCKS = "layers"
    embedding_children: tuple[str, ...] = ("tok_embeddings",)
    """Children the embedding uses (the first pipeline stage keeps them)."""

    def __init__(self, cfg: LlamaConfig, attention: str | AttentionConfig = "sdpa") -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = Embedding(cfg.vocab_size, cfg.n_embd)
        self.rope = RotaryEmbedding(cfg.n_embd // cfg.n_head, cfg.rope_theta)
        self.layers = nn.ModuleList(TransformerBlock(cfg, attention) for _ in range(cfg.n_layer))
        self.norm = norm("rmsnorm", cfg.n_embd, cfg.norm_eps)
        self.output = None if cfg.tie_embeddings else Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    @property
    def head_children(self) -> tuple[str, ...]:
        """Children the LM head uses (the last pipeline stage keeps them): ``norm`` and ``output``,
        or the token embedding when tied."""
        return ("norm", "output") if self.output is not None else ("norm", "tok_embeddings")

    def embed(self, idx: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Token embeddings: idx LongTensor ``(B, T)`` -> ``(B, T, C)`` (RoPE acts in attention, at
        :meth:`block_args`' positions)."""
        return self.tok_embeddings(idx)

    def block_args(self, positions: torch.Tensor) -> tuple[torch.Tensor]:
        """Arguments every block takes after the hidden states: ``freqs_cis``, complex ``(T, hd/2)``
        of ``positions`` ``(T,)``, made here (the module holds no buffers). Under sequence
        parallelism they are the whole sequence's, not the hidden states' local shard (attention
        gathers the sequence before it rotates)."""
        return (self.rope(positions),)

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        """The final RMSNorm ``norm``."""
        return self.norm(x)

    def head_weight(self) -> torch.Tensor:
        """The LM head ``(V, C)``: ``output.weight``, or the token embedding's when tied."""
        return self.output.weight if self.output is not None else self.tok_embeddings.weight

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Final RMSNorm and LM head (tied or ``output``): ``(B, T, C)`` -> logits ``(B, T, V)``."""
        x = self.norm(x)
        return self.output(x) if self.output is not None else F.linear(x, self.tok_embeddings.weight)


def build(cfg: LlamaConfig, attention: AttentionConfig) -> Llama:
    """The Llama in fp32 on the current default device (see :class:`Llama`)."""
    return Llama(cfg, attention)


def blocks(model: Llama) -> nn.ModuleList:
    """The transformer blocks, in order; each is called as ``block(x, freqs_cis)``."""
    return model.layers


def tied_parameters(model: Llama) -> list[nn.Parameter]:
    """The parameters used outside their own module's forward: the token embedding when the LM head
    is tied, and ``output.weight`` when the head is fused with the loss (``loss.chunk_tokens``)."""
    if model.cfg.tie_embeddings:
        return [model.tok_embeddings.weight]
    return [model.output.weight] if model.loss_chunk_tokens > 0 else []


def tensor_parallel_plan(model: Any) -> dict[str, Any]:
    """The tensor- and sequence-parallel plan (:mod:`flopsweep.tensor_parallel`), torchtitan's
    for Llama 3: ``wq``, ``wk``, ``wv``, ``w1``, ``w3`` column-wise (each rank ``n_head / tp`` query
    and ``n_kv_head / tp`` key/value heads, whole GQA groups), ``wo`` and ``w2`` row-wise,
    reduce-scattered to the sequence-sharded residual stream; RMSNorms sequence-parallel; the token
    embedding vocabulary-parallel; the separate ``output`` head column-wise over the vocabulary
    (vocabulary-sharded logits for loss parallelism), or, when tied, ``norm``'s output gathered
    for the head that reads the vocabulary-sharded embedding weight."""
    from flopsweep.tensor_parallel import Sublayer, sequence_parallel_plan

    return sequence_parallel_plan(
        embedding="tok_embeddings",
        blocks="layers.*",
        sublayers=[
            Sublayer(
                norm="attention_norm",
                module="attention",
                colwise=("wq", "wk", "wv"),
                rowwise=("wo",),
                extra_inputs=1,  # freqs_cis
            ),
            Sublayer(norm="ffn_norm", module="feed_forward", colwise=("w1", "w3"), rowwise=("w2",)),
        ],
        norm="norm",
        head=None if model.output is None else "output",  # tied: F.linear(norm(x), tok_embeddings.weight)
    )


TENSOR_PARALLEL_PLAN = tensor_parallel_plan
