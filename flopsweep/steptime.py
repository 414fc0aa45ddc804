"""The step-time model: a run's iteration time at N GPUs, from a compute time and the interconnect.

Torch-free, one place (its calibration from records: :mod:`flopsweep.predict`, which re-exports
every name here): the job (``metrics.predicted``, made before the measured steps), ``plan=true``
(a row per job, on this machine or a cluster described by ``predict.*``) and ``python -m analysis
--predict`` all call :func:`predict`. docs/prediction.md states the model and its
assumptions; in short, per optimizer step and per rank::

    t_step   = t_compute x (1 + (pp-1)/(v m)) + t_optimizer + t_exposed   (m micro batches, v stages a rank)
    t_exposed = max(t_comm x (1 - overlap), t_comm - t_compute)       (data-parallel collectives)
              + t_tp + t_pp_send                                        (never overlapped)
    t_comm   = sum over collectives of bytes x factor / busbw          (nccl-tests' bus bandwidth)

``t_compute`` comes from the compute probe (``predict.probe``, :func:`compute_from_probe`), else a
calibration record (the same model, kernel, precision, checkpointing and micro batch measured at a
smaller world size, or for the job and ``plan=true`` at the same one: its step time less its
optimizer and exposed communication, scaled by the micro batches per rank and divided by the ranks
that share a batch, ``cp x tp x pp``), or, without one, from the hardware FLOPs at
:data:`UNCALIBRATED_GEMM_FRACTION` of the measured GEMM rate, or at :data:`DATASHEET_GEMM_FRACTION`
of the datasheet peak (said so in ``source``). ``factor`` is nccl-tests' bus-bandwidth factor
(:func:`busbw_factor`): ``(n-1)/n`` for all-gather and reduce-scatter, ``2(n-1)/n`` for all-reduce,
with ``bytes`` the full buffer (the gathered output, the scattered input). Units: seconds, bytes,
GB/s (1e9 bytes/s), FLOP.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from flopsweep import cost
from flopsweep import degrees as fdegrees
from flopsweep.backend_specs import BACKEND_SPECS, backend_spec
from flopsweep.degrees import (
    DATA_DEGREES,
    MESH_DEGREES,
    REPLICA_DEGREES,
    SAME_BATCH_DEGREES,
    STATE_SHARD_DEGREES,
    WEIGHT_SPLIT_DEGREES,
    product,
    span,
)
from flopsweep.peaks import PEAK_TABLE, lookup

COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce")
"""The collectives the probe measures and the model counts (``system.interconnect[].collective``)."""
MODELLED = (*COLLECTIVES, "all_to_all")
"""The collectives a :class:`Transfer` may name: the probed ones and context parallel's all-to-all,
whose bandwidth a :class:`Link` takes as the mean of the probed ones (:meth:`Link.busbw_gbps`)."""

UNCALIBRATED_GEMM_FRACTION = 0.6
"""Without a calibration record, compute runs at this fraction of the measured (or datasheet) dense
GEMM rate. Our committed H200 runs reach 0.65-0.75 of the measured rate in model FLOPs (gpt-1.3b
eager 484/670, Llama 3.1 8B compiled with full checkpointing 0.55 in hardware FLOPs): 0.6 is a
round figure below them, stated in every uncalibrated ``source``."""

DATASHEET_GEMM_FRACTION = 0.45
"""Without a calibration record or a measured GEMM rate (``plan=true plan_gpu=H100`` on a laptop),
compute runs at this fraction of the datasheet dense peak (:mod:`flopsweep.peaks`). Our committed
H200 runs reach 0.43-0.52 of the 989.4 TFLOP/s peak in hardware FLOPs (HFU: Llama 3.1 8B compiled
with full checkpointing 0.51, eager 0.43; gpt-1.3b FSDP eager 0.52): 0.45 is a round figure near
the bottom of them, stated in every such ``source``."""

NVLINK_GBPS = {row.name: row.nvlink_gbps for row in PEAK_TABLE if row.nvlink_gbps is not None}
"""NVLink bandwidth per GPU and direction, GB/s, by :mod:`flopsweep.peaks` row name (a view of
:attr:`flopsweep.peaks.PeakRow.nvlink_gbps`). A ring's bus bandwidth cannot exceed it."""

