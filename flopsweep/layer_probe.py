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
        ``{layers, step_s, host_s, spread, wall_s, fallback: None}``: the depths, the slowest rank's
        median step of each and its host's issue time (s), and the largest ratio over ranks of a copy's
        second slowest timed step to its median;
        ``fallback`` is why the times are not used when a copy's spread is over
        ``predict.layer_probe_max_spread`` (:func:`unsteady`; the times are kept); or ``{fallback: why,
        wall_s}`` when a copy ran out of memory, here or on another rank
        (:func:`flopsweep.compute_probe.fall_back_on_oom`, the compute probe's path: the run goes on
        and the prediction says why).
    """
    import torch
    import torch.distributed as dist

    from flopsweep.compute_probe import fall_back_on_oom, free_memory

    start = time.perf_counter()
    layers = run_depths(cfg)

    def measure() -> dict[str, Any]:
        timed = []
        for n in layers:
            timed.append(_time_depth(cfg, device, layout, n, batches))
            free_memory(device)  # the copy goes before the next is built
        return {
            "layers": layers,
            "step_s": [t for t, _, _ in timed],
            "host_s": [h for _, h, _ in timed],
            "spread": [r for _, _, r in timed],
        }

    out = fall_back_on_oom(measure, device, "a shallow copy ran out of memory", is_oom)  # frees them all
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


def _time_depth(
    cfg: Any, device: Any, layout: Any, n_layer: int, batches: Callable[[Any], list]
) -> tuple[float, float, float]:
    """``(step, host, spread)`` of :data:`MEASURED_STEPS` steps of ``cfg`` at ``n_layer`` blocks on
    this rank: the median seconds, each from a synchronised device to a synchronised device; the
    median seconds until ``step()`` returned (the host's issue time; the step itself on a CPU); and
    the second slowest step over the median (one slow step, which the median leaves out, is not
    unsteadiness)."""
    import torch

    from flopsweep.backends import build_trainer

    shallow = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_layer=n_layer))
    trainer = build_trainer(shallow, device, layout)
    try:
        micro = batches(shallow)
        times, hosts = [], []
        for i in range(WARMUP_STEPS + MEASURED_STEPS):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            begun = time.perf_counter()
            trainer.step(micro)
            issued = time.perf_counter()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= WARMUP_STEPS:
                times.append(time.perf_counter() - begun)
                hosts.append(
                    issued - begun if device.type == "cuda" else times[-1]
                )  # a CPU step is the host's
        median = statistics.median(times)
        second = sorted(times)[-2] if len(times) > 1 else times[-1]
        return median, statistics.median(hosts), (second / median if median > 0 else float("inf"))
    finally:  # DeepSpeed: out of its module-level state (DeepSpeedTrainer.release); freed by probe_layers
        own = getattr(trainer, "release", None)
        if callable(own):
            own()
        del own, trainer
