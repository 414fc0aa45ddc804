"""The step loops every backend returns, and the run's optimizer.

A :class:`Trainer` takes one optimizer step over a list of micro batches (grad accumulation).
:class:`TorchTrainer` is the loop of ``single``, ``ddp`` and ``fsdp`` (autocast or FSDP2's mixed
precision, ``no_sync`` on all but the last micro batch, a ``GradScaler`` for fp16, clipping,
AdamW); :class:`DeepSpeedTrainer` drives a DeepSpeed engine; the pipeline has its own
(:class:`flopsweep.pipeline.PipelineTrainer`). Every backend steps the same AdamW
(:func:`build_adamw`, ``OptimConfig``), so that a sweep compares strategies, not recipes.
Each micro batch's forward and backward run inside the degrees' micro-batch hooks
(:func:`micro_context`, from :data:`flopsweep.degrees.DEGREE_SPECS`: ``loss_parallel`` under tensor
parallelism), given the micro batch as a :class:`MicroBatch` whose ``args`` a hook may replace.
:func:`optimizer_facts` reads the optimizer that stepped for ``system.optimizer``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn
from torch.profiler import record_function

from flopsweep import compile_levers, optim_in_backward, optim_overlap
from flopsweep import degrees as fdegrees
from flopsweep import precision as fprecision
from flopsweep.annotations import OPTIMIZER_ANNOTATION
from flopsweep.config import OptimConfig, RunConfig
from flopsweep.expert_parallel import clip_grad_norm

DTYPES = fprecision.DTYPES


class Trainer(Protocol):
    def step(self, micro_batches: Sequence[torch.Tensor]) -> torch.Tensor:
        """One optimizer step over ``len(micro_batches)`` micro batches (grad accumulation).

        Returns the mean loss as a detached 0-d tensor on the device (no host sync).
        """


@dataclass
class MicroBatch:
    """One micro batch as the model gets it: ``model(*args)``. ``args`` is ``(tokens,)`` (the model
    cuts inputs and targets itself) unless a degree's micro-batch hook replaces it inside its context
    (context parallel: this rank's shard of :meth:`whole`)."""

    tokens: torch.Tensor
    """LongTensor ``[B, T + 1]``: inputs ``tokens[:, :-1]``, targets ``tokens[:, 1:]``."""
    args: tuple = field(default=())
    """What the model is called with (``CausalLM.forward``'s ``tokens, targets, positions``)."""

    def __post_init__(self) -> None:
        self.args = self.args or (self.tokens,)

    def whole(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(inputs, targets, positions)`` of the whole sequence, each a contiguous tensor a hook may
        shard along the sequence (``[B, T]``, ``[B, T]``, ``[T]``): ``model(*batch.whole())`` is
        ``model(batch.tokens)``."""
        inputs, targets = self.tokens[:, :-1].contiguous(), self.tokens[:, 1:].contiguous()
        return inputs, targets, torch.arange(inputs.size(1), device=inputs.device)


Hook = Callable[[MicroBatch], contextlib.AbstractContextManager]
"""A degree's micro-batch hook: the context one micro batch's forward and backward run in."""


def micro_context(layout: Any, mesh: Any = None) -> Hook:
    """The context of each micro batch on ``layout`` (and the world ``mesh``): every degree's hook
    (:attr:`flopsweep.degrees.DegreeSpec.micro_context`, in the table's order, the first outermost)
    that is not None on this layout; ``nullcontext`` when none is."""
    hooks = [
        hook
        for spec in fdegrees.DEGREE_SPECS
        if (factory := spec.resolve("micro_context")) is not None
        and (hook := factory(layout, mesh)) is not None
    ]
    if not hooks:
        return contextlib.nullcontext
    if len(hooks) == 1:
        return hooks[0]

    @contextlib.contextmanager
    def run(batch: MicroBatch) -> Any:
        with contextlib.ExitStack() as stack:
            for hook in hooks:
                stack.enter_context(hook(batch))
            yield

    return run


IMPLEMENTATION_FLAGS: dict[str, dict[str, bool | None]] = {
    "fused": {"fused": True, "foreach": None},
    "foreach": {"fused": None, "foreach": True},
    "for_loop": {"fused": None, "foreach": False},
}
"""``optim.implementation`` as ``torch.optim.AdamW``'s ``fused``/``foreach`` flags (``auto``: below)."""


def build_adamw(params: Any, optim: OptimConfig, device: torch.device) -> torch.optim.AdamW:
    """``torch.optim.AdamW`` with the shared settings and ``optim.implementation``'s kernel.

    ``auto`` is the fused kernel on CUDA and torch's default elsewhere (the for-loop for CPU
    tensors). ``device`` is where the parameters live: the host under FSDP2's ``cpu_offload``
    (:func:`_optimizer_device`)."""
    impl = getattr(optim, "implementation", "auto")
    flags = IMPLEMENTATION_FLAGS.get(impl, {"fused": device.type == "cuda", "foreach": None})
    return torch.optim.AdamW(
        params,
        lr=optim.lr,
        betas=(optim.beta1, optim.beta2),
        eps=optim.eps,
        weight_decay=optim.weight_decay,
        **flags,
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
    micro_context: Hook = contextlib.nullcontext
    """Around each micro batch's forward and backward, given the :class:`MicroBatch`: the degrees'
    hooks (:func:`micro_context`; ``loss_parallel`` under tensor parallelism)."""
    cudagraphs: bool = False
    """The compiled regions run as CUDA graphs (``compile_mode=reduce-overhead`` or ``max-autotune``):
    each micro batch starts a new graph-tree iteration (``torch.compiler.cudagraph_mark_step_begin``),
    so that a replay never takes the memory of the step before's outputs still in use."""
    last_grad_norm: torch.Tensor | None = None
    """The total gradient norm of the last step, before clipping (``clip_grad_norm_``'s result); None
    without clipping (``grad_clip`` 0, and so ``optim.in_backward``: no gradient outlives backward)."""

    def step(self, micro_batches: Sequence[torch.Tensor]) -> torch.Tensor:
        n = len(micro_batches)
        total = torch.zeros((), device=micro_batches[0].device)
        for i, tokens in enumerate(micro_batches):
            batch = MicroBatch(tokens)
            if self.cudagraphs:
                torch.compiler.cudagraph_mark_step_begin()
            with self.micro_context(batch):
                with self._sync_context(i == n - 1), self._autocast(tokens.device):
                    loss = self.model(*batch.args) / n
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
                self.last_grad_norm = clip_grad_norm(self.model, self.grad_clip)
            if self.scaler:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            if self.after_step is not None:
                self.after_step()
        return total

    def drain(self) -> None:
        """Before the measured window's last mark: the main stream waits for an optimizer step still
        running on ``optim.overlap_forward``'s side stream (:mod:`flopsweep.optim_overlap`); else nothing."""
        if isinstance(self.optimizer, optim_overlap.OverlappedOptimizer):
            self.optimizer.drain()

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

    def release(self) -> None:
        """Let the engine go before another is built in this process
        (:func:`release_engine`); the trainer is unusable after it, and
        the engine is freed once the caller's references are gone and ``gc.collect()`` has run."""
        release_engine(self.engine)
        self.engine = None


def _optimizer_device(cfg: RunConfig, device: torch.device) -> torch.device:
    """Where the parameters that AdamW steps live: the host under FSDP2's ``cpu_offload``, else the
    rank's device."""
    return torch.device("cpu") if getattr(cfg.backend, "cpu_offload", False) else device


def torch_trainer(
    model: nn.Module,
    cfg: RunConfig,
    device: torch.device,
    *,
    autocast: bool = True,
    no_sync: Any = None,
    layout: Any = None,
    mesh: Any = None,
) -> TorchTrainer:
    """A :class:`TorchTrainer` of ``model`` with the run's optimizer (on the host under FSDP2's
    ``cpu_offload``), clip, precision (autocast unless ``autocast`` is False: FSDP2 casts itself)
    and fp16 ``GradScaler``; ``no_sync(is_last)`` gives each micro batch's sync context, and the
    degrees of ``layout`` on ``mesh`` its micro-batch hooks (:func:`micro_context`)."""
    dtype = DTYPES[cfg.precision.name]
    # FSDP2 CPU offload keeps the parameters and gradients on the host: the step runs there
    optimizer_device = _optimizer_device(cfg, device)
    if getattr(cfg.optim, "overlap_forward", False):  # units stepped on a side stream (rules: single, CUDA)
        from flopsweep.models import family

        blocks = family(cfg.model).blocks(model)
        optimizer = optim_overlap.attach(model, blocks, lambda p: build_adamw(p, cfg.optim, optimizer_device))
    else:
        optimizer = build_optimizer(model.parameters(), cfg.optim, optimizer_device)
    return TorchTrainer(
        model,
        optimizer,
        cfg.optim.grad_clip,
        autocast_dtype=dtype if autocast and dtype != torch.float32 else None,
        scaler=torch.amp.GradScaler(device.type) if cfg.precision.name == "fp16" else None,
        no_sync=no_sync,
        micro_context=micro_context(layout, mesh) if layout is not None else contextlib.nullcontext,
        cudagraphs=compile_levers.uses_cudagraphs(cfg),
    )


def optimizer_facts(trainer: Any) -> dict[str, Any] | None:
    """``system.optimizer``: the optimizer that steps, read from the built trainer, not the config.

    Returns:
        ``{class, fused, foreach, in_backward, overlap_forward}``: ``class`` the qualified name of the
        optimizer's class (``torch.optim.adamw.AdamW``; under DeepSpeed its basic optimizer, the one its ZeRO
        wrapper steps: ``deepspeed.ops.adam.fused_adam.FusedAdam``,
        ``deepspeed.ops.adam.cpu_adam.DeepSpeedCPUAdam`` or torch's AdamW); ``fused`` and ``foreach``
        the implementation a torch optimizer runs (a flag left None resolved as torch resolves it at
        its step, from its parameters' devices), null for an optimizer without those flags;
        ``in_backward`` true for ``optim.in_backward``'s one optimizer per parameter (the first one's
        class and flags), ``overlap_forward`` for ``optim.overlap_forward``'s one per unit (likewise).
        None when the trainer holds no optimizer. Read after the measured steps:
        ``foreach`` may depend on the tensors a step put into the optimizer.
    """
    engine = getattr(trainer, "engine", None)  # DeepSpeedTrainer
    source, name = (trainer, "optimizer") if engine is None else (engine, "basic_optimizer")
    optimizer = getattr(source, name, None)
    in_backward = isinstance(optimizer, optim_in_backward.OptimizerInBackward)
    overlap = isinstance(optimizer, optim_overlap.OverlappedOptimizer)
    if in_backward or overlap:
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
        "overlap_forward": overlap,
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


def release_engine(engine: Any) -> None:
    """Free a DeepSpeed engine built in this process before another is built (the layer probe's
    shallow copies, :mod:`flopsweep.layer_probe`): ``engine.destroy()`` (its hooks, ZeRO's buckets),
    then the two references DeepSpeed 0.19.8 keeps in module-level state that ``destroy`` leaves,
    each of which keeps a ZeRO-3 engine's module, its parameters' partitions and, through the
    parameters' ``ds_*`` attributes, the optimizer's fp32 partitions and AdamW moments alive for the
    rest of the process (16 B per parameter of the copy: on one H200 a ZeRO-3 run after the probe of
    Llama 3.2 1B peaked 10.55 GiB above the same run without it, the two copies' 0.708 B parameters):

    - ``deepspeed.runtime.zero.parameter_offload.FWD_MODULE_STACK``, to which
      ``DeepSpeedZeRoOffload.setup_zero_stage3_hooks`` appends the root module and which nothing pops,
      and where a block's forward recomputed in backward (``full`` or ``selective`` checkpointing)
      leaves its submodules (a ``Linear`` of each copy, on 1 gloo rank and on one H200: gpt-1.3b
      ZeRO-3 `full` after the probe peaked 31.7 GiB against 27.0 without it): every module of the
      engine's is taken out (by identity; other entries stay);
    - ``PartitionedParameterCoordinator.__params_to_release``, a class-level ``functools.lru_cache``
      keyed by ``(coordinator, submodule, step_id)``: cleared (a cache: a live engine computes its
      entries again).

    The caller then drops its references and runs ``gc.collect()``: the engine, its optimizer and
    hooks hold one another in cycles (ZeRO-1 and -2 too), which only the collector frees. Safe for
    any stage and when DeepSpeed's internals move (a missing name is skipped). The layer probe records
    this release as ``metrics.predicted.layer_probe.released`` (:data:`flopsweep.layer_probe.RELEASED`:
    change it with this function)."""
    module = getattr(engine, "module", None)
    engine.destroy()
    with contextlib.suppress(ImportError):
        from deepspeed.runtime.zero import parameter_offload

        stack = getattr(parameter_offload, "FWD_MODULE_STACK", None)
        if isinstance(stack, list) and module is not None:
            mine = {id(m) for m in module.modules()}
            stack[:] = [m for m in stack if id(m) not in mine]
    with contextlib.suppress(ImportError):
        from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator

        cached = vars(PartitionedParameterCoordinator).get(
            "_PartitionedParameterCoordinator__params_to_release"
        )
        for cell in getattr(cached, "__closure__", None) or ():  # under DeepSpeed's instrument_w_nvtx
            with contextlib.suppress(ValueError):  # an empty cell
                if callable(getattr(cell.cell_contents, "cache_clear", None)):
                    cell.cell_contents.cache_clear()
        if callable(getattr(cached, "cache_clear", None)):
            cached.cache_clear()
