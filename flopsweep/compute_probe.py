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
memory, or an out-of-memory error) returns ``fallback``, the reason, and the prediction falls back
to the FLOPs estimate (or a calibration), naming it.

A family whose blocks take family-specific arguments and differ by layer (``hf``: its
``probe_model``) is probed on a copy with one block of each kind (an MoE layer and a dense one
apart): each block is called with what the model's own forward passed it (captured once), the
block time is the layer-weighted mean over the kinds (``layers_per_kind``), and the head piece is
the model's forward and backward with its decoder layers taken out.

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
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from flopsweep.compile_levers import probe_mode
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

METHOD = 3
"""The probe's method, part of its cache key: 3 also records ``optimizer_device``, ``block_params`` and
``head_params`` (the step model rates the head's host optimizer by the block's,
:meth:`flopsweep.compute_time.ProbeTimes.head_optimizer`); 2 times rounds of calls back to back and probes
one rank under autocast on every backend (:func:`casts_weights`); 1 timed calls one at a time and cast
FSDP2's and DeepSpeed's weights on one rank too."""

ADAMW_BYTES = 16
"""Bytes per parameter the probe holds: fp32 weight, gradient and AdamW's two moments."""


class ProbeUnfit(RuntimeError):
    """The probe cannot run here (it would not fit)."""


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
    out = fall_back_on_oom(
        lambda: _measure(cfg, torch.device(device), budget_s), device, "the compute probe did not fit"
    )
    return {**out, "fallback": out.get("fallback"), "wall_s": time.perf_counter() - start}


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is ``torch.OutOfMemoryError`` or a RuntimeError that says ``out of memory``."""
    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


def fall_back_on_oom(
    measure: Callable[[], dict[str, Any]],
    device: Any,
    what: str,
    is_oom: Callable[[BaseException], bool] = out_of_memory,
) -> dict[str, Any]:
    """``measure()``, or the probe's fallback when it does not fit: ``{fallback: "<what>: <type>:
    <message, 200 characters>"}`` for an error ``is_oom`` says is out of memory, ``{fallback: why}``
    for :class:`ProbeUnfit`; any other error is raised. The memory is freed after, either way
    (``gc.collect``, and the CUDA cache on a GPU), so the run goes on as if no probe had run. The
    compute probe's and the layer probe's (:func:`flopsweep.layer_probe.probe_layers`) one path."""
    try:
        return measure()
    except ProbeUnfit as exc:
        return {"fallback": str(exc)}
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        if not is_oom(exc):
            raise
        return {"fallback": f"{what}: {type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        free_memory(device)


def free_memory(device: Any) -> None:
    """Give back what a probe's dropped objects hold: ``gc.collect()`` (models, optimizers and hooks
    hold one another in cycles) and, on a GPU, ``torch.cuda.empty_cache()`` (the cached blocks go back
    to the driver, so that the run's allocator starts as a fresh one would)."""
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def _measure(cfg: RunConfig, device: torch.device, budget_s: float) -> dict[str, Any]:
    from flopsweep.backend_specs import backend_spec
    from flopsweep.parallelize import make_model, wrap_blocks
    from flopsweep.precision import DTYPES, prepare_model

    fam = family(cfg.model)
    # The pieces are timed alone: compiled per block, without CUDA graphs (compile_levers.probe_mode)
    cfg = dataclasses.replace(cfg, compile_scope="block", compile_mode=probe_mode(cfg.compile_mode))
    if fam.probe_model is None:  # every block alike: the family built with one
        one = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_layer=1))
        _check_fits(fam.n_params(one.model), device)
        model = make_model(one, device)
        counts = [cfg.model.n_layer]
    else:  # a block of each kind (hf), its layer count beside it
        one = cfg
        model, counts = fam.probe_model(cfg.model, cfg.attention)
        _check_fits(sum(p.numel() for p in model.parameters()), device)
        model = fam.torch().materialize(model, device, cfg.seed)
        prepare_model(model, cfg.precision)
    dtype = DTYPES[cfg.precision.name]
    spec = backend_spec(cfg.backend.name)
    cast = casts_weights(cfg)

    def autocast() -> contextlib.AbstractContextManager:
        on = dtype != torch.float32 and not cast
        return torch.autocast(device.type, dtype=dtype) if on else contextlib.nullcontext()

    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    shape = (cfg.batch.micro_batch_size, cfg.model.seq_len + 1)
    tokens = torch.randint(0, cfg.model.vocab_size, shape, generator=gen, device=device)
    share = budget_s / 4
    if fam.probe_model is None:
        model = wrap_blocks(model, one)
        if cast:  # FSDP2's and DeepSpeed's compute dtype over several ranks: the weights themselves in dtype
            model = model.to(dtype)
        block_s, head_s, reps = _builtin_pieces(model, one, tokens, autocast, share)
    else:
        if cast:
            model = model.to(dtype)
        block_s, head_s, reps = _captured_pieces(model, one, tokens, autocast, share, counts, wrap_blocks)
    kept = list(fam.blocks(model))
    mine = {id(p) for block in kept for p in block.parameters()}
    host = spec is not None and spec.offload(cfg.backend).steps_on_host
    where = torch.device("cpu") if host else device
    block_params = [p for b in kept for p in b.parameters()]
    block_opt = _optimizer_step(block_params, cfg, where)
    head_opt = _optimizer_step([p for p in model.parameters() if id(p) not in mine], cfg, where)
    sizes = [sum(p.numel() for p in b.parameters()) for b in kept]
    mean_block = sum(n * c for n, c in zip(sizes, counts, strict=True)) / sum(counts)
    per_block = mean_block / max(sum(sizes), 1)
    out = {
        "block_s": block_s,
        "head_s": head_s,
        "block_optimizer_s": timed(block_opt, where, budget_s=share)[0] * per_block,
        "head_optimizer_s": timed(head_opt, where, budget_s=share)[0],
        "reps": reps,
        "optimizer_note": _stand_in(cfg, where),
        "optimizer_device": where.type,
        "block_params": mean_block,
        "head_params": sum(p.numel() for p in model.parameters() if id(p) not in mine),
    }
    if fam.probe_model is not None:
        out["layers_per_kind"] = counts
    return out


