"""The GPT-2 family (``model.arch=gpt2``): its schema, module, parameter count and FLOPs.

Learned positions, pre-LayerNorm blocks, a GELU MLP of 4h, and an LM head tied
to the token embedding. Weights are initialised inside each leaf module's
``reset_parameters`` so that construction under ``deepspeed.zero.Init`` (which
partitions each module right after its ``__init__``) gives the same weights as
plain construction from the same seed.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flopsweep import flops
from flopsweep.attention import build_attention_fn
from flopsweep.config import AttentionConfig, ConfigError, require_positive
from flopsweep.options import GPT2Config

CONFIG = GPT2Config

INIT_STD = 0.02  # GPT-2's N(0, 0.02) for every weight matrix and embedding


class Linear(nn.Linear):
    """``nn.Linear`` with GPT-2 initialisation: weights N(0, 0.02), bias 0."""

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, mean=0.0, std=INIT_STD)
        if self.bias is not None:
            nn.init.zeros_(self.bias)


class Embedding(nn.Embedding):
    """``nn.Embedding`` with GPT-2 initialisation N(0, 0.02)."""

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, mean=0.0, std=INIT_STD)


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention with one fused QKV projection.

    The fused projection's output features are laid out head by head, ``[q_0 k_0 v_0 q_1 k_1 v_1
    ...]`` (each ``hs`` wide), as Megatron-LM lays out its fused QKV, so that a column-wise split
    into ``tp`` equal parts gives each tensor-parallel rank whole heads with their own q, k and v.
    The head count is read from the projection's output, so the same code runs the local heads
    (``n_head / tp``) under tensor parallelism.
    """

    def __init__(self, cfg: GPT2Config, attention: str | AttentionConfig) -> None:
        super().__init__()
        self.head_dim = cfg.n_embd // cfg.n_head
        self.c_attn = Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = Linear(cfg.n_embd, cfg.n_embd)
        self.attn_fn = build_attention_fn(attention)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape  # (batch, seq, n_embd)
        hs = self.head_dim
        qkv = self.c_attn(x).view(B, T, -1, 3, hs)  # (B, T, nh_local, 3, hs)
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(dim=3))  # each (B, nh_local, T, hs)
        y = self.attn_fn(q, k, v)  # (B, nh_local, T, hs)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.c_fc = Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: GPT2Config, attention: str | AttentionConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg, attention)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT of DESIGN.md; ``forward(tokens)`` returns the mean next-token cross-entropy.

    Args:
        cfg: sizes ``n_layer``, ``n_embd``, ``n_head``, ``seq_len``, ``vocab_size``.
        attention: attention option, a name or an ``AttentionConfig`` (``flopsweep.attention``).

    Activation checkpointing is applied from outside, to :func:`blocks`
    (:mod:`flopsweep.checkpointing`).
    """

    def __init__(
        self,
        cfg: GPT2Config,
        attention: str | AttentionConfig = "sdpa",
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = Embedding(cfg.seq_len, cfg.n_embd)
        self.h = nn.ModuleList(Block(cfg, attention) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Loss of one micro batch.

        Args:
            tokens: LongTensor ``[batch, seq_len + 1]``; inputs are ``tokens[:, :-1]``
                and targets ``tokens[:, 1:]``.

        Returns:
            Scalar mean cross-entropy (computed in fp32).
        """
        idx, targets = tokens[:, :-1], tokens[:, 1:]
        x = self.embed(idx)  # (B, T, C)
        for block in self.h:
            x = block(x)
        return self.head_loss(x, targets)

    # The parts of forward, for pipeline stages (flopsweep.pipeline): the first stage embeds, every
    # stage runs its blocks with ``block_args``, the last stage computes the logits.
    embedding_children: tuple[str, ...] = ("wte", "wpe")
    """Children the embedding uses (the first pipeline stage keeps them)."""
    head_children: tuple[str, ...] = ("ln_f", "wte")
    """Children the LM head uses (the last pipeline stage keeps them): the tied token embedding."""

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        """Token plus learned position embeddings: idx LongTensor ``(B, T)`` -> ``(B, T, C)``."""
        pos = torch.arange(idx.size(1), device=idx.device)
        return self.wte(idx) + self.wpe(pos)

    def block_args(self, seq_len: int, device: torch.device) -> tuple:
        """Arguments every block takes after the hidden states, for sequences of ``seq_len``: none."""
        return ()

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Final LayerNorm and tied LM head: ``(B, T, C)`` -> logits ``(B, T, V)``."""
        return F.linear(self.ln_f(x), self.wte.weight)

    def head_loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Final LayerNorm, tied LM head and cross-entropy in fp32.

        Args:
            x: hidden states ``(B, T, C)``; targets: LongTensor ``(B, T)``.

        Returns:
            Scalar mean loss. Compiled with the blocks when ``compile=true``, which lets
            Inductor fuse the fp32 upcast into the log-softmax instead of
            materialising fp32 logits ``(B, T, V)``.
        """
        logits = self.logits(x)  # tied LM head: (B, T, V)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def build(cfg: GPT2Config, attention: AttentionConfig) -> GPT:
    """The GPT in fp32 on the current default device (see :class:`GPT`)."""
    return GPT(cfg, attention)


