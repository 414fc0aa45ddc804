"""How long a CPU run takes at the most, counted before it starts: the check that a fix flopsweep
suggests for a CPU run (a smaller ``model.seq_len`` that fits the free host memory,
:func:`flopsweep.job.hostcheck.check_free_host_memory`) also ends within the run's ``timeout_s``.

Was: ``device=cpu model.seq_len=1048576`` was refused for host memory with ``Fix: set
model.seq_len=262144``, which fits the memory but whose steps (attention's ``s^2`` term: about 0.7 PFLOP a
step of gpt-tiny) take hours on a CPU; typed back, it ran into ``timeout_s`` in init (``timeout_s=120``:
``error: timeout: no result within timeout_s=120 s``; at the default 1800 s the same).

Torch-free.
"""

from __future__ import annotations

from typing import Any

CPU_CORE_FLOPS = 25e9
"""FLOP/s one usable core is counted to run (hardware FLOPs, the full attention square): about half of
what the slowest measurement gave, so that the count is an upper bound of the time. Measured: gpt-tiny at
``model.seq_len=8192``, one rank on a 2-core machine at load 2.3-3.0, 8.4 s a step, 0.109 TFLOP/s of
model FLOPs (54.5 GFLOP/s a core; 2026-12-07)."""

PROBE_STEPS = 3
"""Steps the CPU step probe takes at the least before the run (:mod:`flopsweep.cpu_probe`: the first,
then 2 more once the steps are past its 0.5 s budget), counted as steps of the whole model."""

START_S = 30.0
"""Seconds counted for the ranks' start (the imports of torch, the build) before the first step."""


def steps_counted(cfg: Any) -> int:
    """The most optimizer steps a run takes: :data:`PROBE_STEPS`, ``steps.warmup``,
    ``steps.max_extra_warmup`` and ``steps.measure``."""
    s = cfg.steps
    return PROBE_STEPS + s.warmup + s.max_extra_warmup + s.measure


def run_seconds(cfg: Any, tokens_per_step: int, cores: int, nnodes: int = 1) -> float:
    """The longest a CPU run of ``cfg`` is counted to take, in seconds: :data:`START_S` plus
    :func:`steps_counted` steps of its hardware FLOPs (:func:`flopsweep.metrics.hardware_flops` at the
    layout's attention density; the model FLOPs where the recompute is the compiler's) at
    :data:`CPU_CORE_FLOPS` a core on ``cores`` cores of each of ``nnodes`` nodes (the ranks of a node share
    its cores).

    Args:
        tokens_per_step: tokens of one optimizer step over every rank (global batch x ``model.seq_len``).
        cores: the usable cores of a node (:func:`flopsweep.worker.usable_cores`), at least 1 counted.
    """
    from flopsweep.attention import attention_density
    from flopsweep.metrics import hardware_flops
    from flopsweep.models import family

    density = attention_density(cfg.attention, cfg.model.seq_len)
    flops = hardware_flops(cfg, tokens_per_step, density)
    if flops is None:
        flops = family(cfg.model).model_flops(cfg.model, tokens_per_step, density)
    rate = CPU_CORE_FLOPS * max(1, cores) * max(1, nnodes)
    return START_S + steps_counted(cfg) * flops / rate
