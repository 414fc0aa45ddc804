"""The compute of a set-up never measured, from the nearest set-up that was (``compute_source: nearest``).

Behind the probes and a calibration record of the same set-up, ahead of the flat FLOPs estimate
(:func:`flopsweep.compute_time.compute_uncalibrated`), the job, the plan and the tuner
(:mod:`flopsweep.forecast`) and the analysis (:func:`flopsweep.predict_record.predict_record`) pick the most
similar measured set-up, not the target's own (:func:`candidates`, :data:`RULE`), and carry over what it
measured, independent of the model:

    R     = F_r / (t_r - t_opt,r - t_exp,r)        achieved FLOP/s on hardware FLOPs per rank
    t_c   = F_t / R x peak_r / peak_t              the target's per-rank compute
    t_opt = rate_t x P_t                           seconds per parameter a rank updates x its parameters

``F`` the hardware FLOPs per rank of a step (a record before ``hardware_flops_per_iteration`` with full
checkpointing: its model FLOPs x 4/3, the forward run again; an older record's compiled checkpointed block's
recompute as what its backward reads, :mod:`flopsweep.recompute_read`), ``t`` the mean step, ``t_opt`` and
``t_exp`` its optimizer and exposed communication (:func:`flopsweep.predict.measured_parts`), ``rate_t`` the
optimizer's seconds per parameter of the target's optimizer on the target's GPU
(:func:`flopsweep.predict.optimizer_rate` over the records left, each scaled by its GPU's datasheet memory
bandwidth over the target's: a memory-bound step) and ``P_t`` the parameters a rank updates; ``peak`` the
datasheet dense peak of the precision (1 on the same GPU kind). Where no rate separates the optimizer of
both, it stays inside ``R``; a record whose ``R`` exceeds its GPU's datasheet peak measured no compute rate
and is passed over. A record whose ``R`` exceeds its measured GEMM rate ``G_r`` counted work its kernel
skipped (the causal square's masked half, at long sequences): its ``R`` and the target's ``F`` are on executed
FLOPs instead (:func:`flopsweep.nearest_measured.executed_flops`), ``R`` at most ``G_r`` (:func:`gemm_rate`).
Torch-free; seconds, FLOP.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from flopsweep import (
    fp8_cast,
    memory_edge,
    nearest_host,
    nearest_wrap,
    noise,
    peaks,
    zero3_floor,
)
from flopsweep.nearest_measured import (  # noqa: F401 - FULL_RECOMPUTE, hardware_flops: nearest.X as before
    EXECUTED_WORDS,
    FULL_RECOMPUTE,
    HOST,
    Measured,
    closest,
    device_of,
    executed_flops,
    gemm_rate,
    hardware_flops,
    setup_of,
)
from flopsweep.nearest_words import SCALED, scaled_from, unmeasured_degrees  # noqa: F401 - nearest.X as before
from flopsweep.record import value_at
from flopsweep.text import figure, format_count, plural
from flopsweep.workload import Compute, PredictionError, Workload

RULE = (
    "same device type, precision, compile and optimizer side, the GPU or the host (identity.HOST_OFFLOAD) "
    "(required; an fp8 run that no such record stands for takes "
    "its recipe at the other compile setting, then bf16 eager, the eager float8 casts moved: "
    "flopsweep.fp8_cast); a GPU kind of the same datasheet peak first (H100 and H200 SXM alike), another "
    "scaled by the peak ratio; then the same attention kernel; the same "
    "experts kernel (model.experts); dense or mixture of experts alike; for a run off the memory edge, a "
    "record that did not run unsteady at it (nearest.unsteady_edge); for a compiled one-rank DDP, ZeRO-1/2 "
    "or FSDP2 run, a record of a backend alike on one rank (single, FSDP2, DDP, ZeRO-1/2; for FSDP2 single "
    "or FSDP2), of its model "
    "family, then the nearest model, its backend's cost added per parameter (flopsweep.nearest_wrap); "
    "the same backend, ZeRO stage and optimizer; the nearest "
    "model by |ln(parameters ratio)| + |ln(tokens per micro batch ratio)| + |ln(sequence length ratio)|; "
    "the nearest world size; the same backend knobs; "
    "the same GPU kind; one set-up whatever its policy (the siblings' shared base); in it a record off "
    "the memory edge, the same checkpointing policy, else selective last and the nearest recompute share; "
    "the name"
)
"""The picking rule (:func:`candidates`) in full (docs/prediction-nearest.md)."""

RULE_SHORT = (
    "same GPU peak (else scaled), precision, compile and optimizer side (GPU or host); then kernel, experts "
    "kernel, dense or MoE, off the memory edge a steady record, compiled one-rank DDP, ZeRO-1/2 or FSDP2 "
    "its model family and model first, backend, stage and optimizer, nearest parameters, tokens per micro "
    "batch and sequence length, world size, backend knobs, GPU kind, then in that set-up the policy "
    "(docs/prediction-nearest.md)"
)
""":data:`RULE` in the words every ``nearest`` source ends with: each key :func:`order` sorts by."""


def _peak(gpu: str | None, precision: str) -> float | None:
    return peaks.peak_tflops(gpu, precision)[0] if gpu else None


def _log_gap(a: float, b: float) -> float:
    return abs(math.log(a / b)) if a > 0 and b > 0 else math.inf


DISPATCH_POLICIES = ("selective",)
"""Policies whose step pays a cost beyond its counted FLOPs (``selective``: the per-operator dispatch of
its policy function), so that its rate on hardware FLOPs is not another policy's: a base set-up's record
of such a policy stands for another policy only where the base measured no other (:func:`order`)."""


def recompute_share(m: Measured) -> float:
    """Hardware over model FLOPs of ``m``'s step (1: no recompute; :func:`hardware_flops`)."""
    model = m.workload.model_flops / m.workload.world_size
    return hardware_flops(m) / model if model > 0 else 1.0


