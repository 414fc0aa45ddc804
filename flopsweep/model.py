"""The GPT that every backend trains: GPT-2 style, one readable file.

Learned positions, pre-LayerNorm blocks, a GELU MLP of 4h, and an LM head tied
to the token embedding. Weights are initialised inside each leaf module's
``reset_parameters`` so that construction under ``deepspeed.zero.Init`` (which
partitions each module right after its ``__init__``) gives the same weights as
plain construction from the same seed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from flopsweep.attention import build_attention_fn
from flopsweep.config import ModelConfig

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
    def __init__(self, cfg: ModelConfig, attention: str) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = Linear(cfg.n_embd, cfg.n_embd)
        self.attn_fn = build_attention_fn(attention)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # (batch, seq, n_embd)
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, T, C) -> (B, nh, T, hs)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = self.attn_fn(q, k, v)  # (B, nh, T, hs)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.c_fc = Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: ModelConfig, attention: str) -> None:
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
        attention: attention type (``flopsweep.attention``).
        activation_checkpointing: recompute each block in backward
            (non-reentrant ``torch.utils.checkpoint``).
    """

    def __init__(
        self, cfg: ModelConfig, attention: str = "sdpa", activation_checkpointing: bool = False
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.activation_checkpointing = activation_checkpointing
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
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        for block in self.h:
            if self.activation_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)  # tied LM head: (B, T, V)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
