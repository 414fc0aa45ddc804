"""Peak GPU memory per rank of a planned run, before anything runs (``plan=true``, and every run's
``metrics.predicted_peak_gib``); on the CPU the same figures, times the ranks of the node, are host
memory. A pure function of the resolved config and its :class:`~flopsweep.layout.Layout`: no
device, no weights (DeepSpeed's estimators import torch, and ZeRO-3's buffers count the parameter
tensors of a meta-device build).

The peak of a training step comes at one of two moments, and the estimate is the larger:

- **the start of backward** (the usual peak): model states without gradients (the optimizer
  step's ``zero_grad(set_to_none=True)`` freed them; a second micro batch of ``grad_accum`` finds
  them), every activation kept for backward, and the loss's logits;
- **the end of backward and the optimizer step**: every model state, gradients included, and the
  larger of FSDP2's gradient reduce-scatter buffers (:func:`fsdp_reduce_bytes`) and the lowest
  block's backward (:func:`lowest_block_bytes`: its activations, the one block's still live);
  (Llama 3.1 8B with ``full`` checkpointing peaks here: ``16 P`` and a little on one GPU alone,
  ``16 P + 4 R`` under FSDP2; Mistral 7B at micro batch 16 in the lowest block). With
  ``optim.in_backward`` (the step fused into backward) only the largest parameter's gradient, or
  one FSDP2 unit's, is live instead of every gradient (:func:`in_backward_gradient_bytes`).

The parts, in bytes, for the rank that needs the most (the first pipeline stage, which holds the
most in-flight micro-batches, or the last, which computes the loss):

- **model states** of the parameters the rank holds, ``P_r`` (:func:`stage_params`: its stage's
  ``ceil(n_layer / pp)`` blocks plus the embedding or head, over ``tp``):
  - ``single``/``ddp``: fp32 weights and AdamW's two moments ``12 P_r``, fp32 gradients ``4 P_r``;
    under autocast (bf16, fp16) the cached low-precision weight copies ``2 P_r`` (forward only:
    autocast frees its cache on exit; not for blocks wrapped in torch's checkpoint, which cast
    again in backward: none under ``full`` and ``selective``, ``every_n``'s unwrapped share;
    Llama 3.2 1B with ``full`` is within 3% without them, 9% over with them); DDP's gradient
    buckets ``4 P_r``.
  - ``fsdp``: the same ``12 + 4`` bytes over ``dp_shard`` (FSDP2 shards over the shard dimension;
    HSDP's replicas hold copies), plus what FSDP2 holds unsharded (:func:`fsdp_gathered_bytes`,
    :func:`fsdp_reduce_bytes`; ``R`` the root's parameter group, embedding, output head and final
    norm, ``B`` a block, ``c`` the compute dtype's bytes, ``W = dp_shard``): at the start of
    backward the root's group, which FSDP2 does not reshard after forward, and
    :data:`FSDP_INFLIGHT_BLOCKS` blocks, ``c (R + 2 B)``; at the end of backward the fp32
    reduce-scatter input of the root's gradients (``reduce_dtype``), ``4 R`` (Llama 3.1 8B on one
    H200: 123.57 GiB against 123.64 measured, 119.66 without it), or a block's moment if larger.
    With ``grad_accum`` > 1 FSDP2 keeps unsharded fp32 gradients between micro batches, ``4 P_r``
    (not over ``W``). With ``backend.cpu_offload`` the sharded states live on the host
    (``CPUOffloadPolicy``, :func:`offload_host_bytes`: ``16 P / W``) and the GPU holds only the
    gathered weights and the reduce-scatter buffers.
  - ``deepspeed``: DeepSpeed's own estimators, with their offload arguments
    (``backend.offload_optimizer`` -> ``cpu_offload``, ``backend.offload_param`` ->
    ``cpu_offload_params``; ``cpu`` and ``nvme`` alike):
    ``deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs`` for ZeRO-1
    and -2 (``2 P + 18 P / W``, offloaded: ``2 P``) and
    ``stage3.estimate_zero3_model_states_mem_needs`` for ZeRO-3 (``4 x largest layer + 18 P / W``;
    offloaded optimizer: ``4 x largest layer + 2 P / W``; parameters too: ``4 x largest layer``),
    ``W = dp`` (DeepSpeed is data parallel only). The estimators count the gradients, which
    exist only at the optimizer step: at the start of backward ZeRO-1/2 lack the ``6 P / W`` of
    bf16 and fp32 gradient partitions and ZeRO-3 the ``2 P / W`` of bf16 ones
    (:data:`ZERO_GRADIENT_BYTES`; the H200 records checked this: the estimators alone are 5-14%
    over). The estimator knows no parameter offload without optimizer offload; that case is
    counted as no offload (an upper bound). ZeRO-3 holds more than its estimator counts
    (:func:`zero3_buffer_bytes`, from DeepSpeed's code): the reduce bucket, ``c x
    reduce_bucket_size``; the persistent parameters (tensors of at most
    ``stage3_param_persistence_threshold`` elements) and, at the start of backward, those forward
    keeps for backward, ``min(P - persistent, max(max_live, max_reuse / 2))``, ``c`` bytes each
    when ``W > 1`` (one rank's gathered parameters are views of its partition); ``overlap_comm``
    and ``stage3_prefetch_bucket_size`` size nothing more (the two-H200 ``zero3-tuning`` records:
    within 0.4%, were 3.8-7.6% under). These are the functions behind DeepSpeed's printing
    ``estimate_zero3_model_states_mem_needs_all_live`` and ``estimate_zero2_..._all_live``,
    which read ``(total, largest layer)`` from a built model (``model_to_params``); the estimate
    takes them from the family (``ModelFamily.n_params``, ``largest_layer_params``: the same
    numbers, tests/test_memory.py) without building one, so it stays a pure function.
- **activations** kept for backward, per token and layer, from the model family
  (:func:`flopsweep.models.ModelFamily.memory`): the ``residual`` elements (norm inputs and their
  normalised values) in fp32 when autocast runs over fp32 weights (single, DDP), else in the
  compute dtype, and the ``other`` elements in the compute dtype (4 bytes for fp32);
  ``compile=true`` keeps the family's ``residual_compiled`` and ``other_compiled`` instead
  (Inductor's partitioner recomputes the norms and pointwise activations and keeps the matmul
  inputs). Plus what the attention kernel keeps per layer (:data:`ATTENTION_SAVED`): the
  probabilities of a kernel that materialises the ``B x h x s x s`` scores, the ``B x h x s``
  fp32 logsumexp of a fused (flash, memory-efficient, cuDNN, flex) kernel. What is kept is the
  checkpointing policy's (``CheckpointPolicy.activations``): ``none`` every block's; ``full`` each
  block's input only, and the top block's full activations (its input among them) while it is
  recomputed; ``every_n`` between the two. The layout: the
  first pipeline stage keeps ``ceil(n_layer / pp)`` layers for the in-flight pipeline
  micro-batches (:func:`in_flight_microbatches`: ``1F1B`` up to ``pp``, ``GPipe`` all of them),
  each ``micro_batch_size / pp_microbatches`` sequences; tensor parallelism with sequence
  parallelism, and context parallelism, divide by ``tp`` and ``cp``.
- **attention workspace**: under a policy that recomputes the forward, a materialising kernel
  makes one layer's scores again (bf16 product, fp32 upcast, softmax, bf16 probabilities) while
  the gradients above are live: :data:`RECOMPUTED_SCORE_BYTES` per score, what is kept included.
  Without recompute the forward's transients pass while less is live (0 on top, measured).
- **logits** at the start of backward: :data:`LOGIT_BYTES` per logit eager (the loss's saved
  fp32 log-softmax, the fp32 gradient of it and of its input, the bf16 gradient), fewer compiled
  (Inductor fuses the upcast into the log-softmax); ``tokens x V / tp`` logits (a loss-parallel
  head), on the last stage, for one pipeline micro-batch.

Not counted: the CUDA context (about 0.5 GiB, not in ``max_memory_allocated``), allocator
fragmentation (``reserved - allocated``), fp8's smaller saved activations (torchao keeps float8
copies), and the gathered key and value blocks of ``blocksparse`` ``impl=gather``.
``benchmarks/memory_estimate.py`` compares the estimate with the ``peak_cuda_allocated_bytes`` of
every committed H200 record.

``plan=true`` can ask about a GPU that is not here (:func:`planned_gpu_bytes`): ``plan_gpu=``
a device name of the peak table (:mod:`flopsweep.peaks`, ``H100``, ``H100-80GB``, ``A100-40GB``),
whose memory is the driver's (:data:`GPU_MEMORY_GIB`), or ``plan_gpu_memory_gib=``, as given.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from flopsweep import checkpointing
from flopsweep.config import ConfigError
from flopsweep.layout import Layout
from flopsweep.models import family

GIB = 2**30

LOGIT_BYTES = {False: 12, True: 4}
"""Bytes per logit at the start of backward, eager (``False``) and with ``compile=true`` (``True``):
eager keeps the fp32 log-softmax output and makes the fp32 gradients of it and of its input and the
bf16 gradient of the logits; compiled, Inductor's fused loss keeps the bf16 logits and makes their
bf16 gradient. Fitted to the H200 records (gpt-1.3b micro batch 8 and 16, Llama 3.2 1B and 3B)."""
ZERO_GRADIENT_BYTES = {1: 6, 2: 6, 3: 2}
"""Bytes per parameter (over ``W``) of gradient partitions that DeepSpeed's estimators count and
that do not exist yet at the start of backward, by ZeRO stage (see the module docstring)."""

ATTENTION_SAVED = {"standard": 6, "sdpa-math": 4}
"""Bytes per attention score (``B x h x s x s`` per layer) that backward keeps, for the kernels that
materialise the scores: ``standard`` (flopsweep's explicit ``softmax(QK^T)V``) keeps the fp32
softmax output (4) and its bf16 cast (2); SDPA's math kernel about 4 (measured: gpt-1.3b, micro
batch 4 and 8, sequence 2048, on the H200). Every other kernel keeps the fp32 logsumexp,
:data:`LOGSUMEXP_BYTES` per query and head."""
RECOMPUTED_SCORE_BYTES = 13
"""Bytes per score live while one layer of a kernel of :data:`ATTENTION_SAVED` is recomputed in
backward, what it keeps included (measured: 13.3 for ``standard`` and ``sdpa-math``, gpt-1.3b at
sequence 8192, micro batch 1, ``full`` checkpointing, against ``sdpa``)."""
LOGSUMEXP_BYTES = 4
"""Bytes per query and head that a fused attention kernel saves for backward (fp32 logsumexp)."""
FSDP_INFLIGHT_BLOCKS = 2
"""All-gathered blocks FSDP2 holds at once: the one computing and the one prefetched."""
REDUCE_BYTES = 4
"""Bytes per gradient element that FSDP2 reduce-scatters: ``MixedPrecisionPolicy(reduce_dtype=
torch.float32)`` (:func:`flopsweep.backends.shard_data_parallel`)."""


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    """Peak GPU memory of one rank, in bytes, by part, and where the model-state figures come from."""

    model_states: int
    """Weights and optimizer states at the start of backward (gradients only with ``grad_accum``
    above 1), and what offload leaves on the GPU."""
    activations: int
    """What backward keeps (the attention kernel's saved tensors included)."""
    attention_workspace: int
    """One layer's attention backward workspace on top (kernels that materialise the scores)."""
    logits: int
    """The loss's logits at the start of backward (last stage)."""
    step_states: int
    """Every model state at the optimizer step, gradients included (the activations are gone)."""
    method: str
    """How the model states were estimated (formula or DeepSpeed estimator)."""
    reduce_buffers: int = 0
    """FSDP2's gradient reduce-scatter buffers at the end of backward, on top of
    :attr:`step_states` (:func:`fsdp_reduce_bytes`); 0 for other backends."""
    lowest_block: int = 0
    """The lowest block's backward, on top of :attr:`step_states` (:func:`lowest_block_bytes`):
    its activations and what is unsharded then, less its own gradients not yet made."""

    @property
    def backward_start(self) -> int:
        """Bytes at the start of backward: states, activations, workspace and logits."""
        return self.model_states + self.activations + self.attention_workspace + self.logits

    @property
    def end_of_backward(self) -> int:
        """Bytes at the end of backward and the optimizer step: every model state, and the larger
        of the gradient reduce-scatter buffers and the lowest block's backward."""
        return self.step_states + max(self.reduce_buffers, self.lowest_block)

    @property
    def total(self) -> int:
        """The peak: the larger of :attr:`backward_start` and :attr:`end_of_backward`."""
        return max(self.backward_start, self.end_of_backward)

    @property
    def total_gib(self) -> float:
        """:attr:`total` in GiB (2**30 bytes), as ``metrics.predicted_peak_gib`` records it."""
        return self.total / GIB


def _offload(cfg: Any) -> tuple[bool, bool, bool]:
    """``(fsdp_cpu_offload, offload_optimizer, offload_param)`` from the backend's knobs (absent
    knobs: no offload)."""
    b = cfg.backend
    return (
        bool(getattr(b, "cpu_offload", False)),
        getattr(b, "offload_optimizer", "none") not in (None, "none"),
        getattr(b, "offload_param", "none") not in (None, "none"),
    )


def block_params(model: Any) -> int:
    """One block's parameters: ``n_params(n_layer=2) - n_params(n_layer=1)`` of the model's family,
    so that every family counts its own (0 for a family whose count ignores ``n_layer``)."""
    fam = family(model)
    return fam.n_params(dataclasses.replace(model, n_layer=2)) - fam.n_params(
        dataclasses.replace(model, n_layer=1)
    )


def stage_params(cfg: Any, layout: Layout) -> int:
    """The parameters of the rank that holds the most: its pipeline stage's ``ceil(n_layer / pp)``
    blocks and the parameters outside the blocks that it keeps (embedding, head, final norm),
    over ``tp``. Under ``pp > 1`` the first stage holds the embedding and the last the head: the
    larger half of the rest for an untied head, all of it for a tied one (both ends keep the
    shared matrix). ``model=hf`` (whose count comes from its file, whatever ``n_layer`` says) is
    counted as untied, its rest the two ``V x h`` matrices."""
    m = cfg.model
    total = family(m).n_params(m)
    if layout.pp == 1:
        return math.ceil(total / layout.tp)
    tied = m.arch == "gpt2" or bool(getattr(m, "tie_embeddings", False))
    block = block_params(m)
    if block <= 0:  # a family whose count ignores n_layer (model=hf reads its file): V h per end
        block = max(0, total - m.vocab_size * m.n_embd * (1 if tied else 2)) // max(1, m.n_layer)
    rest = total - m.n_layer * block
    held = math.ceil(m.n_layer / layout.pp) * block + (rest if tied else math.ceil(rest / 2))
    return math.ceil(held / layout.tp)


def _deepspeed_states(cfg: Any, layout: Layout) -> tuple[int, int, str]:
    """``(at the start of backward, at the optimizer step, method)`` from DeepSpeed's estimators."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    m = cfg.model
    fam = family(m)
    n_params, largest = fam.n_params(m), fam.memory(m)["largest_layer_params"]
    _, opt, param = _offload(cfg)
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
    if stage != 3:
        return gpu - absent, gpu, method
    buffers = zero3_buffer_bytes(cfg, layout)
    method += f"; {buffers.method}"
    return gpu - absent + buffers.backward_start, gpu + buffers.step, method


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

    from flopsweep.backends import run_deepspeed_config

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


def zero3_buffer_bytes(cfg: Any, layout: Layout) -> Zero3Buffers:
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
      (tests/test_memory.py: one MLP matrix of 60,000 elements): there the term is an upper
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
    costs = layout.dp > 1 or _offload(cfg)[2]
    method = (
        f"ZeRO-3 reduce bucket {knobs.reduce_bucket_size:.3g} x {c} B, gathered parameters "
        f"{persistent:.3g} persistent + {retained:.3g} retained (max_live {knobs.max_live_parameters:.3g}, "
        f"max_reuse {knobs.max_reuse_distance:.3g}) x {c} B" + ("" if costs else ": free at W = 1")
    )
    return Zero3Buffers(
        reduce_bucket=bucket,
        persistent=c * persistent if costs else 0,
        retained=c * retained if costs else 0,
        method=method,
    )


def _model_states(cfg: Any, layout: Layout) -> tuple[int, int, str]:
    """``(at the start of backward, at the optimizer step, method)``: the rank's model states in
    bytes and how they were counted (see the module docstring)."""
    backend, precision = cfg.backend.name, cfg.precision.name
    if backend == "deepspeed":
        return _deepspeed_states(cfg, layout)
    held = stage_params(cfg, layout)
    accumulated = 4 * held if cfg.batch.grad_accum > 1 else 0  # the last micro batch's gradients
    if backend in ("single", "ddp"):
        autocast_copies = 2 * _autocast_cached(cfg, layout) if precision != "fp32" else 0
        ddp = 4 * held if backend == "ddp" else 0
        parts = ["12 P weights and AdamW moments", "4 P gradients at the step"]
        parts += ["2 P autocast copies"] * bool(autocast_copies) + ["4 P DDP buckets"] * bool(ddp)
        return 12 * held + accumulated + autocast_copies + ddp, 16 * held + ddp, " + ".join(parts)
    shard, gathered = layout.dp_shard, fsdp_gathered_bytes(cfg, layout)
    # FSDP2 without gradient sync (grad_accum's earlier micro batches) keeps unsharded fp32
    # gradients (FSDPParam.to_accumulated_grad_if_needed): not divided by dp_shard.
    if _offload(cfg)[0]:
        return (
            gathered + accumulated,
            0,
            "FSDP2 CPUOffloadPolicy: states on the host; the root's group (embedding, head, final norm) "
            f"and {FSDP_INFLIGHT_BLOCKS} blocks all-gathered in the compute dtype",
        )
    return (
        12 * held // shard + accumulated + gathered,
        16 * held // shard,
        "(12 P + 4 P gradients) / dp_shard (FSDP2 shards weights, gradients, AdamW moments), plus the root's "
        f"group and {FSDP_INFLIGHT_BLOCKS} blocks all-gathered, and the fp32 reduce-scatter buffers",
    )


def _autocast_cached(cfg: Any, layout: Layout) -> int:
    """Parameters whose bf16 autocast copies backward keeps (single, DDP): the rank's ``P_r``, in the
    share of its blocks that torch's checkpoint does not wrap. A wrapped block (``full``,
    ``selective``'s per-operator policy, ``every_n``'s checkpointed ones) keeps only its input and
    the outputs its policy saves, and casts its weights again when backward recomputes it: 0 for
    ``full`` and ``selective`` (Llama 3.2 1B with ``full`` is within 3% without the copies, 9% over
    with them; Llama 3.1 8B ``selective`` compiled at micro batch 4 peaks at the step, 120.0 GiB,
    where the copies would put the start of backward at 126.6), ``P_r (l - k) / l`` for
    ``every_n``'s ``k`` of ``l``; all of ``P_r`` for ``none`` and ``memory_budget`` (the compiler's
    partitioner, no checkpoint wrapper)."""
    held = stage_params(cfg, layout)
    blocks = math.ceil(cfg.model.n_layer / layout.pp)
    ac = cfg.activation_checkpointing
    if checkpointing.policy(ac).recompute(bool(cfg.compile)) in ("none", "unknown"):
        return held
    recast = len(checkpointing.checkpointed_blocks(ac, blocks))
    return held * (blocks - recast) // max(1, blocks)


def _fsdp_groups(cfg: Any, layout: Layout) -> tuple[int, int]:
    """``(block, root)``: the parameters of one block and of the root's parameter group (embedding,
    output head, final norm: what :func:`stage_params` holds outside the blocks), on one rank
    before sharding over ``dp_shard``, over ``tp``. ``model=hf``: the blocks' mean from
    :func:`stage_params`'s split."""
    m = cfg.model
    block = block_params(m)
    if block <= 0:  # a family whose count ignores n_layer (model=hf reads its file): V h per end
        tied = m.arch == "gpt2" or bool(getattr(m, "tie_embeddings", False))
        total = family(m).n_params(m)
        block = max(0, total - m.vocab_size * m.n_embd * (1 if tied else 2)) // max(1, m.n_layer)
    root = stage_params(cfg, layout) * layout.tp - math.ceil(m.n_layer / layout.pp) * block
    return math.ceil(block / layout.tp), math.ceil(max(0, root) / layout.tp)


