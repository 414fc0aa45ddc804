"""Peak GPU memory per rank of a planned run, before anything runs (``plan=true``, and every run's
``metrics.predicted_peak_gib``); on the CPU the same figures, times the ranks of the node, are host
memory. A pure function of the resolved config and its :class:`~flopsweep.layout.Layout`: no
device, no weights (for ``deepspeed`` its estimators import torch, and ZeRO-3's buffers count the
parameter tensors of a meta-device build: :mod:`flopsweep.zero_memory`).

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
    code).

  Each backend's terms are its spec's (:mod:`flopsweep.backend_specs`: which degree shards its
  states, its buckets, what it holds unsharded, where offload puts the states); this module
  computes the rank's counts (``_Terms``) and asks the spec, never the backend's name.
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
  (Inductor fuses the upcast into the log-softmax); ``tokens x V / (tp cp)`` logits (a loss-parallel
  head; a context-parallel rank's own tokens), on the last stage, for one pipeline micro-batch.
  With ``loss.chunk_tokens`` (the head fused with its loss,
  :func:`flopsweep.models.layers.chunked_linear_cross_entropy`) instead: one chunk's logits at
  :data:`CHUNK_LOGIT_BYTES`, the hidden states' gradient (fp32, ``tokens x C``)
  and the head weight's (fp32, ``V x C``), which the fused loss keeps from forward to backward.

- **registered buffers** of the module (:attr:`MemoryEstimate.buffers`), at both moments: the
  family's ``buffer_bytes`` (``model=hf`` measures them on its meta-device build: a GPT-Neo of
  ``max_position_embeddings`` 32768 keeps a 1 GiB causal mask per layer).

Not counted: the CUDA context (about 0.5 GiB, not in ``max_memory_allocated``), allocator
fragmentation (``reserved - allocated``), fp8's smaller saved activations (torchao keeps float8
copies), and the gathered key and value blocks of ``blocksparse`` ``impl=gather``.
``benchmarks/memory_estimate.py`` compares the estimate with the ``peak_cuda_allocated_bytes`` of
every committed H200 record.

``plan=true`` can ask about a GPU that is not here (:func:`flopsweep.gpu_memory.planned_gpu_bytes`,
re-exported here): ``plan_gpu=`` a device name of the GPU table (:mod:`flopsweep.peaks`, ``H100``,
``H100-80GB``, ``A100-40GB``), whose memory is its row's (what the driver reports), or
``plan_gpu_memory_gib=``, as given.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

from flopsweep import checkpointing
from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.expert_parallel import gathered_expert_cut
from flopsweep.gpu_memory import planned_gpu_bytes  # noqa: F401 - memory.planned_gpu_bytes, as callers use it
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.peaks import GPU_MEMORY_GIB  # noqa: F401 - memory.GPU_MEMORY_GIB, as config's docstring names it

GIB = 2**30

LOGIT_BYTES = {False: 12, True: 4}
"""Bytes per logit at the start of backward, eager (``False``) and with ``compile=true`` (``True``):
eager keeps the fp32 log-softmax output and makes the fp32 gradients of it and of its input and the
bf16 gradient of the logits; compiled, Inductor's fused loss keeps the bf16 logits and makes their
bf16 gradient. Fitted to the H200 records (gpt-1.3b micro batch 8 and 16, Llama 3.2 1B and 3B)."""
CHUNK_LOGIT_BYTES = 10
"""Bytes per logit of one chunk of the fused head and loss (``loss.chunk_tokens``): the fp32 logits,
made into the softmax in place (4), its bf16 copy for the two gradient matmuls (2), and the fp32
log-sum-exp's and gather's transients (4, an upper bound)."""
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
    GPT-Neo's ``max_position_embeddings^2`` causal masks); 0 for the built-in families."""

    optimizer_workspace: int = 0
    """AdamW's temporaries during its step, on top of :attr:`step_states`
    (:func:`optimizer_workspace_bytes`; 0 for the fused kernel)."""

    @property
    def backward_start(self) -> int:
        """Bytes at the start of backward: states, activations, workspace, logits and buffers."""
        return self.model_states + self.activations + self.attention_workspace + self.logits + self.buffers

    @property
    def end_of_backward(self) -> int:
        """Bytes at the end of backward and the optimizer step: every model state, the largest of
        the gradient reduce-scatter buffers, the lowest block's backward and AdamW's workspace
        (each at its own moment), and the buffers."""
        transient = max(self.reduce_buffers, self.lowest_block, self.optimizer_workspace)
        return self.step_states + transient + self.buffers

    @property
    def total(self) -> int:
        """The peak: the larger of :attr:`backward_start` and :attr:`end_of_backward`."""
        return max(self.backward_start, self.end_of_backward)

    @property
    def total_gib(self) -> float:
        """:attr:`total` in GiB (2**30 bytes), as ``metrics.predicted_peak_gib`` records it."""
        return self.total / GIB


