"""ZeRO's model states on the GPU, from DeepSpeed's own estimators and code: what the ``deepspeed``
backend's spec (:meth:`flopsweep.backend_specs.DeepSpeedSpec.model_states`) answers
:func:`flopsweep.memory.estimate` with (:func:`deepspeed_states`). Torch-free to import; the
functions import DeepSpeed (and ZeRO-3's buffers build the model on the meta device).

DeepSpeed's estimators, with their offload arguments (``backend.offload_optimizer`` ->
``cpu_offload``, ``backend.offload_param`` -> ``cpu_offload_params``; ``cpu`` and ``nvme`` alike):
``deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs`` for ZeRO-1 and -2
(``2 P + 18 P / W``, offloaded: ``2 P``) and ``stage3.estimate_zero3_model_states_mem_needs`` for
ZeRO-3 (``4 x largest layer + 18 P / W``; offloaded optimizer: ``4 x largest layer + 2 P / W``;
parameters too: ``4 x largest layer``), ``W = dp`` (DeepSpeed is data parallel only). The
estimators count the gradients, which exist only at the optimizer step: at the start of backward
ZeRO-1/2 lack the ``6 P / W`` of bf16 and fp32 gradient partitions and ZeRO-3 the ``2 P / W`` of
bf16 ones (:data:`ZERO_GRADIENT_BYTES`; the H200 records checked this: the
estimators alone are 5-14% over). The estimator knows no parameter offload without optimizer
offload; that case is counted as no offload (an upper bound). ZeRO-3 holds more than its
estimator counts (:func:`zero3_buffer_bytes`), and on one rank without parameter offload less: its
``4 x largest layer`` (the layer's gathered copy and gradient) is a view of the rank's own partition, and no
gradient exists at the start of backward. The optimizer step is read from DeepSpeed's code, not the
estimators: ZeRO-1/2 (``stage_1_and_2.py``, ``step``: ``self.flatten(averaged_gradients)`` then ``.to(fp32)``)
hold the flattened 16-bit gradient partition beside the fp32 copy the estimator counts, ``2 P / W`` more
(gpt-1.3b ZeRO-2 ``full`` on one H200: 22 P = 26.96 GiB, measured 27.02; the estimator's 20 P was -9.3%);
ZeRO-3 without optimizer offload holds :data:`ZERO3_STEP_BYTES` and one sub-group's fp32 gradients and
temporaries (:func:`zero3_step_bytes`; the estimator's ``18 P / W + 4 x largest layer`` was 6-9% over on
Llama 3.1 8B at the memory edge). These are the functions behind DeepSpeed's printing
``estimate_zero3_model_states_mem_needs_all_live`` and ``estimate_zero2_..._all_live``, which read
``(total, largest layer)`` from a built model (``model_to_params``); the estimate takes them from
the family (``ModelFamily.n_params``, ``largest_layer_params``: the same numbers,
tests/unit/test_memory.py) without building one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.text import figure

ZERO_GRADIENT_BYTES = {1: 6, 2: 6, 3: 2}
"""Bytes per parameter (over ``W``) of gradient partitions that DeepSpeed's estimators count and
that do not exist yet at the start of backward, by ZeRO stage (the module docstring)."""


def deepspeed_states(cfg: Any, layout: Layout, offload: Any) -> tuple[int, int, str]:
    """``(at the start of backward, at the optimizer step, method)``: the rank's ZeRO model states in
    bytes from DeepSpeed's estimators (module docstring), and ZeRO-3's buffers."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    m = cfg.model
    fam = family(m)
    n_params, largest = fam.n_params(m), fam.memory(m)["largest_layer_params"]
    opt, param = offload.optimizer, offload.param
    world, stage = layout.dp, cfg.backend.zero_stage
    if stage == 3:
        _, gpu, _ = estimate_zero3_model_states_mem_needs(
            n_params, largest, num_gpus_per_node=world, cpu_offload=opt, cpu_offload_params=opt and param
        )
        method = (
            f"DeepSpeed estimate_zero3_model_states_mem_needs (cpu_offload={opt}, "
            f"cpu_offload_params={opt and param})"
        )
        if param and not opt:
            method += (
                "; backend.offload_param without offload_optimizer: the estimator knows no such case, "
                "counted as no offload (an upper bound)"
            )
    else:
        _, gpu = estimate_zero2_model_states_mem_needs(n_params, num_gpus_per_node=world, cpu_offload=opt)
        method = f"DeepSpeed estimate_zero2_model_states_mem_needs (cpu_offload={opt}; ZeRO-1 and -2)"
    absent = 0 if opt or cfg.batch.grad_accum > 1 else ZERO_GRADIENT_BYTES[stage] * n_params // world
    c = 4 if cfg.precision.name == "fp32" else 2
    if stage != 3:
        flat = 0 if opt or c == 4 else c * math.ceil(n_params / world)  # zero2_step_flatten_bytes
        if flat:
            method += f"; the step's flattened {c}-byte gradient partition beside its fp32 copy, {c} P / W"
        return gpu - absent, gpu + flat, method
    buffers = zero3_buffer_bytes(cfg, layout, offload_param=param)
    method += f"; {buffers.method}"
    # one rank without parameter offload: the largest layer's gathered copy is a view of the rank's own
    # partition and its gradient is not made yet at the start of backward (nor kept to the step)
    largest_layer = 4 * largest if world > 1 or param else 0
    start = gpu - 4 * largest + largest_layer - absent + buffers.backward_start
    if opt:
        return start, gpu - 4 * largest + largest_layer + buffers.step, method
    sub = zero3_step_bytes(cfg, layout)
    method += f"; its optimizer step: 16 P / W and {sub.method}"
    return start, ZERO3_STEP_BYTES * math.ceil(n_params / world) + sub.bytes + buffers.step, method