def fsdp_gathered_bytes(cfg: Any, layout: Layout) -> int:
    """Bytes of unsharded (all-gathered) FSDP2 weights at the start of backward: the root's group,
    which FSDP2 does not reshard after forward (``FSDPState._lazy_init``: the root's
    ``post_forward_mesh_info = None``), and :data:`FSDP_INFLIGHT_BLOCKS` blocks (the last block,
    ``reshard_after_forward=False``, and the one prefetched for backward), in the compute dtype
    (``MixedPrecisionPolicy.param_dtype``). 0 for other backends."""
    if cfg.backend.name != "fsdp":
        return 0
    block, root = _fsdp_groups(cfg, layout)
    compute = 4 if cfg.precision.name == "fp32" else 2
    return compute * (root + FSDP_INFLIGHT_BLOCKS * block)


def fsdp_reduce_bytes(cfg: Any, layout: Layout) -> int:
    """Bytes on top of :attr:`MemoryEstimate.step_states` at the end of backward, when FSDP2
    reduce-scatters a parameter group's gradients (``foreach_reduce``): the unsharded gradients in
    the compute dtype ``c`` are copied into an fp32 reduce-scatter input (``reduce_dtype``,
    :data:`REDUCE_BYTES` per element, the whole unsharded group), freed, and the output shard
    becomes the sharded gradient. The larger of two moments, for ``W = dp_shard``:

    - the root's group ``R`` (reduced last, after every block's gradient shard exists; its
      weights resharded first): ``max(c R + 4 R, 4 R + 4 R / W)``, less its own shard ``4 R / W``
      that :attr:`~MemoryEstimate.step_states` counts (Llama 3.1 8B on one H200: ``16 P + 4 R``,
      123.6 GiB measured, 119.7 without this);
    - a block ``B``: its weights and gradients, the next block's prefetched weights and the
      previous block's reduce-scatter input, ``(3 c + 4) B``, less its own shard ``4 B / W``.

    With ``backend.cpu_offload`` the shards go to the host and the output shard is on the GPU
    until copied (nothing subtracted). 0 for other backends.
    """
    if cfg.backend.name != "fsdp":
        return 0
    block, root = _fsdp_groups(cfg, layout)
    compute, w = (4 if cfg.precision.name == "fp32" else 2), layout.dp_shard
    counted = 0 if _offload(cfg)[0] else 1  # the output shard is a model state (step_states)
    root_moment = max(compute * root + REDUCE_BYTES * root, REDUCE_BYTES * root * (1 + 1 / w))
    block_moment = (3 * compute + REDUCE_BYTES) * block
    return int(
        max(
            root_moment - counted * REDUCE_BYTES * root / w, block_moment - counted * REDUCE_BYTES * block / w
        )
    )


