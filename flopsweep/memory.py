"""Peak GPU memory per rank of a planned run, before anything runs (``plan=true``); on the CPU
the same figures, times the ranks of the node, are host memory.

The estimate adds four parts, in bytes per rank:

- **model states**: weights, gradients and AdamW's two moments.
  - ``single``/``ddp``: fp32 weights, gradients and moments, ``16 P``; under autocast (bf16,
    fp16) the cached low-precision weight copies, ``2 P``; DDP's gradient buckets, ``4 P``.
  - ``fsdp``: ``16 P / W`` (FSDP2 shards all of it; the all-gathered blocks in flight are a
    few blocks' worth and are left out).
  - ``deepspeed``: DeepSpeed's own estimators, without offload:
    ``deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs`` for ZeRO-1
    and -2 (``2 P + 18 P / W``) and ``stage3.estimate_zero3_model_states_mem_needs`` for ZeRO-3
    (``4 x largest layer + 18 P / W``).
- **activations** kept for backward, per token and layer, from the model family
  (:func:`flopsweep.models.ModelFamily.memory`): the residual-stream elements in fp32 when
  autocast runs over fp32 weights (single, DDP), else in the compute dtype, and the rest in
  the compute dtype (4 bytes for fp32). What is kept is the checkpointing policy's
  (``CheckpointPolicy.activations``): ``none`` every block's; ``full`` each block's input
  only, plus one block's full activations while it is recomputed.
- **logits**: ``6 bytes x tokens x V`` (bf16 logits, their fp32 upcast and the loss's saved
  fp32 softmax, measured on the H200 records).

Not counted: the CUDA context (about 0.5 GiB, not in ``max_memory_allocated``), allocator
fragmentation (``reserved - allocated``), ``torch.compile``'s different saved set, and
attention kernels' scratch. ``benchmarks/memory_estimate.py`` compares the estimate with the
``peak_cuda_allocated_bytes`` of every committed H200 record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopsweep import checkpointing
from flopsweep.layout import Layout
from flopsweep.models import family

LOGIT_BYTES = 6
"""Bytes per logit at the loss's peak (eager): bf16 logits, fp32 upcast, saved fp32 softmax."""


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak GPU memory of one rank, in bytes, by part, and where the model-state figure comes from."""

    model_states: int
    activations: int
    logits: int
    method: str

    @property
    def total(self) -> int:
        return self.model_states + self.activations + self.logits


def _model_states(cfg: Any, layout: Layout, n_params: int, largest_layer: int) -> tuple[int, str]:
    """FSDP2 shards over ``layout.dp_shard`` ranks (HSDP replicas hold copies), ZeRO over all
    ``layout.dp`` data-parallel ranks."""
    backend, precision = cfg.backend.name, cfg.precision.name
    autocast_copies = 2 * n_params if precision != "fp32" else 0
    if backend in ("single", "ddp"):
        ddp = 4 * n_params if backend == "ddp" else 0
        return (
            16 * n_params + autocast_copies + ddp,
            "16 P fp32 states + 2 P autocast copies (+ 4 P DDP buckets)",
        )
    if backend == "fsdp":
        shards = layout.dp_shard * layout.tp  # HSDP replicas hold copies; TP splits each shard
        return 16 * n_params // shards, "16 P / W (FSDP2 shards weights, gradients, AdamW moments)"
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    world = layout.dp
    if cfg.backend.zero_stage == 3:
        _, gpu, _ = estimate_zero3_model_states_mem_needs(
            n_params, largest_layer, num_gpus_per_node=world, cpu_offload=False, cpu_offload_params=False
        )
        return gpu, "DeepSpeed estimate_zero3_model_states_mem_needs (no offload)"
    _, gpu = estimate_zero2_model_states_mem_needs(n_params, num_gpus_per_node=world, cpu_offload=False)
    return gpu, "DeepSpeed estimate_zero2_model_states_mem_needs (no offload; ZeRO-1 and -2)"


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


def activation_bytes(cfg: Any) -> tuple[int, int]:
    """``(activations, logits)``: one rank's bytes kept for backward and at the loss (see the
    module docstring), for ``cfg.batch.micro_batch_size`` sequences."""
    m = cfg.model
    shape = family(m).memory(m)
    compute = 4 if cfg.precision.name == "fp32" else 2
    autocast_over_fp32 = cfg.backend.name in ("single", "ddp") and compute == 2
    residual = 4 if autocast_over_fp32 else compute
    tokens = cfg.batch.micro_batch_size * m.seq_len
    per_layer = shape["residual"] * residual + shape["other"] * compute  # bytes per token
    saves = checkpointing.policy(cfg.activation_checkpointing).activations
    activations = saves(cfg.activation_checkpointing, tokens, m.n_layer, m.n_embd * residual, per_layer)
    return activations, LOGIT_BYTES * tokens * m.vocab_size


def estimate(cfg: Any, layout: Layout) -> MemoryEstimate:
    """The peak GPU memory of one rank of the resolved config ``cfg`` laid out as ``layout``.

    Args:
        cfg: a resolved ``RunConfig`` (``flopsweep.plan.Plan.cfg``).
        layout: the plan's parallel degrees (``flopsweep.plan.Plan.layout``).

    Returns:
        The estimate by part (see the module docstring for each formula).
    """
    m = cfg.model
    fam = family(m)
    states, method = _model_states(cfg, layout, fam.n_params(m), fam.memory(m)["largest_layer_params"])
    activations, logits = activation_bytes(cfg)
    return MemoryEstimate(states, activations, logits, method)
