"""DeepSpeed ZeRO-3's own overhead on one GPU: a step time per parameter added to the GPU work
(issue 41, "DeepSpeed's own overheads per stage"; docs/prediction-zero3.md).
Torch-free.

A one-GPU ZeRO-3 step (CUDA, no offload) is the step of the same set-up without DeepSpeed (backend
``single``) plus :data:`PER_PARAMETER_S` seconds per parameter of the model:

    t_step(ZeRO-3, 1 GPU) = t_step(single) + c x P        c = PER_PARAMETER_S,  P = model parameters

``benchmarks/zero3_floor.py`` fits ``c`` over every committed one-GPU ZeRO-3 record with a ``single``
record of its set-up (48 records, 4 models, H100 and H200 hosts, eager and compiled) and tests it
leave-one-model-out against ``max(t_single, floor)`` and a floor per hooked parameter tensor. The
prediction (:func:`flopsweep.predict.measured_parts` for a one-GPU ZeRO-3 calibration or nearest
record, :func:`with_floor` for the target) takes the floor out of a measured ZeRO-3 step before its
work is scaled to the target and puts the target's floor back; where the fitted floor would leave
nothing of the record's work, it takes out what leaves its executed FLOPs at its GEMM rate
(:func:`record_floor`). The layer probe (``compute_source:
layers``) times the whole step, floor included, and is left as it is; several GPUs are not modelled
(their records overlap the floor with communication): a ZeRO-3 target on several ranks carries a
one-GPU record's step over whole (:func:`kept_for`). The floor is the hosts': the H100 and H200
machines the records ran on agree within the fit's spread, and it is not scaled for another host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from flopsweep import recompute_read
from flopsweep.record import value_at
from flopsweep.text import figure, format_count
from flopsweep.workload import Compute, Workload

PER_PARAMETER_S = 91e-12
"""ZeRO-3's own seconds per model parameter per step on one GPU (91 ps: 0.11 s for Llama 3.2 1B, 0.73 s
for Llama 3.1 8B): the least-squares fit of ``t_zero3 = t_single + c P`` over the 48 one-GPU ZeRO-3
records of ``benchmarks/results`` with a ``single`` record of their set-up (``benchmarks/zero3_floor.py``;
leave-one-model-out median |error| 9.5%, p90 28.8%, worst -42.2%, against 34.9%, 65.0%, -78.5% for the
single step alone). Fitted on the lent H100 and H200 hosts."""

SOURCE = (
    "ZeRO-3 floor {floor} s ({ps} ps x {params} parameters; fitted on H100/H200 hosts, "
    "benchmarks/zero3_floor.py)"
)
"""What a prediction's ``source`` says of the floor it added (:func:`with_floor`)."""

BLOCK_TENSORS = {"gpt2": 12, "llama": 9}
"""Parameter tensors of one block, per ``model.arch``: GPT-2's two LayerNorms (weight, bias), QKV and
output projections and two MLP matrices (weight, bias each): 12; Llama's ``wq``, ``wk``, ``wv``,
``wo``, ``w1``, ``w2``, ``w3`` and two RMSNorm weights: 9."""


def hooked_tensors(model: Mapping[str, Any]) -> int | None:
    """The parameter tensors DeepSpeed ZeRO-3 fetches and releases per pass (``config.model``):
    :data:`BLOCK_TENSORS` per block, plus GPT-2's token and position embeddings and final LayerNorm
    (4), Llama's token embedding and final RMSNorm (2) and its untied output (1). None for another
    ``arch`` (``hf``) or a model without ``n_layer``."""
    arch = model.get("arch", "gpt2")
    per_block, layers = BLOCK_TENSORS.get(arch), model.get("n_layer")
    if per_block is None or not isinstance(layers, int):
        return None
    extra = 4 if arch == "gpt2" else 2 + (0 if model.get("tie_embeddings", True) else 1)
    return per_block * layers + extra


