"""The step-time model's terms (:mod:`flopsweep.steptime`), torch-free: what it knows of a run
(:class:`Workload`: the config's and the model's counts, the parallel degrees), of the interconnect
(:class:`Link`: bus bandwidths per collective, in a node and across), of one kind of collective
(:class:`Transfer`) and of the per-rank compute time (:class:`Compute`), and the one error
(:class:`PredictionError`). The degrees' step-time terms (:attr:`flopsweep.degrees.DegreeSpec.transfers`)
build :class:`Transfer` from here. Units: seconds, bytes, GB/s (1e9 bytes/s), FLOP.
:mod:`flopsweep.steptime` (and :mod:`flopsweep.predict`) re-export every name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flopsweep.degrees import (
    DATA_DEGREES,
    MESH_DEGREES,
    REPLICA_DEGREES,
    SAME_BATCH_DEGREES,
    STATE_SHARD_DEGREES,
    WEIGHT_SPLIT_DEGREES,
    product,
)

COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce")
"""The collectives the probe measures and the model counts (``system.interconnect[].collective``)."""
MODELLED = (*COLLECTIVES, "all_to_all")
"""The collectives a :class:`Transfer` may name: the probed ones and context parallel's all-to-all,
whose bandwidth a :class:`Link` takes as the mean of the probed ones (:meth:`Link.busbw_gbps`)."""

PARAM_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 2, "fp8-rowwise": 2}
"""Bytes per parameter element that FSDP2 all-gathers (``MixedPrecisionPolicy.param_dtype``) and
DeepSpeed communicates, by ``precision``; fp8 runs keep bf16 parameters (torchao casts inside
the matmul)."""

FP32 = 4
"""Bytes of an fp32 element: FSDP2 reduce-scatters gradients in fp32 (``reduce_dtype``), DDP
all-reduces fp32 gradients."""


class PredictionError(ValueError):
    """The inputs cannot give a prediction (no compute time, a world size below 1)."""


@dataclass(frozen=True, kw_only=True)
class Link:
    """Bus bandwidths (GB/s, nccl-tests' busbw) per collective, inside a node and across nodes.

    ``intra`` or ``inter`` map a collective (:data:`COLLECTIVES`) to GB/s; a missing collective
    takes the mean of the others. ``source`` says where the figures come from.
    """

    intra: dict[str, float] = field(default_factory=dict)
    inter: dict[str, float] = field(default_factory=dict)
    source: str = "none"

    def busbw_gbps(self, collective: str, *, across_nodes: bool) -> float | None:
        """The bus bandwidth for ``collective``, GB/s; None when nothing is known."""
        table = (self.inter or self.intra) if across_nodes else self.intra
        if collective in table:
            return table[collective]
        return sum(table.values()) / len(table) if table else None


@dataclass(frozen=True, kw_only=True)
class Transfer:
    """One kind of collective of a step: ``count`` calls of ``bytes`` each over ``group`` ranks."""

    what: str
    """What moves (``fsdp param all-gather (forward)``)."""
    collective: str
    bytes: float
    """The full buffer of one call (nccl-tests' size): gathered output, scattered input."""
    count: int
    group: int
    across_nodes: bool
    overlappable: bool = True
    """False for tensor-parallel all-reduces and pipeline sends, which sit on the critical path."""


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What the model needs to know of one run (config and model counts, no torch).

    Attributes:
        backend: ``single``, ``ddp``, ``fsdp`` or ``deepspeed``; ``zero_stage`` for the last.
        precision: the ``precision`` option name (:data:`PARAM_BYTES`).
        n_params: the model's parameters.
        n_layer, n_embd: its depth and width (tensor-parallel and pipeline activations).
        seq_len, micro_batch_size, grad_accum: the batch per rank.
        degrees: ``dp_replicate``, ``dp_shard``, ``tp``, ``pp``, ``cp``, ``ep`` (``system.parallel``).
        pp_microbatches: micro batches through the pipeline per step (default ``grad_accum``).
        pp_stages_per_rank: pipeline stages each rank holds (``Interleaved1F1B``: 2 or more).
        reshard_after_forward: FSDP2 all-gathers the parameters again in backward.
        model_flops, hardware_flops: per optimizer step over every rank, FLOP.
        executed_flops: the FLOPs the step runs, the attention square halved where the kernel skips
            the masked tiles (:func:`flopsweep.metrics.executed_flops`); None: ``hardware_flops``.
        top_k: experts each token is routed to in an MoE layer (expert parallel's all-to-alls,
            :func:`flopsweep.expert_parallel.transfers`); 0 for a dense model or unknown.
    """

    backend: str
    zero_stage: int | None = None
    precision: str = "bf16"
    n_params: int
    n_layer: int
    n_embd: int
    seq_len: int
    micro_batch_size: int
    grad_accum: int = 1
    degrees: dict[str, int] = field(default_factory=lambda: {"dp_replicate": 1, "dp_shard": 1})
    pp_microbatches: int | None = None
    pp_stages_per_rank: int = 1
    reshard_after_forward: bool = True
    model_flops: float
    hardware_flops: float
    executed_flops: float | None = None
    top_k: int = 0
    overlap_share: float = 0.0
    """``optim.overlap_forward``: the blocks' share of the parameters, whose optimizer step may run
    beside the next forward (:func:`flopsweep.overlap_forward.blocks_share`); 0 without it."""

    def degree(self, name: str) -> int:
        return int(self.degrees.get(name, 1) or 1)

    @property
    def world_size(self) -> int:
        return product(self.degrees, MESH_DEGREES)

    @property
    def dp(self) -> int:
        """Ranks that see different batches (:data:`flopsweep.degrees.DATA_DEGREES`)."""
        return product(self.degrees, DATA_DEGREES)

    @property
    def state_shards(self) -> int:
        """Ranks FSDP2 shards the model states over (:data:`flopsweep.degrees.STATE_SHARD_DEGREES`)."""
        return product(self.degrees, STATE_SHARD_DEGREES)

    @property
    def replicas(self) -> int:
        """HSDP's replicas (:data:`flopsweep.degrees.REPLICA_DEGREES`)."""
        return product(self.degrees, REPLICA_DEGREES)

    @property
    def weight_split(self) -> int:
        """Parts the weights are split into, each rank holding one (``tp x pp``)."""
        return product(self.degrees, WEIGHT_SPLIT_DEGREES)

    @property
    def work_split(self) -> int:
        """Ranks that share one batch's forward and backward (``cp x tp x pp``)."""
        return product(self.degrees, SAME_BATCH_DEGREES)

    @property
    def param_bytes(self) -> int:
        """Bytes per communicated parameter element (:data:`PARAM_BYTES`)."""
        return PARAM_BYTES.get(self.precision, 2)

    @property
    def tokens_per_step(self) -> int:
        return self.micro_batch_size * self.grad_accum * self.dp * self.seq_len

    @property
    def recompute_share(self) -> float:
        """Share (0..1) of the forward that backward runs again: the hardware FLOPs above the model
        FLOPs over the forward's third of them (1 with full checkpointing, 0 without)."""
        if self.model_flops <= 0:
            return 0.0
        return max(0.0, min(1.0, 3 * (self.hardware_flops / self.model_flops - 1)))

    @property
    def pp_microbatch_sequences(self) -> float:
        """Sequences in one pipeline micro batch: the local batch over ``pp_microbatches``."""
        return self.micro_batch_size * self.grad_accum / (self.pp_microbatches or self.grad_accum)


@dataclass(frozen=True, kw_only=True)
class Compute:
    """Per-rank compute time of one step of the target run, seconds, and where it comes from."""

    compute_s: float
    optimizer_s: float
    source: str
    kind: str = "flops"
    """What the compute time comes from: ``probe``, ``calibration``, ``nearest`` (the nearest measured
    set-up, :mod:`flopsweep.nearest`), ``flops``, or ``layers`` (the
    layer probe's whole step, communication and bubble inside: :func:`predict` adds none)
    (``metrics.predicted.compute_source``)."""