def model_states_floor(cfg: Any, layout: Layout) -> int:
    """A lower bound of one rank's bytes for fp32 weights, gradients and AdamW's two moments:
    ``16 P`` for ``single`` and ``ddp`` (every rank a full replica), ``16 P / W`` for ``fsdp`` and
    ``deepspeed`` (sharded at most ``W = dp_shard x tp`` ways; ZeRO-1 and -2 keep more). Unlike
    :func:`estimate` it needs no DeepSpeed import, so validation can afford it on every job.

    Args:
        cfg: a ``RunConfig``; layout: the run's parallel degrees (:class:`flopsweep.layout.Layout`).
    """
    n_params = family(cfg.model).n_params(cfg.model)
    shards = layout.dp_shard * layout.tp  # FSDP2 (HSDP: per replica) x TP; ZeRO: dp_shard = dp
    return 16 * n_params if cfg.backend.name in ("single", "ddp") else 16 * n_params // shards


def offload_host_bytes(cfg: Any, layout: Layout) -> int:
    """One rank's bytes that offload puts in host memory (0 without offload), a lower bound:

    - FSDP2 ``backend.cpu_offload``: the rank's shard of the fp32 weights, their gradients and
      AdamW's two moments, ``16 P / W`` (``W = layout.dp_shard``);
    - DeepSpeed ``backend.offload_optimizer=cpu``: fp32 master weights, fp32 gradients and the two
      moments, ``16 P / W`` (``W = layout.dp``), and ``offload_param=cpu`` the 16-bit weights, ``2 P / W``:
      the per-rank multipliers of DeepSpeed's own ``estimate_zero3_model_states_mem_needs`` with
      ``zero_init`` (``16`` and ``18 P`` per node of one GPU), without its 1.5 buffer factor;
    - ``nvme``: nothing here (the bytes go to the drive; its pinned staging buffers are not counted).

    Args:
        cfg: a ``RunConfig``; layout: the run's parallel degrees.
    """
    backend, n_params = cfg.backend, family(cfg.model).n_params(cfg.model)
    if getattr(backend, "cpu_offload", False):
        return 16 * n_params // layout.dp_shard
    per_param = 16 if getattr(backend, "offload_optimizer", "none") == "cpu" else 0
    per_param += 2 if getattr(backend, "offload_param", "none") == "cpu" else 0
    return per_param * n_params // layout.dp