def same_peak(target: Measured, m: Measured) -> bool:
    """Whether ``m``'s GPU kind has ``target``'s known datasheet peak for its precision (H100 SXM, H200
    SXM): :func:`order` takes them as one kind (the same kind a tie-break after the model), so one set-up
    on either takes one base record, x1 (before, an 8B H100 run took a gpt-2.7b H100 record, its H200
    twin 8B's own, and the H100 came out faster)."""
    peak = _peak(target.gpu, target.precision)
    return peak is not None and peak == _peak(m.gpu, target.precision)


def order(target: Measured, m: Measured) -> tuple[Any, ...]:
    """The sort key of :data:`RULE` (smaller: nearer). No key ahead of the base set-up (:attr:`Measured.base`)
    reads the target's policy, so targets that differ only in it (a plan's policy siblings) take one base
    set-up, each its own policy's record there, else the nearest recompute share's (:data:`DISPATCH_POLICIES`
    last) scaled by the hardware FLOPs (:func:`transfer`; docs/prediction-nearest.md). No key ahead of the
    model reads the GPU kind beyond its peak (:func:`same_peak`). A target off the memory edge
    (:attr:`Measured.edge` False) takes a record that ran unsteady at it (:func:`unsteady_edge`) after every
    other, ahead of the backend. A compiled one-rank DDP, ZeRO-1/2 or FSDP2 target takes a record of its
    model family, then the nearest model, ahead of the backend
    (:func:`flopsweep.nearest_wrap.model_first`)."""
    return (
        m.gpu != target.gpu and not same_peak(target, m),
        m.attention != target.attention,
        m.experts != target.experts,
        m.moe != target.moe,
        target.edge is False and unsteady_edge(m),
        *nearest_wrap.model_first(target, m, model_gap),
        m.backend[0] != target.backend[0],
        m.backend[1] != target.backend[1],
        m.backend[2] != target.backend[2],
        model_gap(target, m),
        _log_gap(target.world, m.world),
        m.knobs != target.knobs,
        m.gpu != target.gpu,
        m.base or m.name,
        retried(m),
        m.policy != target.policy,
        m.policy in DISPATCH_POLICIES,
        round(_log_gap(recompute_share(target), recompute_share(m)), 9),
        m.name,
    )


