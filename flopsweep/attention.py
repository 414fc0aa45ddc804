"""Causal attention kernels, each a callable ``(q, k, v) -> y``.

All tensors are ``(B, nh, T, hs)``: batch, heads, sequence, head dim. ``standard``
is the explicit reference; the ``sdpa-*`` options pin one kernel of
``torch.nn.functional.scaled_dot_product_attention`` with
``torch.nn.attention.sdpa_kernel``, so that a row of a sweep measures the kernel
its label names: when that kernel cannot run, SDPA raises instead of falling
back to another one. ``flex`` and ``blocksparse`` use FlexAttention (compiled to
Triton kernels) or, for ``blocksparse impl=gather``, plain PyTorch
(:mod:`flopsweep.blocksparse`). ``xformers`` is imported only when chosen.

A kernel that cannot run on this machine raises :class:`KernelUnavailable`; the
job records such a run as ``invalid`` (never a silent fallback).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flopsweep import blocksparse
from flopsweep.config import AttentionConfig

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

_PINNED = {
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-math": SDPBackend.MATH,
}


class KernelUnavailable(RuntimeError):
    """The chosen attention kernel cannot run here (not installed, not built for this
    torch/CUDA, or not for this dtype or head dim). The run's status is ``invalid``."""


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Explicit ``softmax(Q K^T / sqrt(d) + mask) V``: the reference of every kernel.

    Args:
        q, k, v: ``(B, nh, T, hs)``.
        mask: BoolTensor ``[T, T]``, true where query ``t`` may see key ``u``; every
            row must keep at least one key.
    """
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))  # (B, nh, T, T)
    att = att.masked_fill(~mask, float("-inf"))
    att = F.softmax(att.float(), dim=-1).to(q.dtype)
    return att @ v  # (B, nh, T, hs)


def standard_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Explicit ``softmax(Q K^T / sqrt(d) + causal mask) V``; materialises the (T, T) scores."""
    T = q.size(-2)
    return reference_attention(q, k, v, torch.ones(T, T, dtype=torch.bool, device=q.device).tril())


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``scaled_dot_product_attention(is_causal=True)``; PyTorch picks the kernel."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _pinned(backend: SDPBackend) -> AttentionFn:
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    attention.__name__ = f"sdpa_{backend.name.lower()}"
    return attention


@functools.cache
def _compiled_flex() -> Callable[..., torch.Tensor]:
    from torch.nn.attention.flex_attention import flex_attention

    # Without torch.compile, flex_attention runs an unfused path that materialises
    # the (T, T) scores: compiling is what gives the fused Triton kernel.
    return torch.compile(flex_attention, dynamic=False)