ASSUMED_NVLINK_SHARE = 0.7
"""Without a probe, a configured bandwidth or profiled records, the bus bandwidth inside a node is
assumed to be this share of :data:`NVLINK_GBPS` (nccl-tests reach about 0.8 of it on an idle H100
node, 350-370 GB/s; inside a training step the collectives share the GPU with compute): stated in
``bandwidth_source``."""

DEFAULT_OVERLAP = {name: spec.default_overlap for name, spec in BACKEND_SPECS.items()}
"""Share of the data-parallel communication hidden behind compute when no profiled record
(``metrics.breakdown``) of the backend calibrates it: assumed, and named ``assumed`` in
``overlap_source`` (:attr:`flopsweep.backend_specs.BackendSpec.default_overlap`; a backend no
spec knows: :data:`UNKNOWN_OVERLAP`)."""

UNKNOWN_OVERLAP = 0.5
"""The assumed overlap of a record's backend that no spec knows."""


def default_overlap(backend: str) -> float:
    """:data:`DEFAULT_OVERLAP` of ``backend``, :data:`UNKNOWN_OVERLAP` for a name no spec has."""
    spec = backend_spec(backend)
    return spec.default_overlap if spec else UNKNOWN_OVERLAP


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
    top_k: int = 0

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
    """What the compute time comes from: ``probe``, ``calibration``, ``flops``, or ``layers`` (the
    layer probe's whole step, communication and bubble inside: :func:`predict` adds none)
    (``metrics.predicted.compute_source``)."""


@dataclass(frozen=True, kw_only=True)
class ProbeTimes:
    """The compute probe's times (:mod:`flopsweep.compute_probe`), seconds, at the run's shapes on one
    GPU, unsplit: ``block_s`` one decoder block's forward and backward of one micro batch (the run's
    kernel, precision, checkpointing and compile), ``head_s`` the embedding, head and loss's, and
    ``block_optimizer_s``/``head_optimizer_s`` the run's AdamW step (with its clip) over one block's
    parameters and over the embedding and head's."""

    block_s: float
    head_s: float
    block_optimizer_s: float
    head_optimizer_s: float

    @classmethod
    def of(cls, probe: dict[str, Any]) -> ProbeTimes:
        """From the probe's dict (``metrics.predicted.probe``).

        Raises:
            PredictionError: a time missing, not positive or not finite.
        """
        names = ("block_s", "head_s", "block_optimizer_s", "head_optimizer_s")
        bad = [
            n for n in names if not isinstance(probe.get(n), int | float) or not 0 < probe[n] < float("inf")
        ]
        if bad:
            raise PredictionError(f"the compute probe has no usable {', '.join(bad)}")
        return cls(**{n: float(probe[n]) for n in names})