def _said(value: Any) -> str:
    """A config value for :func:`differences` (a dict by its ``name``; JSON text parsed first)."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            value = json.loads(value)
        except ValueError:
            pass
    if isinstance(value, dict):
        value = value.get("name", json.dumps(value, sort_keys=True, default=str))
    return str(value)


def differences(target: Measured, m: Measured) -> list[str]:
    """Each way the record ``m`` differs from ``target`` that :func:`order` sorts by, in its order, as
    ``"KEY TARGET'S vs RECORD'S"`` texts: the attention kernel, the experts kernel, dense or MoE, the backend
    (:func:`flopsweep.predict.backend_differences`: its name, else its ZeRO stage and knobs), the
    optimizer side, the checkpointing policy, the model (its name, else its parameters), the sequence
    length, the micro batch (the two make the tokens per micro batch), the world size and the layout's
    tensor, pipeline, context and expert parallel degrees (which :func:`order` does not sort by). The GPU kind
    is said by the source's scaling (:func:`_compute`); the device never differs, precision and compile
    only for a stand-in (:func:`flopsweep.fp8_cast.stand_ins`), said first. Empty: the same set-up on
    another GPU kind."""
    from flopsweep.predict import backend_differences

    kinds = (("precision", target.precision, m.precision), ("compile", target.compile, m.compile))
    out = [f"{key} {a} vs {b}" for key, a, b in kinds if a != b]  # a stand-in's (fp8_cast.stand_ins)
    if m.attention != target.attention:
        out.append(f"attention {_said(target.attention)} vs {_said(m.attention)}")
    if m.experts != target.experts:
        out.append(f"model.experts {target.experts} vs {m.experts}")
    if m.moe != target.moe:
        out.append(f"experts {'MoE' if target.moe else 'dense'} vs {'MoE' if m.moe else 'dense'}")
    out += backend_differences(target.record, m.record)
    if m.backend[2] != target.backend[2]:
        out.append(f"optimizer side {target.backend[2]} vs {m.backend[2]}")
    if m.policy != target.policy:
        out.append(f"activation_checkpointing {target.policy} vs {m.policy}")
    names = [_said(value_at(r, ("config", "model", "name"))) for r in (target.record, m.record)]
    if names[0] != names[1]:
        out.append(f"model {names[0]} vs {names[1]}")
    elif m.n_params != target.n_params:
        out.append(f"parameters {format_count(target.n_params)} vs {format_count(m.n_params)}")
    t, w = target.workload, m.workload
    if t.seq_len != w.seq_len:
        out.append(f"model.seq_len {t.seq_len} vs {w.seq_len}")
    if t.micro_batch_size != w.micro_batch_size:
        out.append(f"batch.micro_batch_size {t.micro_batch_size} vs {w.micro_batch_size}")
    if m.world != target.world:
        out.append(f"world size {target.world} vs {m.world}")
    for degree in ("tp", "pp", "cp", "ep"):  # a layout's degree: its own costs beyond the modelled traffic
        mine, theirs = t.degrees.get(degree, 1), w.degrees.get(degree, 1)
        if mine != theirs:
            out.append(f"parallel.{degree} {mine} vs {theirs}")
    return out


def candidates(
    target: Measured, pool: Iterable[Measured], *, stand_in: bool = True
) -> tuple[list[Measured], str]:
    """The records of ``pool`` that may stand for ``target``, nearest first (:data:`RULE`), and, when
    there are none, why. Never a record of the target's own set-up (the same config less the rank
    count, on the same GPU kind); only ``ok`` records with a mean step time; of the target's optimizer
    side (the GPU or the host, :data:`flopsweep.nearest_measured.HOST`: a host-bound step's rate says
    nothing of one on the GPU), device type, precision and compile; on another GPU kind only where both
    GPUs' datasheet peaks for the precision are known (to scale by). With ``stand_in``, an fp8 target
    that no such record stands for takes those of the first of :func:`flopsweep.fp8_cast.stand_ins` that
    has some (its recipe at the other compile setting, then bf16 eager for an eager one), :func:`transfer`
    moving the eager float8 casts (:mod:`flopsweep.fp8_cast`)."""
    pool = list(pool)
    usable = [
        m
        for m in pool
        if m.record.get("status") == "ok"
        and isinstance(value_at(m.record, ("metrics", "iteration_time_s", "mean")), int | float)
        and m.name != target.name
        and not (target.setup is not None and m.setup == target.setup and m.gpu == target.gpu)
    ]
    if not usable:
        return [], f"none of the {len(pool)} records read is an ok record of another set-up"
    side = [m for m in usable if (m.backend[2] == HOST) == (target.backend[2] == HOST)]
    if not side:  # a host-bound step's rate says nothing of one on the GPU, nor the reverse
        where = "the host" if target.backend[2] == HOST else "the GPU"
        return [], (
            f"none of the {len(usable)} ok records of other set-ups steps its optimizer on {where}, as the "
            "run does (backend.cpu_offload, backend.offload_optimizer: identity.HOST_OFFLOAD)"
        )
    usable = side
    found, why = _of_kind(target, usable, target.precision, target.compile)
    for precision, compiled in fp8_cast.stand_ins(target.precision, target.compile) if stand_in else ():
        if found:
            break
        found = _of_kind(target, usable, precision, compiled)[0]
    return sorted(found, key=lambda m: order(target, m)), "" if found else why


def _of_kind(
    target: Measured, usable: list[Measured], precision: str, compiled: str
) -> tuple[list[Measured], str]:
    """The records of ``usable`` on ``target``'s device type that ran ``precision`` with compile ``compiled``
    and can be scaled to its GPU kind by its own precision's peaks (:func:`candidates`), else none and why."""
    own, target = target.precision, dataclasses.replace(target, precision=precision, compile=compiled)
    same = [m for m in usable if m.device == target.device and m.precision == target.precision]
    if not same:
        return (
            [],
            f"none of the {len(usable)} ok records of other set-ups ran {target.precision} on "
            f"{target.device}",
        )
    same = [m for m in same if m.compile == target.compile]
    if not same:
        return [], f"no ok record of another set-up ran {target.precision} with compile {target.compile}"
    scalable = [
        m
        for m in same
        if m.gpu == target.gpu or target.gpu is None or (_peak(m.gpu, own) and _peak(target.gpu, own))
    ]
    if not scalable:
        return [], (
            f"the {len(same)} records of {target.precision} and compile {target.compile} ran on GPUs whose "
            f"{target.precision} peak, or the {target.gpu}'s, the peak table lacks (nothing to scale by)"
        )
    return scalable, ""


