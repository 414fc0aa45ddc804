"""Attention options, torch-free: the registry ``KERNELS`` and the checks of each ``attention=``.

``KERNELS`` holds one :class:`KernelSpec` per option, with the devices, precisions and package it
needs, its schema and the import path of its kernel (``flopsweep.attention_kernels:build_*``,
loaded on the rank by :func:`flopsweep.attention_kernels.build_attention_fn`). The kernels
themselves, ``(q, k, v) -> y`` on ``(B, nh, T, hs)`` tensors, are in
:mod:`flopsweep.attention_kernels`: ``standard`` (the explicit reference), the ``sdpa-*`` pins of
one SDPA kernel (no silent fallback), ``flex``, ``blocksparse`` and ``xformers``. Validation, the
estimators and the metrics read this module without torch; the density of a ``blocksparse``
layout is counted here without building it (:func:`flopsweep.blocksparse.row_counts`).

A kernel that cannot run on this machine raises :class:`KernelUnavailable`; the
job records such a run as ``invalid`` (never a silent fallback). Adding a kernel is a
``build_*`` function in :mod:`flopsweep.attention_kernels`, one ``KERNELS`` line here and one
YAML file under ``conf/attention/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from flopsweep import blocksparse, lazy
from flopsweep.choices import require_choice
from flopsweep.config import AttentionConfig, ConfigError, require_positive
from flopsweep.kernel_memory import KernelMemory, KernelShape, blocksparse_memory
from flopsweep.limits import MAX_SEED
from flopsweep.options import BlockSparseConfig
from flopsweep.text import figure

BLOCKSPARSE_IMPLS = ("auto", "flex", "gather")

KERNEL_MODULE = "flopsweep.attention_kernels"
"""The module (torch) of every kernel's ``build_*`` function."""


class KernelUnavailable(RuntimeError):
    """The chosen attention kernel cannot run here (not installed, not built for this
    torch/CUDA, or not for this dtype or head dim). The run's status is ``invalid``."""


def _row_counts(cfg: BlockSparseConfig, seq_len: int) -> list[int]:
    """Key blocks kept per query block of a ``blocksparse`` config at ``seq_len``
    (:func:`flopsweep.blocksparse.row_counts`; no torch)."""
    n = blocksparse.n_blocks(seq_len, cfg.block_size)
    return blocksparse.row_counts(n, **blocksparse.layout_knobs(cfg))


def attention_density(cfg: AttentionConfig, seq_len: int) -> float:
    """Fraction of (query block, key block) pairs computed: the layout's for
    ``blocksparse``, 1.0 for every dense kernel (the published convention, causal or not)."""
    if not isinstance(cfg, BlockSparseConfig):
        return 1.0
    return blocksparse.counts_density(_row_counts(cfg, seq_len))


def executed_density(cfg: AttentionConfig, seq_len: int) -> float:
    """Fraction of the ``s x s`` score square that the kernel actually computes (masked or not).

    The layout's :func:`attention_density` for every kernel but ``blocksparse impl=gather``,
    which pads each query block to the most key blocks any block keeps (``K``) and the
    sequence to whole blocks: ``n K bs^2 / s^2``. Hardware FLOPs use this; model FLOPs use
    the layout's density (the work the layout needs).
    """
    if not isinstance(cfg, BlockSparseConfig) or cfg.impl != "gather":
        return attention_density(cfg, seq_len)
    counts = _row_counts(cfg, seq_len)
    n, k_max = len(counts), max(counts)
    return n * k_max * cfg.block_size**2 / seq_len**2


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


@dataclass(frozen=True, kw_only=True)
class KernelSpec:
    """One ``attention=`` option.

    Attributes:
        build: the name of its builder in :data:`KERNEL_MODULE` (torch), ``cfg -> (q, k, v) -> y``
            with ``q (B, nh, T, hs)``, ``k, v (B, n_kv, T, hs)``; loaded by :meth:`builder`.
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
        context_parallel: it runs under ``parallel.cp > 1`` (:mod:`flopsweep.context_parallel`:
            the all-to-all over heads gives it whole causal sequences of fewer heads);
            ``why_not_cp`` says why not, in the one-line refusal.
        skips_masked: its causal forward and backward skip the tiles above the diagonal (FlashAttention-2,
            Dao 2023 sec. 3.1; cuDNN, flex), so it runs about half of the ``s^2`` square that the FLOPs
            convention counts; False for kernels that compute the whole square and then mask it
            (``standard``, ``sdpa-math``). The uncalibrated step time divides the FLOPs it runs by a
            GEMM rate (:func:`flopsweep.metrics.executed_flops`).
        memory: ``(cfg, KernelShape) -> KernelMemory | None``: what its own tensors cost per layer
            (:mod:`flopsweep.kernel_memory`: saved for backward, while recomputed, held between steps),
            which the memory estimate counts instead of a fused kernel's logsumexp; None (or a None
            answer): the kernels of :data:`flopsweep.activation_memory.ATTENTION_SAVED` or a fused one.

    ``min_capability`` and ``nvidia_only`` are checked for a GPU that ``plan=true`` plans for
    (:func:`hardware_problem`); on this machine's GPU the start-up probe (``probe``) finds them.
    """

    build: str
    config: type[AttentionConfig] = AttentionConfig
    devices: tuple[str, ...] = ("cuda", "cpu")
    precisions: tuple[str, ...] | None = None
    package: str | None = None
    probe: bool = False
    why_not_cpu: str = "this SDPA kernel exists only on CUDA"
    resolve: Callable[[Any, str, int, int], Any] | None = None
    min_capability: tuple[int, int] | None = None
    nvidia_only: bool = False
    context_parallel: bool = True
    why_not_cp: str = ""
    skips_masked: bool = True
    memory: Callable[[Any, KernelShape], KernelMemory | None] | None = None

    def builder(self) -> Callable[[Any], Any]:
        """The kernel's builder, from :data:`KERNEL_MODULE` (imports torch)."""
        return getattr(lazy.module(KERNEL_MODULE), self.build)


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
    impl = blocksparse.resolved_impl(a.impl, device)
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
    "standard": KernelSpec(build="build_standard", skips_masked=False),
    "sdpa": KernelSpec(build="build_sdpa"),
    "sdpa-flash": KernelSpec(
        build="build_sdpa_flash",
        devices=("cuda",),
        precisions=("bf16", "fp16", "fp8", "fp8-rowwise"),
        probe=True,
        min_capability=(8, 0),
    ),
    "sdpa-cudnn": KernelSpec(
        build="build_sdpa_cudnn",
        devices=("cuda",),
        probe=True,
        min_capability=(8, 0),
        nvidia_only=True,
    ),
    "sdpa-efficient": KernelSpec(build="build_sdpa_efficient", devices=("cuda",), probe=True),
    "sdpa-math": KernelSpec(build="build_sdpa_math", probe=True, skips_masked=False),
    "flex": KernelSpec(build="build_flex", devices=("cuda",), why_not_cpu=_FLEX_CPU),
    "blocksparse": KernelSpec(
        build="build_blocksparse",
        config=BlockSparseConfig,
        resolve=_resolve_blocksparse,
        context_parallel=False,
        why_not_cp="its block layout is not verified against one rank under the all-to-all over heads",
        memory=blocksparse_memory,
    ),
    "xformers": KernelSpec(
        build="build_xformers",
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
    ``kernels``: those the model takes (``model=hf``: ``models.hf.HF_ATTENTION``; None: all), the only
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
            f"is derived from the layout ({figure(density, 6)} here), not set by hand",
            "drop the attention.density override",
        )
    return dataclasses.replace(cfg, density=density)