ZERO3_STEP_BYTES = 16
"""Bytes per parameter (over ``W``) that ZeRO-3 without optimizer offload holds through its optimizer step
(DeepSpeed 0.19.8, ``stage3.py``): the 16-bit parameter partition (``fp16_partitioned_groups_flat``, 2), the
fp32 master partition (4), AdamW's two fp32 moments (8) and the 16-bit gradient partitions
(``grad_partitions_flat_buffer``, allocated once in ``__init__``, 2). Not the estimator's 18: the fp32
gradients exist one sub-group at a time (:func:`zero3_step_bytes`), and ``step`` frees every
``param.grad`` (``zero_grad(set_to_none=True)``) and releases the gathered parameters
(``_partition_all_parameters``) first."""


@dataclass(frozen=True, kw_only=True)
class StepBytes:
    """ZeRO-3's transient bytes in its optimizer step (:func:`zero3_step_bytes`)."""

    bytes: int
    sub_group: int
    """Elements of the largest sub-group partition."""
    method: str


def zero3_sub_groups(cfg: Any, layout: Layout) -> list[int]:
    """Elements of each optimizer sub-group of one rank, as DeepSpeed 0.19.8 cuts them
    (``DeepSpeedZeroOptimizer_Stage3._create_fp16_sub_groups``): the rank's partitions ``ceil(n / W)`` of
    every parameter tensor in ``named_parameters`` order (flopsweep gives DeepSpeed one parameter group),
    a sub-group closed as soon as it reaches ``sub_group_size`` elements (1e9 unless set) or at the last
    tensor; the whole group when ``sub_group_size`` covers it."""
    return [elements for elements, _ in _sub_groups(cfg, layout)]


def _sub_groups(cfg: Any, layout: Layout) -> list[tuple[int, int]]:
    """``(elements, tensors)`` of each sub-group (:func:`zero3_sub_groups`)."""
    parts = [math.ceil(n / layout.dp) for n in parameter_numels(cfg)]
    size = zero3_knobs(cfg, layout).sub_group_size
    if size is None or size >= sum(parts):
        return [(sum(parts), len(parts))]
    groups, current, tensors = [], 0, 0
    for i, n in enumerate(parts):
        current, tensors = current + n, tensors + 1
        if current >= size or i == len(parts) - 1:
            groups.append((current, tensors))
            current, tensors = 0, 0
    return groups


