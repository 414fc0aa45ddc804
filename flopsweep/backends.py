"""Distributed backends: the registry of ``backend=`` options; each builds this rank's module and
returns a :class:`~flopsweep.trainers.Trainer`.

Every backend trains the same model from the same seed with the same AdamW settings
(``OptimConfig``) and gradient clipping, so that a sweep compares strategies, not recipes.
``build_trainer`` is the only entry point the worker uses. ``BACKENDS`` is the registry: one
:class:`BackendSpec` per ``backend=`` option, with its schema (knobs), the ranks and devices it
supports and its builder. A builder makes the model (:func:`flopsweep.parallelize.make_model`),
runs :func:`flopsweep.parallelize.parallelize` with its data-parallel step (none, DDP, FSDP2 or
HSDP, DeepSpeed's engine) and wraps the result in a trainer (:mod:`flopsweep.trainers`). Adding a
backend is a builder, one ``BACKENDS`` line and one YAML file under ``conf/backend/``.

The names that lived here before the split stay importable from here: the trainers
(:mod:`flopsweep.trainers`), the model steps (:mod:`flopsweep.parallelize`), DeepSpeed's config
(:mod:`flopsweep.deepspeed_config`) and engine (:mod:`flopsweep.deepspeed_backend`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from flopsweep import mesh as fmesh
from flopsweep import precision as fprecision
from flopsweep import tensor_parallel
from flopsweep.config import BackendConfig, ConfigError, RunConfig
from flopsweep.deepspeed_backend import build_deepspeed, extensions_dir
from flopsweep.deepspeed_config import (
    CUDA_BUCKET,
    SIZE_KEYS,
    ZERO_SHORTHANDS,
    check_nvme,
    deepspeed_config,
    run_deepspeed_config,
    whole_deepspeed_sizes,
)
from flopsweep.layout import Layout
from flopsweep.options import DeepSpeedConfig, FSDPConfig
from flopsweep.parallelize import (
    build_model,
    ddp,
    fsdp,
    make_model,
    parallelize,
    shard_data_parallel,
    wrap_blocks,
)
from flopsweep.text import plural
from flopsweep.trainers import (
    DTYPES,
    DeepSpeedTrainer,
    TorchTrainer,
    Trainer,
    build_adamw,
    build_optimizer,
    optimizer_facts,
    torch_trainer,
)

__all__ = [  # the names callers import from here (the ones moved out included)
    "BACKENDS",
    "CUDA_BUCKET",
    "DTYPES",
    "SIZE_KEYS",
    "ZERO_SHORTHANDS",
    "BackendSpec",
    "DeepSpeedConfig",
    "DeepSpeedTrainer",
    "FSDPConfig",
    "TorchTrainer",
    "Trainer",
    "build_adamw",
    "build_ddp",
    "build_deepspeed",
    "build_fsdp",
    "build_model",
    "build_optimizer",
    "build_single",
    "build_trainer",
    "check_support",
    "deepspeed_config",
    "extensions_dir",
    "make_model",
    "optimizer_facts",
    "parallelize",
    "run_deepspeed_config",
    "shard_data_parallel",
    "wrap_blocks",
]


def build_single(cfg: RunConfig, device: torch.device, layout: Layout) -> TorchTrainer:
    """One rank, fp32 master weights, ``torch.autocast`` for bf16/fp16."""
    return torch_trainer(parallelize(make_model(cfg, device), cfg, layout), cfg, device)


def build_ddp(cfg: RunConfig, device: torch.device, layout: Layout) -> TorchTrainer:
    """``DistributedDataParallel`` with ``torch.autocast``; ``no_sync`` on all but the last micro batch."""
    model = parallelize(make_model(cfg, device), cfg, layout, data_parallel=ddp(device))

    def no_sync(is_last: bool) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if is_last else model.no_sync()

    return torch_trainer(model, cfg, device, no_sync=no_sync)


def build_fsdp(cfg: RunConfig, device: torch.device, layout: Layout) -> Trainer:
    """FSDP2 on the layout's device mesh (:mod:`flopsweep.mesh`), every step of
    :func:`flopsweep.parallelize.parallelize` in its order, ending with ``fully_shard`` each block
    and the root on the data-parallel sub-mesh (1-D ``dp_shard``, or 2-D ``(dp_replicate,
    dp_shard)``: HSDP). With ``layout.pp > 1``, the pipeline of :mod:`flopsweep.pipeline`: each of
    this rank's stages is split from its own whole model (the pipeline step), then sharded so."""
    world_mesh = fmesh.build_mesh(layout, device.type)
    shard = fsdp(cfg, fmesh.dp_mesh(world_mesh, layout))
    if layout.pp > 1:  # pipeline stages, each FSDP2-sharded over the data-parallel sub-mesh
        from flopsweep import pipeline

        return pipeline.build_pipeline(
            cfg,
            device,
            layout,
            world_mesh,
            build_stage=lambda split: parallelize(
                make_model(cfg, device), cfg, layout, mesh=world_mesh, split=split, data_parallel=shard
            ),
            build_optimizer=lambda params: build_adamw(params, cfg.optim, device),
        )
    model = parallelize(make_model(cfg, device), cfg, layout, mesh=world_mesh, data_parallel=shard)

    @contextlib.contextmanager
    def no_sync(is_last: bool) -> Iterator[None]:
        model.set_requires_gradient_sync(is_last)
        yield

    # FSDP2's MixedPrecisionPolicy casts the parameters itself: no autocast on top.
    trainer = torch_trainer(model, cfg, device, autocast=False, no_sync=no_sync)
    trainer.after_step = fprecision.after_optimizer_step(model, cfg.precision)
    trainer.micro_context = tensor_parallel.loss_context(layout.tp)
    return trainer


