"""``optim.overlap_forward``'s rules and its term of the step-time model (torch-free; the stream work
itself is :mod:`flopsweep.optim_overlap`).

The side stream steps the parameters outside the blocks first (the next forward reads the embedding at
once), then each block, so that block ``i``'s forward waits for its own unit only. The step-time model
(:func:`flopsweep.compute_time.exposed_optimizer_s`, re-exported here) hides the blocks' share of the
optimizer step behind the next forward, at most the forward's time: a model, not a measurement (the two
streams share the memory bandwidth).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flopsweep.compile_levers import NO_CUDAGRAPHS, uses_cudagraphs
from flopsweep.compute_time import exposed_optimizer_s  # noqa: F401 - overlap_forward.X, as the docs name it
from flopsweep.config import ConfigError

OVERLAP_BACKENDS = ("single",)
"""Backends whose step :mod:`flopsweep.optim_overlap` moves to a side stream: ``single`` only (DDP is
untested; FSDP2's pre-forward all-gather would have to wait for the unit too; DeepSpeed's engine owns
its step)."""

FIX = "or set optim.overlap_forward=false"


def enabled(cfg: Any) -> bool:
    return bool(getattr(cfg.optim, "overlap_forward", False))


def check(cfg: Any) -> None:
    """Refuse ``optim.overlap_forward=true`` where it is not built or untested: a backend other than
    :data:`OVERLAP_BACKENDS`, ``device=cpu`` (no CUDA stream), ``optim.in_backward`` (no step after
    backward), precision fp16 (the ``GradScaler`` checks every gradient before one step), CUDA graphs
    and ``compile_scope=model`` (the per-block waits would break the graph: untested).

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    if not enabled(cfg):
        return
    if cfg.backend.name not in OVERLAP_BACKENDS:
        raise ConfigError(
            "optim.overlap_forward",
            True,
            f"is built for backend=single only; backend={cfg.backend.name} is untested with it",
            f"pick backend=single, {FIX}",
        )
    check_placed(cfg, cfg.device)
    conflicts = (  # key, its value, the value refused, why, the fix
        (
            "optim.in_backward",
            cfg.optim.in_backward,
            True,
            "it steps each parameter inside backward",
            "=false",
        ),
        ("precision", cfg.precision.name, "fp16", "fp16's GradScaler checks every gradient first", "=bf16"),
        ("compile_scope", getattr(cfg, "compile_scope", "block"), "model", "untested with it", "=block"),
    )
    for key, value, bad, why, fix in conflicts:
        if value == bad:
            problem = f"optim.overlap_forward=true is refused here: {why}"
            raise ConfigError(key, value, problem, f"set {key}{fix}, {FIX}")
    if uses_cudagraphs(cfg):
        raise ConfigError(
            "compile_mode",
            cfg.compile_mode,
            "runs CUDA graphs, untested with the optimizer on a side stream",
            f"pick compile_mode={NO_CUDAGRAPHS[cfg.compile_mode]} (no CUDA graphs), {FIX}",
        )


def check_placed(cfg: Any, device: str) -> None:
    """The rule that needs the placed run: ``device`` (``auto`` resolved) must be ``cuda``."""
    if enabled(cfg) and device == "cpu":
        raise ConfigError(
            "optim.overlap_forward",
            True,
            "steps the optimizer on a second CUDA stream, and the run is on the CPU",
            f"set device=cuda on a GPU, {FIX}",
        )


def blocks_share(cfg: Any) -> float:
    """The share (0..1) of the model's parameters in its blocks, which :func:`exposed_optimizer_s` may
    hide: ``n_layer`` times one block's count (a family's ``n_params`` at 2 layers less at 1) over the
    whole count; 0 when ``optim.overlap_forward`` is off or the count cannot be taken (nothing hidden).
    Llama 3.1 8B: 0.869 (the embedding and the untied head are 1.05 B of 8.03 B)."""
    if not enabled(cfg):
        return 0.0
    from flopsweep.models import family

    m = cfg.model
    try:
        count = family(m).n_params
        block = count(dataclasses.replace(m, n_layer=2)) - count(dataclasses.replace(m, n_layer=1))
        total = count(m)
    except (TypeError, ValueError, KeyError, AttributeError):  # a family that reads its depth elsewhere
        return 0.0
    return max(0.0, min(1.0, m.n_layer * block / total)) if total > 0 and block > 0 else 0.0
