"""Precision options: the registry ``PRECISIONS`` and what each does to the model.

``bf16``/``fp16`` train fp32 master weights under ``torch.autocast`` (single, DDP),
FSDP2's ``MixedPrecisionPolicy`` or DeepSpeed's own bf16/fp16 engine; ``fp16`` adds
dynamic loss scaling. ``fp8``/``fp8-rowwise`` are bf16 runs whose block ``nn.Linear``
layers are converted by torchao's float8 training (tensorwise or rowwise dynamic
scaling, :mod:`flopsweep.fp8`). Adding a precision is one ``PRECISIONS`` line and
one YAML file under ``conf/precision/``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from flopsweep.config import PrecisionConfig


@dataclass(kw_only=True)
class Fp8Config(PrecisionConfig):
    """``precision=fp8`` / ``fp8-rowwise``: torchao float8 training on top of bf16."""

    name: str = "fp8"
    fp8_all_gather: bool = False
    """FSDP2 only, tensorwise only: all-gather the parameters in float8 (half the bytes of bf16)
    and precompute their dynamic scales after each optimizer step."""


@dataclass(frozen=True, kw_only=True)
class PrecisionSpec:
    """One ``precision=`` option.

    Attributes:
        dtype: the compute dtype of autocast or of FSDP2's ``param_dtype``.
        devices: where it runs.
        min_capability: the least CUDA compute capability it needs (None: any).
        config: its schema.
        fp8_recipe: torchao's float8 recipe name, or None.
        why_not_cpu: the reason given on the CPU.
    """

    dtype: torch.dtype
    devices: tuple[str, ...] = ("cuda", "cpu")
    min_capability: tuple[int, int] | None = None
    config: type[PrecisionConfig] = PrecisionConfig
    fp8_recipe: str | None = None
    why_not_cpu: str = ""


_FP8_NEEDS = "fp8 matmuls need a CUDA GPU of compute capability 8.9 or newer (Ada, Hopper, Blackwell)"

PRECISIONS: dict[str, PrecisionSpec] = {
    "bf16": PrecisionSpec(dtype=torch.bfloat16),
    "fp16": PrecisionSpec(
        dtype=torch.float16,
        devices=("cuda",),
        why_not_cpu="fp16 loss scaling needs CUDA (no CPU kernels for it)",
    ),
    "fp32": PrecisionSpec(dtype=torch.float32),
    "fp8": PrecisionSpec(
        dtype=torch.bfloat16,
        devices=("cuda",),
        min_capability=(8, 9),
        config=Fp8Config,
        fp8_recipe="tensorwise",
        why_not_cpu=_FP8_NEEDS,
    ),
    "fp8-rowwise": PrecisionSpec(
        dtype=torch.bfloat16,
        devices=("cuda",),
        min_capability=(8, 9),
        config=Fp8Config,
        fp8_recipe="rowwise",
        why_not_cpu=_FP8_NEEDS,
    ),
}
"""Precisions by ``precision.name``."""

DTYPES = {name: spec.dtype for name, spec in PRECISIONS.items()}
"""Compute dtype by precision name."""


def prepare_model(model: torch.nn.Module, cfg: PrecisionConfig) -> list[str]:
    """Convert ``model`` in place for ``cfg`` (fp8: torchao float8 linears); returns the names
    of the converted layers (stored as ``model.fp8_layers``), empty for the other precisions."""
    recipe = PRECISIONS[cfg.name].fp8_recipe
    if recipe is None:
        return []
    from flopsweep import fp8

    names = fp8.convert(model, recipe, fsdp_float8_all_gather=getattr(cfg, "fp8_all_gather", False))
    model.fp8_layers = names
    return names


def after_optimizer_step(model: torch.nn.Module, cfg: PrecisionConfig) -> Callable[[], None] | None:
    """What FSDP2 runs after each optimizer step: fp8 all-gather's scale precompute, else None."""
    if PRECISIONS[cfg.name].fp8_recipe != "tensorwise" or not getattr(cfg, "fp8_all_gather", False):
        return None
    from flopsweep import fp8

    def precompute() -> None:
        fp8.precompute_scales(model)

    return precompute


def problem(
    cfg: PrecisionConfig, *, device: str, capability: tuple[int, int] | None, bf16: bool
) -> str | None:
    """Why ``cfg`` cannot run on this device, or None."""
    spec = PRECISIONS[cfg.name]
    if device not in spec.devices:
        return spec.why_not_cpu
    if spec.min_capability is not None and capability is not None and capability < spec.min_capability:
        major, minor = capability
        return f"{spec.why_not_cpu}; this GPU is {major}.{minor}"
    if spec.dtype == torch.bfloat16 and device == "cuda" and not bf16:
        return "this GPU has no bf16 support"
    if spec.fp8_recipe is not None:
        import importlib.util

        if importlib.util.find_spec("torchao") is None:
            return "torchao is not installed (pip install -e '.[fp8]')"
    return None


def info(model: Any) -> dict[str, Any]:
    """What the record keeps of a model's precision preparation (the fp8 layers converted)."""
    return {"fp8_layers": list(getattr(model, "fp8_layers", []))}
