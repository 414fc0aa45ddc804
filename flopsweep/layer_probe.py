"""The layer probe (``predict.layer_probe=true``): the run's own optimizer step, timed on shallow copies.

Before the run's trainer is built, every rank builds the run as configured (backend, layout,
kernel, precision, checkpointing policy, compile, micro batch and gradient accumulation) with
``model.n_layer`` set to ``L1`` and then to ``L2 = k L1`` blocks (:func:`depths`; ``k`` up to :data:`SPAN`,
4, as far as ``L2`` stays below ``n_layer``), steps each copy
(below, "Steps"), and keeps the slowest rank's median step. A transformer's step grows by the same
time per block (the blocks are alike), so::

    t(L)  = t(L1) + b (L - L1)        b = (t(L2) - t(L1)) / (L2 - L1)
    t_step = t(n_layer)

where ``a`` is what does not grow with depth (the embedding, head and loss, the root's
collectives, the launch and engine costs of a step) and ``b`` the cost of one more block with
everything around them: their collectives, and the overlap, hooks and bucketing of the real backend,
pipeline bubble included (it grows with the stage's compute). What a shallow copy cannot show is not
in it: the allocator near the memory edge of the full model (``cuda_alloc_retries``).

DeepSpeed's sizes that are compared with sums over the model's parameters (:data:`DEEPSPEED_WINDOWS`:
the reduce bucket, ZeRO-3's prefetch bucket, live parameters, reuse distance and optimizer
sub-groups) would hold a whole shallow copy where they hold a few blocks of the full model: a copy
would then reduce its gradients in one bucket at the end of backward, never release a gathered
parameter nor gather it again for backward, and step its optimizer in one sub-group, so that its
slope misses what the full model does per block. Each copy is built with each such size ``S``
scaled to the copy (:func:`scaled_window`; ``P`` parameters of the copy, ``N`` of the model, ``p``
the largest parameter of a block)::

    S' = min(S, max(S P / N, p))

so that a size holding a share of the model holds that share of the copy (as many buckets and
sub-groups per step as the full model, a block released and gathered again by the copy as by the
model), never below one parameter (a bucket holds at least one), and one within a parameter is
kept. On 2 gloo ranks, llama-tiny at 12 blocks, ZeRO-3 with the sizes a share of the model as
CUDA's defaults are of gpt-1.3b (prefetch and reduce bucket 9.2e5, live and reuse 1.85e6 of 2.43e6):
the copies' all-gathers per step extrapolated to 27 unscaled and 63 scaled, the model's 63, the
elements gathered to 2.43e6 and 3.07e6, the model's 3.02e6 (``benchmarks/deepspeed_copies.py``).
ZeRO-3's persistence threshold is compared with one parameter at a time and is kept. What the
copies were built with is recorded (``deepspeed``: the model's sizes and each copy's).

The host is timed apart too (``host_s``: until ``step()`` returns, before the device is waited for;
on a CPU it is the step). At 1-2 blocks the device's head, loss and optimizer work let the host run
ahead, so the timed steps are the device's; at full depth the host's per-block work (eager dispatch,
per-operator checkpointing, FSDP2's hooks) can outgrow the device's. Both are extrapolated and the
step is the larger, ``max(t(n_layer), h(n_layer))`` (on one H200, gpt-1.3b FSDP2 with ``selective``
checkpointing, eager, stepped 0.30 s against 0.20 s extrapolated from the synchronised steps alone).

``L1`` is the smallest depth the layout builds: ``pp x stages per rank``, times ``every`` for the
``every_n`` checkpointing policy (so each copy has the full model's pattern); when ``2 L1`` is not
below ``n_layer`` the full depth is timed alone and is the prediction. The deeper copy is as deep as
:data:`SPAN` allows because the slope is a difference of two times multiplied by ``n_layer - L1``: on
one H200 (2026-12-05) two runs of Llama 3.2 1B FSDP2 had 1-block copies 1.2 ms apart (45.6 and 46.8
ms, each copy's 3 settled steps within 1 ms), so slopes from 1 and 2 blocks of 7.6 and 6.5 ms a block
and predictions +0.5% and -9.7% of the same measured step; over ``3 L1`` more blocks that offset is a
third of it per block. ``model=hf`` builds the
file's first layers (:func:`flopsweep.models.hf_nn.build`), as many as the least prefix and period
of its layers' kinds need (:func:`periodic_depths`: one dense layer and then MoE ones are timed at
2 and 5 layers); with a pipeline it is refused (:func:`flopsweep.rules.layer_probe`).

The times must be steady: when a copy's second slowest timed step (one slow step the median
leaves out does not count) is over ``predict.layer_probe_max_spread`` (1.5) times its median on any
rank (``spread``), the host's load set them, and the probe falls back (:func:`unsteady`) as one
whose copy ran out of memory does (the compute probe's path,
:func:`flopsweep.compute_probe.fall_back_on_oom`): the prediction takes the next estimate and names why.

The replay (:func:`replays`): on a CPU, a layout whose shapes change from step to step
(:data:`flopsweep.degrees.SHAPE_VARYING_DEGREES`: expert parallel, whose experts receive as many tokens as
the router sends them) has each copy built and stepped untimed first, as many steps as its timed build can
run (:func:`replay_steps`), and the timed copy is a fresh build of it. oneDNN, torch's CPU matmul library,
builds (JIT-compiles) a kernel for each new matmul shape and keeps it, and a copy built from the run's seed
and stepped on the run's batches routes, step by step, as the run will: the first build in the process pays
those kernels at every step, every later build, the run's included, finds them built. On 2 gloo ranks,
OLMoE-tiny EP 2 (bf16, 2026-12-07): the first build's steps 2 to 6 built 36-84 matmul kernels each (8-78 ms
of the 2 ranks' time, and 2-7 thousand page faults a rank, the kernels' memory), the next build's none (354
of 354 found built), its step 0.06-0.07 s of CPU time against the first build's 0.08-0.12 s; so the probe
that timed the first build predicted EP 2 +27.6% and FSDP 2 x EP 2 +45.2% over the run (session 42). Its
seconds are ``replay_s`` (rank 0's, one per copy), inside ``wall_s``. Not on a GPU (cuBLAS builds no
kernel per shape), nor for a layout whose shapes repeat (its first step, never timed, builds them all).

Steps: :mod:`flopsweep.probe_schedule` steps each copy (:func:`schedule`): the first step untimed, then
until its last steps agree on every rank (the early stop), else more timed steps while its median is
unsteady. Each copy records what it cost (``build_s``, ``untimed_s``, ``timed_s``, ``steps_run``,
``steps_timed``, ``times_s``; docs/probe-cost.md), and the job ``metrics.probe_s`` and ``probe_share``.

The top of this module is torch-free (:func:`depths`, :func:`extrapolate`); :func:`probe_layers`
runs on the rank.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

from flopsweep.config import typed_form
from flopsweep.probe_schedule import (  # noqa: F401 - the tests import the schedule's names from here too
    LAYER_STEPS,
    MAX_MEASURED_STEPS,
    MEASURED_STEPS,
    STEADY_ERROR,
    WARMUP_STEPS,
    Steps,
    median_error,
    schedule,
    settled,
)
from flopsweep.text import figure

DEEPSPEED_WINDOWS = {
    "reduce_bucket_size": ("reduce_bucket_size", 1),
    "stage3_prefetch_bucket_size": ("prefetch_bucket_size", 3),
    "stage3_max_live_parameters": ("max_live_parameters", 3),
    "stage3_max_reuse_distance": ("max_reuse_distance", 3),
    "sub_group_size": ("sub_group_size", 3),
}
"""DeepSpeed's sizes (elements) compared with sums over the model's parameters, scaled for each
shallow copy (:func:`scaled_window`): the ``backend.`` key (DeepSpeed's config key) -> (the
attribute of DeepSpeed's ``DeepSpeedZeroConfig``, whose value the engine's ``zero_<attribute>()``
returns, and the least ZeRO stage that reads it). The reduce
bucket (``ipg`` bucket: gradients reduced when it fills), ZeRO-3's prefetch bucket (elements
all-gathered ahead per module), live parameters (the most gathered at once), reuse distance (a
gathered parameter is kept when the module trace reuses it within this many elements, else
released and gathered again, e.g. in backward) and ``sub_group_size`` (the optimizer steps over
sub-groups of this many elements). DeepSpeed 0.19.8: ``runtime/zero/stage_1_and_2.py``,
``stage3.py``, ``partitioned_param_coordinator.py``."""

RELEASED = "every_module"
"""``metrics.predicted.layer_probe.released`` under ``backend=deepspeed``: how each copy's engine was let go
before the next was built, so that a record tells whether its run held the copies' ZeRO-3 states
beside it (``benchmarks/memory_estimate.py``). ``every_module``: :func:`flopsweep.trainers.release_engine`
took every module of the engine out of DeepSpeed's ``FWD_MODULE_STACK`` (not only the root: a block
recomputed in backward leaves its submodules there) and cleared the coordinator's ``lru_cache``. Not
written under another backend or when a copy ran out of memory (the fallback keeps only why); a
DeepSpeed record without it predates the key (``memory_estimate`` dates it by its start instead).
Change the value when the release changes."""


SPAN = 4
"""The deeper copy's depth over the shallower's, at most: ``[L1, k L1]`` with the largest ``k <= SPAN``
that keeps ``k L1`` below ``n_layer`` (:func:`deeper`), ``k >= 2``; the wider apart, the less a
copy's own noise weighs in the slope (module docstring)."""


