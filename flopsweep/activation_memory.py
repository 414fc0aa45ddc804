"""What one rank keeps for backward beyond its model states, in bytes, before anything runs: the
activations, the attention workspace and the loss's logits (:func:`activation_bytes`,
:func:`attention_workspace_bytes`; the parts of :func:`flopsweep.memory.estimate` that grow with the
tokens), and what ``activation_checkpointing=offload`` puts in host memory instead
(:func:`activation_host_bytes`). Torch-free; the numbers are the family's
(:attr:`flopsweep.models.ModelFamily.memory`), the kernel's (:data:`ATTENTION_SAVED`) and the
checkpointing policy's (``CheckpointPolicy.activations``). :mod:`flopsweep.memory` re-exports every
name.

- **activations** kept for backward, per token and layer, from the model family
  (:func:`flopsweep.models.ModelFamily.memory`): the ``residual`` elements (norm inputs and their
  normalised values) in fp32 when autocast runs over fp32 weights (single, DDP), else in the
  compute dtype, and the ``other`` elements in the compute dtype (4 bytes for fp32);
  ``compile=true`` keeps the family's ``residual_compiled`` and ``other_compiled`` instead
  (Inductor's partitioner recomputes the norms and pointwise activations and keeps the matmul
  inputs); a backend whose hooks break the compiled block's graph at every submodule
  (``BackendSpec.splits_compiled_blocks``: DeepSpeed ZeRO-3) keeps the family's
  ``residual_split_compiled`` and ``other_split_compiled`` (each piece keeps its own inputs) under a
  policy that rebuilds no block. Plus what the attention kernel keeps per layer (:data:`ATTENTION_SAVED`,
  by compute dtype): the probabilities of a kernel that materialises the ``B x h x s x s`` scores, the
  ``B x h x s`` fp32 logsumexp of a fused (flash, memory-efficient, cuDNN, flex) kernel. What is kept is the
  checkpointing policy's (``CheckpointPolicy.activations``): ``none`` every block's; ``full`` each
  block's input only, and the top block's full activations (its input among them) while it is
  recomputed; ``every_n`` between the two; ``selective`` the outputs the policy saves, eager all of them
  (:func:`selective_eager_bytes`), compiled those the partitioner keeps (:func:`selective_compiled_bytes`),
  with one block rebuilt to its full activations. The layout: the
  first pipeline stage keeps ``ceil(n_layer / pp)`` layers for the in-flight pipeline
  micro-batches (:func:`in_flight_microbatches`: ``1F1B`` up to ``pp``, ``GPipe`` all of them),
  each ``micro_batch_size / pp_microbatches`` sequences; tensor parallelism with sequence
  parallelism, and context parallelism, divide by ``tp`` and ``cp``.
- **attention workspace**: under a policy that recomputes the forward, a materialising kernel
  makes one layer's scores again (bf16 product, fp32 upcast, softmax, bf16 probabilities) while
  the gradients above are live: :data:`RECOMPUTED_SCORE_BYTES` per score, what is kept included.
  Without recompute the forward's transients pass while less is live (0 on top, measured).
- **the top block's backward** (:func:`block_backward_bytes`): the gradient entering it and its MLP's
  gradient temporaries, once the logits are freed.
- **logits** while the loss's backward runs, before backward rebuilds any block: :data:`LOGIT_BYTES` per
  logit eager (the loss's saved fp32 log-softmax, the fp32 gradient of it and of its input, the bf16
  gradient), 2 compiled (the bf16 logits, their gradient written in place), :data:`SPLIT_LOGIT_BYTES`
  where the backend breaks the compiled head (:func:`logit_bytes`); ``tokens x V / (tp cp)`` logits
  (a loss-parallel head; a context-parallel rank's own tokens), on the last stage, for one pipeline
  micro-batch. With ``loss.chunk_tokens`` (the head fused with its loss,
  :func:`flopsweep.models.layers.chunked_linear_cross_entropy`) instead: one chunk's logits at
  :data:`CHUNK_LOGIT_BYTES`, the hidden states' gradient (fp32, ``tokens x C``)
  and the head weight's (fp32, ``V x C``), which the fused loss keeps from forward to backward.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from flopsweep import checkpointing
from flopsweep.attention import KERNELS
from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.kernel_memory import KernelMemory, KernelShape
from flopsweep.layout import Layout
from flopsweep.models import family

LOGIT_BYTES = {False: 12, True: 2}
"""Bytes per logit while the loss's backward runs, eager (``False``) and with ``compile=true`` (``True``):
eager keeps the fp32 log-softmax output and makes the fp32 gradients of it and of its input and the
bf16 gradient of the logits; compiled, the head and loss are one graph whose backward writes the bf16
logits' gradient into the bf16 logits it saved: AOTAutograd donates the saved buffer
(``torch._functorch.config.donated_buffer``, ``collect_bw_donated_buffer_idxs``) and Inductor reuses it
in place (``Scheduler.decide_inplace_update``). Counted on the CPU (process RSS over the head's backward,
Llama 3.2 1B's vocabulary): eager 12.07, compiled 2.06 plus the head's gradient, 4.06 with donation off."""
SPLIT_LOGIT_BYTES = 4
"""Bytes per logit while the loss's backward runs when a backend breaks the compiled head at its
submodules (:meth:`flopsweep.backend_specs.BackendSpec.splits_compiled_blocks`, ZeRO-3): the logits
enter the compiled loss as a graph input, which is never donated, so their bf16 gradient is a new
buffer beside them (the ZeRO-3 Llama 3.2 1B records, ``full`` and ``selective``: within 4%)."""
CHUNK_LOGIT_BYTES = 10
"""Bytes per logit of one chunk of the fused head and loss (``loss.chunk_tokens``): the fp32 logits,
made into the softmax in place (4), its bf16 copy for the two gradient matmuls (2), and the fp32
log-sum-exp's and gather's transients (4, an upper bound)."""
ATTENTION_SAVED = {"standard": {2: 6, 4: 4}, "sdpa-math": {2: 4, 4: 4}}
"""Bytes per attention score (``B x h x s x s`` per layer) that backward keeps, by kernel and compute
dtype's bytes (2: bf16, fp8's and autocast's compute; 4: fp32), for the kernels that materialise the
scores (:func:`saved_score_bytes`). ``standard``
(:func:`flopsweep.attention_kernels.reference_attention`: ``softmax(s.float()).to(q.dtype) @ v``, no
dropout) keeps the fp32 softmax output (4, saved by the softmax) and, in bf16, its cast (2, saved by the
matmul with ``v``); in fp32 the cast is the softmax output itself, so 4 (the scaled product and the
mask fill save no score: ``tests/unit/test_memory.py`` counts what autograd saves). SDPA's math kernel
about 4 (measured on the H200: gpt-1.3b bf16, micro batch 4 and 8, sequence 2048; Llama 3.2 1B fp32,
see :func:`scores_kernel`). Every other kernel keeps the fp32 logsumexp, :data:`LOGSUMEXP_BYTES` per
query and head."""
RECOMPUTED_SCORE_BYTES = 13
"""Bytes per score live while one layer of a kernel of :data:`ATTENTION_SAVED` is recomputed in
backward, what it keeps included (measured: 13.3 for ``standard`` and ``sdpa-math``, gpt-1.3b at
sequence 8192, micro batch 1, ``full`` checkpointing, against ``sdpa``)."""
LOGSUMEXP_BYTES = 4
"""Bytes per query and head that a fused attention kernel saves for backward (fp32 logsumexp)."""


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


def saved_score_bytes(cfg: Any) -> int | None:
    """Bytes per attention score that backward keeps (:data:`ATTENTION_SAVED`) for the kernel that
    runs (:func:`scores_kernel`) in ``cfg``'s compute dtype (4 bytes in fp32, else 2); None for a
    kernel that does not keep the scores."""
    kept = ATTENTION_SAVED.get(scores_kernel(cfg))
    return None if kept is None else kept[4 if cfg.precision.name == "fp32" else 2]


def kernel_memory(cfg: Any, layout: Layout | None = None) -> KernelMemory | None:
    """The attention kernel's own term (:attr:`flopsweep.attention.KernelSpec.memory`,
    :mod:`flopsweep.kernel_memory`) for one layer's call on the rank's pipeline micro-batch
    (:func:`in_flight_microbatches`), every head (before ``tp``, as :func:`bytes_per_token` counts), in
    the compute dtype; None for a kernel without one (``blocksparse impl=gather`` has one)."""
    spec = KERNELS.get(cfg.attention.name)
    if spec is None or spec.memory is None:
        return None
    m = cfg.model
    _, per = in_flight_microbatches(cfg, layout or Layout())
    shape = KernelShape(
        sequences=per,
        seq_len=m.seq_len,
        heads=m.n_head,
        kv_heads=getattr(m, "n_kv_head", None) or m.n_head,
        head_dim=m.n_embd // m.n_head,
        compute=4 if cfg.precision.name == "fp32" else 2,
        device=cfg.device,
    )
    return spec.memory(cfg.attention, shape)


def bytes_per_token(cfg: Any, layout: Layout | None = None) -> tuple[int, int]:
    """``(boundary, layer)``: bytes per token of one block's input and of all it keeps for backward
    (the attention kernel's saved tensors included), on one rank before ``tp``/``cp``. Compiled, the
    family's ``_compiled`` figures, or its ``_split_compiled`` ones where the backend breaks the block's
    graph at every submodule (:meth:`flopsweep.backend_specs.BackendSpec.splits_compiled_blocks`) and the
    policy rebuilds no block (``none``, ``offload``). A policy that rebuilds blocks in backward keeps the
    ``_compiled`` figures: how its checkpoint runs and recomputes under those breaks is not derived (the
    ZeRO-3 ``full`` and ``selective`` records are within 4% with them, further with the split ones). A
    kernel with a term of its own (:func:`kernel_memory`) adds what it saves less the queries, keys and
    values that the family counts and it does not keep, over the call's tokens (rounded up: its mask is
    per call); ``layout`` sizes the call (the pipeline micro-batch), None: the micro batch."""
    m = cfg.model
    shape = family(m).memory(m)
    compute = 4 if cfg.precision.name == "fp32" else 2
    residual = 4 if BACKEND_SPECS[cfg.backend.name].autocast_fp32_weights and compute == 2 else compute
    kept, other = shape["residual"], shape["other"]
    if cfg.compile:
        split = BACKEND_SPECS[cfg.backend.name].splits_compiled_blocks(cfg.backend)
        split = split and checkpointing.policy(cfg.activation_checkpointing).recompute(True) == "none"
        suffix = "_split_compiled" if split and "residual_split_compiled" in shape else "_compiled"
        kept, other = shape.get(f"residual{suffix}", kept), shape.get(f"other{suffix}", other)
        other -= fp8_compiled_inputs(cfg)
    return m.n_embd * residual, kept * residual + other * compute + attention_bytes_per_token(cfg, layout)


def attention_bytes_per_token(cfg: Any, layout: Layout | None = None) -> int:
    """What the attention kernel keeps for backward, bytes a token and layer before ``tp``/``cp``: the
    scores of a kernel of :data:`ATTENTION_SAVED` (``bytes x n_head x seq_len``), a fused kernel's
    logsumexp (:data:`LOGSUMEXP_BYTES` ``x n_head``), or a kernel's own term less the queries, keys and
    values the family counts (:func:`kernel_memory`, over the call's tokens, rounded up)."""
    m = cfg.model
    attention = (saved_score_bytes(cfg) or 0) * m.n_head * m.seq_len
    attention = attention or LOGSUMEXP_BYTES * m.n_head
    if own := kernel_memory(cfg, layout):
        _, per = in_flight_microbatches(cfg, layout or Layout())
        attention = -(-(own.saved - own.inputs) // (per * m.seq_len))
    return attention


def selective_compiled_bytes(cfg: Any, layout: Layout | None = None) -> int | None:
    """Bytes a token that one block keeps under ``selective`` with ``compile=true``, its input included:
    the block input (the boundary), the family's ``selective_compiled`` elements in the compute dtype and
    the attention kernel's saved tensors (:func:`attention_bytes_per_token`). The partitioner keeps, of
    the outputs the policy marks ``MUST_SAVE`` (the attention op, every odd matmul:
    :func:`flopsweep.checkpointing_apply.sac_context_fn`), those backward reads, and recomputes the
    rest from them and the block input (Llama: ``wq``'s, ``wv``'s, the attention's and ``w1``'s
    outputs, ``2q + kv + ffn``, not ``w2``'s; GPT-2: ``c_attn``'s, the attention's and ``c_fc``'s,
    ``8h``). Measured on the CPU: a compiled Llama block's saved tensors under ``saved_tensors_hooks``
    at two micro batches (``h`` 96, ``kv`` 48, ``ffn`` 320: 1328 bytes a token, as counted). None for
    another policy, eager, or a family without the key (:func:`activation_bytes` then uses the policy's
    ``(a - b) / 2`` estimate)."""
    if cfg.activation_checkpointing.name != "selective" or not cfg.compile:
        return None
    return _family_selective_bytes(cfg, layout, "selective_compiled")


def selective_eager_bytes(cfg: Any, layout: Layout | None = None) -> int | None:
    """Bytes a token that one eager block keeps under ``selective``, its input included: the block input
    (the boundary), the family's ``selective_eager`` elements in the compute dtype and the attention
    kernel's saved tensors (:func:`attention_bytes_per_token`). Eager per-operator checkpointing
    (``torch.utils.checkpoint``'s ``_CachingTorchDispatchMode``) caches the output of every op the
    policy marks ``MUST_SAVE`` (the attention op, every odd matmul:
    :func:`flopsweep.checkpointing_apply.sac_context_fn`), whether backward reads it or not, and nothing
    else: Llama ``wq``'s, ``wv``'s, the attention's, ``w1``'s
    and ``w2``'s outputs, ``2q + kv + ffn + h`` (the compiled partitioner drops ``w2``'s, which no backward
    reads: :func:`selective_compiled_bytes`); GPT-2 ``c_attn``'s, the attention's and ``c_fc``'s, ``8h``.
    Counted on the CPU (live bytes at the end of forward, ``benchmarks/live_per_block.py``: a Llama block
    with ``h`` 96, ``kv`` 48, ``ffn`` 320 keeps 1,720 bytes a token, this 1,712; the policy's
    ``(a - b) / 2`` estimate, 2,728, is why Llama 3.2 1B eager ``selective`` was 9-11% over). None for
    another policy, compiled, or a family without the key (:func:`activation_bytes` then uses the policy's
    estimate)."""
    if cfg.activation_checkpointing.name != "selective" or cfg.compile:
        return None
    return _family_selective_bytes(cfg, layout, "selective_eager")


def _family_selective_bytes(cfg: Any, layout: Layout | None, key: str) -> int | None:
    """The block input plus the family's ``key`` elements (``selective_compiled``, ``selective_eager``) in
    the compute dtype (4 bytes in fp32, else 2) plus the attention kernel's saved tensors, bytes a token;
    None where the family names no ``key``."""
    m = cfg.model
    elements = family(m).memory(m).get(key)
    if elements is None:
        return None
    boundary, _ = bytes_per_token(cfg, layout)
    compute = 4 if cfg.precision.name == "fp32" else 2
    return boundary + elements * compute + attention_bytes_per_token(cfg, layout)


def selective_bytes(cfg: Any, layout: Layout | None = None) -> int | None:
    """Bytes a token that one block keeps under ``selective``, its input included:
    :func:`selective_compiled_bytes` with ``compile=true``, else :func:`selective_eager_bytes`; None for
    another policy or a family that names neither (the policy's ``(a - b) / 2`` estimate then)."""
    return selective_compiled_bytes(cfg, layout) if cfg.compile else selective_eager_bytes(cfg, layout)


def fp8_shape(cfg: Any) -> dict[str, int]:
    """The family's fp8 memory keys (:data:`flopsweep.fp8.FP8_MEMORY_KEYS`) when ``cfg``'s precision
    trains the Linear layers in float8 (``precision=fp8``, ``fp8-rowwise``: a torchao recipe), else ``{}``."""
    from flopsweep.fp8 import FP8_MEMORY_KEYS
    from flopsweep.precision import PRECISIONS

    spec = PRECISIONS.get(cfg.precision.name)
    if spec is None or spec.fp8_recipe is None:
        return {}
    shape = family(cfg.model).memory(cfg.model)
    return {k: shape[k] for k in FP8_MEMORY_KEYS if k in shape}


def fp8_compiled_inputs(cfg: Any) -> int:
    """Elements per token and layer that a compiled fp8 block does not keep in the compute dtype: the
    family's ``fp8_compiled_inputs`` (the bf16 inputs of Linears whose backward reads only their float8
    casts, recomputed from what the block keeps: :data:`flopsweep.fp8.FP8_MEMORY_KEYS`) under an fp8
    precision, else 0. Eager fp8 keeps what bf16 keeps (torchao saves the bf16 input)."""
    return fp8_shape(cfg).get("fp8_compiled_inputs", 0) if cfg.compile else 0


def logit_bytes(cfg: Any) -> int:
    """Bytes per logit while the loss's backward runs: :data:`LOGIT_BYTES` by ``compile``, or
    :data:`SPLIT_LOGIT_BYTES` when compiled on a backend that breaks the compiled head's graph."""
    if cfg.compile and BACKEND_SPECS[cfg.backend.name].splits_compiled_blocks(cfg.backend):
        return SPLIT_LOGIT_BYTES
    return LOGIT_BYTES[bool(cfg.compile)]


def activation_bytes(cfg: Any, layout: Layout | None = None) -> tuple[int, int]:
    """``(activations, logits)``: the bytes one rank keeps for backward on its busiest stage and
    at the loss (see the module docstring), for ``cfg.batch.micro_batch_size`` sequences.
    ``layout`` None: one rank, no model parallelism.

    Under ``pp > 1`` the first stage's activations (every in-flight micro-batch) and the last
    stage's (one micro-batch, plus the logits) are both estimated; the larger total is returned
    with its logits (0 when the first stage is the larger)."""
    layout = layout or Layout()
    m = cfg.model
    boundary, layer = bytes_per_token(cfg, layout)
    saves = checkpointing.policy(cfg.activation_checkpointing).activations
    if (kept := selective_bytes(cfg, layout)) is not None:  # every block's, one rebuilt to ``a``

        def saves(ac: Any, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
            return tokens * (n_layer * kept + max(0, layer - kept))

    layers = math.ceil(m.n_layer / layout.pp)
    split = layout.tp * layout.cp
    in_flight, per = in_flight_microbatches(cfg, layout)
    tokens = per * m.seq_len
    first = saves(cfg.activation_checkpointing, tokens * in_flight, layers, boundary, layer) // split
    first -= budget_cast_bytes(cfg, layout)
    local = tokens // layout.cp  # the tokens whose loss this rank computes (context parallel's shard)
    logits = logit_bytes(cfg) * local * m.vocab_size // layout.tp
    if chunk := cfg.loss.chunk_tokens:  # the fused head (rules.chunked_loss: tp = pp = 1)
        logits = (CHUNK_LOGIT_BYTES * min(chunk, local) + 4 * m.n_embd) * m.vocab_size + 4 * local * m.n_embd
    if layout.pp == 1:
        return first, logits
    last = saves(cfg.activation_checkpointing, tokens, layers, boundary, layer) // split
    return (first, 0) if first >= last + logits else (last, logits)


def budget_cast_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """Bytes that ``memory_budget`` (budget ``B`` below 1) keeps fewer than ``B`` of what a block keeps beyond
    its input, on the rank's blocks: ``B x 2 x`` their cast parameters (``l_r`` blocks' parameters over
    ``tp``, less fp8's converted Linears), where autocast casts fp32 weights (``single``, DDP; 0 in fp32,
    under a backend that holds 16-bit weights, or another policy). torch's ``choose_saved_values_set``
    keeps at most ``inputs + B (default - inputs)``: the inputs hold the fp32 weights (4 bytes a parameter)
    and the default the bf16 casts (2), so of that target the fp32 weights, which the rank holds anyway,
    take ``4 - 2 B`` bytes a parameter, and the activations ``B (a - b)`` less ``2 B`` a parameter
    (:attr:`flopsweep.checkpointing.CheckpointPolicy.compiler_budget`). Counted on the CPU
    (``benchmarks/budget_casts.py``, torch 2.13, a Llama block of ``h`` 512 at 4,096 tokens): 35.7 MB a block
    saved, under the ``41.4`` MB this bounds."""
    layout = layout or Layout()
    budget = checkpointing.policy(cfg.activation_checkpointing).compiler_budget(cfg.activation_checkpointing)
    spec = BACKEND_SPECS[cfg.backend.name]
    if budget is None or budget >= 1 or cfg.precision.name == "fp32" or not spec.autocast_fp32_weights:
        return 0
    m = cfg.model
    fam = family(m)
    block = fam.n_params(dataclasses.replace(m, n_layer=2)) - fam.n_params(dataclasses.replace(m, n_layer=1))
    cast = max(0, block - fp8_shape(cfg).get("fp8_linear_params", 0))
    return int(budget * 2 * cast * math.ceil(m.n_layer / layout.pp) // layout.tp)


def forward_end_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """What the rank keeps for backward when forward ends and its loss runs, before backward rebuilds any
    block: the policy's ``forward_end`` (``full``: every block's input, ``l b``, where
    :func:`activation_bytes` counts ``(l - 1) b + a``;
    :attr:`flopsweep.checkpointing.CheckpointPolicy.forward_end`);
    :func:`activation_bytes`' first figure for a policy that rebuilds nothing and under a pipeline (whose
    stages' moments are not split). :func:`flopsweep.memory.estimate` counts it at the end of forward
    (with :func:`forward_logit_bytes`) and, with the fused loss, at the start of backward."""
    layout = layout or Layout()
    activations, _ = activation_bytes(cfg, layout)
    at_end = checkpointing.policy(cfg.activation_checkpointing).forward_end
    if at_end is None or layout.pp > 1:
        return activations
    boundary, layer = bytes_per_token(cfg, layout)
    tokens = cfg.batch.micro_batch_size * cfg.model.seq_len
    if (kept := selective_bytes(cfg, layout)) is not None:
        return tokens * cfg.model.n_layer * kept // (layout.tp * layout.cp)
    return at_end(cfg.activation_checkpointing, tokens, cfg.model.n_layer, boundary, layer) // (
        layout.tp * layout.cp
    )


FORWARD_LOGIT_BYTES = {False: 10, True: 2}
"""Bytes per logit live while the loss runs in forward, eager (``False``) and compiled (``True``): eager
``next_token_loss`` (``F.cross_entropy(logits.float() ...)``) holds the head's bf16 logits (2), their fp32
copy (4) and the log-softmax it saves (4) at once; compiled, Inductor's fused loss reads the bf16 logits
and keeps a logsumexp per token."""


def forward_logit_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """The loss's bytes at the end of forward on the last stage (0 under a pipeline, whose stages' moments
    are not split): :data:`FORWARD_LOGIT_BYTES` per logit, ``tokens x V / (tp cp)``; with
    ``loss.chunk_tokens`` the fused loss's whole figure (:func:`activation_bytes`' logits: its chunk and the
    gradients it makes in forward)."""
    layout = layout or Layout()
    if layout.pp > 1:
        return 0
    if cfg.loss.chunk_tokens:
        return activation_bytes(cfg, layout)[1]
    m = cfg.model
    local = cfg.batch.micro_batch_size * m.seq_len // layout.cp
    return FORWARD_LOGIT_BYTES[bool(cfg.compile)] * local * m.vocab_size // layout.tp


def loss_kept_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """Of :func:`activation_bytes`' logits, what outlives the loss into the blocks' backward: the fused
    head and loss (``loss.chunk_tokens``) makes its gradients in forward and keeps the hidden states'
    (fp32, ``tokens x C``) and the head weight's (fp32, ``V x C``) until backward takes them; its chunk's
    logits are gone by then. 0 for the whole-logits loss (its logits and their gradient are freed by the
    head's backward)."""
    layout = layout or Layout()
    if not cfg.loss.chunk_tokens:
        return 0
    m = cfg.model
    return 4 * m.n_embd * m.vocab_size + 4 * (cfg.batch.micro_batch_size * m.seq_len // layout.cp) * m.n_embd


def block_backward_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """What backward makes on top of the kept activations while it runs through the top block (the first it
    reaches; under ``full`` the one it has just rebuilt), for one pipeline micro-batch over ``tp x cp``, in
    bytes a token:

    - the gradient that enters the block, ``n_embd`` elements in the residual stream's dtype (the
      boundary's bytes, :func:`bytes_per_token`);
    - the family's ``backward_temporaries``, in the compute dtype: the gradients its MLP's backward holds
      at once beyond what the block keeps (GPT-2: the ``4h`` hidden's gradient, which ``c_proj``'s backward
      makes while the GELU output it saved is live; the GELU's backward then swaps that output for
      ``c_fc``'s output gradient, ``4h`` again). Measured on the CPU (autograd's saved and made tensors, a
      2- and 3-block GPT at two micro batches): ``h + 4h`` a token above ``(l - 1) b + a``;
    - compiled, also what the eager block keeps and the compiled one does not (``residual`` and ``other``
      less their ``_compiled`` figures, 0 where the compiled block keeps as many bytes): the compiled
      backward recomputes those (Llama: the norms' inputs and the SiLU output) and holds what the eager
      backward holds (gpt-1.5b-seed ``full``, micro batch 36, FSDP2 on one H200: eager and compiled peak
      alike, 31.5 GiB).

    The loss's logits are freed by then (:attr:`flopsweep.memory.MemoryEstimate.block_backward`, whose
    moment also counts the block's own gradients, ``BackendSpec.top_block_gradient_bytes``)."""
    layout = layout or Layout()
    m = cfg.model
    shape = family(m).memory(m)
    boundary, layer = bytes_per_token(cfg, layout)
    compute = 4 if cfg.precision.name == "fp32" else 2
    extra = boundary + shape.get("backward_temporaries", 0) * compute
    if cfg.compile:
        eager = dataclasses.replace(cfg, compile=False)
        extra += max(0, bytes_per_token(eager, layout)[1] - layer)
    _, per = in_flight_microbatches(cfg, layout)
    return per * m.seq_len * extra // (layout.tp * layout.cp)


def attention_workspace_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """The scores of the layer being recomputed, on top of what the layer keeps, for the kernels
    that materialise them (``standard``, ``sdpa-math``) under a policy that recomputes the forward:
    ``(RECOMPUTED_SCORE_BYTES - kept) B h s^2 / (tp cp)`` bytes for the pipeline micro-batch; for a
    kernel with a term of its own (:func:`kernel_memory`, ``blocksparse impl=gather``) its padded
    scores at the same bytes and its ``recompute_extra``. 0 for the fused kernels and without recompute."""
    layout = layout or Layout()
    own = kernel_memory(cfg, layout)
    kept = saved_score_bytes(cfg)
    recomputes = checkpointing.policy(cfg.activation_checkpointing).recomputes_forward
    if (kept is None and own is None) or not recomputes:
        return 0
    split = layout.tp * layout.cp
    if own is not None:
        return ((RECOMPUTED_SCORE_BYTES - own.score_bytes) * own.scores + own.recompute_extra) // split
    m = cfg.model
    _, per = in_flight_microbatches(cfg, layout)
    return (RECOMPUTED_SCORE_BYTES - kept) * per * m.n_head * m.seq_len**2 // split


def attention_plan_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """What the attention kernels of the rank's ``ceil(n_layer / pp)`` layers hold from their first call
    on, whatever the checkpointing: each layer's :attr:`flopsweep.kernel_memory.KernelMemory.held`
    (``blocksparse impl=gather``: its plan, ``allowed`` and ``kv_index``, whole on every ``tp`` rank); 0
    for a kernel without a term of its own. :func:`flopsweep.memory.estimate` counts it with the buffers."""
    layout = layout or Layout()
    own = kernel_memory(cfg, layout)
    return own.held * math.ceil(cfg.model.n_layer / layout.pp) if own else 0


def activation_host_bytes(cfg: Any, layout: Layout | None = None) -> int:
    """The activation bytes one rank's checkpointing policy puts in host memory
    (:attr:`flopsweep.checkpointing.CheckpointPolicy.host_activations`: ``activation_checkpointing=offload``
    keeps every block's saved activations there, ``tokens l a / (tp cp)``, on its first stage); 0 for
    the others."""
    layout = layout or Layout()
    m = cfg.model
    boundary, layer = bytes_per_token(cfg, layout)
    in_flight, per = in_flight_microbatches(cfg, layout)
    host = checkpointing.policy(cfg.activation_checkpointing).host_activations
    tokens = per * m.seq_len * in_flight
    return host(cfg.activation_checkpointing, tokens, math.ceil(m.n_layer / layout.pp), boundary, layer) // (
        layout.tp * layout.cp
    )