def applies_to(backend: Mapping[str, Any], world_size: Any, device: Any) -> bool:
    """Whether the floor applies: DeepSpeed ZeRO-3 (``config.backend``) on one CUDA rank, nothing
    offloaded."""
    return (
        backend.get("name") == "deepspeed"
        and backend.get("zero_stage") == 3
        and str(world_size) == "1"
        and device == "cuda"
        and backend.get("offload_optimizer") in ("none", None)
        and backend.get("offload_param") in ("none", None)
    )


def applies(record: Mapping[str, Any]) -> bool:
    """:func:`applies_to` of a record (or its view): its ``config.backend``, world size
    (``system.world_size``, else ``config.nproc_per_node`` x ``config.nnodes``) and ``config.device``."""
    world = value_at(record, ("system", "world_size"))
    if world is None:
        nproc, nodes = value_at(record, ("config", "nproc_per_node")), value_at(record, ("config", "nnodes"))
        world = int(nproc) * int(nodes or 1) if str(nproc).isdigit() else nproc
    backend = value_at(record, ("config", "backend"))
    device = value_at(record, ("config", "device"))
    return isinstance(backend, Mapping) and applies_to(backend, world, device)


def kept_for(target: Workload | None) -> bool:
    """Whether a measured one-GPU ZeRO-3 step keeps its floor when carried to ``target``: a ZeRO-3
    target on several ranks, where the floor is not modelled (their records overlap it with
    communication; Llama 3.1 8B on two H200s ran faster than on one) and the measured step is carried
    over whole, as before the floor. False for None (no target named)."""
    return (
        target is not None
        and target.backend == "deepspeed"
        and target.zero_stage == 3
        and target.world_size > 1
    )


def floor_s(n_params: float) -> float:
    """ZeRO-3's floor on one GPU for a model of ``n_params`` parameters, seconds per step."""
    return PER_PARAMETER_S * max(0.0, float(n_params))


def executed_flops(record: Mapping[str, Any], hardware_flops: float) -> float:
    """The FLOPs of ``hardware_flops`` (a record's step, the recompute as what ran:
    :func:`flopsweep.predict.workload_from_record`) that its attention kernel executed: the attention square
    halved where the kernel (``config.attention.name``) skips the masked tiles, as
    :func:`flopsweep.metrics.executed_flops` counts a run. The square's share per token comes from the
    family's counts of ``config.model`` (attention density ``config.attention.density``, else 1): of the
    model FLOPs, ``12 l h s rho`` of ``6 N + 12 l h s rho``; of the recompute (``hardware_flops`` less
    ``metrics.model_flops_per_iteration``), the share of the forward that ran again (``metrics.recompute``;
    a compiled ``full`` counted before session 30 ran as ``early_stop``). ``hardware_flops`` unchanged for a
    kernel that computes the whole square or a block-sparse layout, ``hf`` and a model the family cannot
    read."""
    from flopsweep.attention import KERNELS
    from flopsweep.models import recorded_config

    attention, model = value_at(record, ("config", "attention")), value_at(record, ("config", "model"))
    model_flops = value_at(record, ("metrics", "model_flops_per_iteration"))
    name = attention.get("name") if isinstance(attention, Mapping) else None
    found = recorded_config(model, default_arch="gpt2")
    if name not in KERNELS or not KERNELS[name].skips_masked or name == "blocksparse":
        return hardware_flops
    if found is None or not isinstance(model_flops, int | float):
        return hardware_flops
    fam, cfg = found
    density = attention.get("density") or 1.0
    mode = value_at(record, ("metrics", "recompute"))
    if mode in (None, "none") or (mode == "full" and recompute_read.ran_share(record) < 1):
        mode = "early_stop"  # what ran (flopsweep.recompute_read); none: no recompute to weigh
    try:
        per_token, bare = fam.model_flops(cfg, 1, density), fam.model_flops(cfg, 1, 0.0)
        again = fam.hardware_flops(cfg, 1, density, mode) - per_token
        again_square = 1 - (fam.hardware_flops(cfg, 1, 0.0, mode) - bare) / again
        square = 1 - bare / per_token
    except (TypeError, ValueError, ZeroDivisionError):
        return hardware_flops
    recompute = max(0.0, hardware_flops - model_flops)
    return hardware_flops - 0.5 * (square * min(model_flops, hardware_flops) + again_square * recompute)


