"""Distributed backends, torch side: each ``backend=`` option's builder makes this rank's module and
returns a :class:`~flopsweep.trainers.Trainer`.

Every backend trains the same model from the same seed with the same AdamW settings
(``OptimConfig``) and gradient clipping, so that a sweep compares strategies, not recipes.
``build_trainer`` is the only entry point the worker uses. The registry is torch-free:
:data:`flopsweep.backend_specs.BACKEND_SPECS` (re-exported here as ``BACKENDS``), one spec per option
with its schema, ranks, devices, checks and memory and communication terms, naming its builder here by
import path (``flopsweep.backends:build_<name>``). A builder makes the model
(:func:`flopsweep.parallelize.make_model`), runs :func:`flopsweep.parallelize.parallelize` with its
data-parallel step (none, DDP, FSDP2 or HSDP, DeepSpeed's engine) and wraps the result in a trainer
(:mod:`flopsweep.trainers`). Adding a backend is a builder here, one spec in
:mod:`flopsweep.backend_specs` and one YAML file under ``conf/backend/``.

The names that lived here before the split stay importable from here: the trainers
(:mod:`flopsweep.trainers`), the model steps (:mod:`flopsweep.parallelize`), DeepSpeed's config
(:mod:`flopsweep.deepspeed_config`) and engine (:mod:`flopsweep.deepspeed_backend`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from flopsweep import mesh as fmesh
from flopsweep import precision as fprecision
from flopsweep.backend_checks import check_support
from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.config import RunConfig
from flopsweep.deepspeed_backend import build_deepspeed, extensions_dir
from flopsweep.deepspeed_config import (
    CUDA_BUCKET,
    SIZE_KEYS,
    ZERO_SHORTHANDS,
    deepspeed_config,
    run_deepspeed_config,
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
    return torch_trainer(parallelize(make_model(cfg, device), cfg, layout), cfg, device, layout=layout)


def build_ddp(cfg: RunConfig, device: torch.device, layout: Layout) -> TorchTrainer:
    """``DistributedDataParallel`` with ``torch.autocast``; ``no_sync`` on all but the last micro batch."""
    model = parallelize(make_model(cfg, device), cfg, layout, data_parallel=ddp(device))

    def no_sync(is_last: bool) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if is_last else model.no_sync()

    return torch_trainer(model, cfg, device, no_sync=no_sync, layout=layout)


def build_fsdp(cfg: RunConfig, device: torch.device, layout: Layout) -> Trainer:
    """FSDP2 on the layout's device mesh (:mod:`flopsweep.mesh`), every step of
    :func:`flopsweep.parallelize.parallelize` in its order, ending with ``fully_shard`` each block
    and the root on FSDP2's mesh (:attr:`flopsweep.mesh.WorldMesh.fsdp`: 1-D ``dp_shard``, or 2-D
    ``(dp_replicate, dp_shard)``: HSDP). With ``layout.pp > 1``, the pipeline of
    :mod:`flopsweep.pipeline`: each of this rank's stages is split from its own whole model (the
    pipeline step), then sharded so. Each micro batch runs in the degrees' hooks
    (:func:`flopsweep.trainers.micro_context`)."""
    world_mesh = fmesh.build_mesh(layout, device.type)
    shard = fsdp(cfg, world_mesh.fsdp)
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
    trainer = torch_trainer(
        model, cfg, device, autocast=False, no_sync=no_sync, layout=layout, mesh=world_mesh
    )
    trainer.after_step = fprecision.after_optimizer_step(model, cfg.precision)
    return trainer


BACKENDS = BACKEND_SPECS
"""The ``backend=`` registry: :data:`flopsweep.backend_specs.BACKEND_SPECS` (one torch-free spec per
option, naming its builder here by import path)."""


def build_trainer(cfg: RunConfig, device: torch.device, layout: Layout) -> Trainer:
    """Build the backend named by ``cfg.backend.name`` on this rank's ``device``, laid out as the
    plan's ``layout`` (:class:`flopsweep.layout.Layout`)."""
    return BACKEND_SPECS[cfg.backend.name].build()(cfg, device, layout)
