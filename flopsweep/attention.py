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

``KERNELS`` is the registry: one :class:`KernelSpec` per ``attention=`` option,
with the devices, precisions and package it needs. Adding a kernel is a function
here, one ``KERNELS`` line and one YAML file under ``conf/attention/``.

Grouped-query attention: ``k`` and ``v`` may carry fewer heads than ``q`` (a whole
divisor). Kernels with ``gqa=True`` take them as they are (SDPA's ``enable_gqa``,
FlexAttention's ``enable_gqa``); the others get the KV heads repeated first.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flopsweep import blocksparse
from flopsweep.config import MAX_SEED, AttentionConfig, ConfigError, require_choice, require_positive
from flopsweep.options import BlockSparseConfig

BLOCKSPARSE_IMPLS = ("auto", "flex", "gather")

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class KernelUnavailable(RuntimeError):
    """The chosen attention kernel cannot run here (not installed, not built for this
    torch/CUDA, or not for this dtype or head dim). The run's status is ``invalid``."""


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
    if not isinstance(cfg, BlockSparseConfig):
        return 1.0
    return blocksparse.density(layout_of(cfg, seq_len))


def executed_density(cfg: AttentionConfig, seq_len: int) -> float:
    """Fraction of the ``s x s`` score square that the kernel actually computes (masked or not).

    The layout's :func:`attention_density` for every kernel but ``blocksparse impl=gather``,
    which pads each query block to the most key blocks any block keeps (``K``) and the
    sequence to whole blocks: ``n K bs^2 / s^2``. Hardware FLOPs use this; model FLOPs use
    the layout's density (the work the layout needs).
    """
    if not isinstance(cfg, BlockSparseConfig) or cfg.impl != "gather":
        return attention_density(cfg, seq_len)
    layout = layout_of(cfg, seq_len)
    n, k_max = layout.size(0), int(layout.sum(1).max())
    return n * k_max * cfg.block_size**2 / seq_len**2


class BlockSparseAttention:
    """``blocksparse``: only the blocks of the layout are computed, by ``impl`` ``flex``
    (a FlexAttention ``BlockMask``) or ``gather`` (plain PyTorch). ``impl=auto`` takes
    flex on CUDA and gather on the CPU (validation resolves it for a run)."""

    def __init__(self, cfg: BlockSparseConfig) -> None:
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
            # Planned on the CPU (it reads sizes back), then moved: the meta device works too.
            plan = blocksparse.gather_plan(layout_of(self.cfg, q.size(-2)), self.cfg.block_size)
            self._plans[key] = tuple(t.to(q.device) for t in plan)
        kv_index, allowed = self._plans[key]
        k, v = repeat_kv(q, k, v)
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
        k, v = repeat_kv(q, k, v)
        # xformers takes (B, T, nh, hs): the transposes are views, no copies.
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())
        return y.transpose(1, 2)  # (B, nh, T, hs)

    return xformers_attention


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
    return spec.build(cfg)


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


REASONS_CHARS = 1500
"""At most this much of a kernel library's refusal goes into the record."""