OFFLOAD_HOST_HELD = {"fsdp": 1.10, "deepspeed": 1.25}
"""How much more host memory an offloading run held than :func:`offload_host_bytes` counts (the
lower bound validation refuses at), measured on the H200 host (125.8 GiB usable, 16 cores), bf16,
Llama 3.1 8B's width, micro batch 1, one rank (``benchmarks/results/h200/frontier/``):

- FSDP2 ``cpu_offload``: the host trace peaked at 117 GiB at 28 blocks (106.7 counted) and 120 GiB at
  29 (110.0): 1.09-1.10x (``fsdp-full-offload-host-memory.txt``);
- ZeRO-3 ``offload_optimizer=cpu``: 26 blocks (6.72 B, 100.1 GiB counted) trained and 27 (6.94 B,
  103.4 GiB) was killed by the OOM killer, so it held between 125.8 / 103.4 = 1.22x and
  125.8 / 100.1 = 1.26x (``zero3-full-offload-25.log``, ``zero3-full-offload-27/``); DeepSpeed's own
  ``estimate_zero3_model_states_mem_needs`` allows 1.5x (its ``additional_buffer_factor``).

The CUDA context, the libraries, the first copy of the model and pinned staging buffers, which the
count leaves out. Only a warning uses it (:func:`offload_host_held_bytes`): one host, one model."""


