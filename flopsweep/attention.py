"""Causal attention kernels, each a function ``(q, k, v) -> y``.

All tensors are ``(batch, n_head, seq, head_dim)``. ``standard`` is the explicit
reference; the ``sdpa-*`` options pin one kernel of
``torch.nn.functional.scaled_dot_product_attention`` with
``torch.nn.attention.sdpa_kernel``, so that a row of a sweep measures the kernel
its label names: when that kernel cannot run, SDPA raises instead of falling
back to another one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

_PINNED = {
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-math": SDPBackend.MATH,
}


def standard_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Explicit ``softmax(Q K^T / sqrt(d) + causal mask) V``; materialises the (T, T) scores."""
    T, d = q.size(-2), q.size(-1)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))  # (B, nh, T, T)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    att = att.masked_fill(~mask, float("-inf"))
    att = F.softmax(att.float(), dim=-1).to(q.dtype)
    return att @ v  # (B, nh, T, hs)


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``scaled_dot_product_attention(is_causal=True)``; PyTorch picks the kernel."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _pinned(backend: SDPBackend) -> AttentionFn:
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    attention.__name__ = f"sdpa_{backend.name.lower()}"
    return attention


def build_attention_fn(name: str) -> AttentionFn:
    """Attention function for an ``attention=`` option.

    Raises:
        ValueError: for an unknown name (the config validation catches it first).
    """
    if name == "standard":
        return standard_attention
    if name == "sdpa":
        return sdpa_attention
    if name in _PINNED:
        return _pinned(_PINNED[name])
    raise ValueError(f"unknown attention {name!r}")