class _Terms:
    """The counts of one rank that the backend specs' memory terms read
    (:mod:`flopsweep.backend_specs`), each computed on first use."""

    def __init__(self, cfg: Any, layout: Layout) -> None:
        self.cfg, self.layout = cfg, layout
        self.spec = BACKEND_SPECS[cfg.backend.name]

    @functools.cached_property
    def offload(self) -> Any:
        return self.spec.offload(self.cfg.backend)

    @functools.cached_property
    def held(self) -> int:
        return stage_params(self.cfg, self.layout)

    @functools.cached_property
    def accumulated(self) -> int:  # the last micro batch's fp32 gradients
        return 4 * self.held if self.cfg.batch.grad_accum > 1 else 0

    @functools.cached_property
    def autocast_copies(self) -> int:
        return 2 * _autocast_cached(self.cfg, self.layout) if self.cfg.precision.name != "fp32" else 0

    @functools.cached_property
    def compute(self) -> int:
        return 4 if self.cfg.precision.name == "fp32" else 2

    @functools.cached_property
    def _groups(self) -> tuple[int, int]:
        return _fsdp_groups(self.cfg, self.layout)

    @property
    def block(self) -> int:
        return self._groups[0]

    @property
    def root(self) -> int:
        return self._groups[1]

    @property
    def head(self) -> int:
        return math.ceil(self.cfg.model.vocab_size * self.cfg.model.n_embd / self.layout.tp)

    @functools.cached_property
    def activations(self) -> int:  # the lowest block's, one pipeline micro-batch
        _, layer = _bytes_per_token(self.cfg)
        _, per = in_flight_microbatches(self.cfg, self.layout)
        return per * self.cfg.model.seq_len * layer // (self.layout.tp * self.layout.cp)

    @functools.cached_property
    def model_block(self) -> int:
        return block_params(self.cfg.model)

    @property
    def rest(self) -> int:
        m = self.cfg.model
        return family(m).n_params(m) - m.n_layer * self.model_block

    @property
    def largest(self) -> int:
        return family(self.cfg.model).memory(self.cfg.model)["largest_layer_params"]


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