def compute_from_probe(w: Workload, probe: ProbeTimes, *, source: str = "probe") -> Compute:
    """The per-rank compute of ``w`` from probed pieces (docs/prediction.md)::

        t_c   = accum x (l / pp x t_block + t_head) / (tp x cp)        (the pipeline's last stage)
        t_opt = (l x t_block_opt + t_head_opt) / (tp x pp x shards)

    ``accum`` micro batches a rank runs, ``l`` blocks, ``shards`` the ranks that split the optimizer
    states (:func:`_shard`). As with a calibration, tensor and context parallelism split each piece
    evenly (their smaller GEMMs are slower), and the bubble follows from ``t_c`` (:func:`predict`)."""
    split = w.degree("tp") * w.degree("cp")
    stage = w.n_layer / w.degree("pp") * probe.block_s + probe.head_s
    opt = (w.n_layer * probe.block_optimizer_s + probe.head_optimizer_s) / (w.weight_split * _shard(w))
    return Compute(
        compute_s=w.grad_accum * stage / split,
        optimizer_s=opt,
        source=f"{source}: {w.n_layer} x block {probe.block_s * 1e3:.4g} ms + head "
        f"{probe.head_s * 1e3:.4g} ms a micro batch",
        kind="probe",
    )


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """``metrics.predicted``: the contract's three keys first, then the parts (seconds)."""

    iteration_time_s: float
    tokens_per_s: float
    source: str
    tokens_per_s_per_device: float
    mfu: float | None
    compute_s: float
    optimizer_s: float
    bubble_s: float
    comm_s: float
    exposed_comm_s: float
    overlap: float
    overlap_source: str
    bandwidth_source: str
    world_size: int
    budget_gpu_hours: float | None = None
    budget_days: float | None = None
    compute_source: str = "flops"
    """:attr:`Compute.kind`: ``probe``, ``calibration`` or ``flops``."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor (``doc/PERFORMANCE.md``): busbw = algbw x factor, so the
    time of a call of ``bytes`` is ``bytes x factor / busbw``. ``(n-1)/n`` for all-gather,
    reduce-scatter and all-to-all (:data:`MODELLED`), ``2(n-1)/n`` for all-reduce; 0 for one rank.

    Raises:
        ValueError: an unknown collective or ``n < 1``.
    """
    if collective not in MODELLED or n < 1:
        raise ValueError(f"busbw_factor: collective {collective!r} over {n} ranks")
    base = (n - 1) / n
    return 2 * base if collective == "all_reduce" else base


def transfers(w: Workload, *, gpus_per_node: int) -> list[Transfer]:
    """The collectives of one optimizer step of ``w``, per rank (docs/prediction.md): every
    degree's term (:attr:`flopsweep.degrees.DegreeSpec.transfers`, in the table's order), summed.

    Data parallel (``dp_shard``'s term, :func:`data_parallel_transfers`: the backend spec's
    collectives). Tensor parallel (:func:`flopsweep.tensor_parallel.transfers`: sequence parallel's
    all-gathers and reduce-scatters of activations, per layer and micro batch, never overlapped).
    Pipeline (:func:`flopsweep.pipeline_plan.transfers`: a pipeline micro batch's activations sent
    forward and its gradients backward at each stage boundary, never overlapped). The mesh is
    ``(pp, dp_replicate, dp_shard, cp, tp)`` with ``tp`` innermost (:mod:`flopsweep.mesh`): a group
    spans nodes when the ranks it reaches (:func:`flopsweep.degrees.span`) pass ``gpus_per_node``.
    """
    out: list[Transfer] = []
    for spec in fdegrees.DEGREE_SPECS:
        term = spec.resolve("transfers")
        if term is not None:
            out += term(w, gpus_per_node=gpus_per_node)
    return out


