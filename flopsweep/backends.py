"""Distributed backends: each builds the GPT, wraps it and returns a :class:`Trainer`.

Every backend trains the same model from the same seed with the same AdamW
settings (``OptimConfig``) and gradient clipping, so that a sweep compares
strategies, not recipes. ``build_trainer`` is the only entry point the worker
uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from flopsweep.config import BackendConfig, BatchConfig, ModelConfig, OptimConfig, RunConfig
from flopsweep.model import GPT

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class Trainer(Protocol):
    def step(self, micro_batches: Sequence[torch.Tensor]) -> torch.Tensor:
        """One optimizer step over ``len(micro_batches)`` micro batches (grad accumulation).

        Returns the mean loss as a detached 0-d tensor on the device (no host sync).
        """


def build_model(cfg: RunConfig, device: torch.device | None) -> GPT:
    """The GPT in fp32, initialised from ``cfg.seed`` (the same weights on every rank).

    ``device=None`` builds without a device context, as ``deepspeed.zero.Init``
    wants (it places each parameter partition on the accelerator itself).
    """
    torch.manual_seed(cfg.seed)
    with device if device is not None else contextlib.nullcontext():
        model = GPT(cfg.model, cfg.attention.name, cfg.activation_checkpointing)
    if cfg.compile:
        for block in model.h:
            block.compile()
    return model


def build_adamw(params: Any, optim: OptimConfig, device: torch.device) -> torch.optim.AdamW:
    """``torch.optim.AdamW`` with the shared settings; fused kernel on CUDA."""
    return torch.optim.AdamW(
        params,
        lr=optim.lr,
        betas=(optim.beta1, optim.beta2),
        eps=optim.eps,
        weight_decay=optim.weight_decay,
        fused=device.type == "cuda",
    )


@dataclass
class TorchTrainer:
    """Step loop for ``single``, ``ddp`` and ``fsdp``: autocast or FSDP2 mixed precision,
    grad accumulation without gradient sync on all but the last micro batch, a
    ``GradScaler`` for fp16, clipping, AdamW."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    grad_clip: float
    autocast_dtype: torch.dtype | None = None
    scaler: torch.amp.GradScaler | None = None
    no_sync: Any = None  # callable(is_last: bool) -> context manager

    def step(self, micro_batches: Sequence[torch.Tensor]) -> torch.Tensor:
        n = len(micro_batches)
        total = torch.zeros((), device=micro_batches[0].device)
        for i, tokens in enumerate(micro_batches):
            with self._sync_context(i == n - 1), self._autocast(tokens.device):
                loss = self.model(tokens) / n
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            total += loss.detach()
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip, foreach=True)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total

    def _sync_context(self, is_last: bool) -> contextlib.AbstractContextManager:
        return self.no_sync(is_last) if self.no_sync else contextlib.nullcontext()

    def _autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=self.autocast_dtype)


@dataclass
class DeepSpeedTrainer:
    """Step loop for a DeepSpeed engine; the engine owns accumulation, scaling and clipping."""

    engine: Any

    def step(self, micro_batches: Sequence[torch.Tensor]) -> torch.Tensor:
        total = torch.zeros((), device=micro_batches[0].device)
        for tokens in micro_batches:
            loss = self.engine(tokens)
            self.engine.backward(loss)  # scales by 1/grad_accum
            self.engine.step()  # steps the optimizer at the accumulation boundary only
            total += loss.detach().float() / len(micro_batches)
        return total


def _torch_trainer(
    model: nn.Module, cfg: RunConfig, device: torch.device, *, autocast: bool = True, no_sync: Any = None
) -> TorchTrainer:
    dtype = DTYPES[cfg.precision.name]
    return TorchTrainer(
        model,
        build_adamw(model.parameters(), cfg.optim, device),
        cfg.optim.grad_clip,
        autocast_dtype=dtype if autocast and dtype != torch.float32 else None,
        scaler=torch.amp.GradScaler(device.type) if cfg.precision.name == "fp16" else None,
        no_sync=no_sync,
    )


def build_single(cfg: RunConfig, device: torch.device) -> TorchTrainer:
    """One rank, fp32 master weights, ``torch.autocast`` for bf16/fp16."""
    return _torch_trainer(build_model(cfg, device), cfg, device)