def _params_per_rank(w: Workload) -> float:
    from flopsweep.compute_time import optimizer_shards

    return w.n_params / (w.degree("tp") * w.degree("pp") * optimizer_shards(w))


@dataclass(frozen=True, kw_only=True)
class Transferred:
    """One record's compute carried over to the target: seconds per step per rank."""

    name: str
    compute_s: float
    optimizer_s: float
    rate_tflops: float
    """The record's achieved TFLOP/s on hardware FLOPs per rank (its compute part)."""
    host_ns: float | None = None
    """Nanoseconds of step per parameter a rank updates, where both step on the host (:data:`HOST`)."""
    cast: str = ""
    """Where ``m`` stands in for another precision or compile setting (:func:`flopsweep.fp8_cast.stand_ins`):
    the eager float8 casts taken out of its step and added to the target's, in words."""
    own_s: float = 0.0
    """``m``'s own step less its optimizer and exposed communication, seconds
    (:mod:`flopsweep.nearest_wrap`)."""
    executed: bool = False
    """Whether :attr:`rate_tflops` is on executed FLOPs (:func:`gemm_rate`: the record's rate on hardware
    FLOPs ran over its measured GEMM rate), the target's compute counted alike."""


def transfer(
    target: Measured,
    m: Measured,
    *,
    rates: dict[str, tuple[float, str] | None],
    measured_rates: dict[str, tuple[float, str] | None] | None = None,
) -> Transferred | None:
    """``m``'s measured step carried over to ``target`` (module docstring); ``rates`` the optimizer rate
    per optimizer family on the target's GPU (:func:`flopsweep.predict.optimizer_rate`, scaled by memory
    bandwidth; None: unknown), ``measured_rates`` on ``m``'s GPU (default ``rates``), for a record whose
    profile does not separate its optimizer. None when nothing is left of ``m``'s step for compute (its
    optimizer and exposed communication fill it), or its parts cannot be read (a multi-rank record with
    neither a profile nor a probe: no bandwidth for its communication)."""
    from flopsweep.predict import measured_parts

    at_m = rates if measured_rates is None else measured_rates
    try:
        step, optimizer, exposed, _ = measured_parts(
            m.name, m.record, rate=at_m.get(m.backend[2]), target=target.workload
        )
    except PredictionError:
        return None
    if target.backend[2] == HOST == m.backend[2]:  # both step on the host: per parameter, not per FLOP
        per_parameter = (step - exposed) / _params_per_rank(m.workload)
        if not per_parameter > 0 or not hardware_flops(m) > 0:
            return None
        whole = per_parameter * _params_per_rank(target.workload)
        rate = hardware_flops(m) / step / 1e12
        return Transferred(
            name=m.name,
            compute_s=whole,
            optimizer_s=0.0,
            rate_tflops=rate,
            host_ns=per_parameter * 1e9,
            own_s=step - exposed,
        )
    own = rates.get(target.backend[2])
    separated = optimizer is not None and own is not None and target.backend[2] != HOST
    fb = step - exposed - (optimizer if separated else 0.0)
    out, add, cast = 0.0, 0.0, ""
    if (m.precision, m.compile) != (target.precision, target.compile):  # a stand-in (fp8_cast.stand_ins)
        out, add, cast = fp8_cast.moved(target, m)
    fb -= out
    if not fb > 0 or not hardware_flops(m) > 0:
        return None
    count, rate = hardware_flops, hardware_flops(m) / fb
    peak = _peak(m.gpu, target.precision)
    gemm = gemm_rate(m)
    if gemm is not None and rate > gemm:  # more than its GPU's GEMMs run: count what the kernel executed
        count, rate = executed_flops, min(executed_flops(m) / fb, gemm)
    elif peak is not None and rate > peak * 1e12:  # faster than its GPU can: no compute rate in its step
        return None
    scale = 1.0
    if target.gpu is not None and m.gpu != target.gpu:
        scale = _peak(target.gpu, target.precision) / _peak(m.gpu, target.precision)
    compute = count(target) / rate / scale + add
    opt = own[0] * _params_per_rank(target.workload) if separated else 0.0  # own: on the target's GPU
    kept = dict(cast=cast, own_s=fb + out, executed=count is executed_flops)
    return Transferred(name=m.name, compute_s=compute, optimizer_s=opt, rate_tflops=rate / 1e12, **kept)


