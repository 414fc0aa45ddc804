"""What an ``oom`` record says of the memory estimate made before the run: the ``oom_estimate`` warning
(:func:`oom_estimate_line`), which sets ``run.before_run.predicted_peak_gib`` beside the device memory the
out-of-memory error names, and the fixes of a run that does not fit its memory (:data:`GPU_MEMORY_FIX`,
:data:`HOST_MEMORY_FIX`, also ``plan=true``'s, :func:`flopsweep.job.planprint.plan_unfit_line`).

Torch-free: the record assembly (:mod:`flopsweep.job.records`) imports it in the sweep process too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

GPU_MEMORY_FIX = (
    "shard it over more GPUs (backend=fsdp or zero3, nproc_per_node, nnodes), set "
    "activation_checkpointing=full or a smaller batch.micro_batch_size"
)
"""The fix of a set-up whose estimate (or run) is over its GPU's memory, where its config is not at hand
(or its estimate fails): every lever that lowers the memory per rank. With the config,
:func:`flopsweep.memory_fix.gpu_memory_fix` names only the levers it has not pulled, each estimated."""

HOST_MEMORY_FIX = (
    "pick a smaller model or micro batch (batch.micro_batch_size), or fewer ranks (nproc_per_node)"
)
"""The fix of a CPU set-up over the host's memory (every rank of the node in it)."""

OVER_MEMORY = "memory_estimate: "
"""How the warning of :func:`over_memory_line` begins (the launch's, in the record's ``warnings``)."""

OOM_ESTIMATE = "oom_estimate: "
"""How the warning of :func:`oom_estimate_line` begins (in the record's ``warnings``; the job logs it
after the oom's own line)."""

UNITS = {"B": 1, "bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
"""The size units torch's caching allocator prints (``c10::CachingAllocator::format_size``)."""

_CAPACITY = re.compile(
    r"total capacity of (?P<a>\d+(?:\.\d+)?) (?P<ua>bytes|B|KiB|MiB|GiB|TiB)"  # torch 2.1 and later
    r"|(?P<b>\d+(?:\.\d+)?) (?P<ub>bytes|B|KiB|MiB|GiB|TiB) total capacity"  # torch 2.0 and before
)
"""The device's total memory in torch's CUDA out-of-memory message: ``GPU 0 has a total capacity of
79.18 GiB of which ...`` (torch >= 2.1), ``GPU 0; 79.15 GiB total capacity; ...`` (before)."""


def device_capacity_gib(message: Any) -> float | None:
    """The device's total memory, GiB, that torch's CUDA out-of-memory ``message`` names
    (:data:`_CAPACITY`); None for another message (a CPU allocation, an injected fault, a
    ``CUDA error: out of memory`` from a kernel), or a size that is not positive and finite."""
    if not isinstance(message, str):
        return None
    found = _CAPACITY.search(message[:4000])
    if found is None:
        return None
    number, unit = (found["a"], found["ua"]) if found["a"] is not None else (found["b"], found["ub"])
    gib = float(number) * UNITS[unit] / 2**30
    return gib if math.isfinite(gib) and gib > 0 else None


def oom_estimate_line(
    predicted_gib: Any, error: dict[str, Any] | None, fix: str | Callable[[float], str] = GPU_MEMORY_FIX
) -> str | None:
    """The ``oom_estimate`` warning of an ``oom`` record: ``run.before_run.predicted_peak_gib``
    (``predicted_gib``, GiB per rank, made before any rank started) against the device's total memory
    that ``error``'s message names (:func:`device_capacity_gib`), whether the estimate said the run
    would fit, and ``fix``: a text, or a function of the capacity in bytes that gives it (the run's own
    levers: :func:`flopsweep.memory_fix.gpu_memory_fix`); :data:`GPU_MEMORY_FIX` by default. None without
    either figure.

    ``oom_estimate: the memory estimate before the run was 85.3 GiB per rank
    (run.before_run.predicted_peak_gib), over the GPU's 79.2 GiB (the capacity the out-of-memory error
    names): it said the run would not fit. Fix: ...``
    """
    capacity = device_capacity_gib((error or {}).get("message"))
    if capacity is None or isinstance(predicted_gib, bool) or not isinstance(predicted_gib, int | float):
        return None
    if not (math.isfinite(predicted_gib) and predicted_gib > 0):
        return None
    said = (
        f"over the GPU's {capacity:.1f} GiB (the capacity the out-of-memory error names): it said the run "
        "would not fit (plan=true shows it before a run: est_peak_gib_per_rank, fits)"
        if predicted_gib > capacity
        else f"within the GPU's {capacity:.1f} GiB (the capacity the out-of-memory error names): the run "
        "needed more than estimated (docs/memory.md lists what the estimate misses)"
    )
    return (
        f"{OOM_ESTIMATE}the memory estimate before the run was {predicted_gib:.1f} GiB per rank "
        f"(run.before_run.predicted_peak_gib), {said}. Fix: {fix(capacity * 2**30) if callable(fix) else fix}"
    )


def over_memory_line(
    predicted_gib: Any,
    capacity_bytes: Any,
    gpu: str | None,
    fix: str | Callable[[float], str] = GPU_MEMORY_FIX,
) -> str | None:
    """The launch's warning when the memory estimate (``metrics.predicted_peak_gib``, ``predicted_gib``
    GiB per rank, made before any rank starts) is over the memory of the GPU the ranks will run on
    (``capacity_bytes``, ``torch.cuda.get_device_properties(0).total_memory``; ``gpu`` its name): the
    run is likely to run out of memory, which the user learns here rather than after its start-up
    (one H100, 2026-12-05: OLMoE 1B-7B at micro batch 2, estimated 106 GiB, ran out of memory in
    warm-up on the 79.2 GiB). Only a warning: the estimate's error on the committed records is a few
    percent (docs/memory.md), and a run near the edge may still fit. None when the estimate is within
    the capacity or either figure is missing or not a positive finite number. ``fix``: as
    :func:`oom_estimate_line`'s (a function is called only when the line is made).

    ``memory_estimate: the memory estimate is 106.0 GiB per rank (metrics.predicted_peak_gib), over
    this GPU's 79.2 GiB (NVIDIA H100 80GB HBM3): the run will likely run out of memory. Fix: ...``
    """
    numbers = (predicted_gib, capacity_bytes)
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in numbers):
        return None
    if not all(math.isfinite(v) and v > 0 for v in numbers):
        return None
    capacity = capacity_bytes / 2**30
    if predicted_gib <= capacity:
        return None
    named = f" ({gpu})" if gpu else ""
    return (
        f"{OVER_MEMORY}the memory estimate is {predicted_gib:.1f} GiB per rank (metrics.predicted_peak_gib), "
        f"over this GPU's {capacity:.1f} GiB{named}: the run will likely run out of memory. "
        f"Fix: {fix(capacity_bytes) if callable(fix) else fix}"
    )
