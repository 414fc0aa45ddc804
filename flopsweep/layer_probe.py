"""The layer probe (``predict.layer_probe=true``): the run's own optimizer step, timed on shallow copies.

Before the run's trainer is built, every rank builds the run as configured (backend, layout,
kernel, precision, checkpointing policy, compile, micro batch and gradient accumulation) with
``model.n_layer`` set to ``L1`` and then to ``L2 = 2 L1`` blocks (:func:`depths`), runs
:data:`WARMUP_STEPS` steps and times :data:`MEASURED_STEPS` more of each, the slowest rank's median
step kept. A transformer's step grows by the same time per block (the blocks are alike), so::

    t(L)  = a + b L / L1          b = t(L2) - t(L1),  a = t(L1) - b
    t_step = t(n_layer)

where ``a`` is what does not grow with depth (the embedding, head and loss, the root's
collectives, the launch and engine costs of a step) and ``b`` the cost of ``L1`` more blocks with
everything around them: their collectives, and the overlap, hooks and bucketing of the real backend,
pipeline bubble included (it grows with the stage's compute). What a shallow copy cannot show is not
in it: the allocator near the memory edge of the full model (``cuda_alloc_retries``), and ZeRO's
buckets that fill differently at full depth.

``L1`` is the smallest depth the layout builds: ``pp x stages per rank``, times ``every`` for the
``every_n`` checkpointing policy (so each copy has the full model's pattern); when ``2 L1`` is not
below ``n_layer`` the full depth is timed alone and is the prediction. ``model=hf`` takes its depth
from its config file and is refused (:func:`flopsweep.rules.layer_probe`).

The times must be steady: when a copy's slowest timed step is over ``predict.layer_probe_max_spread``
(1.5) times its median on any rank (``spread``), the host's load set them, and the probe falls back
(:func:`unsteady`) as one whose copy ran out of memory does (the compute probe's path,
:func:`flopsweep.compute_probe.fall_back_on_oom`): the prediction takes the next estimate and names why.

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
"""Untimed steps of each shallow copy (compilation, the allocator, DeepSpeed's first step)."""
MEASURED_STEPS = 5
"""Timed steps of each shallow copy; the median is kept."""


def depths(cfg: Any) -> list[int]:
    """The depths the probe builds for ``cfg``: ``[L1, 2 L1]``, or ``[n_layer]`` when ``2 L1`` is not
    below it (module docstring)."""
    from flopsweep.pipeline_plan import stages_per_rank

    p = cfg.parallel
    unit = p.pp * stages_per_rank(p.pp_schedule, p.pp_stages_per_rank) if p.pp > 1 else 1
    ckpt = cfg.activation_checkpointing
    if getattr(ckpt, "name", "") == "every_n":
        unit *= max(1, int(getattr(ckpt, "every", 1)))
    n = cfg.model.n_layer
    return [unit, 2 * unit] if 2 * unit < n else [n]


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
    per = (t2 - t1) / (l2 - l1)
    step = t1 + per * (n_layer - l1)
    how = (
        f"layer probe: {l1} blocks {t1 * 1e3:.4g} ms, {l2} blocks {t2 * 1e3:.4g} ms, "
        f"{n_layer} blocks extrapolated (step, communication and optimizer measured together)"
    )
    return step, how


def unsteady(layers: list[int], step_s: list[float], spread: list[float], most: float) -> str | None:
    """Why the copies' timed steps are too unsteady to extrapolate from, or None: the first copy whose
    ``spread`` (its slowest timed step over its median, the largest over ranks) is over ``most``
    (``predict.layer_probe_max_spread``). ``layers``, ``step_s`` (s) and ``spread`` are the probe's,
    one per copy."""
    for n, median, ratio in zip(layers, step_s, spread, strict=False):
        if ratio > most:
            return (
                f"unsteady timed steps: the {n}-block copy's slowest step took {ratio:.3g}x its median "
                f"({median * 1e3:.4g} ms; over predict.layer_probe_max_spread={most:g}), no extrapolation"
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
        ``{layers, step_s, spread, wall_s, fallback: None}``: the depths, the slowest rank's median
        step of each (s) and the largest ratio over ranks of a copy's slowest timed step to its median;
        ``fallback`` is why the times are not used when a copy's spread is over
        ``predict.layer_probe_max_spread`` (:func:`unsteady`; the times are kept); or ``{fallback: why,
        wall_s}`` when a copy ran out of memory, here or on another rank
        (:func:`flopsweep.compute_probe.fall_back_on_oom`, the compute probe's path: the run goes on
        and the prediction says why).
    """
    import torch
    import torch.distributed as dist

    from flopsweep.compute_probe import fall_back_on_oom

    start = time.perf_counter()
    layers = depths(cfg)

    def measure() -> dict[str, Any]:
        timed = [_time_depth(cfg, device, layout, n, batches) for n in layers]
        return {"layers": layers, "step_s": [t for t, _ in timed], "spread": [r for _, r in timed]}

    out = fall_back_on_oom(measure, device, "a shallow copy ran out of memory", is_oom)
    if dist.is_initialized():  # every rank agrees; the slowest rank's times are the step's
        n = len(layers)
        mine = [*out.get("step_s", [0.0] * n), *out.get("spread", [0.0] * n), float("fallback" in out)]
        both = torch.tensor(mine, dtype=torch.float64, device=device)
        dist.all_reduce(both, op=dist.ReduceOp.MAX)
        got = [float(t) for t in both.tolist()]
        if "fallback" not in out and got[-1]:
            out = {"fallback": "a shallow copy ran out of memory on another rank"}
        elif "fallback" not in out:
            out["step_s"], out["spread"] = got[:n], got[n : 2 * n]
    if "fallback" not in out:
        most = cfg.predict.layer_probe_max_spread
        out["fallback"] = unsteady(out["layers"], out["step_s"], out["spread"], most)
    return {**out, "wall_s": time.perf_counter() - start}


def _time_depth(
    cfg: Any, device: Any, layout: Any, n_layer: int, batches: Callable[[Any], list]
) -> tuple[float, float]:
    """``(median, spread)`` of :data:`MEASURED_STEPS` steps of ``cfg`` at ``n_layer`` blocks on this
    rank: the median seconds, and the slowest step over the median."""
    import torch

    from flopsweep.backends import build_trainer

    shallow = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_layer=n_layer))
    trainer = build_trainer(shallow, device, layout)
    try:
        micro = batches(shallow)
        times = []
        for i in range(WARMUP_STEPS + MEASURED_STEPS):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            begun = time.perf_counter()
            trainer.step(micro)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= WARMUP_STEPS:
                times.append(time.perf_counter() - begun)
        median = statistics.median(times)
        return median, (max(times) / median if median > 0 else float("inf"))
    finally:
        destroy = getattr(getattr(trainer, "engine", None), "destroy", None)
        if callable(destroy):  # DeepSpeed: its hooks and buffers go with the engine
            destroy()
        del trainer
