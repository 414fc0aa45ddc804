"""The per-rank compute time of a step (:mod:`flopsweep.steptime`), torch-free, from the first that
is known of: the compute probe's pieces (:func:`compute_from_probe` over :class:`ProbeTimes`), a
calibration record of the same set-up (:func:`compute_from_calibration`), or the executed FLOPs at a
stated share of the GEMM rate (:func:`compute_uncalibrated`). :mod:`flopsweep.steptime` re-exports
every name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopsweep.backend_specs import backend_spec
from flopsweep.clusters import HINT_GPU, set_plan_gpu
from flopsweep.text import figure
from flopsweep.workload import Compute, PredictionError, Workload

UNCALIBRATED_GEMM_FRACTION = 0.6
"""Without a calibration record, compute runs at this fraction of the measured (or datasheet) dense
GEMM rate. Our committed H200 runs reach 0.65-0.75 of the measured rate in model FLOPs (gpt-1.3b
eager 484/670, Llama 3.1 8B compiled with full checkpointing 0.55 in hardware FLOPs): 0.6 is a
round figure below them, stated in every uncalibrated ``source``."""

DATASHEET_GEMM_FRACTION = 0.45
"""Without a calibration record or a measured GEMM rate (``plan=true plan_gpu=NAME`` on a laptop),
compute runs at this fraction of the datasheet dense peak (:mod:`flopsweep.peaks`). Our committed
H200 runs reach 0.43-0.52 of the 989.4 TFLOP/s peak in hardware FLOPs (HFU: Llama 3.1 8B compiled
with full checkpointing 0.51, eager 0.43; gpt-1.3b FSDP eager 0.52): 0.45 is a round figure near
the bottom of them, stated in every such ``source``."""


@dataclass(frozen=True, kw_only=True)
class ProbeTimes:
    """The compute probe's times (:mod:`flopsweep.compute_probe`), seconds, at the run's shapes on one
    GPU, unsplit: ``block_s`` one decoder block's forward and backward of one micro batch (the run's
    kernel, precision, checkpointing and compile), ``head_s`` the embedding, head and loss's, and
    ``block_optimizer_s``/``head_optimizer_s`` the run's AdamW step (with its clip) over one block's
    parameters and over the embedding and head's. ``on_host``: the optimizer was timed on the host
    (FSDP2's ``cpu_offload``, ZeRO-Offload); ``block_params``/``head_params``: the parameters of one
    block (the layer-weighted mean) and of the embedding and head, None where the probe predates them
    (method 3)."""

    block_s: float
    head_s: float
    block_optimizer_s: float
    head_optimizer_s: float
    on_host: bool = False
    block_params: float | None = None
    head_params: float | None = None

    @classmethod
    def of(cls, probe: dict[str, Any]) -> ProbeTimes:
        """From the probe's dict (``metrics.predicted.probe``; ``optimizer_device``, ``block_params``
        and ``head_params`` where it has them).

        Raises:
            PredictionError: a time missing, not positive or not finite.
        """
        names = ("block_s", "head_s", "block_optimizer_s", "head_optimizer_s")
        bad = [n for n in names if not _positive(probe.get(n))]
        if bad:
            raise PredictionError(f"the compute probe has no usable {', '.join(bad)}")
        counts = {n: float(probe[n]) for n in ("block_params", "head_params") if _positive(probe.get(n))}
        return cls(
            **{n: float(probe[n]) for n in names}, on_host=probe.get("optimizer_device") == "cpu", **counts
        )

    def head_optimizer(self) -> tuple[float, str]:
        """``(seconds, said)``: the embedding and head's optimizer step, ``said`` what ``source`` adds
        ("" for the probed time). On the host with both counts known, the block's rate per parameter times
        the head's parameters (:data:`HOST_HEAD_RULE`): the probe's head piece gives the tied embedding
        gradients whose AdamW second moments are mostly subnormal (no block between the embedding and
        the head, so each token's own row dominates its logits), which a CPU steps several times slower;
        the run's, through its blocks, are not. On the GPU (subnormals at full speed) the probed time."""
        if not (self.on_host and self.block_params and self.head_params):
            return self.head_optimizer_s, ""
        rate = self.block_optimizer_s / self.block_params
        seconds = rate * self.head_params
        said = HOST_HEAD_RULE.format(
            rate=figure(rate * 1e9), probed=figure(self.head_optimizer_s / self.head_params * 1e9)
        )
        return seconds, said


HOST_HEAD_RULE = (
    "host optimizer: the head's {probed} ns a parameter replaced by the block's {rate} "
    "(its probe's subnormal moments; docs/prediction-host-optimizer.md)"
)
"""What a probed ``source`` adds where :meth:`ProbeTimes.head_optimizer` took the block's rate."""


def _positive(value: Any) -> bool:
    """A finite positive number (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")


def compute_from_probe(w: Workload, probe: ProbeTimes, *, source: str = "probe") -> Compute:
    """The per-rank compute of ``w`` from probed pieces (docs/prediction.md)::

        t_c   = accum x (l / pp x t_block + t_head) / (tp x cp)        (the pipeline's last stage)
        t_opt = (l x t_block_opt + t_head_opt) / (tp x pp x shards)

    ``t_head_opt`` on the host is the block's rate per parameter times the head's parameters
    (:meth:`ProbeTimes.head_optimizer`) where the probe names both counts.

    ``accum`` micro batches a rank runs, ``l`` blocks, ``shards`` the ranks that split the optimizer
    states (:func:`optimizer_shards`). As with a calibration, tensor and context parallelism split each
    piece evenly (their smaller GEMMs are slower), and the bubble follows from ``t_c`` (:func:`predict`)."""
    split = w.degree("tp") * w.degree("cp")
    stage = w.n_layer / w.degree("pp") * probe.block_s + probe.head_s
    states = w.weight_split * optimizer_shards(w)
    head_opt, said = probe.head_optimizer()
    opt = (w.n_layer * probe.block_optimizer_s + head_opt) / states
    return Compute(
        compute_s=w.grad_accum * stage / split,
        optimizer_s=opt,
        source=f"{source}: {w.n_layer} x block {figure(probe.block_s * 1e3, 4)} ms + head "
        f"{figure(probe.head_s * 1e3, 4)} ms a micro batch" + (f"; {said}" if said else ""),
        kind="probe",
    )


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
        PredictionError: a non-positive compute time after the subtraction, in one line naming
            ``predict.calibration``, the record, its figures and the fix.
    """
    opt = optimizer_s or 0.0
    fb = iteration_time_s - opt - exposed_comm_s
    if not fb > 0:
        raise PredictionError(
            f"predict.calibration={source}: its {figure(iteration_time_s, 4)} s step leaves no compute "
            "time once "
            f"its optimizer ({figure(opt, 4)} s) and exposed communication ({figure(exposed_comm_s, 4)} s) "
            "are taken out. "
            "Fix: give another record of this set-up (predict.calibration=PATH)"
        )
    per_micro = fb / calibration.grad_accum * calibration.work_split
    tokens = target.micro_batch_size / calibration.micro_batch_size  # 1: the same micro batch
    compute = per_micro * tokens * target.grad_accum / target.work_split / compute_scale
    opt_target = opt * optimizer_shards(calibration) / optimizer_shards(target)
    opt_target = opt_target / target.weight_split / compute_scale
    how = "" if optimizer_s is not None else "; optimizer not separated (no profile): kept in compute"
    if tokens != 1:
        how += (
            f"; micro batch {calibration.micro_batch_size} -> {target.micro_batch_size}: compute scaled "
            "by tokens (a larger micro batch usually runs a little faster per token)"
        )
    return Compute(
        compute_s=compute, optimizer_s=opt_target, source=f"calibrated: {source}{how}", kind="calibration"
    )


def compute_uncalibrated(
    target: Workload,
    *,
    gemm_tflops: float | None,
    what: str = "measured",
    calibration: str | None = None,
    gpu: str = HINT_GPU,
    cast: tuple[float, str] | None = None,
    device: str | None = None,
) -> Compute:
    """The target's per-rank compute without a calibration: the FLOPs it executes per rank
    (:attr:`Workload.executed_flops`: the hardware FLOPs, the attention square halved for kernels
    that skip the masked tiles) at
    :data:`UNCALIBRATED_GEMM_FRACTION` of a measured ``gemm_tflops`` (TFLOP/s), or at
    :data:`DATASHEET_GEMM_FRACTION` of it when ``what`` names a datasheet peak (``H100 SXM
    datasheet``).

    Args:
        calibration: ``predict.calibration`` as given (None: unset), which the error names.
        gpu: the GPU the error's ``plan_gpu=NAME`` example names (:func:`flopsweep.clusters.example_gpu`:
            the one ``plan_clusters`` names, else the peak table's first).
        cast: ``(seconds, words)`` of an eager fp8 run's float8 casts (:func:`flopsweep.fp8_cast.cast_time`),
            added to the compute and said in ``source``; None: none (compiled, not fp8).
        device: the command's ``device``; ``cpu``: the fix says ``drop device=cpu and set plan_gpu=``
            (:func:`flopsweep.clusters.set_plan_gpu`), as ``device=cpu plan_gpu=`` is refused.

    Raises:
        PredictionError: no GEMM rate (a CPU plan has neither a probe nor a datasheet peak), in one
            line ``<key>=<value>: <why>. Fix: <what>``.
    """
    if not gemm_tflops or gemm_tflops <= 0:
        fix = "give predict.calibration=PATH (a one-GPU record of the same set-up)"
        if what != "measured":  # plan_gpu named a device whose datasheet has no peak for this precision
            raise PredictionError(
                f"precision={target.precision}: uncalibrated, and the {' '.join(what.split())} gives no "
                f"peak for it. Fix: {fix}"
            )
        raise PredictionError(
            f"predict.calibration={calibration or 'null'}: uncalibrated, and no GEMM rate is known (no GPU "
            f"probe, no datasheet). Fix: {fix}, or {set_plan_gpu('NAME', device)} for its datasheet peak "
            f"(e.g. {set_plan_gpu(gpu, device)})"
        )
    share = UNCALIBRATED_GEMM_FRACTION if what == "measured" else DATASHEET_GEMM_FRACTION
    rate = share * gemm_tflops * 1e12
    executed = target.executed_flops or target.hardware_flops
    return Compute(
        compute_s=executed / target.world_size / rate + (cast[0] if cast else 0.0),
        optimizer_s=0.0,
        source=f"uncalibrated: executed FLOPs at {figure(share, 6)} x the {what} GEMM rate "
        f"({figure(gemm_tflops, 4)} TFLOP/s)" + (f" + {cast[1]}" if cast else ""),
    )


def optimizer_shards(w: Workload) -> int:
    """The ranks that split the optimizer's states (FSDP2 and ZeRO: ``dp_shard``), 1 for DDP and one
    rank (:meth:`flopsweep.backend_specs.BackendSpec.optimizer_shards`)."""
    spec = backend_spec(w.backend)
    return spec.optimizer_shards(w) if spec else 1


def exposed_optimizer_s(optimizer_s: float, forward_s: float, hidden_share: float) -> float:
    """Seconds of the optimizer step that ``optim.overlap_forward`` leaves on the step: the blocks'
    share ``hidden_share`` (0..1: their parameters over the model's) of ``optimizer_s`` runs beside the
    next forward (``forward_s``), so at most ``forward_s`` of it is hidden; the rest (the embedding, the
    norm, the head) is waited for at the forward's start."""
    hidden = min(optimizer_s * max(0.0, min(1.0, hidden_share)), max(0.0, forward_s))
    return optimizer_s - hidden