def nearest_compute(
    target: Measured,
    pool: Sequence[Measured],
    records: Sequence[tuple[str, dict[str, Any]]] | None = None,
    *,
    hosts: bool = True,
) -> tuple[Compute | None, str, Measured | None]:
    """The target's :class:`Compute` from the nearest set-up of ``pool`` (:func:`candidates`): every
    record of that set-up (its repeats) on that GPU kind carried over (:func:`transfer`), the median
    compute and optimizer; with ``""`` and the nearest record. ``records``: those the optimizer rates
    are taken over (default: ``pool``'s, the target's own set-up left out either way). With ``hosts``, the
    host-bound records (:func:`flopsweep.nearest_host.bound`) stand for none while a compute-bound one
    does, a floor where their host work is the target's (:func:`flopsweep.nearest_host.floor`).
    ``(None, why, None)`` when no record may stand for it."""
    from flopsweep.predict import optimizer_rate

    full, why = candidates(target, pool)
    whole, bound = pool, nearest_host.bound(pool) if hosts else {}  # no rate: the rule without them
    if bound and any(m.name not in bound for m in full):
        pool = [m for m in pool if m.name not in bound]
    ranked = full if pool is whole else [m for m in full if m.name not in bound]
    if not ranked:
        return None, f"no nearest set-up: {why}", None
    others = [  # selective's dispatch measured with the other compile setting too (:func:`dispatch`)
        m
        for c in sorted({str(m.compile) for m in pool} - {str(target.compile)})
        for m in candidates(dataclasses.replace(target, compile=c), pool, stand_in=False)[0]
    ]
    own = {target.setup} if target.setup is not None else set()
    source = [
        (n, r)
        for n, r in (records if records is not None else [(m.name, m.record) for m in pool])
        if isinstance(value_at(r, ("metrics", "breakdown")), dict) and n != target.name
    ]
    source = [(n, r) for n, r in source if not own or setup_of(r) not in own]
    cache: dict[tuple[str, str | None], tuple[float, str] | None] = {}

    def rates(family: str, device_name: str | None) -> tuple[float, str] | None:
        if (family, device_name) not in cache:
            found = optimizer_rate(source, family, device_name) if family != HOST else None
            cache[family, device_name] = found
        return cache[family, device_name]

    tried: set[tuple[str | None, str | None]] = set()
    for first in ranked:
        group = (first.setup or first.name, first.gpu)
        if group in tried:
            continue
        tried.add(group)
        same = [m for m in ranked if (m.setup or m.name, m.gpu) == group]
        families = {target.backend[2], *(m.backend[2] for m in same)}
        on = device_of(target) or device_of(first)  # no GPU named: at the speed of the nearest's
        table = {f: rates(f, on) for f in families}
        done = [
            t
            for m in same
            if (
                t := transfer(
                    target, m, rates=table, measured_rates={f: rates(f, device_of(m)) for f in families}
                )
            )
            is not None
        ]
        if not done:
            continue

        def carried_of(m: Measured, on: str | None = on) -> Transferred | None:
            fams = {target.backend[2], m.backend[2]}
            measured = {f: rates(f, device_of(m)) for f in fams}
            return transfer(target, m, rates={f: rates(f, on) for f in fams}, measured_rates=measured)

        def rate_of(m: Measured) -> float | None:
            t = carried_of(m)
            return t.rate_tflops if t is not None and t.host_ns is None else None

        def own_of(m: Measured) -> float | None:
            t = carried_of(m)
            return t.own_s if t is not None else None

        carried = dispatch(target, first, ranked + others, rate_of) if done[0].host_ns is None else (1.0, "")
        wrap = nearest_wrap.overhead(target, first, ranked + others, own_of, model_gap)
        hb = nearest_host.floor_records(target, full, whole, bound)  # a floor wherever ranked, or compiled
        floor = nearest_host.floor(target, hb, bound, own_of, full[0] if ranked is not full else None)
        return _compute(target, first, done, table, carried, wrap, floor), "", first
    if pool is not whole:  # no compute-bound record has compute time left: the host-bound ones as measured
        return nearest_compute(target, whole, records, hosts=False)
    return None, "no nearest set-up: no record of the nearest set-ups has compute time left", None


