"""The step-time model: a run's iteration time at N GPUs, from a compute time and the interconnect.

Torch-free, one place (its calibration from records: :mod:`flopsweep.predict`, which re-exports
every name here): the job (``metrics.predicted``, made before the measured steps), ``plan=true``
(a row per job, on this machine or a cluster described by ``predict.*``) and ``python -m analysis
--predict`` all call :func:`predict`. docs/prediction.md states the model and its
assumptions; in short, per optimizer step and per rank::

    t_step   = t_compute x (1 + (pp-1)/(v m)) + t_optimizer + t_exposed   (m micro batches, v stages a rank)
    (``optim.overlap_forward``: t_optimizer less the blocks' share of it hidden behind the next forward,
    at most t_compute / (3 + recompute): :func:`flopsweep.compute_time.exposed_optimizer_s`)
    t_exposed = max(t_comm x (1 - overlap), t_comm - t_compute)       (data-parallel collectives)
              + t_tp + t_pp_send                                        (never overlapped)
    t_comm   = sum over collectives of bytes x factor / busbw          (nccl-tests' bus bandwidth)

``t_compute`` comes from the compute probe (``predict.probe``, :func:`compute_from_probe`), else a
calibration record (the same model, kernel, precision, checkpointing and micro batch measured at a
smaller world size, or for the job and ``plan=true`` at the same one: its step time less its
optimizer and exposed communication, scaled by the micro batches per rank and divided by the ranks
that share a batch, ``cp x tp x pp``), or, without one, from the executed FLOPs (the hardware
FLOPs, the causal square halved) at :data:`UNCALIBRATED_GEMM_FRACTION` of the measured GEMM rate,
or at :data:`DATASHEET_GEMM_FRACTION` of the datasheet peak (said so in ``source``). ``factor`` is
nccl-tests' bus-bandwidth factor (:func:`busbw_factor`): ``(n-1)/n`` for all-gather and
reduce-scatter, ``2(n-1)/n`` for all-reduce, with ``bytes`` the full buffer (the gathered output, the
scattered input). Units: seconds, bytes, GB/s (1e9 bytes/s), FLOP.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from flopsweep import cost
from flopsweep.comm_time import (  # noqa: F401 - steptime.X, as every caller and the docs name them
    ASSUMED_NVLINK_SHARE,
    DEFAULT_OVERLAP,
    NO_INTER_NODE_FIX,
    NO_INTRA_NODE_FIX,
    NVLINK_GBPS,
    UNKNOWN_OVERLAP,
    assumed_link,
    busbw_factor,
    calibrated_overlap,
    comm_seconds,
    data_parallel_transfers,
    default_overlap,
    foreign_bandwidth,
    link_from_probe,
    transfers,
)
from flopsweep.compute_time import (  # noqa: F401 - steptime.X, as every caller and the docs name them
    DATASHEET_GEMM_FRACTION,
    HOST_HEAD_RULE,
    UNCALIBRATED_GEMM_FRACTION,
    ProbeTimes,
    compute_from_calibration,
    compute_from_probe,
    compute_uncalibrated,
    exposed_optimizer_s,
    optimizer_shards,
)
from flopsweep.workload import (  # noqa: F401 - steptime.X, as every caller and the docs name them
    COLLECTIVES,
    FP32,
    MODELLED,
    PARAM_BYTES,
    Compute,
    Link,
    PredictionError,
    Transfer,
    Workload,
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
    """:attr:`Compute.kind`: ``layers``, ``probe``, ``calibration``, ``nearest`` or ``flops``."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    optimizer = compute.optimizer_s
    if w.overlap_share > 0:  # optim.overlap_forward: the blocks' steps beside the next forward
        forward = compute.compute_s / (3 + w.recompute_share)  # backward 2x, the recompute its share
        optimizer = exposed_optimizer_s(optimizer, forward, w.overlap_share)
    step = compute.compute_s + bubble + optimizer + exposed
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
        optimizer_s=optimizer,
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
