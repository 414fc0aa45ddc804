"""Peak GPU memory per rank of a planned run, before anything runs (``plan=true``, and every run's
``metrics.predicted_peak_gib``); on the CPU the same figures, times the ranks of the node, are host
memory. A pure function of the resolved config and its :class:`~flopsweep.layout.Layout`: no
device, no weights (for ``deepspeed`` its estimators import torch, and ZeRO-3's buffers count the
parameter tensors of a meta-device build: :mod:`flopsweep.zero_memory`).

The peak of a training step comes at one of four moments, and the estimate is the largest:

- **the end of forward**, while the loss runs (:attr:`MemoryEstimate.forward_end`): model states,
  autocast's cached bf16 copy of every weight cast in forward (``single``/DDP eager: the cache is
  cleared only when the trainer's autocast exits after the loss, checkpointed blocks' copies
  included), what every block keeps before backward rebuilds any, and the loss's forward bytes
  (:data:`~flopsweep.activation_memory.FORWARD_LOGIT_BYTES`); gpt-1.3b eager ``full`` peaks here;
- **the start of backward** (the usual peak): model states without gradients (the optimizer
  step's ``zero_grad(set_to_none=True)`` freed them; a second micro batch of ``grad_accum`` finds
  them), every activation kept for backward, and the loss's logits;
- **backward through the top block** (:attr:`MemoryEstimate.through_block`), the logits freed: the same
  states and activations, the gradient entering the block, its MLP's gradient temporaries and its own
  gradients (:func:`~flopsweep.activation_memory.block_backward_bytes`); the peak where the vocabulary is
  small (gpt-1.5b-seed, 65 tokens, ``full``, micro batch 36: 31.4 GiB against 31.5 measured, was 29.8);
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
    :data:`~flopsweep.backend_specs.FSDP_INFLIGHT_BLOCKS` blocks, ``c (R + 2 B)``; at the end of
    backward the fp32 reduce-scatter input of the root's gradients (``reduce_dtype``), ``4 R``
    (Llama 3.1 8B on one H200: 123.57 GiB against 123.64 measured, 119.66 without it), or a
    block's moment if larger.
    With ``grad_accum`` > 1 FSDP2 keeps unsharded fp32 gradients between micro batches, ``4 P_r``
    (not over ``W``). With ``backend.cpu_offload`` the sharded states live on the host
    (``CPUOffloadPolicy``, :func:`offload_host_bytes`: ``16 P / W``) and the GPU holds only the
    gathered weights and the reduce-scatter buffers.
  - ``deepspeed``: DeepSpeed's own estimators (:mod:`flopsweep.zero_memory`, which its spec's
    ``model_states`` calls): ``2 P + 18 P / W`` for ZeRO-1 and -2, ``4 x largest layer + 18 P / W`` for
    ZeRO-3, ``W = dp``, less the gradient partitions that do not exist yet at the start of
    backward (:data:`flopsweep.zero_memory.ZERO_GRADIENT_BYTES`), plus ZeRO-3's reduce bucket
    and gathered parameters (:func:`flopsweep.zero_memory.zero3_buffer_bytes`, from DeepSpeed's
    code; on one rank the largest layer's copy is a view, not counted). The optimizer step, from
    DeepSpeed's code: ZeRO-1/2 hold the flattened 16-bit gradient partition beside its fp32 copy
    (``2 P / W`` more); ZeRO-3 ``16 P / W`` and its largest sub-group's fp32 gradients and
    temporaries (:func:`flopsweep.zero_memory.zero3_step_bytes`) instead of the estimator's figure.

  Each backend's terms are its spec's (:mod:`flopsweep.backend_specs`: which degree shards its
  states, its buckets, what it holds unsharded, where offload puts the states); this module
  computes the rank's counts (:class:`flopsweep.memory_terms.Terms`) and asks the spec, never the
  backend's name.
- **activations**, the **attention workspace** and the **logits**
  (:mod:`flopsweep.activation_memory`, re-exported here): what backward keeps per token and layer
  by the family, the attention kernel and the checkpointing policy, over the layout's in-flight
  pipeline micro-batches and ``tp x cp``; a materialising kernel's recomputed scores; the loss's
  logits on the last stage (or one chunk of the fused head and loss, ``loss.chunk_tokens``).

- **registered buffers** of the module (:attr:`MemoryEstimate.buffers`), at both moments: the
  family's ``buffer_bytes`` (``model=hf`` measures them on its meta-device build: a GPT-Neo of
  ``max_position_embeddings`` 32768 keeps a 1 GiB causal mask per layer).

``blocksparse impl=gather`` is counted from its tensors (:mod:`flopsweep.kernel_memory`: the padded
scores, the gathered key and value blocks, the queries' copy and the mask it saves, less the queries, keys
and values the family counts, which it does not keep; its per-layer plans with the buffers; the five H200
records within 0.3%). Not counted: the CUDA context (about 0.5 GiB, not in ``max_memory_allocated``) and
allocator fragmentation (``reserved - allocated``). fp8 (torchao's float8 Linears) is counted through
the family's :data:`flopsweep.fp8.FP8_MEMORY_KEYS`: no autocast copies of the converted weights and,
compiled, no bf16 copies of the inputs that only a float8 matmul reads.
``benchmarks/memory_estimate.py`` compares the estimate with the ``peak_cuda_allocated_bytes`` of
every committed H200 record.

What offload puts in host memory (``offload_host_bytes``, ``offload_host_held_bytes``,
``OFFLOAD_HOST_HELD``) is :mod:`flopsweep.offload_memory`'s, re-exported here.

``plan=true`` can ask about a GPU that is not here (:func:`flopsweep.gpu_memory.planned_gpu_bytes`,
re-exported here): ``plan_gpu=`` a device name of the GPU table (:mod:`flopsweep.peaks`, ``H100``,
``H100-80GB``, ``A100-40GB``), whose memory is its row's (what the driver reports), or
``plan_gpu_memory_gib=``, as given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flopsweep import checkpointing, fsdp_units
from flopsweep.activation_memory import (  # noqa: F401 - memory.X, as callers and docs name them
    ATTENTION_SAVED,
    CHUNK_LOGIT_BYTES,
    FORWARD_LOGIT_BYTES,
    LOGIT_BYTES,
    LOGSUMEXP_BYTES,
    RECOMPUTED_SCORE_BYTES,
    SPLIT_LOGIT_BYTES,
    activation_bytes,
    activation_host_bytes,
    attention_bytes_per_token,
    attention_plan_bytes,
    attention_workspace_bytes,
    block_backward_bytes,
    budget_cast_bytes,
    bytes_per_token,
    forward_end_bytes,
    forward_logit_bytes,
    fp8_compiled_inputs,
    fp8_shape,
    in_flight_microbatches,
    kernel_memory,
    logit_bytes,
    loss_kept_bytes,
    saved_score_bytes,
    scores_kernel,
    selective_bytes,
    selective_compiled_bytes,
    selective_eager_bytes,
)
from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.gpu_memory import planned_gpu_bytes  # noqa: F401 - memory.planned_gpu_bytes, as callers use it
from flopsweep.layout import Layout
from flopsweep.memory_terms import (  # noqa: F401 - memory.X, as callers and docs name them
    Terms,
    autocast_cached,
    block_params,
    forward_autocast_cached,
    fsdp_groups,
    stage_params,
)
from flopsweep.models import family
from flopsweep.offload_memory import (  # noqa: F401 - memory.X, as callers and docs name them
    OFFLOAD_HOST_HELD,
    offload_host_bytes,
    offload_host_held_bytes,
)
from flopsweep.peaks import GPU_MEMORY_GIB  # noqa: F401 - memory.GPU_MEMORY_GIB, as config's docstring names it

GIB = 2**30


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
    buffers: int = 0
    """The module's registered buffers, whole on every rank (FSDP2 and ZeRO shard parameters
    only): the family's ``buffer_bytes`` (``model=hf``: measured on the meta-device build, e.g.
    GPT-Neo's ``max_position_embeddings^2`` causal masks; 0 for the built-in families), and what the
    attention kernels hold per layer (:func:`flopsweep.activation_memory.attention_plan_bytes`:
    ``blocksparse impl=gather``'s plans)."""

    optimizer_workspace: int = 0
    """AdamW's temporaries during its step, on top of :attr:`step_states`
    (:func:`optimizer_workspace_bytes`; 0 for the fused kernel)."""
    head_reduce: int = 0
    """FSDP2 with ``backend.end_units``: the head unit's reduce-scatter early in backward, where the
    logits were (:func:`flopsweep.fsdp_units.head_reduce_bytes`); 0 otherwise."""
    head_gradient: int = 0
    """The output head's gradient, from the loss's backward to the end of backward
    (``BackendSpec.head_gradient_bytes``: fp32 under ``single``/DDP, the compute dtype unsharded under
    FSDP2, 0 under DeepSpeed, whose buckets its states count)."""
    compiled: bool = False
    """Whether the run compiles its blocks and loss (``compile=true``): decides the start of backward's
    moment (:attr:`backward_start`)."""
    on_host: bool = False
    """Whether the blocks' saved tensors are host copies until backward unpacks them node by node
    (``activation_checkpointing=offload``, :attr:`flopsweep.checkpointing.CheckpointPolicy.saves_on_host`):
    the start of backward counts none of them beside the loss's bytes, eager as compiled."""
    head_gradient_at_loss: int = 0
    """Of :attr:`head_gradient`, what the loss's backward peak holds beside the logits: all of it compiled
    (the fused loss's backward is small; the head's matmul backward makes the gradient while the logits'
    gradient, written over the logits, is live), 0 eager (the peak is the cross-entropy's fp32 backward,
    freed before the head's matmul makes its gradient). Counted on the CPU (process RSS over the head's
    backward): compiled 2.06 bytes a logit plus the head's gradients, eager 12.07 in all."""
    forward_end_activations: int | None = None
    """What backward keeps while the logits are live, before it rebuilds any block
    (:func:`flopsweep.activation_memory.forward_end_bytes`: ``full``'s ``l b``); None: :attr:`activations`."""
    loss_kept: int = 0
    """Of :attr:`logits`, what outlives the loss into the blocks' backward (the fused loss's fp32 gradients,
    :func:`flopsweep.activation_memory.loss_kept_bytes`)."""

    forward_copies: int = 0
    """Autocast's bf16 weight copies held in its cache at the end of forward beyond those backward keeps
    (:attr:`model_states`): a checkpointed block's (``single``, DDP;
    :func:`flopsweep.memory_terms.forward_autocast_cached`)."""
    forward_logits: int = 0
    """The loss's bytes at the end of forward (:func:`flopsweep.activation_memory.forward_logit_bytes`)."""

    block_backward: int = 0
    """What backward makes on top of :attr:`activations` while it runs through the top block, once the
    logits are freed: the gradient entering the block and its MLP's gradient temporaries
    (:func:`flopsweep.activation_memory.block_backward_bytes`) and the block's own gradients
    (``BackendSpec.top_block_gradient_bytes``)."""

    @property
    def forward_end(self) -> int:
        """Bytes at the end of forward, while the loss runs: states, autocast's cached copies of every
        weight cast in forward, every block's kept tensors before any rebuild, the loss's forward bytes
        and buffers (gpt-1.3b ``single`` eager ``full`` at 8192 tokens: 22.49 GiB, measured 22.64)."""
        at_end = self.activations if self.forward_end_activations is None else self.forward_end_activations
        return self.model_states + self.forward_copies + at_end + self.forward_logits + self.buffers

    @property
    def backward_start(self) -> int:
        """Bytes at the start of backward, while the loss's backward runs: states, every block's kept tensors
        before any rebuild (:attr:`forward_end_activations`), the logits and the head's gradient (or the
        head unit's reduce-scatter just after them, whichever is larger) and buffers; the first block
        rebuilt comes after the logits are freed (:attr:`through_block`) when compiled (the Llama 3.2 1B
        grid on one H100, ``full`` and ``selective``: +12% to +52% with it, within 2% without). Eager, the
        first block rebuilt (and its attention workspace) is counted with the loss's bytes: the eager
        records hold it (gpt-1.3b ``standard`` attention, ``full``, 8,192 tokens: -16% without it); why
        is not derived. Not under ``offload`` (:attr:`on_host`): its saved tensors come back only as
        backward's nodes run, after the loss's (Llama 3.2 1B eager, micro batch 7, one H100: 34.85 GiB
        against 35.08 measured, 36.41 with a block's). With the fused loss
        (:attr:`loss_kept` > 0), whose chunk is gone before backward rebuilds a block, the larger of the
        loss (every block's kept tensors before any rebuild and its figure) and the first block rebuilt
        (the activations, the workspace and the gradients it keeps)."""
        early = max(self.logits + self.head_gradient_at_loss, self.head_reduce)
        rebuilt = self.activations + self.attention_workspace
        at_end = self.activations if self.forward_end_activations is None else self.forward_end_activations
        if not self.loss_kept:
            kept = at_end if self.compiled or self.on_host else rebuilt
            return self.model_states + kept + early + self.buffers
        return self.model_states + max(at_end + early, rebuilt + self.loss_kept) + self.buffers

    @property
    def through_block(self) -> int:
        """Bytes while backward runs through the top block (rebuilt under ``full``), after the loss's
        logits are freed: states, activations, the larger of the attention workspace and
        :attr:`block_backward` (the attention's backward comes after the MLP's), buffers. With a small
        vocabulary, where the logits are less than :attr:`block_backward`, the peak is here (gpt-1.5b-seed,
        vocabulary 65, ``full``, micro batch 36: the MLP's gradients, 1.8 GiB)."""
        return (
            self.model_states
            + self.activations
            + max(self.attention_workspace, self.block_backward)
            + self.head_gradient
            + self.buffers
        )

    @property
    def end_of_backward(self) -> int:
        """Bytes at the end of backward and the optimizer step: every model state, the largest of
        the gradient reduce-scatter buffers, the lowest block's backward and AdamW's workspace
        (each at its own moment), and the buffers."""
        transient = max(self.reduce_buffers, self.lowest_block, self.optimizer_workspace)
        return self.step_states + transient + self.buffers

    @property
    def total(self) -> int:
        """The peak: the largest of :attr:`forward_end`, :attr:`backward_start`, :attr:`through_block` and
        :attr:`end_of_backward`."""
        return max(self.forward_end, self.backward_start, self.through_block, self.end_of_backward)

    @property
    def total_gib(self) -> float:
        """:attr:`total` in GiB (2**30 bytes), as ``metrics.predicted_peak_gib`` records it."""
        return self.total / GIB


def _model_states(cfg: Any, layout: Layout) -> tuple[int, int, str]:
    """``(at the start of backward, at the optimizer step, method)``: the rank's model states in
    bytes and how they were counted: the backend spec's
    :meth:`~flopsweep.backend_specs.BackendSpec.model_states` (ZeRO: DeepSpeed's estimators)."""
    return BACKEND_SPECS[cfg.backend.name].model_states(Terms(cfg, layout))


def fsdp_gathered_bytes(cfg: Any, layout: Layout) -> int:
    """Bytes of unsharded (all-gathered) FSDP2 weights at the start of backward: the root's group,
    which FSDP2 does not reshard after forward (``FSDPState._lazy_init``: the root's
    ``post_forward_mesh_info = None``), and :data:`~flopsweep.backend_specs.FSDP_INFLIGHT_BLOCKS`
    blocks (the last block, ``reshard_after_forward=False``, and the one prefetched for backward), in
    the compute dtype (``MixedPrecisionPolicy.param_dtype``). 0 for other backends
    (:meth:`~flopsweep.backend_specs.BackendSpec.gathered_bytes`)."""
    return BACKEND_SPECS[cfg.backend.name].gathered_bytes(Terms(cfg, layout))


def fsdp_reduce_bytes(cfg: Any, layout: Layout) -> int:
    """Bytes on top of :attr:`MemoryEstimate.step_states` at the end of backward, when FSDP2
    reduce-scatters a parameter group's gradients (``foreach_reduce``): the unsharded gradients in
    the compute dtype ``c`` are copied into an fp32 reduce-scatter input (``reduce_dtype``,
    :data:`~flopsweep.backend_specs.REDUCE_BYTES` per element, the whole unsharded group), freed,
    and the output shard becomes the sharded gradient. The larger of two moments, for ``W = dp_shard``:

    - the root's group ``R`` (reduced last, after every block's gradient shard exists; its
      weights resharded first): ``max(c R + 4 R, 4 R + 4 R / W)``, less its own shard ``4 R / W``
      that :attr:`~MemoryEstimate.step_states` counts (Llama 3.1 8B on one H200: ``16 P + 4 R``,
      123.6 GiB measured, 119.7 without this);
    - a block ``B``: its weights and gradients, the next block's prefetched weights and the
      previous block's reduce-scatter input, ``(3 c + 4) B``, less its own shard ``4 B / W``.

    With ``backend.cpu_offload`` the shards go to the host and the output shard is on the GPU
    until copied (nothing subtracted). 0 for other backends
    (:meth:`~flopsweep.backend_specs.BackendSpec.reduce_bytes`).
    """
    return BACKEND_SPECS[cfg.backend.name].reduce_bytes(Terms(cfg, layout))


def model_states_floor(cfg: Any, layout: Layout) -> int:
    """A lower bound of one rank's bytes for fp32 weights, gradients and AdamW's two moments:
    ``16 P`` for ``single`` and ``ddp`` (every rank a full replica), ``16 P / W`` for ``fsdp`` and
    ``deepspeed`` (sharded at most ``W = dp_shard x tp`` ways; ZeRO-1 and -2 keep more). Unlike
    :func:`estimate` it needs no DeepSpeed import, so validation can afford it on every job.

    Args:
        cfg: a ``RunConfig``; layout: the run's parallel degrees (:class:`flopsweep.layout.Layout`).
    """
    n_params = family(cfg.model).n_params(cfg.model)  # FSDP2 (HSDP: per replica) x TP; ZeRO: dp_shard = dp
    return BACKEND_SPECS[cfg.backend.name].floor_bytes(n_params, layout)


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
    return BACKEND_SPECS[cfg.backend.name].lowest_block_bytes(Terms(cfg, layout))


def eager_expert_bytes(cfg: Any, layout: Layout) -> int:
    """The stacked-experts gradients that ``model.experts=eager`` holds beyond the parameter's own while a
    block runs backward (the family's ``eager_expert_gradients`` elements, :data:`flopsweep.models.hf.
    EAGER_EXPERT_GRADIENTS`), in the parameters' dtype: fp32 where autocast runs over fp32 weights
    (``single``, DDP) or in fp32, else the compute dtype (FSDP2's unsharded, DeepSpeed's bf16 weights);
    over ``ep`` (a rank holds ``1 / ep`` of the experts). 0 for every other model. Counted in
    :attr:`MemoryEstimate.lowest_block` and :attr:`MemoryEstimate.block_backward`."""
    elements = family(cfg.model).memory(cfg.model).get("eager_expert_gradients", 0)
    if not elements:
        return 0
    t = Terms(cfg, layout)
    size = 4 if t.spec.autocast_fp32_weights else t.compute
    return size * elements // max(1, getattr(layout, "ep", 1))


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
    return BACKEND_SPECS[cfg.backend.name].in_backward_gradients(Terms(cfg, layout))


def optimizer_workspace_bytes(cfg: Any, layout: Layout) -> tuple[int, str]:
    """``(bytes, what)``: the temporaries torch's AdamW allocates during its step on the rank's device,
    by ``optim.implementation`` (read from ``torch.optim.adam``'s ``_multi_tensor_adam`` and
    ``_single_tensor_adam``, torch 2.13):

    - ``fused`` and ``auto`` (fused on CUDA): none, one kernel reads and writes the states in place
      (``auto`` on the CPU runs the for-loop, whose two temporaries of the largest parameter are
      left out: host memory, a few MB for the models run there);
    - ``foreach``: ``sqrt(v)`` of every tensor it steps at once, fp32, ``4 P_s`` (``P_s``: the
      parameters the rank steps, ``P_r`` over the state shards; with ``optim.in_backward`` one
      parameter at a time, the largest);
    - ``for_loop``: ``v.sqrt()`` and its quotient for one tensor,
      ``8 x`` the largest parameter's elements the rank steps.

    0 where torch's AdamW does not step on the device: DeepSpeed's optimizers
    (:attr:`flopsweep.backend_specs.BackendSpec.torch_adamw`) and a step offloaded to the host.
    """
    t = Terms(cfg, layout)
    impl = getattr(cfg.optim, "implementation", "auto")
    if impl in ("auto", "fused") or not t.spec.torch_adamw or t.offload.steps_on_host:
        return 0, ""
    shards = t.spec.shards(layout)
    largest = math.ceil(t.largest / shards)
    if impl == "foreach" and not getattr(cfg.optim, "in_backward", False):
        return 4 * math.ceil(t.held / shards), "foreach AdamW: 4 B x the parameters the rank steps"
    per = 4 if impl == "foreach" else 8
    return per * largest, f"{impl} AdamW: {per} B x the largest parameter the rank steps"


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
    workspace, what = optimizer_workspace_bytes(cfg, layout)
    t = Terms(cfg, layout)
    head_gradient = t.spec.head_gradient_bytes(t) if logits and not cfg.loss.chunk_tokens else 0
    if workspace:
        method += f"; {what}"
    return MemoryEstimate(
        model_states=states,
        activations=activations,
        attention_workspace=attention_workspace_bytes(cfg, layout),
        logits=logits,
        step_states=step_states,
        method=method,
        reduce_buffers=fsdp_reduce_bytes(cfg, layout),
        lowest_block=lowest_block_bytes(cfg, layout) + eager_expert_bytes(cfg, layout),
        buffers=family(cfg.model).memory(cfg.model).get("buffer_bytes", 0)
        + attention_plan_bytes(cfg, layout),
        optimizer_workspace=workspace,
        head_reduce=fsdp_units.head_reduce_bytes(Terms(cfg, layout)),
        head_gradient=head_gradient,
        head_gradient_at_loss=head_gradient if cfg.compile else 0,
        compiled=bool(cfg.compile),
        on_host=checkpointing.policy(cfg.activation_checkpointing).saves_on_host,
        forward_end_activations=forward_end_bytes(cfg, layout),
        loss_kept=loss_kept_bytes(cfg, layout),
        forward_copies=Terms(cfg, layout).forward_copies,
        forward_logits=forward_logit_bytes(cfg, layout),
        block_backward=block_backward_bytes(cfg, layout)
        + t.spec.top_block_gradient_bytes(t)
        + eager_expert_bytes(cfg, layout),
    )
