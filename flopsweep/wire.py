"""What a rank hands the job process: its figures and, when it failed, its error.

Torch-free and imports nothing of flopsweep: the worker fills these on each rank, rank 0
gathers them into the scratch directory, and the job process (:mod:`flopsweep.metrics`,
:mod:`flopsweep.launch`) reads them into the record (``metrics.per_rank``, ``error``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class ErrorInfo:
    """``record.error``: why a run is not ``ok``.

    Attributes:
        type: the exception class name (``ConfigError``, ``OutOfMemoryError``, ``Timeout``...).
        message: one paragraph.
        phase: one of :data:`flopsweep.record.PHASES`.
        rank: the global rank that failed first, or None (the job itself).
        traceback: path of that rank's traceback file, or None.
        traceback_text: that rank's traceback itself, only when the rank could not write its own
            files (its directory read-only or full) and torch kept it instead; the key is
            absent otherwise.
    """

    type: str
    message: str
    phase: str | None
    rank: int | None = None
    traceback: str | None = None
    traceback_text: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["traceback_text"] is None:
            del out["traceback_text"]
        return out


@dataclass(frozen=True, kw_only=True)
class RankFigures:
    """What one rank measured; rank 0 gathers one per rank, and ``metrics.per_rank`` keeps the
    memory, GEMM and energy part of each (:data:`PER_RANK_KEYS`).

    Attributes:
        rank: global rank.
        device: ``torch.cuda.get_device_name`` or ``"cpu"``.
        cpu_threads: this rank's intra-op threads (``torch.get_num_threads()``: ``OMP_NUM_THREADS``
            when set, else :func:`flopsweep.worker.cpu_threads` on the CPU); rank 0's is the record's
            ``system.cpu_threads``.
        step_times_s: seconds per measured optimizer step on this rank.
        losses: mean loss per step run (warm-up and measured), null where not finite.
        peak_cuda_allocated_bytes, peak_cuda_reserved_bytes: since the measured steps began;
            null on the CPU.
        peak_host_rss_bytes: the process's peak resident set.
        cuda_alloc_retries: times the CUDA caching allocator freed its cache and retried
            ``cudaMalloc`` during the measured steps (``num_alloc_retries`` of
            ``torch.cuda.memory_stats``; each retry synchronises the device); null on the CPU.
        matmul_tflops: the measured dense GEMM rate at the run's matmul precision, TFLOP/s.
        compute_probe: ``predict.probe=true``, rank 0 only: the compute probe's pieces, seconds
            (:func:`flopsweep.compute_probe.probe_compute`), measured before warm-up; else null.
        layer_probe: ``predict.layer_probe=true``, rank 0 only: the layer probe's depths and the
            slowest rank's median step at each (:func:`flopsweep.layer_probe.probe_layers`), measured
            before warm-up; else null.
        interconnect: rank 0 only (null on the others): the interconnect probe's
            ``[{collective, bytes, busbw_gbps, time_s, ranks, ran}]`` over every rank, measured
            before warm-up (:func:`flopsweep.collectives.probe_interconnect`); ``[]`` on one rank.
            The record's ``system.interconnect``.
        warmup_steps: warm-up steps run (``steps.warmup`` plus any extra).
        fp8_layers: Linear layers converted to float8, null when the run is not fp8.
        expert_tokens: ``parallel.ep > 1``: tokens this rank's router sent to each expert of each MoE
            layer over the measured steps, ``[layer][expert]``
            (:func:`flopsweep.expert_parallel.routed_tokens`); null otherwise.
        optimizer: the optimizer that steps on this rank, read from the built trainer
            (:func:`flopsweep.backends.optimizer_facts`: ``{class, fused, foreach, in_backward}``);
            rank 0's is the record's ``system.optimizer``.
        unsteady_steps: measured steps over 3x the median of the others.
        breakdown: ``profile=true`` only: the profiled step's parts, seconds
            (:class:`flopsweep.profile.StepBreakdown`).
        profile_problem: ``profile=true`` only: why this rank has no breakdown (its trace could
            not be written or read), else null; the record's warnings carry it.
        energy_j: the GPU's energy counter over the measured window, J (NVML,
            :class:`flopsweep.energy.NvmlReader`); null on the CPU or without the counter.
        energy_sampled_j: the trapezoid integral of the power sampled in the window, J.
        energy_window_s: the window on the host's clock (first to last power sample), s.
        power_w_sampled_mean: ``energy_sampled_j / energy_window_s``, W.
        sm_clock_mhz_mean: mean sampled SM clock, MHz.
        throttle_reasons: the clock event (throttle) reasons seen in the window
            (:data:`flopsweep.energy.THROTTLE_REASONS` names).
        power_limit_w: the enforced power limit, W.
        power_samples: power samples taken in the window.
        energy_reason: why ``energy_j`` is null (one line), else null.
    """

    rank: int
    device: str
    step_times_s: list[float]
    losses: list[float | None]
    peak_cuda_allocated_bytes: int | None
    peak_cuda_reserved_bytes: int | None
    peak_host_rss_bytes: int
    cpu_threads: int | None = None
    cuda_alloc_retries: int | None = None
    matmul_tflops: float | None = None
    interconnect: list[dict[str, Any]] | None = None
    compute_probe: dict[str, Any] | None = None
    layer_probe: dict[str, Any] | None = None
    warmup_steps: int = 0
    fp8_layers: int | None = None
    expert_tokens: list[list[int]] | None = None
    optimizer: dict[str, Any] | None = None
    unsteady_steps: list[int] = field(default_factory=list)
    breakdown: dict[str, Any] | None = None
    profile_problem: str | None = None
    energy_j: float | None = None
    energy_sampled_j: float | None = None
    energy_window_s: float | None = None
    power_w_sampled_mean: float | None = None
    sm_clock_mhz_mean: float | None = None
    throttle_reasons: list[str] | None = None
    power_limit_w: float | None = None
    power_samples: int | None = None
    energy_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


ENERGY_KEYS = (
    "energy_j",
    "energy_sampled_j",
    "energy_window_s",
    "power_w_sampled_mean",
    "sm_clock_mhz_mean",
    "throttle_reasons",
    "power_limit_w",
    "power_samples",
    "energy_reason",
)
"""What :class:`flopsweep.energy.NvmlReader` reports, keyed by :class:`RankFigures` field names."""

PER_RANK_KEYS = (
    "rank",
    "device",
    "peak_cuda_allocated_bytes",
    "peak_cuda_reserved_bytes",
    "peak_host_rss_bytes",
    "cuda_alloc_retries",
    "matmul_tflops",
    *ENERGY_KEYS,
)
"""The keys of each ``metrics.per_rank`` entry (a part of :class:`RankFigures`)."""