def zero3_step_bytes(cfg: Any, layout: Layout) -> StepBytes:
    """What ZeRO-3's optimizer step allocates on top of :data:`ZERO3_STEP_BYTES`, for the largest
    sub-group ``S`` (:func:`zero3_sub_groups`), without optimizer offload (DeepSpeed 0.19.8, ``stage3.py``
    ``step``: one sub-group at a time, prepared, stepped, released):

    - ``_prepare_fp32_grad_for_sub_group``: ``self.flatten(averaged_gradients).to(fp32)``, the flattened
      16-bit gradients (``c S``, a ``torch.cat`` copy) beside their fp32 copy (``4 S``) until the
      statement ends (fp32 runs: ``.to`` returns the flat tensor itself, ``4 S``; a sub-group of one tensor
      flattens to a view of it, ``_flatten_dense_tensors``: ``4 S``); the fp32 copy is the sub-group's
      ``.grad`` until ``_release_sub_group``;
    - the AdamW step on it: DeepSpeed's ``FusedAdam`` (``backend.optimizer_impl=fused``, CUDA) allocates
      nothing; torch's AdamW (``optimizer_impl=torch``, and always on the CPU: ``foreach=None``) is
      ``foreach`` on CUDA, whose ``torch._foreach_sqrt(exp_avg_sqs)`` is ``4 S`` more beside the fp32
      gradients (``torch.optim.adam._multi_tensor_adam``), and the for-loop on the CPU (no foreach kernels
      there), whose ``exp_avg_sq.sqrt() / ...`` holds ``8 S`` at once (``_single_tensor_adam``).

    So ``max(c S + 4 S, 8 S)`` with torch's AdamW on CUDA (``12 S`` on the CPU), ``c S + 4 S`` with
    ``FusedAdam`` (``4 S`` in fp32).
    Llama 3.1 8B on one H200 (sub-groups of 1.00e9 to 1.30e9 elements): fused, micro batch 2, 126.55 GiB
    measured, ``16 P`` + bucket + ``6 S`` = 126.45; torch's AdamW at 33 and 34 blocks, 131.94 and 136.82
    measured, ``16 P`` + bucket + ``8 S`` = 131.88 and 136.76.
    """
    c = 4 if cfg.precision.name == "fp32" else 2
    on_cpu = cfg.device == "cpu"  # flopsweep's DeepSpeed config asks for torch's AdamW there
    torch_adamw = on_cpu or getattr(cfg.backend, "optimizer_impl", "fused") == "torch"
    adam = 8 if on_cpu else 4  # for-loop: v.sqrt() and its quotient at once; foreach: sqrt(v)
    groups = _sub_groups(cfg, layout)
    s = max(elements for elements, _ in groups)

    def held(elements: int, tensors: int) -> int:
        copied = tensors > 1  # _flatten_dense_tensors of one tensor is a view of it
        fp32 = 4 * elements if copied or c != 4 else 0  # .to(fp32) of fp32 is the tensor itself
        flat = c * elements if copied and c != 4 else 0  # the 16-bit flat copy until .to returns
        return max(fp32 + flat, fp32 + adam * elements if torch_adamw else 0)

    what = "FusedAdam, no temporaries"
    if torch_adamw:
        kernel = "for-loop" if on_cpu else "foreach"
        what = f"torch AdamW's {kernel} temporaries ({adam} S) beside the fp32 gradients"
    return StepBytes(
        bytes=max(held(*g) for g in groups),
        sub_group=s,
        method=f"the largest sub-group's ({figure(s)} elements) flattened and fp32 gradients; {what}",
    )


@dataclass(frozen=True, kw_only=True)
class Zero3Buffers:
    """ZeRO-3's GPU buffers that ``estimate_zero3_model_states_mem_needs`` does not count, in bytes
    (:func:`zero3_buffer_bytes`)."""

    reduce_bucket: int
    """The gradient reduce bucket: ``reduce_bucket_size`` elements of the communication dtype."""
    persistent: int
    """Parameters kept gathered for the whole run (``stage3_param_persistence_threshold``)."""
    retained: int
    """Parameters gathered in forward and kept for backward (``stage3_max_live_parameters``,
    ``stage3_max_reuse_distance``; prefetching needs ``stage3_prefetch_bucket_size`` > 0)."""
    method: str
    """The knobs as resolved, for :attr:`MemoryEstimate.method`."""

    @property
    def backward_start(self) -> int:
        """Bytes at the start of backward: the bucket and every gathered parameter."""
        return self.reduce_bucket + self.persistent + self.retained

    @property
    def step(self) -> int:
        """Bytes at the optimizer step: the bucket and the persistent parameters (the others are
        released as backward passes them)."""
        return self.reduce_bucket + self.persistent


def zero3_knobs(cfg: Any, layout: Layout) -> Any:
    """The ZeRO-3 knobs the run gets, as DeepSpeed resolves them: flopsweep's config dict
    (:func:`flopsweep.backends.deepspeed_config`: a ``None`` bucket is 5e8 elements on CUDA, ``h^2``
    on the CPU, the persistence threshold ``10 h``) read by DeepSpeed's own
    ``deepspeed.runtime.zero.config.DeepSpeedZeroConfig``, which fills what is left unset
    (DeepSpeed 0.19.8: ``stage3_max_live_parameters`` and ``stage3_max_reuse_distance`` 1e9,
    ``stage3_model_persistence_threshold`` unbounded). Returns that ``DeepSpeedZeroConfig``."""
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    from flopsweep.deepspeed_config import run_deepspeed_config

    ds = run_deepspeed_config(cfg, layout, "cpu" if cfg.device == "cpu" else "cuda")
    return DeepSpeedZeroConfig(**ds["zero_optimization"])


_NUMELS: dict[str, tuple[int, ...]] = {}
""":func:`parameter_numels` by ``repr((model, attention))`` (a plan estimates every job)."""


def parameter_numels(cfg: Any) -> tuple[int, ...]:
    """Every parameter tensor's element count, in ``named_parameters`` order (a tied one once), from
    the family's module built on the meta device (no memory, no weights), as DeepSpeed's
    ``mark_persistent_parameters`` walks them."""
    key = repr((cfg.model, cfg.attention))
    if key not in _NUMELS:
        import torch

        with torch.device("meta"):
            module = family(cfg.model).build(cfg.model, cfg.attention)
        _NUMELS[key] = tuple(p.numel() for p in module.parameters())
    return _NUMELS[key]


