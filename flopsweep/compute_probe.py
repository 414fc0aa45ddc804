"""The compute probe (``predict.probe=true``): the run's pieces timed at the run's shapes, torch side.

The step-time model (:func:`flopsweep.steptime.compute_from_probe`, torch-free) composes a step from
these pieces; this module measures them on the rank's device, before warm-up, in a few seconds:

- one decoder block's forward and backward of one micro batch (``[micro_batch_size, seq_len]``),
  built by the family's torch module with the run's attention kernel, precision (autocast over fp32
  weights for ``single`` and DDP, the weights cast to the dtype for FSDP2 and DeepSpeed, as their
  mixed precision does; fp8 conversion), checkpointing policy and compile setting
  (:func:`flopsweep.parallelize.wrap_blocks`);
- the embedding, head and loss forward and backward of the same micro batch;
- the run's AdamW step (:func:`flopsweep.trainers.build_adamw`, fused on CUDA, with the gradient
  clip) over that block's parameters and over the embedding and head's, on the device where the
  run steps them (the host under FSDP2's ``cpu_offload`` and ZeRO-Offload; DeepSpeed's own
  optimizers are stood in for by torch's AdamW, said so in ``optimizer_note``).

Each piece: :data:`WARMUP_REPS` untimed calls (compilation, autotuning, allocator), then up to
:data:`MAX_REPS` timed rounds of :data:`BACK_TO_BACK` calls until its share of ``budget_s`` is spent
(at least one), each round between two ``torch.cuda.synchronize`` on a GPU; the median round over
its calls. The weights are cast as :func:`casts_weights` says. The model is a one-block copy of the
run's (the embedding and head whole), so the probe holds one block's and the head's weights,
gradients and optimizer states. A probe that would not fit (its weights and states over the free
memory, or an out-of-memory error) or a family without a separable block (``hf``) returns
``fallback``, the reason, and the prediction falls back to the FLOPs estimate (or a calibration),
naming it.

:func:`cached_probe` (what the worker calls) keeps each successful probe in a folder
(:data:`CACHE_ENV`) keyed by the machine and the set-up (:func:`probe_key`), and a later run of the
same reads it back in place of probing again (``cached``: the file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import json
import os
import socket
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from flopsweep.config import RunConfig
from flopsweep.models import family

WARMUP_REPS = 2
"""Untimed calls of each piece: the first compiles (``compile=true``) and autotunes, the second
runs at the steady state of the allocator."""

MAX_REPS = 5
"""Timed rounds of each piece at most; the median round is kept."""

BACK_TO_BACK = 4
"""Calls of a piece in one timed round, with no synchronisation between them: a step launches its
blocks back to back, so the host launches the next call's kernels while the device runs this
one's (a call timed alone between two synchronisations adds the launch latency of its first
kernels, a few percent of a small block's time)."""

BUDGET_S = 8.0
"""Seconds of timed calls over the four pieces (a quarter each), warm-up aside."""

PROBED_FAMILIES = ("gpt2", "llama")
"""Families whose blocks take the hidden states and :meth:`CausalLM.block_args` alone, so that one
block runs by itself; ``hf``'s decoder layers take family-specific arguments."""

METHOD = 2
"""The probe's method, part of its cache key: 2 times rounds of calls back to back and probes one
rank under autocast on every backend (:func:`casts_weights`); 1 timed calls one at a time and cast
FSDP2's and DeepSpeed's weights on one rank too."""

ADAMW_BYTES = 16
"""Bytes per parameter the probe holds: fp32 weight, gradient and AdamW's two moments."""


class ProbeUnfit(RuntimeError):
    """The probe cannot run here (it would not fit, or the family has no separable block)."""


