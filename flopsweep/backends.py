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

from flopsweep import checkpointing, optim_in_backward, tensor_parallel
from flopsweep import precision as fprecision
from flopsweep.annotations import OPTIMIZER_ANNOTATION
from flopsweep.config import BackendConfig, BatchConfig, ConfigError, ModelConfig, OptimConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.options import OFFLOAD_DEVICES, DeepSpeedConfig, FSDPConfig
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
    module hooks do not know the wrapper.) ``memory_budget`` sets
    ``torch._functorch.config.activation_memory_budget`` for the process instead of wrapping."""
    blocks = family(cfg.model).blocks(model)
    checkpointing.policy(cfg.activation_checkpointing).apply(blocks, cfg.activation_checkpointing)
    # memory_budget: the partitioner reads its budget when a block compiles, at the first step; a
    # rank is its own process, so the setting stays for the run (rules refuse it without compile)
    for key, value in checkpointing.compiler_settings(cfg.activation_checkpointing).items():
        import torch._functorch.config as functorch_config

        setattr(functorch_config, key, value)
    if cfg.compile:
        for block in blocks:
            block.compile()
        model.head_loss = torch.compile(model.head_loss)
    return model


def build_adamw(params: Any, optim: OptimConfig, device: torch.device) -> torch.optim.AdamW:
    """``torch.optim.AdamW`` with the shared settings; fused kernel on CUDA. ``device`` is where the
    parameters live: the host under FSDP2's ``cpu_offload`` (:func:`_optimizer_device`), where torch's
    default (the for-loop implementation for CPU tensors) steps them."""
    return torch.optim.AdamW(
        params,
        lr=optim.lr,
        betas=(optim.beta1, optim.beta2),
        eps=optim.eps,
        weight_decay=optim.weight_decay,
        fused=device.type == "cuda",
    )


def build_optimizer(
    params: Any, optim: OptimConfig, device: torch.device
) -> torch.optim.Optimizer | optim_in_backward.OptimizerInBackward:
    """The run's AdamW (:func:`build_adamw`), or with ``optim.in_backward`` one per parameter, stepped
    in backward by its post-accumulate-grad hook (:mod:`flopsweep.optim_in_backward`)."""
    if optim.in_backward:
        return optim_in_backward.attach(params, lambda one: build_adamw(one, optim, device))
    return build_adamw(params, optim, device)


@dataclass
class TorchTrainer:
    """Step loop for ``single``, ``ddp`` and ``fsdp``: autocast or FSDP2 mixed precision,
    grad accumulation without gradient sync on all but the last micro batch, a
    ``GradScaler`` for fp16, clipping (``grad_clip`` 0: none), AdamW; or, with an
    :class:`~flopsweep.optim_in_backward.OptimizerInBackward` (``optim.in_backward``), AdamW stepped
    per parameter inside backward, and no clip, step or ``zero_grad`` after it."""

    model: nn.Module
    optimizer: torch.optim.Optimizer | optim_in_backward.OptimizerInBackward
    grad_clip: float
    autocast_dtype: torch.dtype | None = None
    scaler: torch.amp.GradScaler | None = None
    no_sync: Any = None  # callable(is_last: bool) -> context manager
    after_step: Callable[[], None] | None = None  # e.g. fp8 scale precompute for FSDP2
    micro_context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    """Around each micro batch's forward and backward (``loss_parallel`` under tensor parallelism)."""
    last_grad_norm: torch.Tensor | None = None
    """The total gradient norm of the last step, before clipping (``clip_grad_norm_``'s result); None
    without clipping (``grad_clip`` 0, and so ``optim.in_backward``: no gradient outlives backward)."""

    def step(self, micro_batches: Sequence[torch.Tensor]) -> torch.Tensor:
        n = len(micro_batches)
        total = torch.zeros((), device=micro_batches[0].device)
        for i, tokens in enumerate(micro_batches):
            with self.micro_context():
                with self._sync_context(i == n - 1), self._autocast(tokens.device):
                    loss = self.model(tokens) / n
                (self.scaler.scale(loss) if self.scaler else loss).backward()
            total += loss.detach()
        if isinstance(self.optimizer, optim_in_backward.OptimizerInBackward):  # stepped in backward
            if self.after_step is not None:
                self.after_step()
            return total
        with record_function(OPTIMIZER_ANNOTATION):  # profile=true: the optimizer part
            if self.scaler:
                self.scaler.unscale_(self.optimizer)
            if self.grad_clip > 0:  # 0: no clipping
                self.last_grad_norm = torch.nn.utils.clip_grad_norm_(
                    self.model.parameters(), self.grad_clip, foreach=True
                )
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


