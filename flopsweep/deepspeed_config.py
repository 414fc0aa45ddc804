"""DeepSpeed's config, derived from the typed config in one place, and the rules of its knobs.

:func:`deepspeed_config` is the dict the engine gets (:mod:`flopsweep.deepspeed_backend`) and the
memory estimate reads; :func:`whole_deepspeed_sizes` is ``backend=deepspeed``'s option check
(``option_check`` of :class:`flopsweep.backend_specs.DeepSpeedSpec`) and :func:`check_nvme` the part
of :func:`flopsweep.backend_checks.check_support` that needs the device. No torch: validation and the
estimators import it without starting torch.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from flopsweep.config import BackendConfig, BatchConfig, ConfigError, ModelConfig, OptimConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.options import OFFLOAD_DEVICES, OPTIMIZER_IMPLS, DeepSpeedConfig

ZERO_SHORTHANDS = {"zero1": 1, "zero2": 2, "zero3": 3}
"""The ``backend=`` options that are ``backend=deepspeed`` with a fixed ZeRO stage
(``conf/backend/zero<N>.yaml``); ``flopsweep.plan`` refuses a ``backend.zero_stage`` that
contradicts the one picked. ``backend=deepspeed`` leaves the stage free."""

CUDA_BUCKET = 500_000_000
"""ZeRO's reduce and ZeRO-3's prefetch bucket on CUDA when not set, elements (see deepspeed_config)."""

SIZE_KEYS = (
    "reduce_bucket_size",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
    "sub_group_size",
)
"""DeepSpeed sizes in elements: typed float (``5e8`` parses), passed on as ``int``."""


ZERO_STAGES = (1, 2, 3)
"""The ZeRO stages ``backend.zero_stage`` takes (DeepSpeed's stage 0, no ZeRO, is ``backend=ddp``)."""


def zero_stage_error(stage: object, example: int = 3) -> ConfigError | None:
    """The refusal of a ``backend.zero_stage`` outside :data:`ZERO_STAGES` (``4``, ``0``, ``-1``), its fix
    the stage ``example`` (the picked option's: ``backend=zero2``'s 2), else None: one line, before Hydra
    (:func:`flopsweep.value_sets.value_set_problem`) and in the job (:func:`whole_deepspeed_sizes`)."""
    if stage in ZERO_STAGES and not isinstance(stage, bool):
        return None
    return ConfigError(
        "backend.zero_stage",
        stage,
        "DeepSpeed ZeRO has stages 1, 2 and 3",
        f"set backend.zero_stage={example} (or another of 1, 2, 3)",
    )


def whole_deepspeed_sizes(backend: DeepSpeedConfig) -> DeepSpeedConfig:
    """The DeepSpeed sizes as ``int`` (``5e8`` -> 500000000); a fraction or a negative is an error, and
    so is a ZeRO stage outside :data:`ZERO_STAGES` (:func:`zero_stage_error`)."""
    if (stage := zero_stage_error(backend.zero_stage)) is not None:
        raise stage
    sizes = {}
    if backend.optimizer_impl not in OPTIMIZER_IMPLS:
        raise ConfigError(
            "backend.optimizer_impl",
            backend.optimizer_impl,
            "is not an optimizer implementation (fused: DeepSpeed's FusedAdam; torch: torch.optim.AdamW)",
            "set backend.optimizer_impl=fused or backend.optimizer_impl=torch",
        )
    if backend.deepcompile and backend.zero_stage == 2:
        raise ConfigError(
            "backend.deepcompile",
            True,
            "DeepCompile has ZeRO-1 and ZeRO-3 passes, not ZeRO-2",
            "set backend.zero_stage=1 or 3, or backend.deepcompile=false",
        )
    _check_zero_plus_plus(backend)
    _check_offload(backend)
    for key in SIZE_KEYS:
        value = getattr(backend, key)
        if value is None:
            continue
        if not (math.isfinite(value) and value == int(value)):
            whole = f"={int(value)}" if math.isfinite(value) else " to a whole number"
            raise ConfigError(
                f"backend.{key}",
                value,
                "DeepSpeed needs a whole number of elements",
                f"set backend.{key}{whole}, or null for the default",
            )
        if value < 0:
            raise ConfigError(
                f"backend.{key}",
                value,
                "must be >= 0 elements",
                f"set backend.{key}=null for the default or a positive integer",
            )
        sizes[key] = int(value)
    return dataclasses.replace(backend, **sizes)


def _check_zero_plus_plus(backend: DeepSpeedConfig) -> None:
    """ZeRO++'s three knobs are ZeRO-3's (hpZ and qwZ partition and gather ZeRO-3's weights);
    ``zero_hpz_partition_size`` is at least 1 (1: off). Its divisibility into the world size is
    checked with the world (:func:`flopsweep.backend_checks.check_support`)."""
    if backend.zero_hpz_partition_size < 1:
        raise ConfigError(
            "backend.zero_hpz_partition_size",
            backend.zero_hpz_partition_size,
            "must be a positive number of ranks (1: off)",
            "set backend.zero_hpz_partition_size=1, or the GPUs per node",
        )
    on = {
        "zero_hpz_partition_size": backend.zero_hpz_partition_size > 1,
        "zero_quantized_weights": backend.zero_quantized_weights,
        "zero_quantized_gradients": backend.zero_quantized_gradients,
    }
    for key, enabled in on.items():
        if enabled and backend.zero_stage != 3:
            raise ConfigError(
                f"backend.{key}",
                getattr(backend, key),
                f"is a ZeRO++ knob of ZeRO-3, and backend.zero_stage={backend.zero_stage}",
                f"set backend.zero_stage=3 (backend=zero3), or leave backend.{key} at its default",
            )


def run_deepspeed_config(cfg: RunConfig, layout: Layout, device_type: str) -> dict[str, Any]:
    """:func:`deepspeed_config` of a ``RunConfig`` on its layout (world size ``layout.dp``) and a
    device type (``cuda`` or ``cpu``): what the engine gets, and what the memory estimate reads."""
    return deepspeed_config(
        backend=cfg.backend,
        batch=cfg.batch,
        precision=cfg.precision.name,
        optim=cfg.optim,
        model=cfg.model,
        world_size=layout.dp,
        device_type=device_type,
    )


def deepspeed_config(
    *,
    backend: DeepSpeedConfig,
    batch: BatchConfig,
    precision: str,
    optim: OptimConfig,
    model: ModelConfig,
    world_size: int,
    device_type: str,
) -> dict[str, Any]:
    """The DeepSpeed config dict, derived from the typed config in this one place.

    Bucket sizes left ``None``: under ZeRO-3 on CUDA, ``reduce_bucket_size = stage3_prefetch_bucket_size =
    5e8`` elements (:data:`CUDA_BUCKET`, DeepSpeed's own reduce default, chosen by
    ``sweep/zero3-tuning.yaml`` on two H200s: gpt-1.3b ZeRO-3 at micro batch 8 went from 70,752
    to 92,956 tokens/s, +31%, against h^2-sized buckets; benchmarks/RESULTS.md); otherwise
    from the hidden size ``h``: ``reduce_bucket_size = h^2``, ``stage3_prefetch_bucket_size =
    int(0.9 h^2)`` (small gloo messages). ``stage3_param_persistence_threshold = 10 h``
    everywhere. All as ``int`` (DeepSpeed's config validation rejects floats such as
    0.9 * 2048^2 = 3774873.6).

    Args:
        world_size: data-parallel ranks (the layout's ``dp``); ``train_batch_size = micro x accum x
            world_size``.
        device_type: ``cuda`` uses DeepSpeed's FusedAdam; ``cpu`` uses ``torch.optim.AdamW``.
    """
    h = model.n_embd
    # Tuned for ZeRO-3 only (the stage it was measured on); ZeRO-1/2 keep h^2.
    cuda_bucket = CUDA_BUCKET if device_type == "cuda" and backend.zero_stage == 3 else None
    zero: dict[str, Any] = {
        "stage": backend.zero_stage,
        "overlap_comm": backend.overlap_comm,
        "contiguous_gradients": backend.contiguous_gradients,
        "reduce_bucket_size": int(_default(backend.reduce_bucket_size, cuda_bucket or h * h)),
    }
    if backend.zero_stage == 3:
        prefetch = _default(backend.stage3_prefetch_bucket_size, cuda_bucket or 0.9 * h * h)
        zero["stage3_prefetch_bucket_size"] = int(prefetch)
        zero["stage3_param_persistence_threshold"] = int(
            _default(backend.stage3_param_persistence_threshold, 10 * h)
        )
        for key in ("stage3_max_live_parameters", "stage3_max_reuse_distance", "sub_group_size"):
            if getattr(backend, key) is not None:  # else DeepSpeed's own default
                zero[key] = int(getattr(backend, key))
        # ZeRO++ (Wang et al. 2023, arXiv 2306.10209): DeepSpeed's own keys, passed on as set.
        zero["zero_hpz_partition_size"] = backend.zero_hpz_partition_size
        zero["zero_quantized_weights"] = backend.zero_quantized_weights
        zero["zero_quantized_gradients"] = backend.zero_quantized_gradients
    ds: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": batch.micro_batch_size,
        "gradient_accumulation_steps": batch.grad_accum,
        "train_batch_size": batch.micro_batch_size * batch.grad_accum * world_size,
        "gradient_clipping": optim.grad_clip,
        "zero_optimization": zero,
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": optim.lr,
                "betas": [optim.beta1, optim.beta2],
                "eps": optim.eps,
                "weight_decay": optim.weight_decay,
                "torch_adam": device_type != "cuda" or backend.optimizer_impl == "torch",
            },
        },
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    zero.update(_offload_sections(backend, device_type))
    if backend.deepcompile:
        ds["compile"] = {"deepcompile": True}
    if precision == "bf16":
        ds["bf16"] = {"enabled": True}
    elif precision == "fp16":
        ds["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    return ds


def _offload_sections(backend: DeepSpeedConfig, device_type: str) -> dict[str, Any]:
    """``zero_optimization.offload_optimizer`` / ``offload_param`` for ``backend.offload_*`` other than
    ``none``: ``{"device": "cpu"}`` or ``{"device": "nvme", "nvme_path": ...}``, pinned host memory on
    CUDA (a CPU-only torch cannot pin)."""
    out: dict[str, Any] = {}
    for key in ("offload_optimizer", "offload_param"):
        where = getattr(backend, key)
        if where == "none":
            continue
        section: dict[str, Any] = {"device": where, "pin_memory": device_type == "cuda"}
        if where == "nvme":
            section["nvme_path"] = backend.nvme_path
        out[key] = section
    return out


def _check_offload(backend: DeepSpeedConfig) -> None:
    """``backend.offload_optimizer`` and ``offload_param`` are ``none``, ``cpu`` or ``nvme``;
    ``offload_param`` and NVMe need ZeRO-3 (DeepSpeed offloads parameters and NVMe-offloads the
    optimizer only in stage 3: ZeRO-Infinity); ``nvme`` needs ``backend.nvme_path``, and
    ``backend.nvme_path`` needs an ``nvme`` (nothing else reads it).

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    for key in ("offload_optimizer", "offload_param"):
        where = getattr(backend, key)
        if where not in OFFLOAD_DEVICES:
            raise ConfigError(
                f"backend.{key}",
                where,
                f"must be one of {', '.join(OFFLOAD_DEVICES)}",
                f"set backend.{key}=cpu",
            )
        if where != "none" and backend.zero_stage != 3 and (key == "offload_param" or where == "nvme"):
            what = "parameter offload" if key == "offload_param" else "NVMe offload"
            raise ConfigError(
                f"backend.{key}",
                where,
                f"DeepSpeed has {what} in ZeRO-3 only, and backend.zero_stage={backend.zero_stage}",
                f"set backend=zero3, or backend.{key}=none",
            )
        if where == "nvme" and not backend.nvme_path:
            raise ConfigError(
                "backend.nvme_path",
                backend.nvme_path,
                f"backend.{key}=nvme needs a folder on an NVMe drive",
                f"set backend.nvme_path=/local_nvme/flopsweep (a folder you own), or backend.{key}=cpu",
            )
    if backend.nvme_path and "nvme" not in (backend.offload_optimizer, backend.offload_param):
        raise ConfigError(
            "backend.nvme_path",
            backend.nvme_path,
            "is where NVMe offload writes, and neither backend.offload_optimizer "
            f"({backend.offload_optimizer}) nor backend.offload_param ({backend.offload_param}) is nvme, "
            "so nothing reads it",
            "set backend.offload_optimizer=nvme or backend.offload_param=nvme (ZeRO-3), "
            "or drop backend.nvme_path (null)",
        )


def check_nvme(cfg: BackendConfig, device: str, *, path_here: bool = True) -> None:
    """NVMe offload (ZeRO-Infinity) runs DeepSpeed's ``async_io`` op, which is built for CUDA (and
    libaio) only, and writes into ``backend.nvme_path``, which must be an existing folder (checked
    only when ``path_here``: a plan for GPUs that are not here leaves it to the run's launch).

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    keys = [k for k in ("offload_optimizer", "offload_param") if getattr(cfg, k, "none") == "nvme"]
    if not keys or cfg.zero_stage != 3 or not cfg.nvme_path:
        return  # _check_offload names the stage and the missing path
    if device != "cuda":
        raise ConfigError(
            f"backend.{keys[0]}",
            "nvme",
            f"NVMe offload runs DeepSpeed's async_io op, which is built for CUDA, not device={device}",
            f"set backend.{keys[0]}=cpu, or device=cuda",
        )
    path = cfg.nvme_path
    if path_here and not os.path.isdir(path):
        raise ConfigError(
            "backend.nvme_path",
            path,
            "is not an existing folder (NVMe offload writes its swap files there)",
            "create the folder on an NVMe drive first, or set backend.nvme_path to one",
        )


def _default(value: float | None, default: float) -> float:
    return default if value is None else value
