"""Causal attention kernels (torch), each a callable ``(q, k, v) -> y``; their options are :mod:`.attention`.

All tensors are ``(B, nh, T, hs)``: batch, heads, sequence, head dim. ``standard``
is the explicit reference; the ``sdpa-*`` options pin one kernel of
``torch.nn.functional.scaled_dot_product_attention`` with
``torch.nn.attention.sdpa_kernel``, so that a row of a sweep measures the kernel
its label names: when that kernel cannot run, SDPA raises instead of falling
back to another one. ``flex`` and ``blocksparse`` use FlexAttention (compiled to
Triton kernels) or, for ``blocksparse impl=gather``, plain PyTorch
(:mod:`flopsweep.blocksparse_kernels`). ``xformers`` is imported only when chosen.

Each ``KernelSpec.build`` of :data:`flopsweep.attention.KERNELS` names one ``build_*`` function
here (``cfg -> (q, k, v) -> y``); the model's attention modules call :func:`build_attention_fn`
on the rank, and the worker's start-up probe :func:`check_kernel`.

Grouped-query attention: ``k`` and ``v`` may carry fewer heads than ``q`` (a whole
divisor). Kernels with ``gqa=True`` take them as they are (SDPA's ``enable_gqa``,
FlexAttention's ``enable_gqa``); the others get the KV heads repeated first.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flopsweep import blocksparse, blocksparse_kernels
from flopsweep.attention import KERNELS, KernelUnavailable, kernel_refusal_reasons
from flopsweep.blocksparse import layout_knobs
from flopsweep.config import AttentionConfig
from flopsweep.options import BlockSparseConfig

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def repeat_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``k``, ``v`` with each of their heads repeated ``q.size(1) // k.size(1)`` times (GQA);
    ``(B, n_kv, T, hs) -> (B, nh, T, hs)``, a no-op when the head counts already match."""
    groups = q.size(1) // k.size(1)
    if groups == 1:
        return k, v
    return k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)


def _gqa(q: torch.Tensor, k: torch.Tensor) -> dict[str, bool]:
    """``enable_gqa=True`` for SDPA/flex only when the KV heads are fewer (GQA)."""
    return {"enable_gqa": True} if k.size(1) != q.size(1) else {}


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
    k, v = repeat_kv(q, k, v)
    return reference_attention(q, k, v, torch.ones(T, T, dtype=torch.bool, device=q.device).tril())


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``scaled_dot_product_attention(is_causal=True)``; PyTorch picks the kernel."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, **_gqa(q, k))


def _pinned(backend: SDPBackend, gqa: bool) -> AttentionFn:
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if not gqa:
            k, v = repeat_kv(q, k, v)
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, **_gqa(q, k))

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
            return _compiled_flex()(q, k, v, block_mask=mask, **_gqa(q, k))


def flex_causal() -> FlexAttention:
    """FlexAttention with a causal ``BlockMask`` (default 128-token blocks)."""
    from torch.nn.attention.flex_attention import create_block_mask

    return FlexAttention(lambda T, device: create_block_mask(_causal, None, None, T, T, device=device))


def layout_of(cfg: BlockSparseConfig, seq_len: int) -> torch.Tensor:
    """The block layout ``[n_blocks, n_blocks]`` of a ``blocksparse`` config at ``seq_len``."""
    return blocksparse_kernels.block_layout(
        blocksparse_kernels.n_blocks(seq_len, cfg.block_size),
        **layout_knobs(cfg),
        seed=cfg.seed or 0,
    )