def data_parallel_transfers(w: Workload, *, gpus_per_node: int) -> list[Transfer]:
    """The data-parallel collectives of one step (``dp_shard``'s term; none on one data-parallel
    rank): the backend spec's (:meth:`flopsweep.backend_specs.BackendSpec.collectives`) over its group
    (:meth:`~flopsweep.backend_specs.BackendSpec.dp_group`), or over the replicas.

    DDP all-reduces ``4P`` (fp32 gradients) over ``dp``; FSDP2 all-gathers ``bP`` (``b`` =
    :data:`PARAM_BYTES`) per micro batch in forward and again in backward (``reshard_after_forward``)
    and reduce-scatters ``4P``, over its shard group, and with ``dp_replicate > 1`` (HSDP) all-reduces
    its ``4P / shards`` gradient shard over the replicas; ZeRO-1/2 reduce-scatter ``bP`` gradients and
    all-gather ``bP`` updated parameters; ZeRO-3 all-gathers ``bP`` forward and backward per micro
    batch and reduce-scatters ``bP``. ``P`` is the parameters of one rank's part of the weights
    (over ``tp x pp``); under a pipeline a stage gathers once per step."""
    spec = backend_spec(w.backend)
    if spec is None or w.dp <= 1:
        return []
    p = w.n_params / w.weight_split
    micro = w.grad_accum if w.degree("pp") == 1 else 1  # with a pipeline, the stage gathers once per step
    group = spec.dp_group(w)
    inner = STATE_SHARD_DEGREES[-1]  # the shard group is strided by the dimensions inside it
    stride = span(w.degrees, inner) // w.degree(inner)
    replicate = w.replicas
    return [
        Transfer(
            what=c.what,
            collective=c.collective,
            bytes=c.bytes,
            count=c.count,
            group=replicate if c.across_replicas else group,
            across_nodes=stride * group * (replicate if c.across_replicas else 1) > gpus_per_node,
        )
        for c in spec.collectives(w, p=p, b=w.param_bytes, micro=micro)
    ]


def comm_seconds(items: Iterable[Transfer], link: Link) -> tuple[float, float]:
    """``(overlappable, critical)`` seconds of ``items`` at ``link``'s bus bandwidths.

    Raises:
        PredictionError: a collective over several ranks with no bandwidth known for it.
    """
    soft = hard = 0.0
    for x in items:
        bw = link.busbw_gbps(x.collective, across_nodes=x.across_nodes)
        if bw is None or bw <= 0:
            raise PredictionError(
                f"no bus bandwidth for {x.collective} ({'across nodes' if x.across_nodes else 'in a node'}): "
                "run on the ranks (the probe measures it) or set predict.intra_node_gbps/inter_node_gbps"
            )
        seconds = x.count * x.bytes * busbw_factor(x.collective, x.group) / (bw * 1e9)
        if x.overlappable:
            soft += seconds
        else:
            hard += seconds
    return soft, hard


def link_from_probe(entries: Sequence[dict[str, Any]] | None, *, source: str) -> Link:
    """A :class:`Link` from ``system.interconnect`` entries (``{collective, bytes, busbw_gbps}``):
    per collective the bandwidth at its largest measured size (the closest to a run's
    parameter-sized messages). The probe's ranks count as one node."""
    best: dict[str, tuple[float, float]] = {}
    for e in entries or []:
        c, n, bw = e.get("collective"), e.get("bytes"), e.get("busbw_gbps")
        if c in COLLECTIVES and isinstance(n, int | float) and isinstance(bw, int | float) and bw > 0:
            if c not in best or n > best[c][0]:
                best[c] = (float(n), float(bw))
    return Link(intra={c: bw for c, (_, bw) in best.items()}, source=source)


def calibrated_overlap(breakdowns: Iterable[tuple[str, dict[str, Any]]]) -> tuple[float, str] | None:
    """The overlap ``1 - exposed_comm_s / comm_s``, median over profiled multi-rank records
    (``(name, metrics.breakdown)`` pairs with ``comm_s > 0``), and which records; None without any."""
    pairs = [
        (name, 1 - b["exposed_comm_s"] / b["comm_s"])
        for name, b in breakdowns
        if isinstance(b, dict) and (b.get("comm_s") or 0) > 0 and b.get("exposed_comm_s") is not None
    ]
    if not pairs:
        return None
    values = sorted(max(0.0, min(1.0, v)) for _, v in pairs)
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    return median, f"profiled: median of {len(pairs)} ({', '.join(n for n, _ in pairs[:3])})"


