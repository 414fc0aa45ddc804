"""Distributed backends: each builds the model, wraps it and returns a :class:`Trainer`.

Every backend trains the same model from the same seed with the same AdamW
settings (``OptimConfig``) and gradient clipping, so that a sweep compares
strategies, not recipes. ``build_trainer`` is the only entry point the worker
uses. ``BACKENDS`` is the registry: one :class:`BackendSpec` per ``backend=``
option, with its schema (knobs) and the ranks and devices it supports. Adding a
backend is a builder here, one ``BACKENDS`` line and one YAML file under
``conf/backend/``. The model is reached only through its family
(:mod:`flopsweep.models`): its blocks and its tied parameters.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn
from torch.profiler import record_function

from flopsweep import checkpointing
from flopsweep import precision as fprecision
from flopsweep.annotations import OPTIMIZER_ANNOTATION
from flopsweep.config import BackendConfig, BatchConfig, ConfigError, ModelConfig, OptimConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.options import DeepSpeedConfig, FSDPConfig
from flopsweep.text import plural

log = logging.getLogger("flopsweep")


ZERO_SHORTHANDS = {"zero1": 1, "zero2": 2, "zero3": 3}
"""The ``backend=`` options that are ``backend=deepspeed`` with a fixed ZeRO stage
(``conf/backend/zero<N>.yaml``); ``flopsweep.plan`` refuses a ``backend.zero_stage`` that
contradicts the one picked. ``backend=deepspeed`` leaves the stage free."""

DTYPES = fprecision.DTYPES


class Trainer(Protocol):
    def step(self, micro_batches: Sequence[torch.Tensor]) -> torch.Tensor:
        """One optimizer step over ``len(micro_batches)`` micro batches (grad accumulation).

        Returns the mean loss as a detached 0-d tensor on the device (no host sync).
        """


def build_model(cfg: RunConfig, device: torch.device | None) -> nn.Module:
    """The model of ``cfg.model``'s family in fp32, initialised from ``cfg.seed`` (the same
    weights on every rank), converted for fp8 when the precision asks for it, then
    checkpointed and compiled per block (:func:`wrap_blocks`).

    ``device=None`` builds without a device context, as ``deepspeed.zero.Init`` wants (it
    places each parameter partition on the accelerator itself).
    """
    return wrap_blocks(make_model(cfg, device), cfg)


def make_model(cfg: RunConfig, device: torch.device | None) -> nn.Module:
    """The bare model (fp8-converted when asked), before checkpointing and compile."""
    torch.manual_seed(cfg.seed)
    with device if device is not None else contextlib.nullcontext():
        model = family(cfg.model).build(cfg.model, cfg.attention)
    fprecision.prepare_model(model, cfg.precision)
    return model


def wrap_blocks(model: nn.Module, cfg: RunConfig) -> nn.Module:
    """The activation checkpointing policy wraps the blocks (:mod:`flopsweep.checkpointing`;
    ``full``: non-reentrant ``checkpoint_wrapper`` per block), and ``compile`` then compiles
    each wrapped block, as torchtitan does: the recompute sits
    inside the compiled graph, where Inductor fuses it, instead of re-running a compiled
    forward from outside. Identical blocks share one compiled graph, and FSDP2/ZeRO-3
    hooks stay outside the compiled regions. (Outside ``deepspeed.zero.Init``: its
    module hooks do not know the wrapper.)"""
    blocks = family(cfg.model).blocks(model)
    checkpointing.policy(cfg.activation_checkpointing).apply(blocks, cfg.activation_checkpointing)
    if cfg.compile:
        for block in blocks:
            block.compile()
        model.head_loss = torch.compile(model.head_loss)
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
    after_step: Callable[[], None] | None = None  # e.g. fp8 scale precompute for FSDP2

    def step(self, micro_batches: Sequence[torch.Tensor]) -> torch.Tensor:
        n = len(micro_batches)
        total = torch.zeros((), device=micro_batches[0].device)
        for i, tokens in enumerate(micro_batches):
            with self._sync_context(i == n - 1), self._autocast(tokens.device):
                loss = self.model(tokens) / n
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            total += loss.detach()
        with record_function(OPTIMIZER_ANNOTATION):  # profile=true: the optimizer part
            if self.scaler:
                self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip, foreach=True)
            if self.scaler:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            if self.after_step is not None:
                self.after_step()
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
            with record_function(OPTIMIZER_ANNOTATION):
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


def build_single(cfg: RunConfig, device: torch.device, layout: Layout) -> TorchTrainer:
    """One rank, fp32 master weights, ``torch.autocast`` for bf16/fp16."""
    return _torch_trainer(build_model(cfg, device), cfg, device)


def build_ddp(cfg: RunConfig, device: torch.device, layout: Layout) -> TorchTrainer:
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


def build_fsdp(cfg: RunConfig, device: torch.device, layout: Layout) -> Trainer:
    """FSDP2: ``fully_shard`` each block, then the root, with one ``MixedPrecisionPolicy``
    (params in the run's precision, gradients reduced in fp32), sharded over the layout's
    ``dp_shard`` ranks. With ``layout.pp > 1``, the pipeline of :mod:`flopsweep.pipeline`, each
    stage sharded so."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if layout.pp > 1:  # pipeline stages, each FSDP2-sharded over the data-parallel sub-mesh
        from flopsweep import pipeline

        return pipeline.build_pipeline(
            cfg,
            device,
            layout,
            build_model=lambda: build_model(cfg, device),
            build_optimizer=lambda params: build_adamw(params, cfg.optim, device),
        )
    model = build_model(cfg, device)
    mesh = init_device_mesh(device.type, (layout.dp_shard,), mesh_dim_names=("dp_shard",))
    dtype = DTYPES[cfg.precision.name]
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    blocks = family(cfg.model).blocks(model)
    for i, block in enumerate(blocks):
        # The last block's backward runs right after forward: keeping it unsharded
        # saves one all-gather per step (torchtitan does the same).
        last = i == len(blocks) - 1
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
    trainer = _torch_trainer(model, cfg, device, autocast=False, no_sync=no_sync)
    trainer.after_step = fprecision.after_optimizer_step(model, cfg.precision)
    return trainer


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
    if backend.deepcompile:
        ds["compile"] = {"deepcompile": True}
    if precision == "bf16":
        ds["bf16"] = {"enabled": True}
    elif precision == "fp16":
        ds["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    return ds


def _default(value: float | None, default: float) -> float:
    return default if value is None else value


def extensions_dir(environ: Mapping[str, str] = os.environ) -> str:
    """Where DeepSpeed's JIT-built ops (the CPU ``deepspeed_shm_comm``, ...) are built and cached:
    the user's ``TORCH_EXTENSIONS_DIR`` when set, else a directory of flopsweep's own under
    ``$XDG_CACHE_HOME`` (``~/.cache``), keyed on Python, torch, DeepSpeed and the environment's
    prefix. torch's default (``~/.cache/torch_extensions/py311_cpu``) is shared by every environment
    of the machine: two of them with other torch or DeepSpeed versions rebuild each other's ops
    on every run (minutes each). Created private (0700)."""
    if environ.get("TORCH_EXTENSIONS_DIR"):
        return environ["TORCH_EXTENSIONS_DIR"]
    from importlib.metadata import version

    ds = version("deepspeed")
    key = "|".join([sys.prefix, sys.version, torch.__version__, str(torch.version.cuda), ds])
    name = f"py{sys.version_info.major}{sys.version_info.minor}-torch{torch.__version__}-ds{ds}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    path = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flopsweep" / "torch_extensions"
    path = path / f"{name}-{digest}"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return str(path)


def build_deepspeed(cfg: RunConfig, device: torch.device, layout: Layout) -> DeepSpeedTrainer:
    """DeepSpeed ZeRO engine; under ZeRO-3 the model is built inside ``deepspeed.zero.Init``
    so that each rank only ever holds its partition. Its JIT-built ops go to :func:`extensions_dir`."""
    os.environ["TORCH_EXTENSIONS_DIR"] = extensions_dir()
    import deepspeed

    # init_distributed print()s "DeepSpeed ... built successfully" on every rank of every job, even
    # when the op is cached: kept for the debug log (hydra.verbose=flopsweep shows it).
    with contextlib.redirect_stdout(io.StringIO()) as chatter:
        deepspeed.init_distributed()  # adopts the process group the worker already made
    for line in chatter.getvalue().splitlines():
        log.debug("%s", line)
    ds_config = deepspeed_config(
        backend=cfg.backend,
        batch=cfg.batch,
        precision=cfg.precision.name,
        optim=cfg.optim,
        model=cfg.model,
        world_size=layout.dp,
        device_type=device.type,
    )
    stage3 = cfg.backend.zero_stage == 3
    fam = family(cfg.model)
    # zero_init=False (hf): built whole on the host, partitioned by deepspeed.initialize.
    with deepspeed.zero.Init(config_dict_or_path=ds_config, enabled=stage3 and fam.zero_init):
        model = make_model(cfg, None if stage3 else device)
    model = wrap_blocks(model, cfg)
    if stage3:
        # A tied LM head uses the embedding weight outside the embedding's own forward.
        for param in fam.tied_parameters(model):
            deepspeed.zero.register_external_parameter(model, param)
        if fam.zero3_leaf_modules is not None and (leaves := fam.zero3_leaf_modules(model)):
            from deepspeed.utils import set_z3_leaf_modules

            set_z3_leaf_modules(model, leaves)  # MoE layers: gathered whole, not per routed expert
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
    if cfg.backend.deepcompile:
        engine.compile()  # DeepCompile: the whole model, with ZeRO's passes in the graph
    return DeepSpeedTrainer(engine)


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


def _whole_deepspeed_sizes(backend: DeepSpeedConfig) -> DeepSpeedConfig:
    """The DeepSpeed sizes as ``int`` (``5e8`` -> 500000000); a fraction or a negative is an error."""
    import dataclasses

    if backend.zero_stage not in (1, 2, 3):
        raise ConfigError(
            "backend.zero_stage",
            backend.zero_stage,
            "DeepSpeed ZeRO has stages 1, 2 and 3",
            "set backend.zero_stage=1, 2 or 3",
        )
    sizes = {}
    if backend.optimizer_impl not in ("fused", "torch"):
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
        check=_whole_deepspeed_sizes,
        precisions=("bf16", "fp16", "fp32"),
    ),
}
"""Distributed backends by ``backend.name``."""


def check_support(
    cfg: BackendConfig, *, world_size: int, device: str, precision: str, compile_blocks: bool = False
) -> BackendConfig:
    """Check that ``cfg``'s backend runs ``world_size`` ranks on ``device`` at ``precision``.

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