def _model_states(cfg: Any, layout: Layout) -> tuple[int, int, str]:
    """``(at the start of backward, at the optimizer step, method)``: the rank's model states in
    bytes and how they were counted: the backend spec's
    :meth:`~flopsweep.backend_specs.BackendSpec.model_states` (ZeRO: DeepSpeed's estimators)."""
    return BACKEND_SPECS[cfg.backend.name].model_states(_Terms(cfg, layout))


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
    :func:`stage_params`'s split. Under expert parallel a block holds ``1 / ep`` of its routed experts
    (:func:`flopsweep.expert_parallel.gathered_expert_cut`)."""
    m = cfg.model
    block = block_params(m)
    if block <= 0:  # a family whose count ignores n_layer (model=hf reads its file): V h per end
        tied = m.arch == "gpt2" or bool(getattr(m, "tie_embeddings", False))
        total = family(m).n_params(m)
        block = max(0, total - m.vocab_size * m.n_embd * (1 if tied else 2)) // max(1, m.n_layer)
    root = stage_params(cfg, layout) * layout.tp - math.ceil(m.n_layer / layout.pp) * block
    block -= gathered_expert_cut(m, layout.ep)  # expert parallel: the rank gathers its own experts only
    return math.ceil(block / layout.tp), math.ceil(max(0, root) / layout.tp)


def fsdp_gathered_bytes(cfg: Any, layout: Layout) -> int:
    """Bytes of unsharded (all-gathered) FSDP2 weights at the start of backward: the root's group,
    which FSDP2 does not reshard after forward (``FSDPState._lazy_init``: the root's
    ``post_forward_mesh_info = None``), and :data:`~flopsweep.backend_specs.FSDP_INFLIGHT_BLOCKS`
    blocks (the last block, ``reshard_after_forward=False``, and the one prefetched for backward), in
    the compute dtype (``MixedPrecisionPolicy.param_dtype``). 0 for other backends
    (:meth:`~flopsweep.backend_specs.BackendSpec.gathered_bytes`)."""
    return BACKEND_SPECS[cfg.backend.name].gathered_bytes(_Terms(cfg, layout))


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
    return BACKEND_SPECS[cfg.backend.name].reduce_bytes(_Terms(cfg, layout))


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


def offload_host_bytes(cfg: Any, layout: Layout) -> int:
    """One rank's bytes that offload puts in host memory (0 without offload), a lower bound:

    - FSDP2 ``backend.cpu_offload``: the rank's shard of the fp32 weights, their gradients and
      AdamW's two moments, ``16 P / W`` (``W = layout.dp_shard``);
    - DeepSpeed ``backend.offload_optimizer=cpu``: fp32 master weights, fp32 gradients and the two
      moments, ``16 P / W`` (``W = layout.dp``), and ``offload_param=cpu`` the 16-bit weights, ``2 P / W``:
      the per-rank multipliers of DeepSpeed's own ``estimate_zero3_model_states_mem_needs`` with
      ``zero_init`` (``16`` and ``18 P`` per node of one GPU), without its 1.5 buffer factor;
    - ``nvme``: nothing here (the bytes go to the drive; its pinned staging buffers are not counted);
    - ``activation_checkpointing=offload``: the saved activations (:func:`activation_host_bytes`).

    Args:
        cfg: a ``RunConfig``; layout: the run's parallel degrees.
    """
    n_params = family(cfg.model).n_params(cfg.model)
    return BACKEND_SPECS[cfg.backend.name].host_bytes(cfg.backend, n_params, layout) + activation_host_bytes(
        cfg, layout
    )


def activation_host_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """The activation bytes one rank's checkpointing policy puts in host memory
    (:attr:`flopsweep.checkpointing.CheckpointPolicy.host_activations`: ``activation_checkpointing=offload``
    keeps every block's saved activations there, ``tokens l a / (tp cp)``, on its first stage); 0 for
    the others."""
    layout = layout or Layout()
    m = cfg.model
    boundary, layer = _bytes_per_token(cfg)
    in_flight, per = in_flight_microbatches(cfg, layout)
    host = checkpointing.policy(cfg.activation_checkpointing).host_activations
    tokens = per * m.seq_len * in_flight
    return host(cfg.activation_checkpointing, tokens, math.ceil(m.n_layer / layout.pp), boundary, layer) // (
        layout.tp * layout.cp
    )


OFFLOAD_HOST_HELD = {name: spec.host_held for name, spec in BACKEND_SPECS.items() if spec.host_held != 1.0}
"""How much more host memory an offloading run held than :func:`offload_host_bytes` counts (the
lower bound validation refuses at), by backend (:attr:`flopsweep.backend_specs.BackendSpec.host_held`),
measured on the H200 host (125.8 GiB usable, 16 cores), bf16, Llama 3.1 8B's width, micro batch 1,
one rank (``benchmarks/results/h200/frontier/``):

- FSDP2 ``cpu_offload``: the host trace peaked at 117 GiB at 28 blocks (106.7 counted) and 120 GiB at
  29 (110.0): 1.09-1.10x (``fsdp-full-offload-host-memory.txt``);
- ZeRO-3 ``offload_optimizer=cpu``: 26 blocks (6.72 B, 100.1 GiB counted) trained and 27 (6.94 B,
  103.4 GiB) was killed by the OOM killer, so it held between 125.8 / 103.4 = 1.22x and
  125.8 / 100.1 = 1.26x (``zero3-full-offload-25.log``, ``zero3-full-offload-27/``); DeepSpeed's own
  ``estimate_zero3_model_states_mem_needs`` allows 1.5x (its ``additional_buffer_factor``).

The CUDA context, the libraries, the first copy of the model and pinned staging buffers, which the
count leaves out. The launch refuses by it (:func:`offload_host_held_bytes`, against the free host
memory: ``flopsweep.job.hostcheck``); validation, against the host's total, by the lower bound."""


def offload_host_held_bytes(cfg: Any, layout: Layout) -> int:
    """One rank's host memory an offloading run is expected to hold: :func:`offload_host_bytes`
    times :data:`OFFLOAD_HOST_HELD` of its backend (0 without offload). An estimate from one host's
    runs: the launch refuses a run whose estimate exceeds the free host memory
    (:func:`flopsweep.job.check_free_host_memory`)."""
    return int(offload_host_bytes(cfg, layout) * BACKEND_SPECS[cfg.backend.name].host_held)


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
    return BACKEND_SPECS[cfg.backend.name].lowest_block_bytes(_Terms(cfg, layout))


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


def scores_kernel(cfg: Any) -> str:
    """The attention kernel that runs, as far as what backward keeps goes: ``cfg.attention.name``,
    except ``sdpa`` in fp32 with GQA (``n_kv_head < n_head``) on CUDA, which is ``sdpa-math``:
    SDPA's flash kernel takes no fp32 and its memory-efficient kernel no ``enable_gqa``, so SDPA
    falls back to its math kernel and keeps the scores (measured: Llama 3.2 1B fp32 ``single``,
    micro batch 4, ``benchmarks/results/h200/session16/probe-1/prec/0``: 81.7 GiB, 3.9 bytes a
    score above the fused kernel's estimate of 50.1)."""
    name = cfg.attention.name
    m = cfg.model
    gqa = 0 < (getattr(m, "n_kv_head", None) or m.n_head) < m.n_head
    if name == "sdpa" and cfg.precision.name == "fp32" and gqa and cfg.device == "cuda":
        return "sdpa-math"
    return name


def _bytes_per_token(cfg: Any) -> tuple[int, int]:
    """``(boundary, layer)``: bytes per token of one block's input and of all it keeps for backward
    (the attention kernel's saved tensors included), on one rank before ``tp``/``cp``."""
    m = cfg.model
    shape = family(m).memory(m)
    compute = 4 if cfg.precision.name == "fp32" else 2
    residual = 4 if BACKEND_SPECS[cfg.backend.name].autocast_fp32_weights and compute == 2 else compute
    kept, other = shape["residual"], shape["other"]
    if cfg.compile:
        kept, other = shape.get("residual_compiled", kept), shape.get("other_compiled", other)
    attention = ATTENTION_SAVED.get(scores_kernel(cfg), 0) * m.n_head * m.seq_len
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
    local = tokens // layout.cp  # the tokens whose loss this rank computes (context parallel's shard)
    logits = LOGIT_BYTES[bool(cfg.compile)] * local * m.vocab_size // layout.tp
    if chunk := cfg.loss.chunk_tokens:  # the fused head (rules.chunked_loss: tp = pp = 1)
        logits = (CHUNK_LOGIT_BYTES * min(chunk, local) + 4 * m.n_embd) * m.vocab_size + 4 * local * m.n_embd
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
    kept = ATTENTION_SAVED.get(scores_kernel(cfg))
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
    return BACKEND_SPECS[cfg.backend.name].in_backward_gradients(_Terms(cfg, layout))


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
    t = _Terms(cfg, layout)
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
        lowest_block=lowest_block_bytes(cfg, layout),
        buffers=family(cfg.model).memory(cfg.model).get("buffer_bytes", 0),
        optimizer_workspace=workspace,
    )