def probe_compute(cfg: RunConfig, device: Any, *, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """Time the run's pieces on ``device`` (module docstring).

    Returns:
        ``{block_s, head_s, block_optimizer_s, head_optimizer_s, reps, optimizer_note, wall_s,
        fallback: None}``,
        seconds per micro batch (the optimizer: per step over the piece's parameters) and the
        probe's own wall time; or ``{fallback: why, wall_s}`` when it could not run (it never
        raises for a probe that does not fit: the run goes on and the prediction names why).
    """
    start = time.perf_counter()
    try:
        out = _measure(cfg, torch.device(device), budget_s)
    except ProbeUnfit as exc:
        out = {"fallback": str(exc)}
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        if not isinstance(exc, torch.OutOfMemoryError) and "out of memory" not in str(exc).lower():
            raise
        out = {"fallback": f"the compute probe did not fit: {type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        gc.collect()
        if torch.device(device).type == "cuda":
            torch.cuda.empty_cache()
    return {**out, "fallback": out.get("fallback"), "wall_s": time.perf_counter() - start}


def _measure(cfg: RunConfig, device: torch.device, budget_s: float) -> dict[str, Any]:
    from flopsweep.backend_specs import backend_spec
    from flopsweep.parallelize import make_model, wrap_blocks
    from flopsweep.precision import DTYPES

    if cfg.model.arch not in PROBED_FAMILIES:
        raise ProbeUnfit(f"model.arch {cfg.model.arch}: no separable block to probe")
    one = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_layer=1))
    _check_fits(one, device)
    dtype = DTYPES[cfg.precision.name]
    spec = backend_spec(cfg.backend.name)
    model = wrap_blocks(make_model(one, device), one)
    (block,) = family(one.model).blocks(model)
    cast = casts_weights(cfg)
    if cast:  # FSDP2's and DeepSpeed's compute dtype over several ranks: the weights themselves in dtype
        model = model.to(dtype)

    def autocast() -> contextlib.AbstractContextManager:
        on = dtype != torch.float32 and not cast
        return torch.autocast(device.type, dtype=dtype) if on else contextlib.nullcontext()

    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    shape = (cfg.batch.micro_batch_size, cfg.model.seq_len + 1)
    tokens = torch.randint(0, cfg.model.vocab_size, shape, generator=gen, device=device)
    idx, targets = tokens[:, :-1], tokens[:, 1:]  # (B, T) each
    positions = model.positions(idx.size(1), device)
    args = model.block_args(positions)
    with autocast():
        x = model.embed(idx, positions).detach().requires_grad_()  # (B, T, C)
        grad = torch.randn_like(block(x, *args))  # the gradient that reaches the last block

    def block_step() -> None:
        with autocast():
            y = block(x, *args)
        y.backward(grad)

    def head_step() -> None:
        with autocast():
            loss = model.head_loss(model.embed(idx, positions), targets)
        loss.backward()

    share = budget_s / 4
    block_s, reps = timed(block_step, device, budget_s=share)
    head_s, _ = timed(head_step, device, budget_s=share)
    mine = {id(p) for p in block.parameters()}
    host = spec is not None and spec.offload(cfg.backend).steps_on_host
    where = torch.device("cpu") if host else device
    block_opt = _optimizer_step(list(block.parameters()), cfg, where)
    head_opt = _optimizer_step([p for p in model.parameters() if id(p) not in mine], cfg, where)
    return {
        "block_s": block_s,
        "head_s": head_s,
        "block_optimizer_s": timed(block_opt, where, budget_s=share)[0],
        "head_optimizer_s": timed(head_opt, where, budget_s=share)[0],
        "reps": reps,
        "optimizer_note": _stand_in(cfg, where),
    }


def casts_weights(cfg: RunConfig) -> bool:
    """Whether the probe casts its weights to the compute dtype once (FSDP2's and DeepSpeed's mixed
    precision over several ranks, where the per-block cast sits in the all-gather that the
    communication model counts) rather than running ``torch.autocast`` over fp32 weights, which casts
    each weight at each call. On one rank every backend is probed under autocast: there FSDP2 and
    ZeRO still cast (or copy) the weights of every block at every step, and on one H200 (session 16,
    ``benchmarks/results/h200/session16/probe-1``) autocast's cast predicted FSDP2's steps better than
    a block sharded alone, whose copies the run overlaps with the previous block's compute and the
    probe cannot."""
    import torch.distributed as dist

    from flopsweep.backend_specs import backend_spec

    spec = backend_spec(cfg.backend.name)
    if cfg.precision.name == "fp32" or spec is None or spec.autocast_fp32_weights:
        return False
    return not (dist.is_initialized() and dist.get_world_size() == 1)


def _stand_in(cfg: RunConfig, where: torch.device) -> str | None:
    """What the optimizer probe timed in place of the run's own optimizer, or None when it is the
    run's (torch's AdamW as the trainer builds it)."""
    if cfg.backend.name != "deepspeed":
        return None
    place = "on the host" if where.type == "cpu" and cfg.device != "cpu" else f"on {where.type}"
    return f"DeepSpeed's optimizer timed as torch's AdamW {place}"


def _check_fits(one: RunConfig, device: torch.device) -> None:
    """Raise :class:`ProbeUnfit` when the one-block model's weights, gradients and AdamW states
    (:data:`ADAMW_BYTES` a parameter) would take more than the device's free memory (CUDA only)."""
    if device.type != "cuda":
        return
    need = family(one.model).n_params(one.model) * ADAMW_BYTES
    free, _ = torch.cuda.mem_get_info(device)
    if need > free:
        raise ProbeUnfit(
            f"the compute probe would not fit: one block with the embedding and head needs "
            f"{need / 2**30:.1f} GiB of weights, gradients and AdamW states, {free / 2**30:.1f} GiB free"
        )