def _builtin_pieces(
    model: torch.nn.Module, cfg: RunConfig, tokens: torch.Tensor, autocast: Callable, share: float
) -> tuple[float, float, int]:
    """``(block_s, head_s, reps)`` of a built-in family's one-block model: its block called with
    the hidden states and :meth:`CausalLM.block_args`, and its embedding with ``head_loss``."""
    (block,) = family(cfg.model).blocks(model)
    idx, targets = tokens[:, :-1], tokens[:, 1:]  # (B, T) each
    positions = model.positions(idx.size(1), tokens.device)
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

    block_s, reps = timed(block_step, tokens.device, budget_s=share)
    head_s, _ = timed(head_step, tokens.device, budget_s=share)
    return block_s, head_s, reps


def block_inputs(
    model: torch.nn.Module, blocks: Any, tokens: torch.Tensor, autocast: Callable
) -> list[tuple[tuple, dict[str, Any]]]:
    """``(args, kwargs)`` that one forward of ``model`` on ``tokens`` (``[B, s + 1]``) passes each of
    ``blocks``, in order, captured by forward pre-hooks (``torch.no_grad``, under ``autocast()``)."""
    seen: list[tuple[tuple, dict[str, Any]]] = []
    hooks = [
        b.register_forward_pre_hook(lambda _m, a, k: seen.append((a, k)), with_kwargs=True) for b in blocks
    ]
    try:
        with torch.no_grad(), autocast():
            model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def _captured_pieces(
    model: torch.nn.Module,
    cfg: RunConfig,
    tokens: torch.Tensor,
    autocast: Callable,
    share: float,
    counts: list[int],
    wrap: Callable,
) -> tuple[float, float, int]:
    """``(block_s, head_s, reps)`` of a model whose blocks take family-specific arguments (``hf``):
    each kept block is called with what the model's own forward passes it (captured by a forward
    pre-hook in one forward before the blocks are wrapped: the hidden states, the rotary
    ``position_embeddings``, the mask, ...); ``block_s`` is the layer-weighted mean over the kinds
    (``sum(counts_k t_k) / n_layer``), ``head_s`` the model's forward and backward with its decoder
    layers taken out (the embedding, rotary tables, mask, final norm, head and loss)."""
    fam = family(cfg.model)
    seen = block_inputs(model, fam.blocks(model), tokens, autocast)
    model = wrap(model, cfg)
    blocks = list(fam.blocks(model))
    calls = []
    for block, (args, kwargs) in zip(blocks, seen, strict=True):
        if args:
            x, rest, named = args[0], args[1:], dict(kwargs)
        else:
            named = dict(kwargs)
            x, rest = named.pop("hidden_states"), ()
        x = x.detach().requires_grad_()
        with autocast():
            out = block(x, *rest, **named)
        grad = torch.randn_like(out[0] if isinstance(out, tuple) else out)
        calls.append((block, x, rest, named, grad))

    def step_of(block, x, rest, named, grad) -> Callable[[], None]:
        def step() -> None:
            with autocast():
                out = block(x, *rest, **named)
            (out[0] if isinstance(out, tuple) else out).backward(grad)

        return step

    layers = fam.blocks(model)

    def head_step() -> None:  # the model's forward and backward with its layers taken out
        kept = list(layers)
        del layers[:]
        try:
            with autocast():
                loss = model(tokens)
            loss.backward()
        finally:
            layers.extend(kept)

    times, reps = [], 0
    for call in calls:
        t, n = timed(step_of(*call), tokens.device, budget_s=share / len(calls))
        times.append(t)
        reps = reps or n
    head_s, _ = timed(head_step, tokens.device, budget_s=share)
    block_s = sum(t * c for t, c in zip(times, counts, strict=True)) / sum(counts)
    return block_s, head_s, reps


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