class BlockSparseAttention:
    """``blocksparse``: only the blocks of the layout are computed, by ``impl`` ``flex``
    (a FlexAttention ``BlockMask``) or ``gather`` (plain PyTorch). ``impl=auto`` takes
    flex on CUDA and gather on the CPU (validation resolves it for a run)."""

    def __init__(self, cfg: BlockSparseConfig) -> None:
        self.cfg = cfg
        self.flex = FlexAttention(self._flex_mask)
        self._plans: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    def _flex_mask(self, seq_len: int, device: torch.device) -> Any:
        return blocksparse_kernels.flex_block_mask(
            layout_of(self.cfg, seq_len), seq_len, self.cfg.block_size, device
        )

    def impl(self, device: torch.device) -> str:
        return blocksparse.resolved_impl(self.cfg.impl, device.type)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.impl(q.device) == "flex":
            return self.flex(q, k, v)
        key = (q.size(-2), q.device)
        if key not in self._plans:
            # Planned on the CPU (it reads sizes back), then moved: the meta device works too.
            plan = blocksparse_kernels.gather_plan(layout_of(self.cfg, q.size(-2)), self.cfg.block_size)
            self._plans[key] = tuple(t.to(q.device) for t in plan)
        kv_index, allowed = self._plans[key]
        k, v = repeat_kv(q, k, v)
        return blocksparse_kernels.gather_attention(
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
        k, v = repeat_kv(q, k, v)
        # xformers takes (B, T, nh, hs): the transposes are views, no copies.
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())
        return y.transpose(1, 2)  # (B, nh, T, hs)

    return xformers_attention


def check_kernel(cfg: AttentionConfig, *, head_dim: int, dtype: torch.dtype, device: torch.device) -> None:
    """Run the pinned SDPA kernels and xformers once, forward and backward, on a tiny input
    of the run's head dim and dtype, so that a kernel that cannot run here ends the run as
    ``invalid`` at start-up rather than as a crash (the other options need no probe).

    Raises:
        KernelUnavailable: naming the kernel, the device, the dtype, the cause and a fix.
    """
    if cfg.name not in KERNELS:
        raise ValueError(f"unknown attention {cfg.name!r}; the kernels are {', '.join(KERNELS)}")
    if not KERNELS[cfg.name].probe:
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
        cause = kernel_refusal_reasons(str(exc)).rstrip(".")
        raise KernelUnavailable(
            f"attention={cfg.name}{version} cannot run on {where} with {str(dtype).removeprefix('torch.')} "
            f"and head dim {head_dim} (torch {torch.__version__}, CUDA {torch.version.cuda}): "
            f"{type(exc).__name__}: {cause}. No other kernel is used instead; pick another attention, "
            "or install a build of the kernel for this torch and CUDA"
        ) from exc


def build_standard(cfg: AttentionConfig) -> AttentionFn:
    return standard_attention


def build_sdpa(cfg: AttentionConfig) -> AttentionFn:
    return sdpa_attention


def build_sdpa_flash(cfg: AttentionConfig) -> AttentionFn:
    return _pinned(SDPBackend.FLASH_ATTENTION, gqa=True)


def build_sdpa_cudnn(cfg: AttentionConfig) -> AttentionFn:
    return _pinned(SDPBackend.CUDNN_ATTENTION, gqa=False)


def build_sdpa_efficient(cfg: AttentionConfig) -> AttentionFn:
    return _pinned(SDPBackend.EFFICIENT_ATTENTION, gqa=False)


def build_sdpa_math(cfg: AttentionConfig) -> AttentionFn:
    return _pinned(SDPBackend.MATH, gqa=True)


def build_flex(cfg: AttentionConfig) -> AttentionFn:
    return flex_causal()


def build_blocksparse(cfg: BlockSparseConfig) -> AttentionFn:
    return BlockSparseAttention(cfg)


def build_xformers(cfg: AttentionConfig) -> AttentionFn:
    return xformers_attention_fn()


def build_attention_fn(attention: str | AttentionConfig) -> AttentionFn:
    """Attention callable for an ``attention=`` option (a name takes the option's defaults).

    Raises:
        ValueError: for an unknown name (validation catches it first).
        KernelUnavailable: for ``xformers`` when it cannot be imported.
    """
    name = attention if isinstance(attention, str) else attention.name
    if name not in KERNELS:
        raise ValueError(f"unknown attention {name!r}; the kernels are {', '.join(KERNELS)}")
    spec = KERNELS[name]
    cfg = spec.config() if isinstance(attention, str) else attention
    return spec.builder()(cfg)


def _xformers_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("xformers")
    except metadata.PackageNotFoundError:
        return "not installed"