def _causal(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
    return q_idx >= kv_idx


class FlexAttention:
    """``torch.compile(flex_attention)`` with a ``BlockMask`` made once per (seq_len, device).

    Args:
        make_mask: ``(seq_len, device) -> BlockMask``.
    """

    def __init__(self, make_mask: Callable[[int, torch.device], Any]) -> None:
        self.make_mask = make_mask
        self._masks: dict[tuple[int, torch.device], Any] = {}

    def block_mask(self, seq_len: int, device: torch.device) -> Any:
        key = (seq_len, device)
        if key not in self._masks:
            self._masks[key] = self.make_mask(seq_len, device)
        return self._masks[key]

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        mask = self.block_mask(q.size(-2), q.device)
        # q, k, v already carry the run's dtype; autocast has nothing to add inside the kernel.
        with torch.autocast(q.device.type, enabled=False):
            return _compiled_flex()(q, k, v, block_mask=mask)


def flex_causal() -> FlexAttention:
    """FlexAttention with a causal ``BlockMask`` (default 128-token blocks)."""
    from torch.nn.attention.flex_attention import create_block_mask

    return FlexAttention(lambda T, device: create_block_mask(_causal, None, None, T, T, device=device))


def layout_of(cfg: AttentionConfig, seq_len: int) -> torch.Tensor:
    """The block layout ``[n_blocks, n_blocks]`` of a ``blocksparse`` config at ``seq_len``."""
    return blocksparse.block_layout(
        blocksparse.n_blocks(seq_len, cfg.block_size),
        layout=cfg.layout,
        window_blocks=cfg.window_blocks,
        global_blocks=cfg.global_blocks,
        random_blocks=cfg.random_blocks,
        stride_blocks=cfg.stride_blocks,
        seed=cfg.seed or 0,
    )


def attention_density(cfg: AttentionConfig, seq_len: int) -> float:
    """Fraction of (query block, key block) pairs computed: the layout's for
    ``blocksparse``, 1.0 for every dense kernel (the published convention, causal or not)."""
    if cfg.name != "blocksparse":
        return 1.0
    return blocksparse.density(layout_of(cfg, seq_len))


class BlockSparseAttention:
    """``blocksparse``: only the blocks of the layout are computed, by ``impl`` ``flex``
    (a FlexAttention ``BlockMask``) or ``gather`` (plain PyTorch). ``impl=auto`` takes
    flex on CUDA and gather on the CPU (validation resolves it for a run)."""

    def __init__(self, cfg: AttentionConfig) -> None:
        self.cfg = cfg
        self.flex = FlexAttention(self._flex_mask)
        self._plans: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    def _flex_mask(self, seq_len: int, device: torch.device) -> Any:
        return blocksparse.flex_block_mask(layout_of(self.cfg, seq_len), seq_len, self.cfg.block_size, device)

    def impl(self, device: torch.device) -> str:
        if self.cfg.impl != "auto":
            return self.cfg.impl
        return "flex" if device.type == "cuda" else "gather"

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.impl(q.device) == "flex":
            return self.flex(q, k, v)
        key = (q.size(-2), q.device)
        if key not in self._plans:
            layout = layout_of(self.cfg, q.size(-2)).to(q.device)
            self._plans[key] = blocksparse.gather_plan(layout, self.cfg.block_size)
        kv_index, allowed = self._plans[key]
        return blocksparse.gather_attention(
            q, k, v, kv_index=kv_index, allowed=allowed, block_size=self.cfg.block_size
        )


def xformers_attention_fn() -> AttentionFn:
    """``xformers.ops.memory_efficient_attention`` with a causal ``LowerTriangularMask``.

    Raises:
        KernelUnavailable: when xformers cannot be imported.
    """
    try:
        import xformers.ops as xops
    except Exception as exc:  # noqa: BLE001 - an ImportError or a broken build alike
        raise KernelUnavailable(f"xformers cannot be imported: {type(exc).__name__}: {exc}") from exc

    def xformers_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # xformers takes (B, T, nh, hs): the transposes are views, no copies.
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())
        return y.transpose(1, 2)  # (B, nh, T, hs)

    return xformers_attention


def build_attention_fn(attention: str | AttentionConfig) -> AttentionFn:
    """Attention callable for an ``attention=`` option (a name takes the option's defaults).

    Raises:
        ValueError: for an unknown name (the config validation catches it first).
        KernelUnavailable: for ``xformers`` when it cannot be imported.
    """
    cfg = AttentionConfig(name=attention) if isinstance(attention, str) else attention
    name = cfg.name
    if name == "standard":
        return standard_attention
    if name == "sdpa":
        return sdpa_attention
    if name in _PINNED:
        return _pinned(_PINNED[name])
    if name == "flex":
        return flex_causal()
    if name == "blocksparse":
        return BlockSparseAttention(cfg)
    if name == "xformers":
        return xformers_attention_fn()
    raise ValueError(f"unknown attention {name!r}")


def check_kernel(cfg: AttentionConfig, *, head_dim: int, dtype: torch.dtype, device: torch.device) -> None:
    """Run the pinned SDPA kernels and xformers once, forward and backward, on a tiny input
    of the run's head dim and dtype, so that a kernel that cannot run here ends the run as
    ``invalid`` at start-up rather than as a crash (the other options need no probe).

    Raises:
        KernelUnavailable: naming the kernel, the device, the dtype, the cause and a fix.
    """
    if cfg.name not in _PINNED and cfg.name != "xformers":
        return
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    try:
        fn = build_attention_fn(cfg)
        q, k, v = (
            torch.randn(1, 2, 128, head_dim, device=device, dtype=dtype, requires_grad=True) for _ in range(3)
        )
        fn(q, k, v).sum().backward()
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the kernel raises, it cannot run here
        version = f" (xformers {_xformers_version()})" if cfg.name == "xformers" else ""
        cause = str(exc).strip().splitlines()[0][:500].rstrip(".") if str(exc).strip() else ""
        raise KernelUnavailable(
            f"attention={cfg.name}{version} cannot run on {where} with {str(dtype).removeprefix('torch.')} "
            f"and head dim {head_dim} (torch {torch.__version__}, CUDA {torch.version.cuda}): "
            f"{type(exc).__name__}: {cause}. No other kernel is used instead; pick another attention, "
            "or install a build of the kernel for this torch and CUDA"
        ) from exc


def _xformers_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("xformers")
    except metadata.PackageNotFoundError:
        return "not installed"