def gemm_tflops(record: Mapping[str, Any]) -> tuple[float, str] | None:
    """The fastest a record's GPU runs matmuls (TFLOP/s) and what that is: the dense GEMM rate it measured
    (``metrics.measured_matmul_tflops``), else its datasheet peak (``metrics.peak_tflops``); None with
    neither."""
    for key, what in (("measured_matmul_tflops", "measured GEMM rate"), ("peak_tflops", "datasheet peak")):
        rate = value_at(record, ("metrics", key))
        if isinstance(rate, int | float) and rate > 0:
            return float(rate), what
    return None


def record_floor(
    record: Mapping[str, Any],
    n_params: float,
    *,
    work_s: float | None = None,
    hardware_flops: float | None = None,
) -> tuple[float, str]:
    """The floor inside a measured record's step (seconds) and, where it is not the fitted one, why (for a
    ``source``, ``"; ..."``; else ``""``). :func:`floor_s` of its ``n_params`` where :func:`applies`, else
    0; where the fitted floor would leave nothing of ``work_s`` (the step less its optimizer and exposed
    communication), the part that leaves the FLOPs it executed (:func:`executed_flops` of its
    ``hardware_flops``) at its GPU's :func:`gemm_tflops`, ``work_s - executed / rate``; 0 where even that
    is nothing, or without ``hardware_flops`` or a rate. Llama 3.1 8B on one H200, eager, no checkpointing,
    micro batch 1 (``h200/frontier/zero3-none-L33``: 0.866 s, optimizer 0.246 s): 0.479 s of the fitted
    0.751 s, where nothing was taken out before (the whole step carried as compute, 164 TFLOP/s).

    Where the fitted floor leaves something it is taken out whole, even where what is left runs faster
    than the GEMM rate (Llama 3.1 8B with ``full`` checkpointing at micro batch 2 and 3): bounding those
    too was tried and not kept (docs/prediction-zero3.md)."""
    floor = floor_s(n_params) if applies(record) else 0.0
    if not floor or work_s is None or work_s > floor:
        return floor, ""
    rate = gemm_tflops(record)
    if not hardware_flops or rate is None:
        return 0.0, ""
    executed = executed_flops(record, hardware_flops)
    room = work_s - executed / (rate[0] * 1e12)
    if not room > 0:
        return 0.0, ""
    said = f"{figure(executed / 1e12, 4)} TFLOP executed at its {rate[1]}, {figure(rate[0], 4)} TFLOP/s"
    return room, f"; of its fitted {figure(floor)} s, what leaves its {said}"


def with_floor(compute: Compute, n_params: float) -> Compute:
    """``compute`` with the target's floor (:func:`floor_s`) added to its compute and said at the end
    of its ``source``; the layer probe's whole step (``kind`` ``layers``) and a floor of 0 leave it
    unchanged. The caller checks
    :func:`applies_to` for the target."""
    floor = floor_s(n_params)
    if compute.kind == "layers" or not floor > 0:
        return compute
    said = SOURCE.format(
        floor=figure(floor), ps=figure(PER_PARAMETER_S * 1e12), params=format_count(float(n_params))
    )
    return dataclasses.replace(
        compute, compute_s=compute.compute_s + floor, source=f"{compute.source}; {said}"
    )


def fit(pairs: Iterable[tuple[float, float, float]]) -> float | None:
    """The seconds per parameter ``c`` of ``T = W + c P`` over ``(T, W, P)`` that minimises the sum of
    squared relative errors ``((W + c P) / T - 1)^2`` (closed form:
    ``sum (T - W) P / T^2 / sum P^2 / T^2``). None without a usable triple (all positive)."""
    pts = [(t, w, p) for t, w, p in pairs if t and w and p and t > 0 and w > 0 and p > 0]
    if not pts:
        return None
    return sum((t - w) * p / t**2 for t, w, p in pts) / sum(p * p / t**2 for t, w, p in pts)
