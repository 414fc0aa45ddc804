"""The step-time model: a run's iteration time at N GPUs, from a calibration and the interconnect.

Torch-free, one place: the job (``metrics.predicted``, made before the measured steps), ``plan=true``
(a row per job, on this machine or a cluster described by ``predict.*``) and ``python -m analysis
--predict`` all call :func:`predict`. docs/design.md ("Prediction") states the model and its
assumptions; in short, per optimizer step and per rank::

    t_step   = t_compute x (1 + (pp-1)/(v m)) + t_optimizer + t_exposed   (m micro batches, v stages a rank)
    t_exposed = max(t_comm x (1 - overlap), t_comm - t_compute)       (data-parallel collectives)
              + t_tp + t_pp_send                                        (never overlapped)
    t_comm   = sum over collectives of bytes x factor / busbw          (nccl-tests' bus bandwidth)

``t_compute`` comes from a calibration record (the same model, kernel, precision, checkpointing
and micro batch measured at a smaller world size, or for the job and ``plan=true`` at the same
one: its step time less its optimizer and exposed communication, scaled by the micro batches per
rank and divided by ``tp x pp``), or, without one,
from the hardware FLOPs at :data:`UNCALIBRATED_GEMM_FRACTION` of the measured GEMM rate, or at
:data:`DATASHEET_GEMM_FRACTION` of the datasheet peak (said so in ``source``). ``factor`` is
nccl-tests' bus-bandwidth factor (:func:`busbw_factor`): ``(n-1)/n`` for all-gather and
reduce-scatter, ``2(n-1)/n`` for all-reduce, with ``bytes`` the full buffer (the gathered output,
the scattered input). Units: seconds, bytes, GB/s (1e9 bytes/s), FLOP.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from flopsweep import cost, identity
from flopsweep.identity import CALIBRATION_KEYS  # re-exported: the calibration's match

COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce")
"""The collectives the probe measures and the model counts (``system.interconnect[].collective``)."""

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

NVLINK_GBPS = {"H100 SXM": 450.0, "H200 SXM": 450.0, "H800 SXM": 200.0, "B200": 900.0}
"""NVLink bandwidth per GPU and direction, GB/s, by :mod:`flopsweep.peaks` row name: half the
datasheets' bidirectional figure (H100/H200 SXM 900 GB/s, H800 400 GB/s, B200 1.8 TB/s). A ring's
bus bandwidth cannot exceed it."""

ASSUMED_NVLINK_SHARE = 0.7
"""Without a probe, a configured bandwidth or profiled records, the bus bandwidth inside a node is
assumed to be this share of :data:`NVLINK_GBPS` (nccl-tests reach about 0.8 of it on an idle H100
node, 350-370 GB/s; inside a training step the collectives share the GPU with compute): stated in
``bandwidth_source``."""

DEFAULT_OVERLAP = {"ddp": 0.8, "fsdp": 0.8, "deepspeed": 0.5, "single": 0.0}
"""Share of the data-parallel communication hidden behind compute when no profiled record
(``metrics.breakdown``) of the backend calibrates it: assumed, and named ``assumed`` in
``overlap_source``. DDP buckets and FSDP2's prefetching overlap most of it; DeepSpeed ZeRO's hooks
less (our ZeRO-3 profiles show host-bound gaps)."""

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
        degrees: ``dp_replicate``, ``dp_shard``, ``tp``, ``pp``, ``cp`` (``system.parallel``).
        pp_microbatches: micro batches through the pipeline per step (default ``grad_accum``).
        pp_stages_per_rank: pipeline stages each rank holds (``Interleaved1F1B``: 2 or more).
        reshard_after_forward: FSDP2 all-gathers the parameters again in backward.
        model_flops, hardware_flops: per optimizer step over every rank, FLOP.
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

    def degree(self, name: str) -> int:
        return int(self.degrees.get(name, 1) or 1)

    @property
    def world_size(self) -> int:
        return math.prod(self.degree(d) for d in ("dp_replicate", "dp_shard", "tp", "pp", "cp"))

    @property
    def dp(self) -> int:
        return self.degree("dp_replicate") * self.degree("dp_shard")

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor (``doc/PERFORMANCE.md``): busbw = algbw x factor, so the
    time of a call of ``bytes`` is ``bytes x factor / busbw``. ``(n-1)/n`` for all-gather and
    reduce-scatter, ``2(n-1)/n`` for all-reduce; 0 for one rank.

    Raises:
        ValueError: an unknown collective or ``n < 1``.
    """
    if collective not in COLLECTIVES or n < 1:
        raise ValueError(f"busbw_factor: collective {collective!r} over {n} ranks")
    base = (n - 1) / n
    return 2 * base if collective == "all_reduce" else base