def blocks(model: GPT) -> nn.ModuleList:
    """The transformer blocks, in order."""
    return model.h


def tied_parameters(model: GPT) -> list[nn.Parameter]:
    """The token embedding, which the LM head also uses outside ``wte``'s forward."""
    return [model.wte.weight]


def tensor_parallel_plan(model: GPT) -> dict[str, Any]:
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


def tensor_parallel_dims(cfg: GPT2Config) -> dict[str, int]:
    """What the plan splits ``parallel.tp`` ways: heads, the MLP width ``4 h`` and the vocabulary
    (the embedding's rows); ``seq_len`` too (the position embedding's rows and the sequence-parallel
    residual stream)."""
    return {
        "model.n_head": cfg.n_head,
        "model.n_embd (MLP width 4 x n_embd)": 4 * cfg.n_embd,
        "model.vocab_size": cfg.vocab_size,
        "model.seq_len": cfg.seq_len,
    }


def check(cfg: GPT2Config) -> None:
    """Raise :class:`ConfigError` unless every size is positive and ``n_head`` divides ``n_embd``."""
    for key in ("n_layer", "n_embd", "n_head", "seq_len", "vocab_size"):
        require_positive(f"model.{key}", getattr(cfg, key))
    if cfg.n_embd % cfg.n_head:
        raise ConfigError(
            "model.n_embd",
            cfg.n_embd,
            f"is not divisible by model.n_head={cfg.n_head}",
            f"choose n_head that divides n_embd, e.g. model.n_head={math.gcd(cfg.n_embd, 16) or 1}",
        )


def n_params(cfg: GPT2Config) -> int:
    """``l (12 h^2 + 13 h) + V h + s h + 2 h`` (:func:`flopsweep.flops.n_params`)."""
    return flops.n_params(cfg.n_layer, cfg.n_embd, cfg.seq_len, cfg.vocab_size)


def _block_matmul_params(cfg: GPT2Config) -> int:
    """Weights of one block's matmuls: QKV ``3 h^2``, projection ``h^2``, MLP ``8 h^2``."""
    return 12 * cfg.n_embd**2


# Forward matmul weights that non-reentrant torch.utils.checkpoint recomputes per block.
# "early_stop" (torch's default) stops once every tensor saved for backward is back, so the
# MLP out-projection, whose output nothing saves, never runs again: 12 h^2 - 4 h^2.
# "full" recomputes everything (a compiled block is one graph and runs whole). "selective"
# (flopsweep.checkpointing: the 1st and 3rd addmm saved, attention saved) recomputes only the
# attention out-projection, whose output ln_2 needs through the residual: h^2.
_RECOMPUTED = {"none": 0, "early_stop": 8, "full": 12, "selective": 1}