def offload_host_held_bytes(cfg: Any, layout: Layout) -> int:
    """One rank's host memory an offloading run is expected to hold: :func:`offload_host_bytes`
    times :data:`OFFLOAD_HOST_HELD` of its backend (0 without offload). An estimate from one host's
    runs, for a warning; validation refuses at the lower bound only."""
    return int(offload_host_bytes(cfg, layout) * OFFLOAD_HOST_HELD.get(cfg.backend.name, 1.0))


def peak_bytes(cfg: Any, layout: Layout, est: MemoryEstimate | None = None) -> int:
    """The peak memory of one rank on its device, in bytes: :func:`estimate`'s ``total``, and on the
    CPU (``cfg.device == "cpu"``, resolved) also what offload puts in host memory
    (:func:`offload_host_bytes`): :func:`estimate` leaves the offloaded states out, as a GPU does not
    hold them, but on the CPU the device's memory is the host's and offloading moves them nowhere.

    What ``plan=true`` shows (``est_peak_gib_per_rank``, ``fits``), what the CPU's budget rule of
    ``batch=auto`` and ``search.model=largest`` holds each probe to, and what the launch refuses a
    CPU run by (:func:`flopsweep.job.check_free_host_memory`, times the ranks of the machine).

    Args:
        cfg: a resolved ``RunConfig``; layout: its parallel degrees.
        est: :func:`estimate` of the same ``cfg`` and ``layout`` when the caller has it (not made again).

    Raises:
        Whatever :func:`estimate` raises (DeepSpeed's estimators are imported for ``deepspeed``).
    """
    peak = (est or estimate(cfg, layout)).total
    return peak + offload_host_bytes(cfg, layout) if cfg.device == "cpu" else peak