def transfers(w: Workload, *, gpus_per_node: int) -> list[Transfer]:
    """The collectives of one optimizer step of ``w``, per rank (docs/design.md, "Prediction").

    Data parallel (gradients synchronised once per step, parameters per micro batch for the
    sharded backends): DDP all-reduces ``4P`` (fp32 gradients) over ``dp``; FSDP2 all-gathers
    ``bP`` (``b`` = :data:`PARAM_BYTES`) per micro batch in forward and again in backward
    (``reshard_after_forward``) and reduce-scatters ``4P``, over ``dp_shard``, and with
    ``dp_replicate > 1`` (HSDP) all-reduces its ``4P / dp_shard`` gradient shard over
    ``dp_replicate``; ZeRO-1/2 reduce-scatter ``bP`` gradients and all-gather ``bP`` updated
    parameters; ZeRO-3 all-gathers ``bP`` forward and backward per micro batch and reduce-scatters
    ``bP``. ``P`` is divided by ``tp x pp`` (each rank's share of the model). Tensor parallel
    (sequence parallel: an all-gather and a reduce-scatter of ``micro x s x h x b`` per
    projection pair, the volume of one all-reduce): per layer and micro batch two in forward, two
    in backward and two more for the recomputed forward (:attr:`Workload.recompute_share`), never
    overlapped. Pipeline: at each stage boundary one send of a pipeline micro batch's activations
    (``s x h x b / tp`` per sequence) forward and one of its gradients backward per micro batch (a
    send is counted as an all-gather of two ranks' worth of bytes: ``bytes x 1/2`` at the busbw).
    The mesh is ``(pp, dp_replicate, dp_shard, cp, tp)`` with ``tp`` innermost
    (:mod:`flopsweep.mesh`): a group spans nodes when its ranks' stride times its size passes
    ``gpus_per_node``.
    """
    tp, pp, dp = w.degree("tp"), w.degree("pp"), w.dp
    b = PARAM_BYTES.get(w.precision, 2)
    p = w.n_params / (tp * pp)
    out: list[Transfer] = []
    if dp > 1:
        out += _data_parallel(w, p=p, b=b, gpus_per_node=gpus_per_node)
    if tp > 1:
        act = w.micro_batch_size * w.seq_len * w.n_embd * b
        per_layer = 4 + 2 * w.recompute_share
        out.append(
            Transfer(
                what="tensor-parallel activation all-gather and reduce-scatter",
                collective="all_reduce",
                bytes=act,
                count=round(per_layer * (w.n_layer // pp) * w.grad_accum),
                group=tp,
                across_nodes=tp > gpus_per_node,
                overlappable=False,
            )
        )
    if pp > 1:
        act = w.pp_microbatch_sequences * w.seq_len * w.n_embd * b / tp
        m = w.pp_microbatches or w.grad_accum
        out.append(
            Transfer(
                what="pipeline activation send (forward and backward)",
                collective="all_gather",
                bytes=2 * act,
                count=2 * m,
                group=2,
                across_nodes=tp * dp * pp > gpus_per_node,
                overlappable=False,
            )
        )
    return out


def _data_parallel(w: Workload, *, p: float, b: int, gpus_per_node: int) -> list[Transfer]:
    """The data-parallel collectives of :func:`transfers` (its docstring), ``p`` parameters per rank."""
    tp, shard, replicate = w.degree("tp"), w.degree("dp_shard"), w.degree("dp_replicate")
    micro = w.grad_accum if w.degree("pp") == 1 else 1  # with a pipeline, the stage gathers once per step
    sharded = w.backend == "fsdp" and replicate > 1  # HSDP: shard inside, replicate outside
    group = shard if sharded else w.dp
    span = tp * group  # the dp group is strided by tp
    across = span > gpus_per_node

    def t(what: str, collective: str, nbytes: float, count: int) -> Transfer:
        return Transfer(
            what=what, collective=collective, bytes=nbytes, count=count, group=group, across_nodes=across
        )

    out: list[Transfer] = []
    if w.backend == "ddp":
        out = [t("ddp gradient all-reduce (fp32)", "all_reduce", FP32 * p, 1)]
    elif w.backend == "fsdp":
        passes = 2 if w.reshard_after_forward else 1
        if group > 1:
            out = [
                t("fsdp parameter all-gather (forward, backward)", "all_gather", b * p, passes * micro),
                t("fsdp gradient reduce-scatter (fp32)", "reduce_scatter", FP32 * p, 1),
            ]
        if sharded:
            out.append(
                Transfer(
                    what="hsdp gradient shard all-reduce across replicas (fp32)",
                    collective="all_reduce",
                    bytes=FP32 * p / shard,
                    count=1,
                    group=replicate,
                    across_nodes=span * replicate > gpus_per_node,
                )
            )
    elif w.backend == "deepspeed":
        if (w.zero_stage or 3) >= 3:
            out = [
                t("zero-3 parameter all-gather (forward, backward)", "all_gather", b * p, 2 * micro),
                t("zero-3 gradient reduce-scatter", "reduce_scatter", b * p, 1),
            ]
        else:
            out = [
                t(f"zero-{w.zero_stage} gradient reduce-scatter", "reduce_scatter", b * p, 1),
                t(f"zero-{w.zero_stage} updated parameter all-gather", "all_gather", b * p, 1),
            ]
    return out


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
    runs ``target.grad_accum`` of them on ``1/(tp x pp)`` of the model, at ``compute_scale`` times the
    speed (1: the same GPU). A calibration of another micro batch scales by tokens
    (``target.micro_batch_size / calibration.micro_batch_size``), said so in ``source``. The
    optimizer (when the calibration's profile separates it, else it stays inside the compute)
    scales with the parameters each rank updates: ``1/dp_shard`` for the sharded backends,
    ``1/(tp x pp)`` always.

    Raises:
        PredictionError: a non-positive compute time after the subtraction.
    """
    opt = optimizer_s or 0.0
    fb = iteration_time_s - opt - exposed_comm_s
    if not fb > 0:
        raise PredictionError(f"calibration {source}: no compute time left ({iteration_time_s:.4g} s step)")
    per_micro = fb / calibration.grad_accum * calibration.degree("tp") * calibration.degree("pp")
    split = target.degree("tp") * target.degree("pp")
    tokens = target.micro_batch_size / calibration.micro_batch_size  # 1: the same micro batch
    compute = per_micro * tokens * target.grad_accum / split / compute_scale
    opt_target = opt * _shard(calibration) / _shard(target) / split / compute_scale
    how = "" if optimizer_s is not None else "; optimizer not separated (no profile): kept in compute"
    if tokens != 1:
        how += (
            f"; micro batch {calibration.micro_batch_size} -> {target.micro_batch_size}: compute scaled "
            "by tokens (a larger micro batch usually runs a little faster per token)"
        )
    return Compute(compute_s=compute, optimizer_s=opt_target, source=f"calibrated: {source}{how}")


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
    from flopsweep.peaks import lookup

    row = lookup(device_name) if device_name else None
    nvlink = NVLINK_GBPS.get(row.name) if row else None
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
    soft, hard = comm_seconds(transfers(w, gpus_per_node=gpus_per_node), link)
    share, share_source = overlap or (DEFAULT_OVERLAP.get(w.backend, 0.5), "assumed")
    exposed = max(soft * (1 - share), soft - compute.compute_s) + hard
    pp = w.degree("pp")
    m = w.pp_microbatches or w.grad_accum
    v = max(1, w.pp_stages_per_rank)  # interleaved: v stages per rank shrink the bubble v-fold
    bubble = compute.compute_s * (pp - 1) / (v * m) if pp > 1 else 0.0  # (p-1)/(vm+p-1) of the step
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
    )


# Records: the calibration side (the job, ``plan=true`` and ``analysis --predict`` share it).


def _get(record: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def backend_of(record: dict[str, Any]) -> str:
    """The record's backend with its ZeRO stage (``deepspeed-3``): what overlap and bandwidth
    calibrations group by."""
    name = _get(record, ("config", "backend", "name"))
    stage = _get(record, ("config", "backend", "zero_stage"))
    return f"{name}-{stage}" if name == "deepspeed" and stage is not None else str(name)


def calibration_key(
    record: dict[str, Any], *, micro_batch: bool = True, only: tuple[str, ...] | None = None
) -> str:
    """The :data:`CALIBRATION_KEYS` of a record (or of ``{"config": asdict(cfg)}``) as one text
    (:func:`flopsweep.identity.calibration_key`); without the micro batch when ``micro_batch`` is
    False; with ``only`` (one of the keys), that one value."""
    return identity.calibration_key(record, micro_batch=micro_batch, only=only)


def backend_differences(record: dict[str, Any], calibration: dict[str, Any]) -> list[str]:
    """The backend settings (``config.backend``) in which ``calibration`` differs from ``record``:
    the name (alone when it differs), the ZeRO stage and every knob (a knob that a record
    predates reads as its schema's default, :data:`flopsweep.options.OPTION_SCHEMAS`: the
    behaviour it ran with), as
    ``"backend.KEY VALUE vs CALIBRATION'S"`` texts; empty when they agree."""
    a = _backend_knobs(_get(record, ("config", "backend")) or {})
    b = _backend_knobs(_get(calibration, ("config", "backend")) or {})
    if a.get("name") != b.get("name"):  # another backend: its knobs are not comparable
        return [f"backend.name {a.get('name')} vs {b.get('name')}"]
    keys = sorted((a.keys() | b.keys()) - {"name"})
    return [f"backend.{k} {a.get(k)} vs {b.get(k)}" for k in keys if a.get(k) != b.get(k)]


def _backend_knobs(backend: dict[str, Any]) -> dict[str, Any]:
    """``config.backend`` with the knobs it lacks filled from its option's schema defaults."""
    import dataclasses

    from flopsweep.options import OPTION_SCHEMAS

    schema = OPTION_SCHEMAS["backend"].get(str(backend.get("name")))
    defaults = {
        f.name: f.default
        for f in (dataclasses.fields(schema) if schema else ())
        if f.default is not dataclasses.MISSING
    }
    return defaults | dict(backend)


def calibration_differences(record: dict[str, Any], calibration: dict[str, Any]) -> list[str]:
    """What a calibration record does not share with the run it would calibrate: each of
    :data:`CALIBRATION_KEYS` (model, attention, precision, checkpointing, compile, device, micro batch) and
    :func:`backend_differences`, as ``"KEY VALUE vs CALIBRATION'S"`` texts. Empty: a calibration
    of the same set-up; anything else is a borrowed record, not a calibration."""
    import json

    out = []
    for path in CALIBRATION_KEYS:
        mine, theirs = (json.loads(calibration_key(r, only=path)) for r in (record, calibration))
        if mine != theirs:
            a, b = _short(mine), _short(theirs)
            a, b = (a, b) if a != b else (json.dumps(mine, default=str), json.dumps(theirs, default=str))
            out.append(f"{'.'.join(path[1:])} {a} vs {b}")
    return out + backend_differences(record, calibration)


def _short(value: Any) -> str:
    """A config value for a one-line message (a policy dict by its name)."""
    if isinstance(value, dict):
        value = value.get("name", value)
    return str(value)


def _world(record: dict[str, Any]) -> int | None:
    world = _get(record, ("system", "world_size"))
    return world if isinstance(world, int) and not isinstance(world, bool) and world > 0 else None


def pick_calibration(
    key: str,
    world: int,
    backend: str | None,
    records: Iterable[tuple[str, dict[str, Any]]],
    *,
    backend_config: dict[str, Any] | None = None,
    hostname: str | None = None,
    micro_batch: bool = True,
    same_backend: bool = False,
    started_at: str | None = None,
    same_world: bool = False,
) -> tuple[str, dict[str, Any]] | None:
    """The calibration of a run (``key`` from :func:`calibration_key`, on ``world`` ranks): an
    ``ok`` record of ``records`` (``(name, record)`` pairs) with the same key at a smaller world
    size and a step time; the same backend first, then the same ZeRO stage (of ``backend_config``),
    then the same host (``hostname``: the same machine's GPUs, clocks and power limit), then the
    same backend knobs (``backend_config``), then the largest world size, then the nearest in time
    to ``started_at`` (ISO 8601, the run's ``run.started_at``: the same lease of a machine whose
    lent copies share one hostname), then the first name. None when there is none. With
    ``micro_batch`` False, ``key`` is one without the micro batch (:func:`calibration_key`), and
    any micro batch matches. With ``same_backend``, only a record of the same backend, stage and
    knobs (:func:`backend_differences` empty against ``backend_config``) counts: the strict
    calibration of the two-GPU check. With ``same_world``, a record on ``world`` ranks counts too
    (then first, as the largest): the job and ``plan=true`` predict from the best record there is,
    and a measured step of the set-up itself is that; the analysis keeps to smaller world sizes,
    whose predictions test the model rather than repeat a measurement."""
    fits = [
        (name, r)
        for name, r in records
        if r.get("status") == "ok"
        and calibrates_world(_world(r), world, same_world=same_world)
        and isinstance(_get(r, ("metrics", "iteration_time_s", "mean")), int | float)
        and calibration_key(r, micro_batch=micro_batch) == key
    ]
    own = {"config": {"backend": backend_config}}
    if same_backend:
        fits = [(n, r) for n, r in fits if backend_config and not backend_differences(own, r)]
    if not fits:
        return None
    stage = backend_of(own) if backend_config else backend
    fits.sort(
        key=lambda nr: (
            _get(nr[1], ("config", "backend", "name")) != backend,
            backend_of(nr[1]) != stage,
            hostname is None or _get(nr[1], ("system", "hostname")) != hostname,
            backend_config is None or bool(backend_differences(own, nr[1])),
            _get(nr[1], ("config", "backend")) != backend_config,  # knobs it predates: after
            -(_world(nr[1]) or 0),
            _seconds_apart(_get(nr[1], ("run", "started_at")), started_at),
            nr[0],
        )
    )
    return fits[0]


def calibrates_world(calibration: int | None, world: int, *, same_world: bool = False) -> bool:
    """Whether a record on ``calibration`` ranks (None: unknown, read as ``world``) may calibrate a
    run on ``world``: a smaller world size, or with ``same_world`` also the same one
    (:func:`pick_calibration`)."""
    ranks = calibration or world
    return ranks <= world if same_world else ranks < world


def _seconds_apart(a: Any, b: str | None) -> float:
    """Seconds between two ISO 8601 times; 0 without ``b``, infinite for an unreadable ``a``."""
    from datetime import datetime

    if b is None:
        return 0.0
    try:
        return abs((datetime.fromisoformat(str(a)) - datetime.fromisoformat(b)).total_seconds())
    except (TypeError, ValueError):
        return math.inf


def workload_from_record(record: dict[str, Any], *, degrees: dict[str, int] | None = None) -> Workload:
    """The :class:`Workload` of a record (its config, ``model.n_params``, ``system.parallel`` and
    the FLOPs of its metrics); ``degrees`` replaces its layout (FLOPs scale with ``dp``).

    Raises:
        PredictionError: a record without the counts the model needs.
    """
    cfg, m, metrics = record.get("config") or {}, record.get("model") or {}, record.get("metrics") or {}
    own = _get(record, ("system", "parallel")) or {"dp_shard": _world(record) or 1}
    n_params, model_flops = m.get("n_params"), metrics.get("model_flops_per_iteration")
    if not isinstance(n_params, int) or not isinstance(model_flops, int | float):
        raise PredictionError("the record has no model.n_params or metrics.model_flops_per_iteration")
    hardware_flops = metrics.get("hardware_flops_per_iteration") or model_flops
    own_dp = int(own.get("dp_replicate", 1) or 1) * int(own.get("dp_shard", 1) or 1)
    new = dict(degrees or own)
    scale = int(new.get("dp_replicate", 1) or 1) * int(new.get("dp_shard", 1) or 1) / own_dp
    backend, batch, parallel = cfg.get("backend") or {}, cfg.get("batch") or {}, cfg.get("parallel") or {}
    return Workload(
        backend=backend.get("name", "single"),
        zero_stage=backend.get("zero_stage"),
        precision=(cfg.get("precision") or {}).get("name", "bf16"),
        n_params=n_params,
        n_layer=int(m.get("n_layer") or cfg.get("model", {}).get("n_layer") or 1),
        n_embd=int(m.get("n_embd") or cfg.get("model", {}).get("n_embd") or 1),
        seq_len=int(m.get("seq_len") or cfg.get("model", {}).get("seq_len") or 1),
        micro_batch_size=int(batch.get("micro_batch_size") or 1),
        grad_accum=int(batch.get("grad_accum") or 1),
        degrees={k: int(v) for k, v in new.items() if isinstance(v, int)},
        pp_microbatches=parallel.get("pp_microbatches"),
        pp_stages_per_rank=int(parallel.get("pp_stages_per_rank") or 1),
        reshard_after_forward=bool(backend.get("reshard_after_forward", True)),
        model_flops=float(model_flops) * scale,
        hardware_flops=float(hardware_flops) * scale,
    )


def optimizer_family(record: dict[str, Any]) -> str | None:
    """Which optimizer a record's step runs, for :func:`optimizer_rate`: ``torch`` (``AdamW`` of
    ``single``, ``ddp``, ``fsdp``), ``deepspeed-fused`` or ``deepspeed-torch``
    (``backend.optimizer_impl``; a record before the key ran the fused one); None when it steps on
    the host (``cpu_offload``, ``offload_optimizer``), which no GPU rate describes."""
    backend = _get(record, ("config", "backend")) or {}
    if backend.get("cpu_offload") or backend.get("offload_optimizer") not in (None, "none"):
        return None
    if backend.get("name") == "deepspeed":
        return f"deepspeed-{backend.get('optimizer_impl') or 'fused'}"
    return "torch"


def _separates_optimizer(b: Any) -> bool:
    """A profile whose ``optimizer_s`` is the optimizer's whole work: CUDA profiles before
    ``optimizer_from`` undercount it (docs/design.md, "Profiling")."""
    return (
        isinstance(b, dict)
        and (b.get("step_s") or 0) > 0
        and b.get("optimizer_s") is not None
        and (b.get("view") != "cuda" or "optimizer_from" in b)
    )


def _shard(w: Workload) -> int:
    """The ranks that split the optimizer's states (FSDP2 and ZeRO), 1 for DDP and one rank."""
    return w.degree("dp_shard") if w.backend in ("fsdp", "deepspeed") else 1


def optimizer_rate(records: Iterable[tuple[str, dict[str, Any]]], family: str) -> tuple[float, str] | None:
    """Seconds of optimizer step per parameter a rank updates, for ``family``
    (:func:`optimizer_family`): each ok record's profiled ``optimizer_s`` (scaled to its mean step)
    over its parameters per rank (``n_params / (tp x pp x shard)``), median over the records whose
    profile separates the optimizer (:func:`_separates_optimizer`); without any, over the CUDA
    profiles before ``optimizer_from``, which undercount it (``lower bound`` in the source); with
    the records named. A memory-bound step: it does not depend on the model or the world size, only
    on the GPU and the optimizer. None without a profiled record of ``family``."""
    for whole in (True, False):
        found = _optimizer_rates(records, family, whole=whole)
        if found:
            names = ", ".join(n for n, _ in found[:3])
            what = "median" if whole else "lower bound (profiles before optimizer_from): median"
            return _median([v for _, v in found]), f"{what} of {len(found)} ({names})"
    return None


def _optimizer_rates(
    records: Iterable[tuple[str, dict[str, Any]]], family: str, *, whole: bool
) -> list[tuple[str, float]]:
    """:func:`optimizer_rate`'s ``(name, seconds per parameter)`` pairs; ``whole``: only profiles
    that separate the optimizer, else only those that undercount it."""
    pairs = []
    for name, r in records:
        b = _get(r, ("metrics", "breakdown"))
        step = _get(r, ("metrics", "iteration_time_s", "mean"))
        if r.get("status") != "ok" or optimizer_family(r) != family or not isinstance(b, dict):
            continue
        if (b.get("step_s") or 0) <= 0 or not (b.get("optimizer_s") or 0) > 0:
            continue
        if _separates_optimizer(b) != whole:
            continue
        try:
            w = workload_from_record(r)
        except PredictionError:
            continue
        per_rank = w.n_params / (w.degree("tp") * w.degree("pp") * _shard(w))
        if isinstance(step, int | float) and per_rank > 0:
            pairs.append((name, b["optimizer_s"] * step / b["step_s"] / per_rank))
    return pairs


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


HOST_BOUND = 0.2
"""The share of a calibration's profiled step in which the GPU idles (``breakdown.idle_s / step_s``)
above which its prediction's source says it is host-bound: the model has no host term, so the
idle is carried over as compute. The H200 records: DDP and FSDP2 one-GPU calibrations idle 2-4%
and predict within 5%; DeepSpeed's idle 27-50% on one GPU against 10-35% on two, and its pairs miss
by 9-40% (benchmarks/RESULTS.md, "Predicted step time")."""


def calibration_compute(
    target: Workload,
    name: str,
    record: dict[str, Any],
    *,
    compute_scale: float = 1.0,
    rate: tuple[float, str] | None = None,
) -> Compute:
    """:func:`compute_from_calibration` from a calibration record: its mean step time; its
    optimizer and exposed communication from its profile (``metrics.breakdown``, scaled to the mean
    step) when it has one; an optimizer that the record's profile does not separate is ``rate``
    (seconds per parameter a rank updates, :func:`optimizer_rate`, and its source) times the
    calibration's parameters per rank, else it stays in the compute; without a profile, a
    multi-rank calibration's exposed communication is the model's own, at its probe's
    bandwidths."""
    cal = workload_from_record(record)
    step = float(_get(record, ("metrics", "iteration_time_s", "mean")))
    b = _get(record, ("metrics", "breakdown"))
    optimizer = exposed = None
    how = ""
    if isinstance(b, dict) and (b.get("step_s") or 0) > 0:
        ratio = step / b["step_s"]
        optimizer = b["optimizer_s"] * ratio if _separates_optimizer(b) else None
        exposed = (b.get("exposed_comm_s") or 0.0) * ratio
    if optimizer is None and rate is not None:
        optimizer = rate[0] * cal.n_params / (cal.degree("tp") * cal.degree("pp") * _shard(cal))
        how = f" (optimizer {rate[0] * 1e12:.3g} ps per parameter a rank updates: {rate[1]})"
    if (
        isinstance(b, dict)
        and (b.get("step_s") or 0) > 0
        and (b.get("idle_s") or 0) / b["step_s"] > HOST_BOUND
    ):
        how += (
            f"; host-bound: the GPU idles {b['idle_s'] / b['step_s']:.0%} of its profiled step, carried "
            "over unchanged (no host term)"
        )
    if exposed is None and cal.world_size > 1:
        link = link_from_probe(_get(record, ("system", "interconnect")), source=name)
        soft, hard = comm_seconds(transfers(cal, gpus_per_node=cal.world_size), link)
        share = DEFAULT_OVERLAP.get(cal.backend, 0.5)
        rough = step - soft - hard
        exposed = max(soft * (1 - share), soft - rough) + hard
    return compute_from_calibration(
        target,
        calibration=cal,
        iteration_time_s=step,
        source=name + how,
        optimizer_s=optimizer,
        exposed_comm_s=exposed or 0.0,
        compute_scale=compute_scale,
    )


def overlap_from_records(
    backend: str, records: Iterable[tuple[str, dict[str, Any]]]
) -> tuple[float, str] | None:
    """:func:`calibrated_overlap` over the ``ok`` multi-rank records with a profile whose backend
    (:func:`backend_of`: ``fsdp``, ``deepspeed-3``; a bare ``deepspeed`` matches every stage) is
    ``backend``."""
    return calibrated_overlap(
        (name, _get(r, ("metrics", "breakdown")))
        for name, r in records
        if r.get("status") == "ok"
        and (_world(r) or 1) > 1
        and backend in (backend_of(r), _get(r, ("config", "backend", "name")))
    )


def calibrated_busbw(
    records: Iterable[tuple[str, dict[str, Any]]], *, backend: str | None = None
) -> tuple[float, str] | None:
    """The bus bandwidth (GB/s) that profiled multi-rank records imply: each record's data-parallel
    bytes x factor (:func:`transfers`) over its profiled ``comm_s``, median over records; with the
    records named. The communication of a profile runs beside compute, so this is the bandwidth
    the collectives get inside a step, not the link's bare speed. With ``backend``, only its
    records (:func:`backend_of`). None without such records."""
    pairs = []
    for name, r in records:
        if backend is not None and backend_of(r) != backend:
            continue
        b = _get(r, ("metrics", "breakdown"))
        if (
            r.get("status") != "ok"
            or (_world(r) or 1) < 2
            or not isinstance(b, dict)
            or not (b.get("comm_s") or 0) > 0
        ):
            continue
        try:
            w = workload_from_record(r)
        except PredictionError:
            continue
        moved = sum(
            x.count * x.bytes * busbw_factor(x.collective, x.group)
            for x in transfers(w, gpus_per_node=w.world_size)
        )
        if moved > 0:
            pairs.append((name, moved / b["comm_s"] / 1e9))
    if not pairs:
        return None
    values = sorted(v for _, v in pairs)
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    return median, f"profiled: median of {len(pairs)} ({', '.join(n for n, _ in pairs[:3])})"


def predict_record(
    name: str, record: dict[str, Any], records: Sequence[tuple[str, dict[str, Any]]]
) -> dict[str, Any]:
    """``metrics.predicted`` for a measured record that lacks one (``python -m analysis
    --predict``): calibrated from ``records`` (:func:`pick_calibration`, never ``name`` itself),
    else uncalibrated at its measured GEMM rate; bandwidths from its own probe
    (``system.interconnect``), else the calibration's; overlap from the profiled records of its
    backend among ``records``, else assumed; without any probe, the bandwidth that the profiled
    records among ``records`` imply (:func:`calibrated_busbw`). Made from inputs that predate its
    measured steps, the other records aside.

    Returns:
        :meth:`Prediction.as_dict`, or ``{iteration_time_s: None, tokens_per_s: None,
        source: "no prediction: <why>"}``.
    """
    try:
        target = workload_from_record(record)
        world = target.world_size
        others = [(n, r) for n, r in records if n != name]
        picked = pick_calibration(
            calibration_key(record),
            world,
            target.backend,
            others,
            backend_config=_get(record, ("config", "backend")),
            hostname=_get(record, ("system", "hostname")),
            started_at=_get(record, ("run", "started_at")),
        )
        metrics = record.get("metrics") or {}
        if picked:
            family = optimizer_family(picked[1])
            compute = calibration_compute(
                target, *picked, rate=optimizer_rate(others, family) if family else None
            )
        else:
            compute = compute_uncalibrated(target, gemm_tflops=metrics.get("measured_matmul_tflops"))
        own = _get(record, ("system", "interconnect"))
        link = link_from_probe(own, source="the run's probe")
        if not link.intra and picked:
            link = link_from_probe(
                _get(picked[1], ("system", "interconnect")), source="the calibration's probe"
            )
        own_backend = backend_of(record)
        bus = calibrated_busbw(others, backend=own_backend) or calibrated_busbw(others)
        if not link.intra and bus:
            link = Link(intra=dict.fromkeys(COLLECTIVES, bus[0]), source=bus[1])
        nproc = _get(record, ("system", "nproc_per_node"))
        result = predict(
            target,
            compute,
            link,
            gpus_per_node=nproc if isinstance(nproc, int) and nproc > 0 else world,
            overlap=overlap_from_records(own_backend, others) or overlap_from_records(target.backend, others),
            peak_tflops=metrics.get("peak_tflops"),
        )
    except PredictionError as exc:
        return {"iteration_time_s": None, "tokens_per_s": None, "source": f"no prediction: {exc}"}
    return result.as_dict()