def kernel_refusal_reasons(text: str) -> str:
    """A kernel library's refusal in one line, with its reasons and without its dump of the inputs.

    xformers' ``NotImplementedError`` reads ``No operator found for `memory_efficient_attention_forward`
    with inputs:``, then the shapes and dtypes of the inputs, then one block per operator: a line
    `` `fa3F@...` is not supported because:`` and its indented reasons. The record keeps the first
    line and every operator's reasons (``; `fa3F@...` is not supported because: requires device
    with capability ...``), the inputs left out, at most :data:`REASONS_CHARS` characters. Any
    other message is its lines joined with ``; ``, within the same bound.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].endswith("with inputs:"):
        first_op = next((i for i, line in enumerate(lines) if line.startswith("`")), len(lines))
        lines = [lines[0].removesuffix(" with inputs:"), *lines[first_op:]]
    out = "; ".join(lines).replace(":;", ":")
    return out if len(out) <= REASONS_CHARS else out[: REASONS_CHARS - 1] + "…"


def _xformers_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("xformers")
    except metadata.PackageNotFoundError:
        return "not installed"


@dataclass(frozen=True, kw_only=True)
class KernelSpec:
    """One ``attention=`` option.

    Attributes:
        build: ``cfg -> (q, k, v) -> y`` with ``q (B, nh, T, hs)``, ``k, v (B, n_kv, T, hs)``.
        config: the option's schema (``AttentionConfig`` or a subclass with its knobs).
        devices: where it runs (``cuda``, ``cpu``); ``cpu`` needs a backward pass there.
        precisions: run precisions it supports (None: all).
        package: a package it imports, checked before launch (``pip install`` hint).
        probe: run it once at start-up on the run's dtype and head dim (pinned kernels
            that refuse inputs rather than fall back).
        why_not_cpu: the reason given when it is asked for on the CPU.
        resolve: ``(cfg, device, run_seed, seq_len) -> cfg``: option rules and defaults
            that depend on the run (``blocksparse``'s impl and seed); raises ``ConfigError``.
        min_capability: the oldest NVIDIA compute capability it runs on (torch's
            ``sdp_utils.cpp``: flash and cuDNN attention need sm80 to sm121), None: any.
        nvidia_only: it exists only on NVIDIA GPUs (cuDNN), not on AMD's (ROCm).

    ``min_capability`` and ``nvidia_only`` are checked for a GPU that ``plan=true`` plans for
    (:func:`hardware_problem`); on this machine's GPU the start-up probe (``probe``) finds them.
    """

    build: Callable[[Any], AttentionFn]
    config: type[AttentionConfig] = AttentionConfig
    devices: tuple[str, ...] = ("cuda", "cpu")
    precisions: tuple[str, ...] | None = None
    package: str | None = None
    probe: bool = False
    why_not_cpu: str = "this SDPA kernel exists only on CUDA"
    resolve: Callable[[Any, str, int, int], Any] | None = None
    min_capability: tuple[int, int] | None = None
    nvidia_only: bool = False


def _resolve_blocksparse(a: BlockSparseConfig, device: str, run_seed: int, seq_len: int) -> BlockSparseConfig:
    """Check the layout options and resolve ``impl=auto`` (flex on CUDA, gather on the CPU)."""
    require_choice("attention.layout", a.layout, blocksparse.LAYOUTS)
    require_choice("attention.impl", a.impl, BLOCKSPARSE_IMPLS)
    for key in ("block_size", "window_blocks", "stride_blocks"):
        require_positive(f"attention.{key}", getattr(a, key))
    for key in ("global_blocks", "random_blocks"):
        if getattr(a, key) < 0:
            raise ConfigError(
                f"attention.{key}", getattr(a, key), "must be >= 0 blocks", f"set attention.{key}=0 or more"
            )
    if a.block_size > seq_len:
        raise ConfigError(
            "attention.block_size",
            a.block_size,
            f"is longer than the sequence (model.seq_len={seq_len}): one padded block, nothing sparse",
            f"set attention.block_size to at most {seq_len}, or attention=sdpa",
        )
    if a.seed is not None and not 0 <= a.seed < MAX_SEED:
        raise ConfigError(
            "attention.seed",
            a.seed,
            "must be in [0, 2**32) (it seeds bigbird's random blocks)",
            "set e.g. attention.seed=0, or null to take the run's seed",
        )
    impl = a.impl if a.impl != "auto" else ("flex" if device == "cuda" else "gather")
    if impl == "flex" and device == "cpu":
        raise ConfigError(
            "attention.impl",
            "flex",
            "FlexAttention has no backward pass on the CPU (torch 2.13)",
            "set attention.impl=gather (or auto) on the CPU, or run with device=cuda",
        )
    if impl == "flex" and a.block_size % 128:
        raise ConfigError(
            "attention.block_size",
            a.block_size,
            "impl=flex needs a multiple of 128 tokens (FlexAttention's sparse block)",
            "set attention.block_size=128 or 256, or attention.impl=gather",
        )
    return dataclasses.replace(a, impl=impl, seed=run_seed if a.seed is None else a.seed)


_FLEX_CPU = "FlexAttention has no backward pass on the CPU (torch 2.13)"

KERNELS: dict[str, KernelSpec] = {
    "standard": KernelSpec(build=lambda cfg: standard_attention),
    "sdpa": KernelSpec(build=lambda cfg: sdpa_attention),
    "sdpa-flash": KernelSpec(
        build=lambda cfg: _pinned(SDPBackend.FLASH_ATTENTION, gqa=True),
        devices=("cuda",),
        precisions=("bf16", "fp16", "fp8", "fp8-rowwise"),
        probe=True,
        min_capability=(8, 0),
    ),
    "sdpa-cudnn": KernelSpec(
        build=lambda cfg: _pinned(SDPBackend.CUDNN_ATTENTION, gqa=False),
        devices=("cuda",),
        probe=True,
        min_capability=(8, 0),
        nvidia_only=True,
    ),
    "sdpa-efficient": KernelSpec(
        build=lambda cfg: _pinned(SDPBackend.EFFICIENT_ATTENTION, gqa=False), devices=("cuda",), probe=True
    ),
    "sdpa-math": KernelSpec(build=lambda cfg: _pinned(SDPBackend.MATH, gqa=True), probe=True),
    "flex": KernelSpec(build=lambda cfg: flex_causal(), devices=("cuda",), why_not_cpu=_FLEX_CPU),
    "blocksparse": KernelSpec(
        build=BlockSparseAttention, config=BlockSparseConfig, resolve=_resolve_blocksparse
    ),
    "xformers": KernelSpec(
        build=lambda cfg: xformers_attention_fn(),
        devices=("cuda",),
        package="xformers",
        probe=True,
        why_not_cpu="xformers' memory_efficient_attention has CUDA kernels only",
    ),
}
"""Attention kernels by ``attention.name``."""


def hardware_problem(name: str, *, capability: tuple[int, int], vendor: str, gpu: str) -> str | None:
    """Why the kernel ``attention=name`` cannot run on the GPU ``gpu`` (its name, for the message)
    of compute ``capability`` and ``vendor`` (``"nvidia"``, ``"amd"``: :data:`flopsweep.peaks.VENDORS`),
    in one line, or None: :attr:`KernelSpec.nvidia_only`, and on NVIDIA :attr:`KernelSpec.min_capability`
    (an AMD GPU's capability is its gfx architecture, which these bounds do not speak of)."""
    spec = KERNELS[name]
    if spec.nvidia_only and vendor != "nvidia":
        return f"runs on NVIDIA GPUs only (cuDNN); the {gpu} is an {vendor.upper()} GPU (ROCm)"
    low = spec.min_capability
    if vendor == "nvidia" and low is not None and tuple(capability) < low:
        return (
            f"needs an NVIDIA GPU of compute capability {low[0]}.{low[1]} or newer (torch's kernel: "
            f"sm{low[0]}{low[1]} and up); the {gpu} is {capability[0]}.{capability[1]}"
        )
    return None


def check_support(
    cfg: AttentionConfig,
    *,
    device: str,
    precision: str,
    run_seed: int,
    seq_len: int,
    kernels: Collection[str] | None = None,
    installed_here: bool = True,
):
    """Check that ``cfg``'s kernel can run on ``device`` at ``precision`` and resolve its options.
    ``kernels``: those the model takes (``model=hf``: ``options.HF_ATTENTION``; None: all), the only
    ones a fix names. ``installed_here`` False (a plan of GPUs that are not here, ``plan_gpu``):
    the kernel's package is the target machine's, not checked on this one.

    Returns:
        ``cfg`` with the option's run-dependent values and ``density`` filled in.

    Raises:
        ConfigError: naming ``attention`` (or the option key), the value and the fix.
    """
    spec = KERNELS[cfg.name]
    if device not in spec.devices:
        cpu_ok = [
            name for name, k in KERNELS.items() if "cpu" in k.devices and (not kernels or name in kernels)
        ]
        raise ConfigError(
            "attention",
            cfg.name,
            spec.why_not_cpu,
            f"use attention={' or '.join(cpu_ok[:3])} on the CPU, or run with device=cuda",
        )
    if spec.precisions is not None and precision not in spec.precisions:
        others = [
            n
            for n, k in KERNELS.items()
            if device in k.devices and k.precisions is None and (not kernels or n in kernels)
        ][:3]
        raise ConfigError(
            "attention",
            cfg.name,
            f"supports only precision {', '.join(spec.precisions)}",
            f"set precision={spec.precisions[0]}, or pick attention={' or '.join(others)}",
        )
    if spec.package is not None and installed_here:
        import importlib.util

        if importlib.util.find_spec(spec.package) is None:
            raise ConfigError(
                "attention",
                cfg.name,
                f"the {spec.package} package is not installed",
                f"pip install an {spec.package} build that matches this torch and CUDA "
                f"(pip install -e '.[{spec.package}]'), or pick attention=sdpa",
            )
    if spec.resolve is not None:
        cfg = spec.resolve(cfg, device, run_seed, seq_len)
    density = attention_density(cfg, seq_len)
    if cfg.density is not None and abs(cfg.density - density) > 1e-12:
        raise ConfigError(
            "attention.density",
            cfg.density,
            f"is derived from the layout ({density:.6g} here), not set by hand",
            "drop the attention.density override",
        )
    return dataclasses.replace(cfg, density=density)
