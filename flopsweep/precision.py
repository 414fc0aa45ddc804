"""Precision options: the registry ``PRECISIONS`` and what each does to the model.

``bf16``/``fp16`` train fp32 master weights under ``torch.autocast`` (single, DDP),
FSDP2's ``MixedPrecisionPolicy`` or DeepSpeed's own bf16/fp16 engine; ``fp16`` adds
dynamic loss scaling. ``fp8``/``fp8-rowwise`` are bf16 runs whose block ``nn.Linear``
layers are converted by torchao's float8 training (tensorwise or rowwise dynamic
scaling, :mod:`flopsweep.fp8`). Adding a precision is one ``PRECISIONS`` line and
one YAML file under ``conf/precision/``.

Torch-free: a spec names its dtype (``"bfloat16"``) and the module of its conversion code
(:attr:`PrecisionSpec.convert_module`, torchao's float8 for fp8); :data:`DTYPES` (torch dtypes,
for the backends on the rank) is made on first use, importing torch then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flopsweep import lazy
from flopsweep.config import PrecisionConfig
from flopsweep.options import Fp8Config

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True, kw_only=True)
class PrecisionSpec:
    """One ``precision=`` option.

    Attributes:
        dtype: the name of the compute dtype of autocast or of FSDP2's ``param_dtype``, as torch
            spells it (``"bfloat16"``: ``torch.bfloat16``; :data:`DTYPES` holds the dtypes).
        devices: where it runs.
        config: its schema.
        fp8_recipe: torchao's float8 recipe name, or None.
        convert_module: the module that converts the model and knows the device requirements
            (:mod:`flopsweep.fp8`, torch and torchao imported inside its functions), or None.
        why_not_cpu: the reason given on the CPU.
    """

    dtype: str
    devices: tuple[str, ...] = ("cuda", "cpu")
    config: type[PrecisionConfig] = PrecisionConfig
    fp8_recipe: str | None = None
    convert_module: str | None = None
    why_not_cpu: str = ""

    def converter(self) -> Any:
        """The :attr:`convert_module` (the spec has one)."""
        assert self.convert_module is not None
        return lazy.module(self.convert_module)


PRECISIONS: dict[str, PrecisionSpec] = {
    "bf16": PrecisionSpec(dtype="bfloat16"),
    "fp16": PrecisionSpec(
        dtype="float16",
        devices=("cuda",),
        why_not_cpu="fp16 loss scaling needs CUDA (no CPU kernels for it)",
    ),
    "fp32": PrecisionSpec(dtype="float32"),
    "fp8": PrecisionSpec(
        dtype="bfloat16",
        devices=("cuda",),
        config=Fp8Config,
        fp8_recipe="tensorwise",
        convert_module="flopsweep.fp8",
    ),
}
PRECISIONS["fp8-rowwise"] = dataclasses.replace(PRECISIONS["fp8"], fp8_recipe="rowwise")
"""Precisions by ``precision.name``."""


def __getattr__(name: str) -> Any:
    """``DTYPES``: the torch compute dtype by precision name (``{"bf16": torch.bfloat16, ...}``),
    made on first use (it imports torch, which the rank has; validation never asks)."""
    if name == "DTYPES":
        import torch

        return {key: getattr(torch, spec.dtype) for key, spec in PRECISIONS.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def prepare_model(model: torch.nn.Module, cfg: PrecisionConfig) -> list[str]:
    """Convert ``model`` in place for ``cfg`` (fp8: torchao float8 linears); returns the names
    of the converted layers (stored as ``model.fp8_layers``), empty for the other precisions."""
    spec = PRECISIONS[cfg.name]
    if spec.fp8_recipe is None:
        return []
    names = spec.converter().convert(
        model, spec.fp8_recipe, fsdp_float8_all_gather=getattr(cfg, "fp8_all_gather", False)
    )
    model.fp8_layers = names
    return names


def after_optimizer_step(model: torch.nn.Module, cfg: PrecisionConfig) -> Callable[[], None] | None:
    """What FSDP2 runs after each optimizer step: fp8 all-gather's scale precompute, else None."""
    spec = PRECISIONS[cfg.name]
    if spec.fp8_recipe != "tensorwise" or not getattr(cfg, "fp8_all_gather", False):
        return None
    fp8 = spec.converter()

    def precompute() -> None:
        fp8.precompute_scales(model)

    return precompute


def problem(
    cfg: PrecisionConfig, *, device: str, capability: tuple[int, int] | None, bf16: bool
) -> str | None:
    """Why ``cfg`` cannot run on this device, or None."""
    spec = PRECISIONS[cfg.name]
    if spec.convert_module is not None:  # device, compute capability and torchao: flopsweep.fp8 knows
        return spec.converter().requirement_problem(device, capability)
    if device not in spec.devices:
        return spec.why_not_cpu
    if spec.dtype == "bfloat16" and device == "cuda" and not bf16:
        return "this GPU has no bf16 support"
    return None