def lowest_block_bytes(cfg: Any, layout: Layout) -> int:
    """Bytes on top of :attr:`MemoryEstimate.step_states` while backward runs through the lowest
    block, when every other gradient exists: that block's activations (kept, or rebuilt under
    ``full``), ``tokens a / (tp cp)`` for one pipeline micro-batch, plus

    - ``single``/``ddp``: its gradients in the compute dtype before they are accumulated into the
      fp32 ``.grad`` (``c B``), less those fp32 gradients not made yet (``4 B``);
    - ``fsdp``: its all-gathered weights and compute-dtype gradients (``2 c B``), the block above's
      fp32 reduce-scatter input (``4 B``), the root's weights (not resharded until its own
      post-backward, ``c R``) and the output head's gradient made first in backward (``c V h``),
      less its own and the root's gradient shards not made yet (``4 (B + R) / W``; with
      ``backend.cpu_offload`` the shards are on the host and nothing is subtracted).

    The H200 records at large micro batches show it: Mistral 7B, ``full``, micro batch 16 peaks at
    115.3 GiB, 16 P + 7.4 GiB, growing 0.45 GiB per sequence. 0 for DeepSpeed (its estimators
    count ZeRO's own buffers).
    """
    backend = cfg.backend.name
    if backend == "deepspeed":
        return 0
    m = cfg.model
    _, layer = _bytes_per_token(cfg)
    _, per = in_flight_microbatches(cfg, layout)
    activations = per * m.seq_len * layer // (layout.tp * layout.cp)
    block, root = _fsdp_groups(cfg, layout)
    compute = 4 if cfg.precision.name == "fp32" else 2
    if backend in ("single", "ddp"):
        return max(0, activations + compute * block - 4 * block)
    head = math.ceil(m.vocab_size * m.n_embd / layout.tp)
    unsharded = 2 * compute * block + REDUCE_BYTES * block + compute * (root + head)
    own = 0 if _offload(cfg)[0] else REDUCE_BYTES * (block + root) // layout.dp_shard
    return max(0, activations + unsharded - own)