def dispatch(
    target: Measured, first: Measured, ranked: Sequence[Measured], rate_of: Callable[[Measured], float | None]
) -> tuple[float, str]:
    """The factor on the compute carried from ``first`` where one of the target's policy and ``first``'s
    is a :data:`DISPATCH_POLICIES` policy and the other not, and its words: the other policies' rate on
    hardware FLOPs (``rate_of``) over that policy's in the nearest set-up of ``ranked`` that ran both (on
    one GPU kind and world size): for a compiled target a compiled one, then of the target's backend
    (where the backend breaks the block's graph and runs hooks, the dispatch shows), then by
    :func:`model_gap`, compile and world size; the median of ties (a cost per eager operator: FSDP2
    gpt-1.3b eager ran ``selective`` 1.10 to 1.59 x slower per FLOP than ``full``, Llama 3.1 8B compiled
    1.03 to 1.1 x).
    Records at the memory edge (:func:`retried`) and one-GPU ZeRO-3 set-ups (floor-bound,
    :func:`flopsweep.zero3_floor.applies`) measure no dispatch."""
    mine = target.policy in DISPATCH_POLICIES
    if mine == (first.policy in DISPATCH_POLICIES):
        return 1.0, ""
    policy = target.policy if mine else first.policy
    bases: dict[tuple[str | None, int, str | None], list[Measured]] = {}
    for m in ranked:
        bases.setdefault((m.base or m.name, m.world, m.gpu), []).append(m)
    found: list[tuple[tuple[Any, ...], float, Measured]] = []
    for ms in bases.values():
        if {m.policy == policy for m in ms} != {True, False} or zero3_floor.applies(ms[0].record):
            continue
        slow = [r for m in ms if m.policy == policy and not retried(m) and (r := rate_of(m))]
        fast = [r for m in ms if m.policy not in DISPATCH_POLICIES and not retried(m) and (r := rate_of(m))]
        if slow and fast:
            m = ms[0]
            eager = target.compile != "false" and m.compile == "false"  # a cost a compiled step never pays
            key = (eager, m.backend != target.backend, model_gap(target, m), m.compile != target.compile)
            found.append(
                (
                    (*key, _log_gap(target.world, m.world)),
                    statistics.median(fast) / statistics.median(slow),
                    m,
                )
            )
    if not found:
        return 1.0, f"{policy}'s dispatch measured in no set-up beside another policy: at its FLOPs' rate"
    factor, m, ties = closest(found)
    model = _said(value_at(m.record, ("config", "model", "name")))
    where = f"{model} {m.backend[0]} micro batch {m.workload.micro_batch_size} on {m.world} {m.gpu}"
    where += f", compile {m.compile}" if m.compile != target.compile else ""
    if ties:
        where += f" and {plural(ties, 'tied set-up')}"
    said = (
        f"{policy}'s dispatch: {policy} at {figure(1 / factor)} x the rate of the other policies, "
        f"as measured in the nearest set-up that ran both ({where})"
    )
    return (factor if mine else 1 / factor), said