def zero3_buffer_bytes(cfg: Any, layout: Layout, *, offload_param: bool | None = None) -> Zero3Buffers:
    """What ZeRO-3 holds on the GPU beyond ``estimate_zero3_model_states_mem_needs`` (``4 x largest
    layer + 18 P / W``), from DeepSpeed 0.19.8's code, with ``c`` the bytes of the 16-bit (or fp32)
    parameters and of the communication dtype and ``W = dp``:

    - **reduce bucket**: ``c x reduce_bucket_size`` with ``contiguous_gradients``, allocated once
      and kept (``stage3.py``, ``DeepSpeedZeroOptimizer_Stage3.__init__``: ``bucket.buffer =
      torch.empty(self.reduce_bucket_size, dtype=...)``, one ``IPGBucketZ3`` per communication
      dtype); ZeRO-3 has no second bucket for ``overlap_comm`` (its reduction only runs on another
      stream: the H200 ``overlap-off`` record peaks as the default does);
    - **persistent parameters**: every tensor of at most ``stage3_param_persistence_threshold``
      elements (up to ``stage3_model_persistence_threshold`` in all) stays gathered, in full
      (``parameter_offload.py``, ``DeepSpeedZeRoOffload.mark_persistent_parameters``; the coordinator
      never releases ``ds_persist`` ones, ``partitioned_param_coordinator.py`` ``__params_to_release``);
    - **retained parameters**: the other gathered parameters that forward keeps for backward,
      ``min(P - persistent, max(max_live, max_reuse / 2))``: the prefetcher gathers ahead
      (``_fetch_sub_module_impl``: ``min(max_live_parameters - n_available, prefetch_bucket_size)``)
      and marks the later uses of the gathered parameters it passes, which are then not released
      (``__params_to_release``: ``__most_recent_step_id_param_fetched_for``), until
      ``stage3_max_live_parameters`` are gathered; a parameter whose next use is within
      ``stage3_max_reuse_distance`` elements of the trace is not released either (the top blocks:
      between their two uses the trace passes the layers above them twice, forward and
      backward). No prefetch bucket: only the reuse distance. gpt-1.3b on two H200s keeps 18 of
      its 24 blocks and the tied embedding, 1.01e9 elements at the default 1e9
      (``results/h200x2/zero3-tuning``: ``persist-2e7`` and ``live-3e9``, which keep every
      parameter, peak 0.57 GiB higher, the other six blocks' weights and ``wpe``, to 0.05%; the
      bucket records move by the bucket's bytes alone, prefetch bucket 3.8e6 to 1e9 alike). On
      the CPU a small copy with ``max_reuse`` 0 kept fewer than ``max_live``
      (tests/unit/test_memory.py: one MLP matrix of 60,000 elements): there the term is an upper
      bound.

    Gathered parameters cost nothing when ``W = 1`` without parameter offload: DeepSpeed's
    ``_no_gather_coalesced`` views the rank's own partition (``NoGatherHandle``); with
    ``offload_param`` they are copied to the GPU and counted as above.

    Args:
        cfg: a resolved ``RunConfig`` with ``backend.zero_stage == 3``; layout: its degrees.
    """
    knobs = zero3_knobs(cfg, layout)
    c = 4 if cfg.precision.name == "fp32" else 2
    bucket = c * knobs.reduce_bucket_size if knobs.contiguous_gradients else 0
    numels = parameter_numels(cfg)
    persistent = 0
    for n in numels:  # mark_persistent_parameters: in named_parameters order, up to the model's cap
        if n <= knobs.param_persistence_threshold and persistent + n <= knobs.model_persistence_threshold:
            persistent += n
    live = knobs.max_live_parameters if knobs.prefetch_bucket_size > 0 else 0
    retained = min(sum(numels) - persistent, max(live, knobs.max_reuse_distance // 2))
    if offload_param is None:  # as DeepSpeedSpec.offload reads backend.offload_param
        offload_param = getattr(cfg.backend, "offload_param", "none") not in (None, "none")
    costs = layout.dp > 1 or offload_param
    method = (
        f"ZeRO-3 reduce bucket {figure(knobs.reduce_bucket_size)} x {c} B, gathered parameters "
        f"{figure(persistent)} persistent + {figure(retained)} retained (max_live "
        f"{figure(knobs.max_live_parameters)}, "
        f"max_reuse {figure(knobs.max_reuse_distance)}) x {c} B" + ("" if costs else ": free at W = 1")
    )
    return Zero3Buffers(
        reduce_bucket=bucket,
        persistent=c * persistent if costs else 0,
        retained=c * retained if costs else 0,
        method=method,
    )