def _optimizer_device(cfg: RunConfig, device: torch.device) -> torch.device:
    """Where the parameters that AdamW steps live: the host under FSDP2's ``cpu_offload``, else the
    rank's device."""
    return torch.device("cpu") if getattr(cfg.backend, "cpu_offload", False) else device


def _torch_trainer(
    model: nn.Module, cfg: RunConfig, device: torch.device, *, autocast: bool = True, no_sync: Any = None
) -> TorchTrainer:
    dtype = DTYPES[cfg.precision.name]
    return TorchTrainer(
        model,
        # FSDP2 CPU offload keeps the parameters and gradients on the host: the step runs there
        build_optimizer(model.parameters(), cfg.optim, _optimizer_device(cfg, device)),
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
    """FSDP2 on the layout's device mesh (:mod:`flopsweep.mesh`), torchtitan's order: tensor
    parallelism first (:func:`parallelize`), then activation checkpointing and compile per block
    (:func:`wrap_blocks`), then ``fully_shard`` each block and the root on the data-parallel
    sub-mesh (1-D ``dp_shard``, or 2-D ``(dp_replicate, dp_shard)``: HSDP) with one
    ``MixedPrecisionPolicy`` (params in the run's precision, gradients reduced in fp32). With
    ``layout.pp > 1``, the pipeline of :mod:`flopsweep.pipeline`, each stage sharded so."""
    from flopsweep import mesh as fmesh

    if layout.pp > 1:  # pipeline stages, each FSDP2-sharded over the data-parallel sub-mesh
        from flopsweep import pipeline

        return pipeline.build_pipeline(
            cfg,
            device,
            layout,
            build_model=lambda world_mesh: wrap_blocks(
                parallelize(make_model(cfg, device), cfg, world_mesh, layout), cfg
            ),
            build_optimizer=lambda params: build_adamw(params, cfg.optim, device),
        )
    world_mesh = fmesh.build_mesh(layout, device.type)
    model = wrap_blocks(parallelize(make_model(cfg, device), cfg, world_mesh, layout), cfg)
    model = shard_data_parallel(model, cfg, fmesh.dp_mesh(world_mesh, layout))

    @contextlib.contextmanager
    def no_sync(is_last: bool) -> Iterator[None]:
        model.set_requires_gradient_sync(is_last)
        yield

    # FSDP2's MixedPrecisionPolicy casts the parameters itself: no autocast on top.
    trainer = _torch_trainer(model, cfg, device, autocast=False, no_sync=no_sync)
    trainer.after_step = fprecision.after_optimizer_step(model, cfg.precision)
    trainer.micro_context = tensor_parallel.loss_context(layout.tp)
    return trainer


def parallelize(model: nn.Module, cfg: RunConfig, world_mesh: Any, layout: Layout) -> nn.Module:
    """The model-parallel part of the layout, before FSDP2 and before checkpointing: the family's
    tensor-parallel plan on the ``tp`` sub-mesh when ``layout.tp > 1``
    (:func:`flopsweep.tensor_parallel.apply`). A pipeline (``layout.pp > 1``) applies it to the
    whole model too, before :func:`flopsweep.pipeline.split_stage` keeps this rank's stages and
    FSDP2 shards them (torchtitan's order: TP, then the split's parts, then ``fully_shard``)."""
    from flopsweep import mesh as fmesh

    if layout.tp > 1:
        tensor_parallel.apply(model, family(cfg.model), fmesh.tp_mesh(world_mesh))
    return model


def shard_data_parallel(model: nn.Module, cfg: RunConfig, dp_mesh: Any) -> nn.Module:
    """``fully_shard`` each block, then the root, over ``dp_mesh`` (FSDP2; HSDP on a 2-D mesh)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=DTYPES[cfg.precision.name], reduce_dtype=torch.float32)
    offload = _fsdp_offload(cfg.backend, dp_mesh.device_type)
    blocks = family(cfg.model).blocks(model)
    for i, block in enumerate(blocks):
        # The last block's backward runs right after forward: keeping it unsharded
        # saves one all-gather per step (torchtitan does the same).
        last = i == len(blocks) - 1
        fully_shard(
            block,
            mesh=dp_mesh,
            mp_policy=mp,
            offload_policy=offload,
            reshard_after_forward=cfg.backend.reshard_after_forward and not last,
        )
    fully_shard(
        model,
        mesh=dp_mesh,
        mp_policy=mp,
        offload_policy=offload,
        reshard_after_forward=cfg.backend.reshard_after_forward,
    )
    return model


def _fsdp_offload(backend: FSDPConfig, device_type: str) -> Any:
    """FSDP2's ``CPUOffloadPolicy`` for ``backend.cpu_offload`` (pinned host memory on CUDA: a CPU-only
    torch cannot pin), else the no-offload ``OffloadPolicy``."""
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy

    if not backend.cpu_offload:
        return OffloadPolicy()
    return CPUOffloadPolicy(pin_memory=device_type == "cuda")


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


def _check_nvme(cfg: BackendConfig, device: str, *, path_here: bool = True) -> None:
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
    ds_config = run_deepspeed_config(cfg, layout, device.type)
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
    checked with the world (:func:`check_support`)."""
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
    _check_nvme(cfg, device, path_here=paths_here)
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