def deeper(first: int, period: int, n: int) -> int:
    """The deeper copy's depth: ``first + m period`` for the largest ``m <= SPAN - 1`` that stays
    below ``n`` blocks (``first + period`` when only that does; the caller checks it does)."""
    return first + period * max(1, min(SPAN - 1, (n - 1 - first) // period))


def depths(cfg: Any) -> list[int]:
    """The depths the probe builds for a built-in ``cfg``: ``[L1, k L1]`` (:data:`SPAN`: ``k`` up to
    4, ``k L1`` below ``n_layer``: 32 blocks give ``[1, 4]``, 4 give ``[1, 3]``), or ``[n_layer]``
    when ``2 L1`` is not below it (module docstring); ``model=hf``: :func:`periodic_depths` of its
    layers' kinds (:func:`run_depths`)."""
    from flopsweep.pipeline_plan import stages_per_rank

    p = cfg.parallel
    unit = p.pp * stages_per_rank(p.pp_schedule, p.pp_stages_per_rank) if p.pp > 1 else 1
    unit *= _every(cfg)
    n = cfg.model.n_layer
    return [unit, deeper(unit, unit, n)] if 2 * unit < n else [n]


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
    number per layer, :func:`flopsweep.models.hf_nn.kind_sequence`): ``[P + p, P + (m + 1) p]`` for
    the least ``P + p`` such that from layer ``P`` on the kinds repeat every ``p`` layers, ``m`` up to
    ``SPAN - 1`` periods while below ``len(kinds)`` (:func:`deeper`; Moonlight's 27 layers, one dense
    then MoE ones: ``P = 1, p = 1``, so ``[2, 5]``; 16 alike layers: ``[1, 4]``), ``P`` and ``p``
    multiples of ``unit`` (``every_n``'s ``every``); or ``[len(kinds)]`` when ``P + 2p`` is not below
    it. The copies then differ by whole periods like the layers after ``P``, so :func:`extrapolate`'s
    ``t(L1) + (n - L1) (t(L2) - t(L1)) / (L2 - L1)`` holds."""
    n = len(kinds)
    for first in range(unit, n, unit):  # first = P + p, the shallower copy's depth
        for period in range(unit, first + 1, unit):
            start = first - period
            if first + period < n and all(kinds[i] == kinds[i - period] for i in range(start + period, n)):
                return [first, deeper(first, period, n)]
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
        return float(times[0]), (
            f"layer probe: the full {n_layer} blocks timed, {figure(times[0] * 1e3, 4)} ms"
        )
    (l1, l2), (t1, t2) = layers, times
    if l2 <= l1:
        raise ValueError(f"the layer probe's depths {layers} do not rise")
    if t2 <= t1:  # a deeper copy stepped no slower: the host's load, not the model, set the times
        raise ValueError(
            f"the layer probe's {l2} blocks stepped no slower than its {l1} ({figure(t2 * 1e3, 4)} ms, "
            f"{figure(t1 * 1e3, 4)} ms): unsteady timings, no extrapolation"
        )
    step = t1 + (t2 - t1) / (l2 - l1) * (n_layer - l1)
    how = (
        f"layer probe: {l1} blocks {figure(t1 * 1e3, 4)} ms, {l2} blocks {figure(t2 * 1e3, 4)} ms, "
        f"{n_layer} blocks extrapolated (step, communication and optimizer measured together)"
    )
    host = probe.get("host_s") or []
    if len(host) == 2 and all(isinstance(h, int | float) and 0 < h < float("inf") for h in host):
        h1, h2 = host
        host_step = h1 + max(0.0, h2 - h1) / (l2 - l1) * (n_layer - l1)
        if host_step > step:
            how += (
                f"; host-bound: the host's {figure(h1 * 1e3, 4)} and {figure(h2 * 1e3, 4)} ms extrapolate to "
                f"{figure(host_step * 1e3, 4)} ms, over the device's {figure(step * 1e3, 4)}"
            )
            step = host_step
    return step, how


def scaled_window(size: int, copy_params: int, model_params: int, largest: int) -> int:
    """A DeepSpeed size (:data:`DEEPSPEED_WINDOWS`, elements) for a shallow copy of ``copy_params``
    parameters of a model of ``model_params``, ``largest`` the elements of its largest parameter in a
    block: ``min(size, max(size x copy_params / model_params, largest))`` (module docstring), at least 1.
    E.g. ZeRO-3's 1e9 reuse distance on gpt-1.3b (1.316e9 parameters) is 1.17e8 for its 1-block copy
    (1.54e8), where unscaled the copy kept every gathered parameter and the model released most.

    Raises:
        ValueError: a parameter count that is not positive.
    """
    if model_params <= 0 or copy_params <= 0:
        raise ValueError(f"parameters must be positive: copy {copy_params}, model {model_params}")
    share = int(size) * min(int(copy_params), int(model_params)) // int(model_params)
    return max(1, min(int(size), max(share, int(largest))))


def deepspeed_windows(sizes: dict[str, int], params: list[int], model_params: int, largest: int) -> dict:
    """``{model, copies, params, largest}``: the model's DeepSpeed ``sizes`` (:data:`DEEPSPEED_WINDOWS`
    keys, elements, as the engine reads them), each copy's (:func:`scaled_window`), the copies' and
    the model's parameter counts (``params``: one per copy) and ``largest``, the elements of the
    largest parameter of a block."""
    copies = [{k: scaled_window(v, p, model_params, largest) for k, v in sizes.items()} for p in params]
    return {"model": dict(sizes), "copies": copies, "params": [*params, model_params], "largest": largest}


def replays(cfg: Any, device_type: str) -> bool:
    """Whether the probe steps each copy untimed first and times a fresh build of it (the replay, module
    docstring): on a CPU (``device_type`` ``cpu``) when a degree whose tensor shapes change from step to step
    (:data:`flopsweep.degrees.SHAPE_VARYING_DEGREES`: ``ep``) is above 1 in ``cfg.parallel``."""
    from flopsweep.degrees import SHAPE_VARYING_DEGREES

    varying = any(int(getattr(cfg.parallel, d, 1) or 1) > 1 for d in SHAPE_VARYING_DEGREES)
    return device_type == "cpu" and varying


def replay_steps(steps: Steps) -> int:
    """The untimed steps of a copy's replay: the most steps :func:`schedule` runs a copy under ``steps``,
    ``warmup + max(measured, most)`` (the CPU probe's 8, the layer probe's 17), so that every step the timed
    build runs has the shapes its replay had."""
    return steps.warmup + max(steps.measured, steps.most)


def unsteady(layers: list[int], step_s: list[float], spread: list[float], most: float) -> str | None:
    """Why the copies' timed steps are too unsteady to extrapolate from, or None: the first copy whose
    ``spread`` (its second slowest timed step over its median, the largest over ranks) is over ``most``
    (``predict.layer_probe_max_spread``). ``layers``, ``step_s`` (s) and ``spread`` are the probe's,
    one per copy."""
    for n, median, ratio in zip(layers, step_s, spread, strict=False):
        if ratio > most:
            return (
                f"unsteady timed steps: the {n}-block copy's second slowest step took {figure(ratio)}x its "
                f"median ({figure(median * 1e3, 4)} ms; over "
                f"predict.layer_probe_max_spread={typed_form(most)}), "
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
    steps: Steps = LAYER_STEPS,
) -> dict[str, Any]:
    """Time the run's step on its shallow copies (module docstring); every rank calls it, at once.
    ``batches(cfg)``: the rank's micro batches for a config (:func:`flopsweep.worker.make_batches`);
    ``is_oom(exc)``: whether an error is an out-of-memory one (:func:`flopsweep.rank_faults.is_oom`);
    ``steps``: each copy's schedule when it does not settle (:class:`Steps`).

    Returns:
        ``{layers, step_s, host_s, spread, build_s, untimed_s, timed_s, steps_run, steps_timed, times_s,
        wall_s, fallback: None}`` (and ``deepspeed`` under ``backend=deepspeed``: :func:`deepspeed_windows`,
        the sizes the copies were built with, and ``released``: :data:`RELEASED`): the depths, the slowest
        rank's median step of each and its host's issue time (s), the largest ratio over ranks of a copy's
        second slowest timed step to its median; rank 0's seconds building each copy, in its untimed and
        in its timed steps, the steps it ran and timed and every step's seconds (:func:`_time_depth`); the
        probe's wall seconds from
        after :func:`_import_first` to the ranks' agreement;
        ``fallback`` is why the times are not used when a copy's spread is over
        ``predict.layer_probe_max_spread`` (:func:`unsteady`; the times are kept); or ``{fallback: why,
        wall_s}`` when a copy ran out of memory, here or on another rank
        (:func:`flopsweep.compute_probe.fall_back_on_oom`, the compute probe's path: the run goes on
        and the prediction says why).
    """
    import torch
    import torch.distributed as dist

    from flopsweep.compute_probe import fall_back_on_oom, free_memory

    loaded = _import_first(cfg, device.type)  # the run's build does this anyway: not the probe's cost
    start = time.perf_counter()
    layers = run_depths(cfg)
    replay = replays(cfg, device.type)
    windows = (
        run_deepspeed_windows(cfg, layout, device.type, layers) if cfg.backend.name == "deepspeed" else None
    )
    if windows is not None:
        windows["ops_loaded"] = loaded

    def copy(i: int, n: int) -> Any:
        shallow = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_layer=n))
        if windows is None:
            return shallow
        return dataclasses.replace(shallow, backend=dataclasses.replace(cfg.backend, **windows["copies"][i]))

    def measure() -> dict[str, Any]:
        replayed = []
        for i, n in enumerate(layers if replay else []):  # the shapes' kernels built, untimed (replays)
            replayed.append(_replay_depth(copy(i, n), device, layout, batches, replay_steps(steps)))
            free_memory(device)
        timed = []
        for i, n in enumerate(layers):
            timed.append(_time_depth(copy(i, n), device, layout, batches, steps))
            free_memory(device)  # the copy goes before the next is built
        if windows is not None:  # what each copy's engine read, not what it was asked
            windows["copies"] = [t["built"] for t in timed]
        return {
            "layers": layers,
            "step_s": [t["step"] for t in timed],
            "host_s": [t["host"] for t in timed],
            "spread": [t["spread"] for t in timed],
            **{key: [round(t[key], 4) for t in timed] for key in ("build_s", "untimed_s", "timed_s")},
            "steps_run": [t["steps_run"] for t in timed],
            "steps_timed": [t["steps_timed"] for t in timed],
            "times_s": [t["times_s"] for t in timed],
            **({"replay_s": [round(t, 4) for t in replayed]} if replay else {}),
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
        if windows is not None:
            out["deepspeed"] = windows
            out["released"] = RELEASED  # every copy's engine went through release_engine (_time_depth)
    return {**out, "wall_s": time.perf_counter() - start}


def run_deepspeed_windows(cfg: Any, layout: Any, device_type: str, layers: list[int]) -> dict[str, Any]:
    """:func:`deepspeed_windows` of a ``backend=deepspeed`` run (``cfg``, on ``layout``, ``device_type``
    ``cuda`` or ``cpu``) probed at the depths ``layers``: its sizes (elements) as DeepSpeed's own
    ``DeepSpeedZeroConfig`` reads the run's config (its defaults where flopsweep sets none), for the
    keys its ZeRO stage reads; the copies' parameters counted on the meta device (:func:`_copy_params`),
    the model's by its family (``n_params``). Imports DeepSpeed (and torch)."""
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    from flopsweep.deepspeed_config import run_deepspeed_config
    from flopsweep.models import family

    zero = DeepSpeedZeroConfig(**run_deepspeed_config(cfg, layout, device_type)["zero_optimization"])
    sizes = {
        key: int(getattr(zero, attr))
        for key, (attr, stage) in DEEPSPEED_WINDOWS.items()
        if cfg.backend.zero_stage >= stage
    }
    counted = [_copy_params(cfg, n) for n in layers]
    model_params = int(family(cfg.model).n_params(cfg.model))
    return deepspeed_windows(sizes, [n for n, _ in counted], model_params, max(big for _, big in counted))


def _copy_params(cfg: Any, n_layer: int) -> tuple[int, int]:
    """``(parameters, largest)`` of ``cfg``'s model at ``n_layer`` blocks, built on the meta device (no
    memory): every parameter (a tied one once), and the elements of the largest parameter of a block."""
    import torch

    from flopsweep.models import family

    model_cfg = dataclasses.replace(cfg.model, n_layer=n_layer)
    fam = family(model_cfg)
    with torch.device("meta"):
        model = fam.build(model_cfg, cfg.attention)
    largest = max(p.numel() for block in fam.blocks(model) for p in block.parameters())
    return sum(p.numel() for p in model.parameters()), largest


def _import_first(cfg: Any, device_type: str) -> list[str]:
    """Import what the run's own build imports on first use, before the probe's clock starts: the
    model family's torch module (with ``torch._dynamo`` and DTensor under it), the backend's builder
    and its package (``BackendSpec.package``: DeepSpeed), in the run's order (the model's module
    first: ZeRO-3 needs ``torch._dynamo`` imported before ``zero.Init``). Measured on the CPU
    (2026-12-04), these imports were about 90% of the first copy's build (the second copy built in
    milliseconds) and the run, built after the probe, no longer paid them: time moved, not spent.
    Under DeepSpeed, also what its run does once a process before its first engine
    (:func:`flopsweep.deepspeed_backend.prepare`: ``init_distributed`` and the JIT ops' build or load).
    Returns the JIT ops loaded (under DeepSpeed the record's ``layer_probe.deepspeed.ops_loaded``)."""
    from flopsweep.backend_specs import BACKEND_SPECS
    from flopsweep.models import family

    family(cfg.model).torch()
    spec = BACKEND_SPECS[cfg.backend.name]
    spec.build()
    if spec.package == "deepspeed":  # the one backend whose package the builder imports on first use
        from flopsweep.deepspeed_backend import prepare

        return prepare(cfg, device_type)
    return []


def _all_settled(mine: bool, device: Any, every: bool = True) -> bool:
    """Whether every rank's copy settled (:func:`settled`; ``every=False``: whether some rank's did): the
    ranks step in lockstep, so they stop together or not at all (one small all-reduce after the step,
    outside its timing)."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return mine
    flag = torch.tensor([float(mine)], dtype=torch.float32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN if every else dist.ReduceOp.MAX)
    return bool(flag.item())


def _time_depth(
    shallow: Any, device: Any, layout: Any, batches: Callable[[Any], list], steps: Steps = LAYER_STEPS
) -> dict[str, Any]:
    """The shallow copy ``shallow`` (the run's config at its depth), built and stepped on this rank
    (:func:`schedule`). Returns ``{step, host, spread, build_s, untimed_s, timed_s, steps_run, steps_timed,
    times_s, built}``: the
    median seconds of the timed steps, each from a synchronised device to a synchronised device; the
    median seconds until ``step()`` returned (the host's issue time; the step itself on a CPU); the
    second slowest timed step over the median (one slow step, which the median leaves out, is not
    unsteadiness); the seconds spent building the copy (and its batches), in its untimed steps and in
    its timed ones; the steps run, how many of them were timed, and every step's seconds; under
    DeepSpeed the :data:`DEEPSPEED_WINDOWS` sizes its engine read (``engine.zero_<attribute>()``), else
    None."""
    import torch

    from flopsweep.backends import build_trainer

    begun_build = time.perf_counter()
    trainer = build_trainer(shallow, device, layout)
    try:
        windows = None
        if shallow.backend.name == "deepspeed":
            windows = {
                key: int(getattr(trainer.engine, f"zero_{attr}")())
                for key, (attr, stage) in DEEPSPEED_WINDOWS.items()
                if shallow.backend.zero_stage >= stage
            }
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

        settle = float(getattr(shallow.predict, "layer_probe_settle", 0.0))
        times, hosts, first = schedule(
            step,
            settle,
            lambda mine: _all_settled(mine, device),
            lambda timed: _noisy(timed, device),
            steps,
            lambda mine: _all_settled(mine, device, every=False),
        )
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
            "built": windows,
        }
    finally:  # DeepSpeed: out of its module-level state (DeepSpeedTrainer.release); freed by probe_layers
        _release(trainer)
        del trainer


def _replay_depth(
    shallow: Any, device: Any, layout: Any, batches: Callable[[Any], list], n_steps: int
) -> float:
    """Build the shallow copy ``shallow`` and run ``n_steps`` untimed steps of it (:func:`replays`), then let
    it go as :func:`_time_depth` does; returns this rank's seconds for it all (the record's ``replay_s``).
    Every rank runs as many steps, so their collectives meet."""
    from flopsweep.backends import build_trainer

    begun = time.perf_counter()
    trainer = build_trainer(shallow, device, layout)
    try:
        micro = batches(shallow)
        for _ in range(n_steps):
            trainer.step(micro)
        return time.perf_counter() - begun  # on a CPU (replays): the steps are done when step() returns
    finally:
        _release(trainer)
        del trainer


def _release(trainer: Any) -> None:
    """A copy's trainer out of its backend's module-level state (DeepSpeed: ``DeepSpeedTrainer.release``);
    freed by :func:`probe_layers` (:func:`flopsweep.compute_probe.free_memory`)."""
    own = getattr(trainer, "release", None)
    if callable(own):
        own()


def _noisy(times: list[float], device: Any) -> bool:
    """Whether the median of ``times`` is over :data:`STEADY_ERROR` (:func:`median_error`) on any
    rank: every rank calls it after the same step, so that all time as many steps."""
    import torch
    import torch.distributed as dist

    error = median_error(times)
    if dist.is_initialized():
        worst = torch.tensor([min(error, 1e9)], dtype=torch.float64, device=device)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        error = float(worst.item())
    return error > STEADY_ERROR