def retried(m: Measured) -> bool:
    """Whether ``m`` ran at the memory edge (``metrics.cuda_alloc_retries`` > 0): its step holds the caching
    allocator's frees and retries, a cost of its memory, not of its policy's work."""
    retries = value_at(m.record, ("metrics", "cuda_alloc_retries"))
    return isinstance(retries, int | float) and retries > 0


def unsteady_edge(m: Measured) -> bool:
    """Whether ``m`` ran unsteady at the memory edge: its measured peak
    (``metrics.peak_cuda_allocated_bytes``) at the edge of its GPU's memory
    (:func:`flopsweep.memory_edge.at_edge`) and its steps noisy (``metrics.iteration_time_s.cv`` over
    :data:`flopsweep.noise.NOISY_CV`), so that its mean step holds
    stalls the step model does not count (Llama 3.1 8B fp8 FSDP2 `none` of micro batch 2 on one H200, 123.6
    of 140.4 GiB, 137.5 reserved, steps 0.43-0.76 s: 432 TFLOP/s where the 8B fp8 `single` records ran
    610-700). :func:`order` takes such a record last for a target off the edge (:attr:`Measured.edge`
    False), ahead of the backend. A one-GPU ZeRO-3 set-up is not one: its step is its floor's
    (:func:`flopsweep.zero3_floor.applies`), noisy or not."""
    peak = value_at(m.record, ("metrics", "peak_cuda_allocated_bytes"))
    capacity = memory_edge.device_capacity_bytes(device_of(m))
    return (
        isinstance(peak, int | float)
        and memory_edge.at_edge(peak, capacity)
        and noise.noisy(value_at(m.record, ("metrics", "iteration_time_s", "cv")))
        and not zero3_floor.applies(m.record)
    )