def optimizer_facts(trainer: Any) -> dict[str, Any] | None:
    """``system.optimizer``: the optimizer that steps, read from the built trainer, not the config.

    Returns:
        ``{class, fused, foreach, in_backward}``: ``class`` the qualified name of the optimizer's
        class (``torch.optim.adamw.AdamW``; under DeepSpeed its basic optimizer, the one its ZeRO
        wrapper steps: ``deepspeed.ops.adam.fused_adam.FusedAdam``,
        ``deepspeed.ops.adam.cpu_adam.DeepSpeedCPUAdam`` or torch's AdamW); ``fused`` and ``foreach``
        the implementation a torch optimizer runs (a flag left None resolved as torch resolves it at
        its step, from its parameters' devices), null for an optimizer without those flags;
        ``in_backward`` true for ``optim.in_backward``'s one optimizer per parameter (the first one's
        class and flags). None when the trainer holds no optimizer. Read after the measured steps:
        ``foreach`` may depend on the tensors a step put into the optimizer.
    """
    engine = getattr(trainer, "engine", None)  # DeepSpeedTrainer
    source, name = (trainer, "optimizer") if engine is None else (engine, "basic_optimizer")
    optimizer = getattr(source, name, None)
    in_backward = isinstance(optimizer, optim_in_backward.OptimizerInBackward)
    if in_backward:
        optimizer = optimizer.optimizers[0] if optimizer.optimizers else None
    if optimizer is None:
        return None
    kind = type(optimizer)
    try:  # a fact of the record: an optimizer of unexpected shape leaves it unknown, never fails the run
        fused, foreach = _torch_implementation(optimizer)
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError):
        fused, foreach = None, None
    return {
        "class": f"{kind.__module__}.{kind.__qualname__}",
        "fused": fused,
        "foreach": foreach,
        "in_backward": in_backward,
    }


def _torch_implementation(optimizer: Any) -> tuple[bool | None, bool | None]:
    """``(fused, foreach)`` that a torch optimizer's step runs, over its first parameter group: its
    flags, or when both are None, torch's default for the tensors it steps
    (``torch.optim.optimizer._default_to_fused_or_foreach``: for-each on CUDA, the for-loop on the
    CPU). Those are the group's parameters, or where a wrapper empties the group between steps
    (DeepSpeed ZeRO-3 puts each flat fp32 partition in only for its step) the tensors that hold
    its state; ``foreach`` is None when neither is there yet (no step taken). ``(None, None)`` for
    an optimizer without those flags (DeepSpeed's own)."""
    groups = getattr(optimizer, "param_groups", None) or [{}]
    group = groups[0]
    if "fused" not in group or "foreach" not in group:
        return None, None
    fused, foreach = group["fused"], group["foreach"]
    if fused is None and foreach is None:
        try:  # torch's private helper: a torch without it leaves foreach unknown, not the run failed
            from torch.optim.optimizer import _default_to_fused_or_foreach
        except ImportError:
            return False, None
        stepped = [p for g in groups for p in g["params"]]
        stepped = stepped or [t for t in getattr(optimizer, "state", {}) if isinstance(t, torch.Tensor)]
        if not stepped:
            return False, None
        differentiable = bool(group.get("differentiable", False))
        try:  # private: another torch's signature leaves foreach unknown, never fails the run
            _, foreach = _default_to_fused_or_foreach(stepped, differentiable, use_fused=False)
        except (TypeError, ValueError, RuntimeError):
            return False, None
        lr = group.get("lr")
        if foreach and isinstance(lr, torch.Tensor) and not group.get("capturable", False):
            foreach = False  # as torch.optim.adam.adam decides
    return bool(fused), bool(foreach)


def build_trainer(cfg: RunConfig, device: torch.device, layout: Layout) -> Trainer:
    """Build the backend named by ``cfg.backend.name`` on this rank's ``device``, laid out as the
    plan's ``layout`` (:class:`flopsweep.layout.Layout`)."""
    return BACKENDS[cfg.backend.name].build(cfg, device, layout)