def _optimizer_step(
    params: list[torch.nn.Parameter], cfg: RunConfig, where: torch.device
) -> Callable[[], None]:
    """One optimizer step of the run's AdamW (and clip) over ``params`` with their gradients, on
    ``where``, in fp32: copies when the run steps on the host or the probe's weights are cast (the
    run's optimizer steps fp32 master weights)."""
    from flopsweep.trainers import build_adamw

    if params and (params[0].device != where or params[0].dtype != torch.float32):
        copies = [torch.nn.Parameter(p.detach().to(where, torch.float32)) for p in params]
        for c, p in zip(copies, params, strict=True):
            c.grad = p.grad.to(where, torch.float32) if p.grad is not None else torch.zeros_like(c)
        params = copies
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    optimizer = build_adamw(params, cfg.optim, where)

    def step() -> None:
        if cfg.optim.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg.optim.grad_clip, foreach=True)
        optimizer.step()

    return step


def timed(fn: Callable[[], None], device: Any, *, budget_s: float) -> tuple[float, int]:
    """The median seconds of ``fn`` over its timed calls (module docstring), and how many ran."""
    dev = torch.device(device)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    for _ in range(WARMUP_REPS):
        fn()
    sync()
    times: list[float] = []
    begun = time.perf_counter()
    while len(times) < MAX_REPS:
        t0 = time.perf_counter()
        for _ in range(BACK_TO_BACK):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / BACK_TO_BACK)
        if time.perf_counter() - begun >= budget_s:
            break
    return statistics.median(times), len(times) * BACK_TO_BACK


CACHE_ENV = "FLOPSWEEP_PROBE_CACHE"
"""A folder for the probes of this machine (one JSON file per :func:`probe_key`), or ``off``. Unset:
``$XDG_CACHE_HOME/flopsweep/probes`` (``~/.cache``) on a GPU, none on the CPU (whose timings move
with the host's other loads)."""


def probe_key(cfg: RunConfig, device: Any) -> dict[str, Any]:
    """What a probe's times depend on: the host, the device and torch, the model, kernel,
    precision, checkpointing, compile, micro batch and optimizer settings, and how the backend runs
    them (cast weights, an optimizer on the host; intra-op threads on the CPU), and the probe's
    :data:`METHOD`."""
    from flopsweep.backend_specs import backend_spec

    dev = torch.device(device)
    spec = backend_spec(cfg.backend.name)
    return {
        "method": METHOD,
        "host": socket.gethostname(),
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "threads": torch.get_num_threads() if dev.type == "cpu" else None,
        "torch": torch.__version__,
        "setup": json.loads(
            json.dumps(
                {
                    "model": dataclasses.asdict(cfg.model),
                    "attention": dataclasses.asdict(cfg.attention),
                    "precision": dataclasses.asdict(cfg.precision),
                    "checkpointing": dataclasses.asdict(cfg.activation_checkpointing),
                    "compile": cfg.compile,
                    "micro_batch_size": cfg.batch.micro_batch_size,
                    "optim": dataclasses.asdict(cfg.optim),
                    "cast": casts_weights(cfg),
                    "host_step": bool(spec and spec.offload(cfg.backend).steps_on_host),
                    "deepspeed": cfg.backend.name == "deepspeed",
                },
                default=str,
            )
        ),
    }


def cache_folder(device: Any) -> Path | None:
    """Where probes are kept (:data:`CACHE_ENV`); None: not kept."""
    value = os.environ.get(CACHE_ENV)
    if value == "off" or (value is None and torch.device(device).type != "cuda"):
        return None
    return (
        Path(value)
        if value
        else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flopsweep" / "probes"
    )


def cached_probe(cfg: RunConfig, device: Any, *, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """:func:`probe_compute`, or the probe kept for this machine and set-up (:func:`cache_folder`),
    with ``cached`` the file it came from (None: measured now). A probe measured now that did not
    fall back is kept; a cache that cannot be read or written is ignored."""
    from flopsweep.files import RecordError, atomic_write_json, read_json

    start = time.perf_counter()
    folder, key = cache_folder(device), probe_key(cfg, device)
    path = None
    if folder is not None:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
        path = folder / f"{digest}.json"
        try:
            kept = read_json(path)
            if kept.get("key") == key and isinstance(kept.get("probe"), dict):
                return {**kept["probe"], "wall_s": time.perf_counter() - start, "cached": str(path)}
        except (RecordError, OSError):
            pass  # none kept yet (or unreadable): probe now
    out = probe_compute(cfg, device, budget_s=budget_s)
    if path is not None and out.get("fallback") is None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {"key": key, "probe": out})
        except (OSError, RecordError):
            pass  # a cache that cannot be written costs the next run a probe, nothing else
    return {**out, "cached": None}
