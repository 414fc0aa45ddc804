"""The layer probe (``predict.layer_probe=true``): the run's own optimizer step, timed on shallow copies.

Before the run's trainer is built, every rank builds the run as configured (backend, layout,
kernel, precision, checkpointing policy, compile, micro batch and gradient accumulation) with
``model.n_layer`` set to ``L1`` and then to ``L2 = 2 L1`` blocks (:func:`depths`), steps each copy
(below, "Steps"), and keeps the slowest rank's median step. A transformer's step grows by the same
time per block (the blocks are alike), so::

    t(L)  = a + b L / L1          b = t(L2) - t(L1),  a = t(L1) - b
    t_step = t(n_layer)

where ``a`` is what does not grow with depth (the embedding, head and loss, the root's
collectives, the launch and engine costs of a step) and ``b`` the cost of ``L1`` more blocks with
everything around them: their collectives, and the overlap, hooks and bucketing of the real backend,
pipeline bubble included (it grows with the stage's compute). What a shallow copy cannot show is not
in it: the allocator near the memory edge of the full model (``cuda_alloc_retries``), and ZeRO's
buckets that fill differently at full depth.

The host is timed apart too (``host_s``: until ``step()`` returns, before the device is waited for;
on a CPU it is the step). At 1-2 blocks the device's head, loss and optimizer work let the host run
ahead, so the timed steps are the device's; at full depth the host's per-block work (eager dispatch,
per-operator checkpointing, FSDP2's hooks) can outgrow the device's. Both are extrapolated and the
step is the larger, ``max(t(n_layer), h(n_layer))`` (on one H200, gpt-1.3b FSDP2 with ``selective``
checkpointing, eager, stepped 0.30 s against 0.20 s extrapolated from the synchronised steps alone).

``L1`` is the smallest depth the layout builds: ``pp x stages per rank``, times ``every`` for the
``every_n`` checkpointing policy (so each copy has the full model's pattern); when ``2 L1`` is not
below ``n_layer`` the full depth is timed alone and is the prediction. ``model=hf`` builds the
file's first layers (:func:`flopsweep.models.hf_nn.build`), as many as the least prefix and period
of its layers' kinds need (:func:`periodic_depths`: one dense layer and then MoE ones are timed at
2 and 3 layers); with a pipeline it is refused (:func:`flopsweep.rules.layer_probe`).

The times must be steady: when a copy's second slowest timed step (one slow step the median
leaves out does not count) is over ``predict.layer_probe_max_spread`` (1.5) times its median on any
rank (``spread``), the host's load set them, and the probe falls back (:func:`unsteady`) as one
whose copy ran out of memory does (the compute probe's path,
:func:`flopsweep.compute_probe.fall_back_on_oom`): the prediction takes the next estimate and names why.

Steps (:func:`schedule`): a copy's first step is never timed (:data:`MIN_UNTIMED`: compilation, the
allocator's first blocks); it stops once its last :data:`SETTLE_STEPS` steps agree on every rank, the
slowest at most ``1 + predict.layer_probe_settle`` times the fastest and not still falling
(:func:`settled`), and their
median is its time; a copy that does not settle runs :data:`WARMUP_STEPS` + :data:`MEASURED_STEPS`
steps and times the last :data:`MEASURED_STEPS`, as every copy did before the early stop. Each copy
records what it cost (``build_s``, ``untimed_s``, ``timed_s``, ``steps_run``, ``steps_timed``,
``times_s``; docs/probe-cost.md), and the job ``metrics.probe_s`` and ``probe_share``.

The top of this module is torch-free (:func:`depths`, :func:`extrapolate`); :func:`probe_layers`
runs on the rank.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

WARMUP_STEPS = 2
"""Untimed steps of a shallow copy that did not settle early (compilation, the allocator, DeepSpeed's
first step); with ``predict.layer_probe_settle=0``, of every copy."""
MEASURED_STEPS = 5
"""Timed steps of a shallow copy that did not settle early; the median is kept."""
MIN_UNTIMED = 1
"""Steps of every copy that are never timed (the first: compilation, the allocator's first blocks)."""
SETTLE_STEPS = 3
"""The fewest timed steps of a copy: the early stop takes the last this many once they agree
(:func:`settled`)."""


def depths(cfg: Any) -> list[int]:
    """The depths the probe builds for a built-in ``cfg``: ``[L1, 2 L1]``, or ``[n_layer]`` when
    ``2 L1`` is not below it (module docstring); ``model=hf``: :func:`periodic_depths` of its layers'
    kinds (:func:`run_depths`)."""
    from flopsweep.pipeline_plan import stages_per_rank

    p = cfg.parallel
    unit = p.pp * stages_per_rank(p.pp_schedule, p.pp_stages_per_rank) if p.pp > 1 else 1
    unit *= _every(cfg)
    n = cfg.model.n_layer
    return [unit, 2 * unit] if 2 * unit < n else [n]


def _every(cfg: Any) -> int:
    ckpt = cfg.activation_checkpointing
    return max(1, int(getattr(ckpt, "every", 1))) if getattr(ckpt, "name", "") == "every_n" else 1


def run_depths(cfg: Any) -> list[int]:
    """:func:`depths`, or for ``model=hf`` (no pipeline: :func:`flopsweep.rules.layer_probe`) the
    :func:`periodic_depths` of its layers' kinds, read from the model built on the meta device."""
    if cfg.model.arch != "hf":
        return depths(cfg)
    from flopsweep.models.hf_nn import kind_sequence

    return periodic_depths(kind_sequence(cfg.model, cfg.attention), _every(cfg))


def periodic_depths(kinds: list[int], unit: int = 1) -> list[int]:
    """The depths the probe builds for a model whose decoder layers have the kinds ``kinds`` (one
    number per layer, :func:`flopsweep.models.hf_nn.kind_sequence`): ``[P + p, P + 2p]`` for the
    least ``P + p`` such that from layer ``P`` on the kinds repeat every ``p`` layers (Moonlight's
    one dense layer then MoE ones: ``P = 1, p = 1``, so ``[2, 3]``; alike layers: ``[1, 2]``), ``P``
    and ``p`` multiples of ``unit`` (``every_n``'s ``every``); or ``[len(kinds)]`` when
    ``P + 2p`` is not below it. The copies then differ by ``p`` layers like every layer after ``P``,
    so :func:`extrapolate`'s ``t(L1) + (n - L1) (t(L2) - t(L1)) / p`` holds."""
    n = len(kinds)
    for first in range(unit, n, unit):  # first = P + p, the shallower copy's depth
        for period in range(unit, first + 1, unit):
            start = first - period
            if first + period < n and all(kinds[i] == kinds[i - period] for i in range(start + period, n)):
                return [first, first + period]
    return [n]


def extrapolate(probe: dict[str, Any], n_layer: int) -> tuple[float, str]:
    """``(t_step, how)``: the step of ``n_layer`` blocks from the probe's ``{layers, step_s}``.

    Raises:
        ValueError: the probe fell back (its reason), or its depths and times are not usable (not two rising
            depths with finite positive times, nor one at ``n_layer``).
    """
    if probe.get("fallback"):
        raise ValueError(str(probe["fallback"]))
    layers, times = probe.get("layers") or [], probe.get("step_s") or []
    ok = all(isinstance(t, int | float) and 0 < t < float("inf") for t in times)
    if not ok or len(layers) != len(times) or not layers:
        raise ValueError(f"the layer probe has no usable times: layers {layers}, step_s {times}")
    if len(layers) == 1:
        if layers[0] != n_layer:
            raise ValueError(f"the layer probe timed {layers[0]} blocks, not the run's {n_layer}")
        return float(times[0]), f"layer probe: the full {n_layer} blocks timed, {times[0] * 1e3:.4g} ms"
    (l1, l2), (t1, t2) = layers, times
    if l2 <= l1:
        raise ValueError(f"the layer probe's depths {layers} do not rise")
    if t2 <= t1:  # a deeper copy stepped no slower: the host's load, not the model, set the times
        raise ValueError(
            f"the layer probe's {l2} blocks stepped no slower than its {l1} ({t2 * 1e3:.4g} ms, "
            f"{t1 * 1e3:.4g} ms): unsteady timings, no extrapolation"
        )
    step = t1 + (t2 - t1) / (l2 - l1) * (n_layer - l1)
    how = (
        f"layer probe: {l1} blocks {t1 * 1e3:.4g} ms, {l2} blocks {t2 * 1e3:.4g} ms, "
        f"{n_layer} blocks extrapolated (step, communication and optimizer measured together)"
    )
    host = probe.get("host_s") or []
    if len(host) == 2 and all(isinstance(h, int | float) and 0 < h < float("inf") for h in host):
        h1, h2 = host
        host_step = h1 + max(0.0, h2 - h1) / (l2 - l1) * (n_layer - l1)
        if host_step > step:
            how += (
                f"; host-bound: the host's {h1 * 1e3:.4g} and {h2 * 1e3:.4g} ms extrapolate to "
                f"{host_step * 1e3:.4g} ms, over the device's {step * 1e3:.4g}"
            )
            step = host_step
    return step, how


def unsteady(layers: list[int], step_s: list[float], spread: list[float], most: float) -> str | None:
    """Why the copies' timed steps are too unsteady to extrapolate from, or None: the first copy whose
    ``spread`` (its second slowest timed step over its median, the largest over ranks) is over ``most``
    (``predict.layer_probe_max_spread``). ``layers``, ``step_s`` (s) and ``spread`` are the probe's,
    one per copy."""
    for n, median, ratio in zip(layers, step_s, spread, strict=False):
        if ratio > most:
            return (
                f"unsteady timed steps: the {n}-block copy's second slowest step took {ratio:.3g}x its "
                f"median ({median * 1e3:.4g} ms; over predict.layer_probe_max_spread={most:g}), "
                "no extrapolation"
            )
    return None


def probe_layers(
    cfg: Any,
    device: Any,
    layout: Any,
    *,
    batches: Callable[[Any], list[Any]],
    is_oom: Callable[[BaseException], bool],
) -> dict[str, Any]:
    """Time the run's step on its shallow copies (module docstring); every rank calls it, at once.
    ``batches(cfg)``: the rank's micro batches for a config (:func:`flopsweep.worker.make_batches`);
    ``is_oom(exc)``: whether an error is an out-of-memory one (:func:`flopsweep.worker.is_oom`).

    Returns:
        ``{layers, step_s, host_s, spread, build_s, untimed_s, timed_s, steps_run, steps_timed, times_s,
        wall_s, fallback: None}``: the depths, the slowest rank's median step of each and its host's
        issue time (s), the largest ratio over ranks of a copy's second slowest timed step to its
        median; rank 0's seconds building each copy, in its untimed and in its timed steps, the steps
        it ran and timed and every step's seconds (:func:`_time_depth`); the probe's wall seconds from
        after :func:`_import_first` to the ranks' agreement;
        ``fallback`` is why the times are not used when a copy's spread is over
        ``predict.layer_probe_max_spread`` (:func:`unsteady`; the times are kept); or ``{fallback: why,
        wall_s}`` when a copy ran out of memory, here or on another rank
        (:func:`flopsweep.compute_probe.fall_back_on_oom`, the compute probe's path: the run goes on
        and the prediction says why).
    """
    import torch
    import torch.distributed as dist

    from flopsweep.compute_probe import fall_back_on_oom

    _import_first(cfg)  # the run's build imports them anyway: not the probe's cost
    start = time.perf_counter()
    layers = run_depths(cfg)

    def measure() -> dict[str, Any]:
        timed = [_time_depth(cfg, device, layout, n, batches) for n in layers]
        return {
            "layers": layers,
            "step_s": [t["step"] for t in timed],
            "host_s": [t["host"] for t in timed],
            "spread": [t["spread"] for t in timed],
            **{key: [round(t[key], 4) for t in timed] for key in ("build_s", "untimed_s", "timed_s")},
            "steps_run": [t["steps_run"] for t in timed],
            "steps_timed": [t["steps_timed"] for t in timed],
            "times_s": [t["times_s"] for t in timed],
        }

    out = fall_back_on_oom(measure, device, "a shallow copy ran out of memory", is_oom)
    if dist.is_initialized():  # every rank agrees; the slowest rank's times are the step's
        n = len(layers)
        mine = [t for key in ("step_s", "host_s", "spread") for t in out.get(key, [0.0] * n)]
        both = torch.tensor([*mine, float("fallback" in out)], dtype=torch.float64, device=device)
        dist.all_reduce(both, op=dist.ReduceOp.MAX)
        got = [float(t) for t in both.tolist()]
        if "fallback" not in out and got[-1]:
            out = {"fallback": "a shallow copy ran out of memory on another rank"}
        elif "fallback" not in out:
            out["step_s"], out["host_s"], out["spread"] = got[:n], got[n : 2 * n], got[2 * n : 3 * n]
    if "fallback" not in out:
        most = cfg.predict.layer_probe_max_spread
        out["fallback"] = unsteady(out["layers"], out["step_s"], out["spread"], most)
    return {**out, "wall_s": time.perf_counter() - start}


def _import_first(cfg: Any) -> None:
    """Import what the run's own build imports on first use, before the probe's clock starts: the
    model family's torch module (with ``torch._dynamo`` and DTensor under it), the backend's builder
    and its package (``BackendSpec.package``: DeepSpeed), in the run's order (the model's module
    first: ZeRO-3 needs ``torch._dynamo`` imported before ``zero.Init``). Measured on the CPU
    (2026-12-04), these imports were about 90% of the first copy's build (the second copy built in
    milliseconds) and the run, built after the probe, no longer paid them: time moved, not spent."""
    import importlib

    from flopsweep.backend_specs import BACKEND_SPECS
    from flopsweep.models import family

    family(cfg.model).torch()
    spec = BACKEND_SPECS[cfg.backend.name]
    spec.build()
    if spec.package:  # a registry name (``deepspeed``), never a path
        importlib.import_module(spec.package)


def settled(times: list[float], settle: float) -> bool:
    """Whether the last :data:`SETTLE_STEPS` of a copy's steps (s, in order) agree: the slowest is at
    most ``1 + settle`` times the fastest (``predict.layer_probe_settle``; 0: never, the early stop
    is off), and they are not each faster than the one before (a copy still warming up can fall by
    less than ``settle`` a step: gpt-1.3b's ZeRO-3 steps fell from 0.52 to 0.385 s on one H200).
    Fewer steps than that never agree."""
    window = times[-SETTLE_STEPS:]
    if settle <= 0 or len(window) < SETTLE_STEPS or min(window) <= 0:
        return False
    falling = all(later < earlier for earlier, later in zip(window, window[1:], strict=False))
    return not falling and max(window) <= (1 + settle) * min(window)


def _all_settled(mine: bool, device: Any) -> bool:
    """Whether every rank's copy settled (:func:`settled`): the ranks step in lockstep, so they stop
    together or not at all (one small all-reduce after the step, outside its timing)."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return mine
    flag = torch.tensor([float(mine)], dtype=torch.float32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def schedule(
    step: Callable[[], tuple[float, float]], settle: float, agree: Callable[[bool], bool] = bool
) -> tuple[list[float], list[float], int]:
    """Step a copy as the probe does (module docstring, "Steps"): ``step()`` runs one step and returns
    its seconds and its host's issue seconds; ``agree(mine)`` says whether every rank's copy settled
    (:func:`settled` on this rank's steps after the first; the ranks must call it together).

    Returns:
        ``(times, hosts, first)``: every step's seconds and host seconds, in order, and the index of
        the first timed step: ``len(times) - 3`` when the copy stopped early (:data:`SETTLE_STEPS`),
        else :data:`WARMUP_STEPS` of ``WARMUP_STEPS + MEASURED_STEPS`` steps run.
    """
    times: list[float] = []
    hosts: list[float] = []
    most = WARMUP_STEPS + MEASURED_STEPS
    while len(times) < most:
        seconds, host = step()
        times.append(seconds)
        hosts.append(host)
        if settle > 0 and MIN_UNTIMED + SETTLE_STEPS <= len(times) < most:
            if agree(settled(times[MIN_UNTIMED:], settle)):
                return times, hosts, len(times) - SETTLE_STEPS
    return times, hosts, WARMUP_STEPS


def _time_depth(
    cfg: Any, device: Any, layout: Any, n_layer: int, batches: Callable[[Any], list]
) -> dict[str, Any]:
    """One shallow copy of ``cfg`` at ``n_layer`` blocks, built and stepped on this rank (:func:`schedule`).
    Returns ``{step, host, spread, build_s, untimed_s, timed_s, steps_run, steps_timed, times_s}``: the
    median seconds of the timed steps, each from a synchronised device to a synchronised device; the
    median seconds until ``step()`` returned (the host's issue time; the step itself on a CPU); the
    second slowest timed step over the median (one slow step, which the median leaves out, is not
    unsteadiness); the seconds spent building the copy (and its batches), in its untimed steps and in
    its timed ones; the steps run, how many of them were timed, and every step's seconds."""
    import torch

    from flopsweep.backends import build_trainer

    begun_build = time.perf_counter()
    shallow = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_layer=n_layer))
    trainer = build_trainer(shallow, device, layout)
    try:
        micro = batches(shallow)
        built = time.perf_counter()
        ends: list[float] = []
        take_step = trainer.step

        def step() -> tuple[float, float]:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            begun = time.perf_counter()
            take_step(micro)
            issued = time.perf_counter()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            ends.append(time.perf_counter())
            seconds = ends[-1] - begun
            return seconds, (issued - begun if device.type == "cuda" else seconds)  # a CPU step is the host's

        settle = float(getattr(cfg.predict, "layer_probe_settle", 0.0))
        times, hosts, first = schedule(step, settle, lambda mine: _all_settled(mine, device))
        timed = times[first:]
        median = statistics.median(timed)
        second = sorted(timed)[-2] if len(timed) > 1 else timed[-1]
        return {
            "step": median,
            "host": statistics.median(hosts[first:]),
            "spread": second / median if median > 0 else float("inf"),
            "build_s": built - begun_build,
            "untimed_s": ends[first - 1] - built,
            "timed_s": ends[-1] - ends[first - 1],
            "steps_run": len(times),
            "steps_timed": len(timed),
            "times_s": [round(t, 5) for t in times],
        }
    finally:
        destroy = getattr(getattr(trainer, "engine", None), "destroy", None)
        if callable(destroy):  # DeepSpeed: its hooks and buffers go with the engine
            destroy()
        del trainer