def compute_from_calibration(
    target: Workload,
    *,
    calibration: Workload,
    iteration_time_s: float,
    source: str,
    optimizer_s: float | None = None,
    exposed_comm_s: float = 0.0,
    compute_scale: float = 1.0,
) -> Compute:
    """The target's per-rank compute from a measured calibration run of the same model, kernel,
    precision, checkpointing and micro batch.

    ``iteration_time_s`` less ``optimizer_s`` and ``exposed_comm_s`` (zero on one rank) is the
    calibration's forward and backward over ``calibration.grad_accum`` micro batches; the target
    runs ``target.grad_accum`` of them, each rank ``1/(cp x tp x pp)`` of the work
    (:attr:`Workload.work_split`), at ``compute_scale`` times the
    speed (1: the same GPU). A calibration of another micro batch scales by tokens
    (``target.micro_batch_size / calibration.micro_batch_size``), said so in ``source``. The
    optimizer (when the calibration's profile separates it, else it stays inside the compute)
    scales with the parameters each rank updates: ``1/(dp_shard x cp)`` for the sharded backends,
    ``1/(tp x pp)`` always (:attr:`Workload.weight_split`).

    Raises:
        PredictionError: a non-positive compute time after the subtraction.
    """
    opt = optimizer_s or 0.0
    fb = iteration_time_s - opt - exposed_comm_s
    if not fb > 0:
        raise PredictionError(f"calibration {source}: no compute time left ({iteration_time_s:.4g} s step)")
    per_micro = fb / calibration.grad_accum * calibration.work_split
    tokens = target.micro_batch_size / calibration.micro_batch_size  # 1: the same micro batch
    compute = per_micro * tokens * target.grad_accum / target.work_split / compute_scale
    opt_target = opt * _shard(calibration) / _shard(target) / target.weight_split / compute_scale
    how = "" if optimizer_s is not None else "; optimizer not separated (no profile): kept in compute"
    if tokens != 1:
        how += (
            f"; micro batch {calibration.micro_batch_size} -> {target.micro_batch_size}: compute scaled "
            "by tokens (a larger micro batch usually runs a little faster per token)"
        )
    return Compute(
        compute_s=compute, optimizer_s=opt_target, source=f"calibrated: {source}{how}", kind="calibration"
    )


def compute_uncalibrated(target: Workload, *, gemm_tflops: float | None, what: str = "measured") -> Compute:
    """The target's per-rank compute without a calibration: its hardware FLOPs per rank at
    :data:`UNCALIBRATED_GEMM_FRACTION` of a measured ``gemm_tflops`` (TFLOP/s), or at
    :data:`DATASHEET_GEMM_FRACTION` of it when ``what`` names a datasheet peak (``H100 SXM
    datasheet``).

    Raises:
        PredictionError: no GEMM rate (a CPU plan has neither a probe nor a datasheet peak).
    """
    if not gemm_tflops or gemm_tflops <= 0:
        if what != "measured":  # plan_gpu named a device whose datasheet has no peak for this precision
            raise PredictionError(
                f"uncalibrated and the {' '.join(what.split())} gives no peak for this precision: give "
                "predict.calibration=PATH (a one-GPU record of the same set-up)"
            )
        raise PredictionError(
            "uncalibrated and no GEMM rate known: give predict.calibration=PATH (a one-GPU record of "
            "the same set-up), or plan_gpu=NAME (e.g. H100) for its datasheet peak"
        )
    share = UNCALIBRATED_GEMM_FRACTION if what == "measured" else DATASHEET_GEMM_FRACTION
    rate = share * gemm_tflops * 1e12
    return Compute(
        compute_s=target.hardware_flops / target.world_size / rate,
        optimizer_s=0.0,
        source=f"uncalibrated: hardware FLOPs at {share:g} x the {what} GEMM rate "
        f"({gemm_tflops:.4g} TFLOP/s)",
    )