def build_ddp(cfg: RunConfig, device: torch.device) -> TorchTrainer:
    """``DistributedDataParallel`` with ``torch.autocast``; ``no_sync`` on all but the last micro batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(
        build_model(cfg, device),
        device_ids=[device.index] if device.type == "cuda" else None,
        gradient_as_bucket_view=True,
    )

    def no_sync(is_last: bool) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if is_last else model.no_sync()

    return _torch_trainer(model, cfg, device, no_sync=no_sync)


def build_fsdp(cfg: RunConfig, device: torch.device) -> TorchTrainer:
    """FSDP2: ``fully_shard`` each block, then the root, with one ``MixedPrecisionPolicy``
    (params in the run's precision, gradients reduced in fp32)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = build_model(cfg, device)
    mesh = init_device_mesh(device.type, (torch.distributed.get_world_size(),))
    dtype = DTYPES[cfg.precision.name]
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    for i, block in enumerate(model.h):
        # The last block's backward runs right after forward: keeping it unsharded
        # saves one all-gather per step (torchtitan does the same).
        last = i == len(model.h) - 1
        fully_shard(
            block,
            mesh=mesh,
            mp_policy=mp,
            reshard_after_forward=cfg.backend.reshard_after_forward and not last,
        )
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=cfg.backend.reshard_after_forward)

    @contextlib.contextmanager
    def no_sync(is_last: bool) -> Iterator[None]:
        model.set_requires_gradient_sync(is_last)
        yield

    # FSDP2's MixedPrecisionPolicy casts the parameters itself: no autocast on top.
    return _torch_trainer(model, cfg, device, autocast=False, no_sync=no_sync)


def deepspeed_config(
    *,
    backend: BackendConfig,
    batch: BatchConfig,
    precision: str,
    optim: OptimConfig,
    model: ModelConfig,
    world_size: int,
    device_type: str,
) -> dict[str, Any]:
    """The DeepSpeed config dict, derived from the typed config in this one place.

    Bucket sizes left ``None`` default from the hidden size ``h``:
    ``reduce_bucket_size = h^2``, ``stage3_prefetch_bucket_size = int(0.9 h^2)``,
    ``stage3_param_persistence_threshold = 10 h``, all as ``int`` (DeepSpeed's
    config validation rejects floats such as 0.9 * 2048^2 = 3774873.6).

    Args:
        world_size: data-parallel ranks; ``train_batch_size = micro x accum x world_size``.
        device_type: ``cuda`` uses DeepSpeed's FusedAdam; ``cpu`` uses ``torch.optim.AdamW``.
    """
    h = model.n_embd
    zero: dict[str, Any] = {
        "stage": backend.zero_stage,
        "overlap_comm": backend.overlap_comm,
        "contiguous_gradients": backend.contiguous_gradients,
        "reduce_bucket_size": int(_default(backend.reduce_bucket_size, h * h)),
    }
    if backend.zero_stage == 3:
        zero["stage3_prefetch_bucket_size"] = int(_default(backend.stage3_prefetch_bucket_size, 0.9 * h * h))
        zero["stage3_param_persistence_threshold"] = int(
            _default(backend.stage3_param_persistence_threshold, 10 * h)
        )
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
                "torch_adam": device_type != "cuda",
            },
        },
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    if precision == "bf16":
        ds["bf16"] = {"enabled": True}
    elif precision == "fp16":
        ds["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    return ds


def _default(value: float | None, default: float) -> float:
    return default if value is None else value


def build_deepspeed(cfg: RunConfig, device: torch.device) -> DeepSpeedTrainer:
    """DeepSpeed ZeRO engine; under ZeRO-3 the model is built inside ``deepspeed.zero.Init``
    so that each rank only ever holds its partition."""
    import deepspeed

    deepspeed.init_distributed()  # adopts the process group the worker already made
    ds_config = deepspeed_config(
        backend=cfg.backend,
        batch=cfg.batch,
        precision=cfg.precision.name,
        optim=cfg.optim,
        model=cfg.model,
        world_size=torch.distributed.get_world_size(),
        device_type=device.type,
    )
    stage3 = cfg.backend.zero_stage == 3
    with deepspeed.zero.Init(config_dict_or_path=ds_config, enabled=stage3):
        model = build_model(cfg, None if stage3 else device)
    if stage3:
        # The tied LM head uses wte.weight outside wte's own forward.
        deepspeed.zero.register_external_parameter(model, model.wte.weight)
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
    return DeepSpeedTrainer(engine)


BUILDERS = {"single": build_single, "ddp": build_ddp, "fsdp": build_fsdp, "deepspeed": build_deepspeed}


def build_trainer(cfg: RunConfig, device: torch.device) -> Trainer:
    """Build the backend named by ``cfg.backend.name`` on this rank's ``device``."""
    return BUILDERS[cfg.backend.name](cfg, device)
