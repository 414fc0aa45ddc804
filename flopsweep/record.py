"""The ``metrics.json`` record: schema constants, metric specs, and the builders of its parts.

Torch-free: the job, the Hydra callbacks and the analysis all import it. The
record is the only contract between a run and the analysis; docs/metrics.md lists
every key. Metric values of a run that is not ``ok`` are null, never 0; what was known before
any rank started (:data:`PRE_RUN_METRICS`: the memory estimate, the prediction) is its
``run.before_run`` (:data:`BEFORE_RUN`) instead. A record is strict JSON: a non-finite number is
written as null (with a flag), never as ``NaN``.

Adding a metric: compute it in the worker or :mod:`flopsweep.metrics`, and add a
:class:`MetricSpec` line to ``METRIC_SPECS``; the analysis derives its columns,
units and ranking direction (``better``) from that table.

Writing and reading the file is :mod:`flopsweep.files` (:func:`~flopsweep.files.atomic_write_json`,
:func:`~flopsweep.safe_read.read_json`); what a rank hands the job is :mod:`flopsweep.wire`.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopsweep.free_folder import another
from flopsweep.wire import ErrorInfo

SCHEMA_VERSION = 2
METRICS_FILE = "metrics.json"
STATUSES = ("ok", "oom", "error", "invalid")
PHASES = ("config", "init", "warmup", "measure", "launch")


@dataclass(frozen=True)
class MetricSpec:
    """One key of ``metrics``.

    Attributes:
        key: the key in ``metrics``.
        unit: its unit (``s``, ``1/s``, ``FLOP``, ``TFLOP/s``, ``bytes``, ``GiB``, ``J``, ``W``, ``MHz``,
            ``USD``, ``kWh``, ``GPU h``, ``1`` for a ratio, ``count``, ``""`` for text or structures).
        better: which way is better, ``higher`` (rates, TFLOPs, MFU) or ``lower`` (times, memory),
            or ``None`` (not a figure of merit: counts, FLOPs, peaks, text). The analysis sorts
            and ranks by it: best first.
        header: the short column header in tables.
        column: the analysis column, when it differs from ``key`` (a scaled or nested value).
        path: the path inside ``metrics`` when nested (``iteration_time_s.mean``).
        scale: divide by this for the column (bytes -> GiB).
        description: one line for the legend.
    """

    key: str
    unit: str
    better: str | None
    header: str
    description: str
    column: str | None = None
    path: tuple[str, ...] | None = None
    scale: float | None = None

    @property
    def name(self) -> str:
        """The analysis column name."""
        return self.column or self.key


GIB = float(2**30)

METRIC_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "iteration_time_s",
        "s",
        "lower",
        "iter_s(mean)",
        "mean seconds per optimizer step",
        column="iteration_time_s_mean",
        path=("iteration_time_s", "mean"),
    ),
    MetricSpec(
        "iteration_time_s",
        "s",
        "lower",
        "iter_s(median)",
        "median seconds per optimizer step",
        column="iteration_time_s_median",
        path=("iteration_time_s", "median"),
    ),
    MetricSpec(
        "iteration_time_s",
        "1",
        "lower",
        "cv",
        "coefficient of variation of the step times",
        column="iteration_time_s_cv",
        path=("iteration_time_s", "cv"),
    ),
    MetricSpec("tokens_per_s", "1/s", "higher", "tokens/s", "global tokens per second (from the mean step)"),
    MetricSpec("tokens_per_s_per_device", "1/s", "higher", "tokens/s/dev", "tokens per second per device"),
    MetricSpec("global_batch_size", "", None, "gbs", "sequences per optimizer step over all ranks"),
    MetricSpec("tokens_per_step", "", None, "tok/step", "tokens per optimizer step over all ranks"),
    MetricSpec(
        "model_flops_per_iteration",
        "FLOP",
        None,
        "model_FLOP",
        "work the model needs per step: every weight matmul fwd+bwd, attention x density, no recompute",
    ),
    MetricSpec(
        "hardware_flops_per_iteration",
        "FLOP",
        None,
        "hw_FLOP",
        "model FLOPs plus the activation-checkpointing recompute that runs",
    ),
    MetricSpec(
        "model_tflops_per_device",
        "TFLOP/s",
        "higher",
        "TFLOPs",
        "model FLOPs / (mean step time x world size)",
    ),
    MetricSpec(
        "hardware_tflops_per_device",
        "TFLOP/s",
        "higher",
        "hw_TFLOPs",
        "hardware FLOPs / (mean step time x world size)",
    ),
    MetricSpec(
        "tflops_per_device",
        "TFLOP/s",
        "higher",
        "eq3_TFLOPs",
        "Narayanan et al. eq. 3 as published (dense, f = 4 with checkpointing); null for Llama",
    ),
    MetricSpec("mfu", "1", "higher", "MFU", "model TFLOPs / dense bf16 (or run precision) datasheet peak"),
    MetricSpec("hfu", "1", "higher", "HFU", "hardware TFLOPs / datasheet peak"),
    MetricSpec("peak_tflops", "TFLOP/s", None, "peak", "datasheet dense peak used for MFU/HFU"),
    MetricSpec("peak_tflops_source", "", None, "peak_src", "where the peak comes from"),
    MetricSpec(
        "measured_matmul_tflops",
        "TFLOP/s",
        None,
        "gemm_TFLOPs",
        "dense GEMM rate measured on the device at the run's matmul precision",
    ),
    MetricSpec("matmul_fraction", "1", "higher", "gemm_frac", "model TFLOPs / measured_matmul_tflops"),
    MetricSpec("peak_tflops_fp8", "TFLOP/s", None, "peak_fp8", "datasheet dense fp8 peak (fp8 runs)"),
    MetricSpec("mfu_fp8", "1", "higher", "MFU_fp8", "model TFLOPs / dense fp8 peak (fp8 runs)"),
    MetricSpec(
        "peak_cuda_allocated_bytes",
        "bytes",
        "lower",
        "alloc_GiB",
        "peak allocated GPU memory, max over ranks",
        column="peak_cuda_allocated_gib",
        scale=GIB,
    ),
    MetricSpec(
        "predicted_peak_gib",
        "GiB",
        None,
        "pred_GiB",
        "the plan's estimate of the peak allocated GPU memory per rank (max over ranks), made before "
        "the run (flopsweep.memory); also on the CPU, where nothing measures it",
    ),
    MetricSpec(
        "cuda_alloc_retries",
        "count",
        "lower",
        "alloc_retries",
        "times the CUDA caching allocator freed its cache and retried cudaMalloc in the measured "
        "steps, max over ranks (each retry synchronises the device: memory too tight for speed)",
    ),
    MetricSpec(
        "peak_cuda_reserved_bytes",
        "bytes",
        "lower",
        "resv_GiB",
        "peak reserved GPU memory, max over ranks",
        column="peak_cuda_reserved_gib",
        scale=GIB,
    ),
    MetricSpec(
        "peak_host_rss_bytes",
        "bytes",
        "lower",
        "rss_GiB",
        "peak host resident memory, max over ranks",
        column="peak_host_rss_gib",
        scale=GIB,
    ),
    MetricSpec("swap_used_bytes", "bytes", "lower", "swap", "host swap in use at the end"),
    MetricSpec("per_rank", "", None, "per_rank", "per-rank memory figures"),
    MetricSpec("loss_first", "", None, "loss0", "mean loss of the first step (warm-up included)"),
    MetricSpec("loss_last", "", None, "loss", "mean loss of the last measured step"),
    MetricSpec("loss_finite", "", None, "loss_ok", "false when any step's loss was NaN or infinite"),
    MetricSpec("warmup_steps", "", None, "warmup", "warm-up steps run (steps.warmup plus any extra)"),
    MetricSpec("unsteady_steps", "", None, "unsteady", "measured steps over 3x the median of the others"),
    MetricSpec(
        "recompute",
        "",
        None,
        "recompute",
        "checkpointing recompute: none, early_stop, selective (full: older compiled)",
    ),
    MetricSpec("fp8_layers", "", None, "fp8_layers", "nn.Linear layers converted to float8 (fp8 runs)"),
    MetricSpec(
        "routing_imbalance",
        "1",
        "lower",
        "imbalance",
        "MoE routing: busiest expert's tokens over the mean per expert, max over layers (parallel.ep > 1)",
    ),
    MetricSpec("flops_convention", "", None, "convention", "how the FLOPs figures are counted"),
    MetricSpec(
        "energy_j",
        "J",
        None,
        "energy_J",
        "GPU energy over the measured window (NVML counter), sum over ranks; null on the CPU",
    ),
    MetricSpec(
        "energy_sampled_j",
        "J",
        None,
        "energy_smp_J",
        "integral of the GPU power sampled every 0.05 s in the same window, sum over ranks (checks energy_J)",
    ),
    MetricSpec(
        "joules_per_token",
        "J",
        "lower",
        "J/token",
        "GPU energy per token trained: energy_J / tokens measured",
    ),
    MetricSpec(
        "power_w_mean", "W", "lower", "W/GPU", "mean power per GPU: energy_J / (measured seconds x GPUs)"
    ),
    MetricSpec("sm_clock_mhz_mean", "MHz", None, "sm_MHz", "mean sampled SM clock, mean over ranks"),
    MetricSpec(
        "throttle_reasons",
        "",
        None,
        "throttle",
        "clock event (throttle) reasons seen in the window: sw_power_cap, hw_slowdown, sw_thermal, ...",
    ),
    MetricSpec("energy_reason", "", None, "energy_why", "why the energy figures are null (CPU, no counter)"),
    MetricSpec(
        "usd_per_million_tokens",
        "USD",
        "lower",
        "$/Mtok",
        "US dollars per million tokens at cost.usd_per_gpu_hour",
    ),
    MetricSpec(
        "budget",
        "tokens",
        None,
        "budget_tok",
        "budget.tokens: the token budget priced in the budget_* columns",
        column="budget_tokens",
        path=("budget", "tokens"),
    ),
    MetricSpec(
        "budget",
        "GPU h",
        "lower",
        "budget_GPUh",
        "GPU-hours to train budget.tokens at the measured rate",
        column="budget_gpu_hours",
        path=("budget", "gpu_hours"),
    ),
    MetricSpec(
        "budget",
        "days",
        "lower",
        "budget_days",
        "days to train budget.tokens on this run's world size",
        column="budget_days",
        path=("budget", "days"),
    ),
    MetricSpec(
        "budget",
        "kWh",
        "lower",
        "budget_kWh",
        "GPU energy to train budget.tokens (joules_per_token x tokens; no host, network or cooling)",
        column="budget_energy_kwh",
        path=("budget", "energy_kwh"),
    ),
    MetricSpec(
        "budget",
        "USD",
        "lower",
        "budget_USD",
        "US dollars to train budget.tokens at cost.usd_per_gpu_hour",
        column="budget_usd",
        path=("budget", "usd"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "prof_step_s",
        "profile=true: wall time of the one profiled step (after the measured ones)",
        column="breakdown_step_s",
        path=("breakdown", "step_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "compute_s",
        "profiled step: busy compute time (not communication, not the optimizer)",
        column="breakdown_compute_s",
        path=("breakdown", "compute_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "optim_s",
        "profiled step: optimizer step (clip, update, zero) not overlapped by compute",
        column="breakdown_optimizer_s",
        path=("breakdown", "optimizer_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "exp_comm_s",
        "profiled step: communication not overlapped by any compute",
        column="breakdown_exposed_comm_s",
        path=("breakdown", "exposed_comm_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "idle_s",
        "profiled step: nothing runs (on a GPU: host-bound time); the four parts sum to prof_step_s",
        column="breakdown_idle_s",
        path=("breakdown", "idle_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "comm_s",
        "profiled step: all communication, overlapped or not",
        column="breakdown_comm_s",
        path=("breakdown", "comm_s"),
    ),
    MetricSpec(
        "predicted",
        "s",
        None,
        "pred_s",
        "step time predicted before the run (flopsweep.predict: calibration, probes, config)",
        column="predicted_iteration_time_s",
        path=("predicted", "iteration_time_s"),
    ),
    MetricSpec(
        "predicted",
        "1/s",
        None,
        "pred_tok/s",
        "global tokens per second predicted before the run",
        column="predicted_tokens_per_s",
        path=("predicted", "tokens_per_s"),
    ),
    MetricSpec(
        "predicted",
        "",
        None,
        "pred_src",
        "what the prediction is calibrated from (a record's path), or uncalibrated",
        column="predicted_source",
        path=("predicted", "source"),
    ),
    MetricSpec(
        "predicted",
        "",
        None,
        "pred_from",
        "what the predicted compute came from: probe (timed pieces), calibration (a record) or flops "
        "(executed FLOPs at a fraction of the measured GEMM rate)",
        column="predicted_compute_source",
        path=("predicted", "compute_source"),
    ),
    MetricSpec(
        "probe_s",
        "s",
        None,
        "probe_s",
        "seconds rank 0 spent in the step-time probes before warm-up (predict.layer_probe's and "
        "predict.probe's wall_s); null when neither ran",
    ),
    MetricSpec(
        "probe_share",
        "1",
        "lower",
        "probe_share",
        "probe_s over the job's wall time (run.wall_s): what the probes cost of the run they predict",
    ),
)
"""Every metric of the record, in record order (a key may have several columns)."""

METRIC_KEYS: tuple[str, ...] = tuple(dict.fromkeys(spec.key for spec in METRIC_SPECS))
"""The keys of ``metrics``, each once."""


def error(
    type_: str,
    message: str,
    phase: str | None,
    rank: int | None = None,
    traceback: str | None = None,
    *,
    traceback_text: str | None = None,
):
    """``record.error`` as a dict (see :class:`ErrorInfo`)."""
    info = ErrorInfo(
        type=type_,
        message=message,
        phase=phase,
        rank=rank,
        traceback=traceback,
        traceback_text=traceback_text,
    )
    return info.as_dict()


def null_metrics() -> dict[str, Any]:
    """Metrics of a run that produced none: every key present, every value null."""
    return dict.fromkeys(METRIC_KEYS)


PRE_RUN_METRICS = ("predicted_peak_gib", "predicted")
"""The metrics known before any rank starts: the memory estimate (``predicted_peak_gib``, GiB per rank,
:func:`flopsweep.memory.estimate`) and the step-time prediction (``predicted``,
:func:`flopsweep.forecast.prediction`, which reads no measured step). An ``ok`` record has them under
``metrics``; one that is not ``ok`` has every metric null and these under :data:`BEFORE_RUN`."""

BEFORE_RUN = "before_run"
"""The ``run`` key of a record that is not ``ok``: ``{"predicted_peak_gib": <GiB or null>, "predicted":
<object or null>}`` (:data:`PRE_RUN_METRICS`, :func:`flopsweep.job.records.before_run`) where its job
passed the launch's checks, null where it never did (a config ``invalid``, a lost Slurm job); absent
from an ``ok`` record."""


def value_at(record: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` (keys from the top) of a record (a parsed ``metrics.json``, or any nest
    of dicts): ``value_at(r, ("system", "world_size"))`` is ``r["system"]["world_size"]``. None where
    a key is missing or a level on the way is not a dict (an older or damaged record); never raises."""
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def strict(value: Any, path: str = "", flagged: list[str] | None = None) -> Any:
    """``value`` with every non-finite float replaced by null, for strict JSON.

    Each replaced path is appended to ``flagged`` (``metrics.loss_last``), so that the
    record can say what it nulled.
    """
    if isinstance(value, float) and not math.isfinite(value):
        if flagged is not None:
            flagged.append(path)
        return None
    if isinstance(value, dict):
        return {k: strict(v, f"{path}.{k}" if path else str(k), flagged) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v, f"{path}[{i}]", flagged) for i, v in enumerate(value)]
    return value


def record_path_problem(path: Path) -> str | None:
    """Why a run must not start that would write its record to ``path``, or None (absent, or a
    regular file).

    Links are never records where the sweep writes: ``metrics.json`` as a symbolic link (dangling,
    looping or to a file) or a FIFO, a device, a socket or a directory is refused, checked with
    ``lstat`` before the run (the finished record could not take its name, and the measurement
    would be lost). The analysis skips such paths with a reason.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be checked ({exc.strerror}); fix its directory or choose another one"
    if stat.S_ISREG(st.st_mode):
        return None
    what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
    return (
        f"{path} is {what}, not a run record: the run's record could not take its place. "
        f"Fix: remove or rename it, then run again (or {another(Path(path).parent, either=True)})"
    )


def exists_message(path: Path) -> str:
    """The refusal to overwrite ``path``, naming it and the two ways out."""
    return (
        f"{path} already exists; refusing to overwrite a run record. Use a new output directory "
        "(hydra.run.dir / hydra.sweep.dir), or resume=true to keep ok records and re-run the rest."
    )