def in_flight_microbatches(cfg: Any, layout: Layout) -> tuple[int, int]:
    """``(in_flight, per_microbatch)``: how many pipeline micro-batches the first stage keeps
    activations for at once, and how many sequences each has. Without a pipeline: ``(1,
    micro_batch_size)``. ``GPipe`` runs every forward first (``pp_microbatches`` in flight);
    ``1F1B`` (and ``Interleaved1F1B``, counted alike) at most ``pp``. ``pp_microbatches`` unset:
    ``pp`` (the schedules' smallest sensible count)."""
    micro = cfg.batch.micro_batch_size
    if layout.pp == 1:
        return 1, micro
    n = cfg.parallel.pp_microbatches or layout.pp
    per = max(1, micro // n)
    return (n if cfg.parallel.pp_schedule == "GPipe" else min(n, layout.pp)), per


def _bytes_per_token(cfg: Any) -> tuple[int, int]:
    """``(boundary, layer)``: bytes per token of one block's input and of all it keeps for backward
    (the attention kernel's saved tensors included), on one rank before ``tp``/``cp``."""
    m = cfg.model
    shape = family(m).memory(m)
    compute = 4 if cfg.precision.name == "fp32" else 2
    residual = 4 if cfg.backend.name in ("single", "ddp") and compute == 2 else compute
    kept, other = shape["residual"], shape["other"]
    if cfg.compile:
        kept, other = shape.get("residual_compiled", kept), shape.get("other_compiled", other)
    attention = ATTENTION_SAVED.get(cfg.attention.name, 0) * m.n_head * m.seq_len
    attention = attention or LOGSUMEXP_BYTES * m.n_head
    return m.n_embd * residual, kept * residual + other * compute + attention


def activation_bytes(cfg: Any, layout: Layout | None = None) -> tuple[int, int]:
    """``(activations, logits)``: the bytes one rank keeps for backward on its busiest stage and
    at the loss (see the module docstring), for ``cfg.batch.micro_batch_size`` sequences.
    ``layout`` None: one rank, no model parallelism.

    Under ``pp > 1`` the first stage's activations (every in-flight micro-batch) and the last
    stage's (one micro-batch, plus the logits) are both estimated; the larger total is returned
    with its logits (0 when the first stage is the larger)."""
    layout = layout or Layout()
    m = cfg.model
    boundary, layer = _bytes_per_token(cfg)
    saves = checkpointing.policy(cfg.activation_checkpointing).activations
    layers = math.ceil(m.n_layer / layout.pp)
    split = layout.tp * layout.cp
    in_flight, per = in_flight_microbatches(cfg, layout)
    tokens = per * m.seq_len
    first = saves(cfg.activation_checkpointing, tokens * in_flight, layers, boundary, layer) // split
    logits = LOGIT_BYTES[bool(cfg.compile)] * tokens * m.vocab_size // layout.tp
    if layout.pp == 1:
        return first, logits
    last = saves(cfg.activation_checkpointing, tokens, layers, boundary, layer) // split
    return (first, 0) if first >= last + logits else (last, logits)


def attention_workspace_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """The scores of the layer being recomputed, on top of what the layer keeps, for the kernels
    that materialise them (``standard``, ``sdpa-math``) under a policy that recomputes the forward:
    ``(RECOMPUTED_SCORE_BYTES - kept) B h s^2 / (tp cp)`` bytes for the pipeline micro-batch; 0
    for the fused kernels and without recompute."""
    layout = layout or Layout()
    kept = ATTENTION_SAVED.get(cfg.attention.name)
    if kept is None or not checkpointing.policy(cfg.activation_checkpointing).recomputes_forward:
        return 0
    m = cfg.model
    _, per = in_flight_microbatches(cfg, layout)
    return (RECOMPUTED_SCORE_BYTES - kept) * per * m.n_head * m.seq_len**2 // (layout.tp * layout.cp)


def in_backward_gradient_bytes(cfg: Any, layout: Layout) -> tuple[int, int, str]:
    """``(every, live, what)``: the rank's fp32 gradient bytes at the optimizer step (``4 P_r``,
    ``4 P_r / dp_shard`` under FSDP2), and the most that ``optim.in_backward`` keeps live at once
    (:mod:`flopsweep.optim_in_backward`), which replaces them in :attr:`MemoryEstimate.step_states`:

    - ``single``: the largest parameter's gradient, ``4 x largest_layer_params`` (the family's; Llama
      3.1 8B: the ``V x h`` embedding or head, 2.0 GiB instead of 29.9 GiB);
    - ``fsdp``: one FSDP2 unit's sharded gradients, ``4 max(block, rest) / dp_shard``: FSDP2 assigns a
      unit's gradients as views of one reduce-scatter output, freed when the last is stepped (the
      root unit's ``rest``: embedding, head and final norm).

    Args:
        cfg: a resolved ``RunConfig`` (``single`` or ``fsdp``, ``pp = tp = 1``: the rules refuse the
            rest); layout: its parallel degrees.
    """
    m = cfg.model
    held = stage_params(cfg, layout)
    if cfg.backend.name == "fsdp":
        block = block_params(m)
        rest = family(m).n_params(m) - m.n_layer * block
        unit = "4 x largest FSDP2 unit (a block, or the root's embedding and head) / dp_shard"
        return 4 * held // layout.dp_shard, 4 * max(block, rest) // layout.dp_shard, unit
    return 4 * held, 4 * family(m).memory(m)["largest_layer_params"], "4 x largest parameter gradient"


def estimate(cfg: Any, layout: Layout) -> MemoryEstimate:
    """The peak GPU memory of the busiest rank of the resolved config ``cfg`` laid out as ``layout``.

    Args:
        cfg: a resolved ``RunConfig`` (``flopsweep.plan.Plan.cfg``).
        layout: the plan's parallel degrees (``flopsweep.plan.Plan.layout``).

    Returns:
        The estimate by part (see the module docstring for each formula); ``.total`` is the peak.
    """
    states, step_states, method = _model_states(cfg, layout)
    if getattr(cfg.optim, "in_backward", False):  # each gradient is freed as soon as it is stepped
        every, live, what = in_backward_gradient_bytes(cfg, layout)
        step_states += live - every
        method += f"; optim.in_backward: {what} instead of every gradient"
    activations, logits = activation_bytes(cfg, layout)
    return MemoryEstimate(
        model_states=states,
        activations=activations,
        attention_workspace=attention_workspace_bytes(cfg, layout),
        logits=logits,
        step_states=step_states,
        method=method,
        reduce_buffers=fsdp_reduce_bytes(cfg, layout),
        lowest_block=lowest_block_bytes(cfg, layout),
    )


GPU_MEMORY_GIB: dict[str, dict[float, float]] = {
    "H100 SXM": {80: 79.6},
    "H100 PCIe": {80: 79.6},
    "H100 NVL": {94: 93.6},
    "H200 SXM": {141: 140.4},
    "H200 NVL": {141: 140.4},
    "GH200": {96: 94.5, 480: 94.5},  # 480 GB: the superchip's name (torch: "NVIDIA GH200 480GB")
    "H800 SXM": {80: 79.6},
    "B200": {180: 179.1, 192: 179.1},  # 192 GB: the launch announcement's size
    "GB200": {186: 184.0, 192: 184.0},
    "A100": {40: 40.0, 80: 80.0},
    "A800": {40: 40.0, 80: 80.0},
    "A10": {24: 22.5},
    "A10G": {24: 22.5},
    "L4": {24: 22.5},
    "L40": {48: 45.0},
    "L40S": {48: 45.0},
    "RTX 6000 Ada": {48: 48.0},
    "V100 SXM2": {16: 15.8, 32: 31.7},
    "V100 PCIe": {16: 15.8, 32: 31.7},
    "V100S PCIe": {32: 32.0},
    "MI300X": {192: 192.0},
    "MI325X": {256: 256.0},
}
"""GPU memory by the canonical name of :data:`flopsweep.peaks.PEAK_TABLE`: ``{nominal GB: GiB}``, the
size the vendor names the device by (``H100 80GB``, ``A100-SXM4-40GB``) and the memory in GiB as the
driver reports it (``nvidia-smi``'s MiB / 1024: an H100's 80 GB is 81,559 MiB, 79.6 GiB; AMD: the
datasheet's GB). A device sold in several sizes (A100 and A800 40/80 GB, V100 16/32 GB) has one
entry per size, and ``plan_gpu`` must name one (``A100-80GB``)."""


def planned_gpu_bytes(gpu: str | None, gpu_memory_gib: float | None) -> tuple[int, str] | None:
    """The memory of the GPU that ``plan=true`` plans for when it is not (or not only) the one
    here: ``(bytes, label)``, or None when neither key is set.

    Args:
        gpu: ``plan_gpu``: a device name of the peak table (:func:`flopsweep.peaks.lookup`:
            ``H100``, ``NVIDIA H100 80GB HBM3``, ``H200``, ``A100-40GB``); its memory is the
            table's (:data:`GPU_MEMORY_GIB`: what the driver reports, ``H100`` and ``H100-80GB``
            alike 79.6 GiB), a size in the name (nominal GB, as vendors name devices) picking one
            of the sizes the device is sold in. Label: ``H100 SXM (79.6 GiB)``,
            ``A100 40 GB (40 GiB)``.
        gpu_memory_gib: ``plan_gpu_memory_gib``: the memory in GiB, as given; wins over the name's.

    Raises:
        ConfigError: a name the peak table does not know (with or without ``gpu_memory_gib``), a
            memory that is not positive or finite or is over ``MAX_BY_KEY``'s bound, or,
            without ``gpu_memory_gib``, a size in the name the device
            is not sold in (``H100-94GB``) or a name of a device that comes in several sizes without one.
    """
    from flopsweep.peaks import PEAK_TABLE, lookup, memory_sizes_gb

    row = lookup(gpu) if gpu else None
    if gpu and row is None:  # with or without a memory: the name also places the job (its capability)
        names = ", ".join(r.name.replace(" ", "-") for r in PEAK_TABLE)
        size = gpu.strip().lower().removesuffix("gib").removesuffix("gb").strip()
        fix = "use one of those"
        if size.replace(".", "", 1).isdigit():  # a memory size given as a name
            fix = f"use one of those, or plan_gpu_memory_gib={size} for a memory size in GiB"
        raise ConfigError("plan_gpu", gpu, f"is no device of the peak table ({names})", fix)
    if gpu_memory_gib is not None:
        from flopsweep.config import MAX_BY_KEY

        most = MAX_BY_KEY["plan_gpu_memory_gib"]
        if not 0 < gpu_memory_gib <= most:  # nan and inf too: a plan row, not a traceback (trial 12b)
            raise ConfigError(
                "plan_gpu_memory_gib",
                gpu_memory_gib,
                f"must be a positive number of GiB, at most {most:g}",
                "set e.g. plan_gpu_memory_gib=80",
            )
        label = f"{gpu} ({gpu_memory_gib:g} GiB)" if gpu else f"{gpu_memory_gib:g} GiB"
        return int(gpu_memory_gib * GIB), label
    if row is None:
        return None
    sizes = GPU_MEMORY_GIB[row.name]
    several = len(set(sizes.values())) > 1
    named = memory_sizes_gb(gpu)
    size = next((gb for gb in named if gb not in sizes), None)  # a size it is not sold in
    if size is not None or (several and not named):
        raise ConfigError("plan_gpu", gpu, *_size_refusal(row.name, sizes, size))
    gb = named[0] if named else next(iter(sizes))
    gib = sizes[gb]
    return int(gib * GIB), f"{row.name} {gb:g} GB ({gib:g} GiB)" if several else f"{row.name} ({gib:g} GiB)"


def _size_refusal(name: str, sizes: dict[float, float], size: float | None) -> tuple[str, str]:
    """``(problem, fix)`` of :func:`planned_gpu_bytes`'s refusal of ``plan_gpu`` naming the device
    ``name`` (canonical) sold in ``sizes`` (:data:`GPU_MEMORY_GIB`): with a ``size`` it is not sold in
    (nominal GB; the fix names a variant of the same family that is, ``H100-94GB``: ``H100-NVL``), or
    (``size`` None) without a size though it comes in several."""
    first = {gib: gb for gb, gib in reversed(sizes.items())}  # one size per memory (GH200: 96, not 480)
    sold = " or ".join(f"{gb:g} GB ({gib:g} GiB)" for gib, gb in reversed(first.items()))
    other = "or set plan_gpu_memory_gib= (GiB) for another memory"
    if size is None:
        return f"{name} comes in more than one memory size ({sold})", (
            f"name the size, e.g. plan_gpu={name.replace(' ', '-')}-{list(sizes)[-1]:g}GB, {other}"
        )
    family = [n for n, s in GPU_MEMORY_GIB.items() if size in s and n.split()[0] == name.split()[0]]
    variant = "".join(f"plan_gpu={n.replace(' ', '-')} ({size:g} GB), " for n in family)
    if len(first) > 1:
        return (
            f"names {size:g} GB; the {name} is sold with {sold}",
            f"name one of those sizes, {variant}{other}",
        )
    return f"names {size:g} GB; the {name} has {sold}", (
        f"drop the size (plan_gpu={name.replace(' ', '-')}), {variant}{other}"
    )