def _check_fits(n_params: int, device: torch.device) -> None:
    """Raise :class:`ProbeUnfit` when the probe's model (``n_params``: one block of each kind with the
    embedding and head) would take more than the device's free memory in weights, gradients and
    AdamW states (:data:`ADAMW_BYTES` a parameter; CUDA only)."""
    if device.type != "cuda":
        return
    need = n_params * ADAMW_BYTES
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
                    # the probe compiles per block without CUDA graphs: only a mode changes its times
                    **(
                        {"compile_mode": probe_mode(cfg.compile_mode)}
                        if cfg.compile_mode != "default"
                        else {}
                    ),
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
    """Where probes are kept (:data:`CACHE_ENV`); None: not kept, also when another user's symbolic link
    is on its path (:func:`flopsweep.links.foreign_link`: a probe read there could be anyone's; one
    warning says so)."""
    from flopsweep.cache_home import not_ours
    from flopsweep.safe_folders import foreign_link_refusal

    value = os.environ.get(CACHE_ENV)
    if value == "off" or (value is None and torch.device(device).type != "cuda"):
        return None
    folder = _cache_base() / "flopsweep" / "probes" if not value else Path(value)
    if foreign := foreign_link_refusal(folder, f"{CACHE_ENV} {folder}"):
        warnings.warn(f"{foreign.line}; no probe is kept or read there. Fix: {foreign.fix}", stacklevel=2)
        return None
    if why := not_ours(_cache_base(), folder):  # a probe planted there would be read as this machine's
        warnings.warn(f"{CACHE_ENV} {folder}: {why}; no probe is kept or read there", stacklevel=2)
        return None
    return folder


def _cache_base() -> Path:
    """The folder :func:`cache_folder`'s folders are made from, each checked: ``FLOPSWEEP_PROBE_CACHE``
    itself when set, else the user's cache base (:func:`flopsweep.cache_home.cache_root`)."""
    from flopsweep.cache_home import cache_root

    return Path(value) if (value := os.environ.get(CACHE_ENV)) else cache_root()[1]


def cached_probe(cfg: RunConfig, device: Any, *, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """:func:`probe_compute`, or the probe kept for this machine and set-up (:func:`cache_folder`),
    with ``cached`` the file it came from (None: measured now). A probe measured now that did not
    fall back is kept; a cache that cannot be read or written is ignored."""
    from flopsweep.cache_home import make_cache_folder
    from flopsweep.files import atomic_write_json
    from flopsweep.safe_read import RecordError, read_json

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
            make_cache_folder(
                path.parent, _cache_base()
            )  # exclusively, never through a link or into another's
            atomic_write_json(path, {"key": key, "probe": out})
        except (OSError, RecordError):
            pass  # a cache that cannot be written costs the next run a probe, nothing else
    return {**out, "cached": None}