def assumed_link(device_name: str | None) -> Link | None:
    """The bus bandwidth assumed inside a node of ``device_name`` GPUs when nothing measured it:
    :data:`ASSUMED_NVLINK_SHARE` of its NVLink bandwidth per direction (:data:`NVLINK_GBPS`, by
    :mod:`flopsweep.peaks` row), for every collective; None for a device without a figure. Nothing
    is assumed across nodes (``predict.inter_node_gbps``)."""
    row = lookup(device_name) if device_name else None
    nvlink = row.nvlink_gbps if row else None
    if nvlink is None:
        return None
    bw = ASSUMED_NVLINK_SHARE * nvlink
    return Link(
        intra=dict.fromkeys(COLLECTIVES, bw),
        inter=dict.fromkeys(COLLECTIVES, 0.0),  # unknown: comm_seconds asks for predict.inter_node_gbps
        source=f"assumed: {ASSUMED_NVLINK_SHARE:g} x {row.name} NVLink {nvlink:g} GB/s per direction "
        f"= {bw:g} GB/s busbw in a node",
    )


def predict(
    w: Workload,
    compute: Compute,
    link: Link,
    *,
    gpus_per_node: int,
    overlap: tuple[float, str] | None = None,
    peak_tflops: float | None = None,
    budget_tokens: float | None = None,
) -> Prediction:
    """The step time of ``w`` (module docstring), its tokens/s, MFU (with ``peak_tflops``) and
    GPU-hours and days for ``budget_tokens``.

    Args:
        compute: from :func:`compute_from_calibration` or :func:`compute_uncalibrated`.
        link: the bus bandwidths (the probe's, or the config's).
        gpus_per_node: ranks per node; groups larger than it run at ``link.inter``.
        overlap: ``(share, source)`` of the data-parallel communication hidden behind compute;
            default :data:`DEFAULT_OVERLAP` of the backend (``assumed``).

    Raises:
        PredictionError: a collective without a bandwidth (:func:`comm_seconds`).
    """
    inside = compute.kind == "layers"  # the layer probe timed the communication and bubble with the steps
    soft, hard = (0.0, 0.0) if inside else comm_seconds(transfers(w, gpus_per_node=gpus_per_node), link)
    share, share_source = overlap or (default_overlap(w.backend), "assumed")
    exposed = max(soft * (1 - share), soft - compute.compute_s) + hard
    pp = w.degree("pp")
    m = w.pp_microbatches or w.grad_accum
    v = max(1, w.pp_stages_per_rank)  # interleaved: v stages per rank shrink the bubble v-fold
    bubble = compute.compute_s * (pp - 1) / (v * m) if pp > 1 and not inside else 0.0  # (p-1)/(vm+p-1)
    step = compute.compute_s + bubble + compute.optimizer_s + exposed
    world = w.world_size
    tokens_per_s = w.tokens_per_step / step
    gpu_hours = days = None
    if budget_tokens:
        budget = cost.budget(
            budget_tokens,
            tokens_per_s=tokens_per_s,
            world=world,
            joules_per_token=None,
            usd_per_gpu_hour=None,
        )
        gpu_hours, days = budget["gpu_hours"], budget["days"]
    return Prediction(
        iteration_time_s=step,
        tokens_per_s=tokens_per_s,
        source=compute.source,
        tokens_per_s_per_device=tokens_per_s / world,
        mfu=w.model_flops / step / world / (peak_tflops * 1e12) if peak_tflops else None,
        compute_s=compute.compute_s,
        optimizer_s=compute.optimizer_s,
        bubble_s=bubble,
        comm_s=soft + hard,
        exposed_comm_s=exposed,
        overlap=share,
        overlap_source=share_source,
        bandwidth_source=link.source,
        world_size=world,
        budget_gpu_hours=gpu_hours,
        budget_days=days,
        compute_source=compute.kind,
    )


def _shard(w: Workload) -> int:
    """The ranks that split the optimizer's states (FSDP2 and ZeRO: ``dp_shard``), 1 for DDP and one
    rank (:meth:`flopsweep.backend_specs.BackendSpec.optimizer_shards`)."""
    spec = backend_spec(w.backend)
    return spec.optimizer_shards(w) if spec else 1
