"""The ``metrics.json`` record (schema_version 1): build it, write it atomically.

The record is the only contract between a run and the analysis. Metric values
of a run that is not ``ok`` are null, never 0.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import socket
import statistics
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from flopsweep import flops
from flopsweep.config import RunConfig

SCHEMA_VERSION = 1
METRICS_FILE = "metrics.json"
STATUSES = ("ok", "oom", "error", "invalid")

METRIC_KEYS = (
    "iteration_time_s",
    "tokens_per_s",
    "tokens_per_s_per_device",
    "tflops_per_device",
    "model_tflops_per_device",
    "mfu",
    "hfu",
    "peak_tflops",
    "peak_tflops_source",
    "peak_cuda_allocated_bytes",
    "peak_cuda_reserved_bytes",
    "per_rank",
    "peak_host_rss_bytes",
    "swap_used_bytes",
    "loss_first",
    "loss_last",
)


class RecordExistsError(FileExistsError):
    """Raised instead of writing over an existing ``metrics.json``."""


def atomic_write_json(path: Path, payload: dict[str, Any], *, overwrite: bool = True) -> None:
    """Write JSON to a temporary file in the same directory, fsync it, then rename.

    A reader sees the whole file or none. With ``overwrite=False`` an existing
    file is refused.

    Raises:
        RecordExistsError: when ``overwrite`` is false and ``path`` exists.
    """
    path = Path(path)
    if not overwrite and path.exists():
        raise RecordExistsError(
            f"{path} already exists; refusing to overwrite a run record. "
            "Use a new output directory (hydra.run.dir / hydra.sweep.dir)."
        )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(payload, fh, indent=2, allow_nan=False)
        fh.flush()
        os.fsync(fh.fileno())
    if not overwrite and path.exists():  # lost a race with another writer
        tmp.unlink()
        raise RecordExistsError(f"{path} appeared while writing; refusing to overwrite it.")
    os.replace(tmp, path)


def null_metrics() -> dict[str, Any]:
    """Metrics of a run that produced none: every key present, every value null."""
    return dict.fromkeys(METRIC_KEYS)


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "std": statistics.pstdev(values),
        "values": values,
    }


def compute_metrics(cfg: RunConfig, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Headline metrics from the per-rank figures gathered by rank 0.

    Iteration time of step ``i`` is the slowest rank's time for that step. TFLOPs use
    the mean iteration time and :func:`flopsweep.flops.flops_per_iteration` with
    ``B = micro_batch_size x grad_accum x world_size``; ``tflops_per_device`` counts
    the recomputed forward under activation checkpointing (hardware FLOPs),
    ``model_tflops_per_device`` never does.

    Args:
        ranks: one dict per rank with ``step_times_s``, ``losses`` (warm-up and
            measured steps, each the mean over micro batches), peak memory figures.
    """
    import psutil

    world = len(ranks)
    steps = [max(times) for times in zip(*(r["step_times_s"] for r in ranks), strict=True)]
    it = _summary(steps)
    m, b = cfg.model, cfg.batch
    global_batch = b.micro_batch_size * b.grad_accum * world
    args = (m.n_layer, m.n_embd, m.seq_len, m.vocab_size, global_batch)
    hw_flops = flops.flops_per_iteration(*args, activation_checkpointing=cfg.activation_checkpointing)
    model_flops = flops.flops_per_iteration(*args, activation_checkpointing=False)
    tflops = flops.tflops_per_device(hw_flops, it["mean"], world)
    model_tflops = flops.tflops_per_device(model_flops, it["mean"], world)
    peak, source = flops.peak_tflops(ranks[0]["device"], cfg.precision.name)
    tokens_per_s = global_batch * m.seq_len / it["mean"]
    losses = [statistics.fmean(step) for step in zip(*(r["losses"] for r in ranks), strict=True)]
    cuda_alloc = [r["peak_cuda_allocated_bytes"] for r in ranks]
    cuda_res = [r["peak_cuda_reserved_bytes"] for r in ranks]
    return {
        "iteration_time_s": it,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_device": tokens_per_s / world,
        "tflops_per_device": tflops,
        "model_tflops_per_device": model_tflops,
        "mfu": model_tflops / peak if peak else None,
        "hfu": tflops / peak if peak else None,
        "peak_tflops": peak,
        "peak_tflops_source": source,
        "peak_cuda_allocated_bytes": None if None in cuda_alloc else max(cuda_alloc),
        "peak_cuda_reserved_bytes": None if None in cuda_res else max(cuda_res),
        "per_rank": [
            {
                k: r[k]
                for k in (
                    "rank",
                    "device",
                    "peak_cuda_allocated_bytes",
                    "peak_cuda_reserved_bytes",
                    "peak_host_rss_bytes",
                )
            }
            for r in ranks
        ],
        "peak_host_rss_bytes": max(r["peak_host_rss_bytes"] for r in ranks),
        "swap_used_bytes": psutil.swap_memory().used,
        "loss_first": losses[0],
        "loss_last": losses[-1],
    }


def sanity_problem(cfg: RunConfig, metrics: dict[str, Any]) -> str | None:
    """Why measured figures cannot be real, or None. Such a run gets status ``invalid``."""
    times = metrics["iteration_time_s"]["values"]
    if len(times) < cfg.steps.measure:
        return f"measured {len(times)} steps but steps.measure={cfg.steps.measure}"
    if min(times) <= 0:
        return f"a measured step took {min(times)} s"
    if metrics["hfu"] is not None and metrics["hfu"] > 1.0:
        return (
            f"{metrics['tflops_per_device']:.1f} TFLOPs per device exceeds the device peak "
            f"{metrics['peak_tflops']} ({metrics['peak_tflops_source']}): the timing cannot be real"
        )
    if not all(map(_finite, (metrics["loss_first"], metrics["loss_last"]))):
        return None  # a diverged loss is a finding, not a timing error
    return None


def _finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")


def model_info(cfg: RunConfig) -> dict[str, Any]:
    m = cfg.model
    return {
        "name": m.name,
        "n_layer": m.n_layer,
        "n_embd": m.n_embd,
        "n_head": m.n_head,
        "seq_len": m.seq_len,
        "vocab_size": m.vocab_size,
        "n_params": flops.n_params(m.n_layer, m.n_embd, m.seq_len, m.vocab_size),
    }


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def system_info(device: str, world_size: int, device_name: str | None = None) -> dict[str, Any]:
    """Host and software versions; ``device_name`` from rank 0 when it ran."""
    import torch

    cuda = device == "cuda" and torch.cuda.is_available()
    return {
        "hostname": socket.gethostname(),
        "device_name": device_name or (torch.cuda.get_device_name(0) if cuda else "cpu"),
        "device_count": torch.cuda.device_count() if cuda else 0,
        "world_size": world_size,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "deepspeed": _version("deepspeed"),
        "xformers": _version("xformers"),
        "python": platform.python_version(),
        "git_sha": _git_sha(),
    }


def build_record(
    *,
    cfg: RunConfig,
    status: str,
    error: dict[str, Any] | None,
    run: dict[str, Any],
    system: dict[str, Any],
    metrics: dict[str, Any] | None,
) -> dict[str, Any]:
    """The schema v1 record; ``metrics=None`` gives every metric key as null."""
    assert status in STATUSES, status
    return {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "error": error,
        "run": run,
        "config": dataclasses.asdict(cfg),
        "model": model_info(cfg),
        "system": system,
        "metrics": metrics if metrics is not None and status == "ok" else null_metrics(),
    }