def model_gap(target: Measured, m: Measured) -> float:
    """:func:`order`'s model distance of ``m`` from ``target``: the ``|ln|`` of the parameters, tokens
    per micro batch and sequence length ratios summed, to 9 places (0: the same model and micro batch)."""
    return round(
        _log_gap(target.n_params, m.n_params)
        + _log_gap(target.tokens, m.tokens)
        + _log_gap(target.workload.seq_len, m.workload.seq_len),
        9,
    )


def _compute(
    target: Measured,
    first: Measured,
    done: list[Transferred],
    rates: dict[str, tuple[float, str] | None],
    carried: tuple[float, str] = (1.0, ""),
    wrap: tuple[float, str] = (0.0, ""),
    floor: tuple[float, str] = (0.0, ""),
) -> Compute:
    names = ", ".join(t.name for t in done[:3]) + (f" and {len(done) - 3} more" if len(done) > 3 else "")
    differs = differences(target, first)
    words = [
        f"nearest: {names} ({len(done)} of its set-up"
        + (f"; differs in {'; '.join(differs)}" if differs else "")
        + ")",
        f"{figure(statistics.median([t.rate_tflops for t in done]), 4)} TFLOP/s on hardware FLOPs per rank",
    ]
    if done[0].executed:
        words[1] = words[1].replace("hardware FLOPs per rank", f"executed FLOPs per rank ({EXECUTED_WORDS})")
    if done[0].host_ns is not None:  # both step on the host: the whole step per parameter
        words[1] = (
            f"optimizer on the host in both: the whole step carried over per parameter a rank updates, "
            f"{figure(statistics.median([t.host_ns for t in done]))} ns (the host's, unscaled by any GPU "
            "ratio)"
        )
    if target.gpu is not None and first.gpu != target.gpu and done[0].host_ns is None:
        scale = _peak(target.gpu, target.precision) / _peak(first.gpu, target.precision)
        words.append(f"measured on {first.gpu}, {SCALED} {target.precision} peak ratio {figure(scale)}")
    elif target.gpu is None and first.gpu is not None:
        words.append(f"no GPU named: at the speed of {first.gpu}")
    if done[0].cast:
        words.append(done[0].cast)
    if carried[1]:
        words.append(carried[1])
    words += [w for w in (wrap[1], floor[1]) if w]
    own = rates.get(target.backend[2])
    if own is not None and any(t.optimizer_s > 0 for t in done):
        words.append(f"optimizer {figure(own[0] * 1e12)} ps per parameter a rank updates ({own[1]})")
    elif done[0].host_ns is None:
        words.append("optimizer not separated: inside the rate")
    return Compute(
        compute_s=max(statistics.median([t.compute_s for t in done]) * carried[0] + wrap[0], floor[0], 0.0),
        optimizer_s=statistics.median([t.optimizer_s for t in done]),
        source="; ".join(words) + f"; rule: {RULE_SHORT}",
        kind="nearest",
    )
