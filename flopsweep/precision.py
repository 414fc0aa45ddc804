"""Precision options: the registry ``PRECISIONS`` and what each does to the model.

``bf16``/``fp16`` train fp32 master weights under ``torch.autocast`` (single, DDP),
FSDP2's ``MixedPrecisionPolicy`` or DeepSpeed's own bf16/fp16 engine; ``fp16`` adds
dynamic loss scaling. ``fp8``/``fp8-rowwise`` are bf16 runs whose block ``nn.Linear``
layers are converted by torchao's float8 training (tensorwise or rowwise dynamic
scaling, :mod:`flopsweep.fp8`). Adding a precision is one ``PRECISIONS`` line and
one YAML file under ``conf/precision/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from flopsweep.config import PrecisionConfig
from flopsweep.options import Fp8Config


@dataclass(frozen=True, kw_only=True)
class PrecisionSpec:
    """One ``precision=`` option.

    Attributes:
        dtype: the compute dtype of autocast or of FSDP2's ``param_dtype``.
        devices: where it runs.
        config: its schema.
        fp8_recipe: torchao's float8 recipe name, or None.
        why_not_cpu: the reason given on the CPU.
    """

    dtype: torch.dtype
    devices: tuple[str, ...] = ("cuda", "cpu")
    config: type[PrecisionConfig] = PrecisionConfig
    fp8_recipe: str | None = None
    why_not_cpu: str = ""


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
        config=Fp8Config,
        fp8_recipe="tensorwise",
    ),
}
PRECISIONS["fp8-rowwise"] = dataclasses.replace(PRECISIONS["fp8"], fp8_recipe="rowwise")
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
    if spec.fp8_recipe is not None:  # device, compute capability and torchao: flopsweep.fp8 knows
        from flopsweep import fp8

        return fp8.requirement_problem(device, capability)
    if device not in spec.devices:
        return spec.why_not_cpu
    if spec.dtype == torch.bfloat16 and device == "cuda" and not bf16:
        return "this GPU has no bf16 support"
    return None