@dataclass(frozen=True, kw_only=True)
class BackendSpec:
    """One ``backend=`` option.

    Attributes:
        build: ``(cfg, device, layout) -> Trainer`` on this rank, after the process group exists.
        config: the option's schema (``BackendConfig`` or a subclass with its knobs).
        max_ranks: the most ranks (world size) it runs on; None for any.
        devices: where it runs.
        package: a package it imports, checked before launch.
        check: ``backend_cfg -> backend_cfg``: option rules (raises ``ConfigError``).
        precisions: run precisions it supports (None: all); fp8 needs torchao's modules.
    """

    build: Callable[[RunConfig, torch.device, Layout], Trainer]
    config: type[BackendConfig] = BackendConfig
    max_ranks: int | None = None
    devices: tuple[str, ...] = ("cuda", "cpu")
    package: str | None = None
    check: Callable[[Any], Any] | None = None
    precisions: tuple[str, ...] | None = None


BACKENDS: dict[str, BackendSpec] = {
    "single": BackendSpec(build=build_single, max_ranks=1),
    "ddp": BackendSpec(build=build_ddp),
    "fsdp": BackendSpec(build=build_fsdp, config=FSDPConfig),
    "deepspeed": BackendSpec(
        build=build_deepspeed,
        config=DeepSpeedConfig,
        package="deepspeed",
        check=whole_deepspeed_sizes,
        precisions=("bf16", "fp16", "fp32"),
    ),
}
"""Distributed backends by ``backend.name``."""


def check_support(
    cfg: BackendConfig,
    *,
    world_size: int,
    device: str,
    precision: str,
    compile_blocks: bool = False,
    paths_here: bool = True,
) -> BackendConfig:
    """Check that ``cfg``'s backend runs ``world_size`` ranks on ``device`` at ``precision``;
    ``paths_here`` False leaves ``backend.nvme_path`` unchecked (a plan for another machine).

    Returns:
        ``cfg`` after the option's own rules (DeepSpeed sizes made ``int``).

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    spec = BACKENDS[cfg.name]
    if spec.max_ranks is not None and world_size > spec.max_ranks:
        others = ", ".join(name for name, b in BACKENDS.items() if b.max_ranks is None)
        raise ConfigError(
            "backend",
            cfg.name,
            f"runs at most {plural(spec.max_ranks, 'rank')} but nproc_per_node x nnodes = {world_size}",
            f"set nproc_per_node={spec.max_ranks}, or pick backend={others}",
        )
    if device not in spec.devices:
        here = " or ".join(f"backend={name}" for name, b in BACKENDS.items() if device in b.devices)
        raise ConfigError(
            "backend",
            cfg.name,
            f"runs only on {', '.join(spec.devices)}, not on {device}",
            f"pick {here}, or set device={spec.devices[0]}",
        )
    if spec.precisions is not None and precision not in spec.precisions:
        others = ", ".join(name for name, b in BACKENDS.items() if b.precisions is None)
        raise ConfigError(
            "precision",
            precision,
            f"backend={cfg.name} does not run it (supports {', '.join(spec.precisions)})",
            f"pick backend={others} for precision={precision}, or another precision",
        )
    hpz = getattr(cfg, "zero_hpz_partition_size", 1)
    if hpz >= 1 and world_size % hpz:
        raise ConfigError(
            "backend.zero_hpz_partition_size",
            hpz,
            f"does not divide the world size {world_size} (nproc_per_node x nnodes)",
            "set backend.zero_hpz_partition_size to the ranks per node (nproc_per_node), or 1",
        )
    check_nvme(cfg, device, path_here=paths_here)
    if getattr(cfg, "deepcompile", False) and device != "cuda":
        raise ConfigError(
            "backend.deepcompile", True, "DeepCompile runs on CUDA only", "set backend.deepcompile=false"
        )
    if getattr(cfg, "deepcompile", False) and compile_blocks:
        raise ConfigError(
            "compile",
            True,
            "backend.deepcompile=true compiles the whole model itself",
            "set compile=false (DeepCompile) or backend.deepcompile=false (per-block compile)",
        )
    return spec.check(cfg) if spec.check is not None else cfg


def build_trainer(cfg: RunConfig, device: torch.device, layout: Layout) -> Trainer:
    """Build the backend named by ``cfg.backend.name`` on this rank's ``device``, laid out as the
    plan's ``layout`` (:class:`flopsweep.layout.Layout`)."""
    return BACKENDS[cfg.backend.name].build(cfg, device, layout)