def model_flops(cfg: GPT2Config, tokens: int, density: float = 1.0) -> float:
    """FLOPs of one optimizer step over ``tokens`` tokens, with no recompute.

    ``6 T (12 l h^2 + V h) + 12 l h s T rho``: every weight matmul forward (2) and
    backward (4), the LM head ``V h`` included, and the attention scores over the full
    ``s x s`` square scaled by the computed fraction ``rho`` (``density``).
    gpt-tiny (l 2, h 128, s 128, V 512) at 512 tokens: 1,610,612,736.
    """
    h, s, layers = cfg.n_embd, cfg.seq_len, cfg.n_layer
    weights = layers * _block_matmul_params(cfg) + cfg.vocab_size * h
    return 6.0 * weights * tokens + 12.0 * layers * h * s * tokens * density


def hardware_flops(cfg: GPT2Config, tokens: int, density: float = 1.0, recompute: str = "none") -> float:
    """:func:`model_flops` plus the recomputed forward of each block that runs.

    ``recompute``: ``none``; ``early_stop`` (non-reentrant checkpoint's default: every
    forward matmul but the MLP out-projection, ``2 T 8 h^2`` per block, plus the attention
    forward ``4 h s T rho``); ``full`` (``2 T 12 h^2`` per block plus the attention forward);
    ``selective`` (``2 T h^2`` per block: the attention out-projection; attention is saved).
    """
    if recompute == "none":
        return model_flops(cfg, tokens, density)
    if recompute not in _RECOMPUTED:
        raise ValueError(f"unknown recompute {recompute!r}; expected one of {', '.join(_RECOMPUTED)}")
    h, s, layers = cfg.n_embd, cfg.seq_len, cfg.n_layer
    attention = 0.0 if recompute == "selective" else 4.0 * h * s * tokens * density
    extra = layers * (2.0 * _RECOMPUTED[recompute] * h * h * tokens + attention)
    return model_flops(cfg, tokens, density) + extra


def eq3_flops(cfg: GPT2Config, global_batch: int, recompute_forward: bool) -> float:
    """Narayanan et al. 2021 eq. 3 as published (:func:`flopsweep.flops.flops_per_iteration`);
    ``recompute_forward``: count a recomputed forward (``f = 4``)."""
    return flops.flops_per_iteration(
        cfg.n_layer, cfg.n_embd, cfg.seq_len, cfg.vocab_size, global_batch, recompute_forward
    )


def info(cfg: GPT2Config) -> dict[str, Any]:
    """The record's ``model`` section: the shape and ``n_params``."""
    keys = ("name", "arch", "n_layer", "n_embd", "n_head", "seq_len", "vocab_size")
    return {**{k: getattr(cfg, k) for k in keys}, "n_params": n_params(cfg)}


def memory(cfg: GPT2Config) -> dict[str, int]:
    """Shapes for the memory estimate (:mod:`flopsweep.memory`), per token and layer, in elements:
    ``residual`` (the two LayerNorm inputs, fp32 under autocast) and ``other`` (ln_1 out h, QKV 3h,
    attention out h, ln_2 out h, c_fc out 4h, GELU out 4h: what backward keeps), and the largest
    single layer's parameters, as DeepSpeed's ``model_to_params`` counts a module's own (the token
    embedding at these vocabularies; else the position embedding or ``c_fc`` with its bias). Compiled
    (``residual_compiled``, ``other_compiled``): Inductor keeps the block input and 12h in the
    compute dtype (the matmul inputs and attention tensors, 10h, and the bf16 copies of the norm
    inputs; fitted to the H200 gpt-1.3b records, micro batch 8 and 16, within 1%)."""
    h = cfg.n_embd
    return {
        "residual": 2 * h,
        "other": 14 * h,
        "residual_compiled": 2 * h,
        "other_compiled": 12 * h,
        "largest_layer_params": max(cfg.vocab_size * h, cfg.seq_len * h, 4 * h * h + 4 * h),
    }
