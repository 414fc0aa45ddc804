"""Host-bound records in the nearest-set-up prediction (:mod:`flopsweep.nearest`): a step set by the host's
per-operator work, not by the FLOPs, carried as a floor rather than as a rate.

A record is **host-bound** (:func:`bound`) where its whole-step rate on hardware FLOPs per rank is under
:data:`HOST_BOUND_SHARE` of the median rate of its peers (:func:`peer_key`: the records of its datasheet peak,
device type, precision, compile, attention kernel, dense or MoE and, for a MoE, experts kernel): its GPU waits
on the host (Qwen3-1.7B FSDP2 compiled at sequence 128, micro batch 2, on one H100: 0.135 s a step, 19.7
TFLOP/s, 0.040 of its peers' median). Such a step does not grow with the work, so its rate carried by the
FLOPs (``t = F_t / R``) is wrong both ways. Instead, for a run ``t``:

    t_c = max(t_host x g_t / g_r, F_t / R_dev)

``t_host`` the host-bound record's step less its optimizer and exposed communication
(:attr:`flopsweep.nearest.Transferred.own_s`), only where the run's host work is the record's
(:func:`host_work_differs`: the same model, backend and knobs, optimizer, compile, precision, kernels,
checkpointing policy, world size and degrees; ``g`` the grad accumulation, the host's work per micro batch
counted), and ``R_dev`` the rate of the nearest compute-bound record (the rule run without the host-bound
records). Torch-free; seconds, FLOP/s.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from flopsweep import peaks, zero3_floor
from flopsweep.nearest_measured import HOST, Measured, hardware_flops
from flopsweep.record import value_at
from flopsweep.text import figure

HOST_BOUND_SHARE = 0.1
"""A record's whole-step rate under this share of its peers' median is host-bound (:func:`bound`). The
committed CUDA records (345 on the GPU side, ZeRO-3 on one GPU left out: its floor is
:mod:`flopsweep.zero3_floor`'s) split with a gap: the two Qwen3-1.7B FSDP2 records of sequence 128 at 0.028
and 0.040, then the Llama 3.1 8B FSDP2 runs at the memory edge at 0.29 and up; 0.1 is about the geometric
middle of 0.040 and 0.29 (docs/prediction-nearest.md#host-bound-records-session-40)."""


def whole_rate(m: Measured) -> float | None:
    """``m``'s hardware FLOPs per rank over its mean step, FLOP/s (its optimizer and communication
    inside); None without a mean step."""
    step = value_at(m.record, ("metrics", "iteration_time_s", "mean"))
    if not isinstance(step, int | float) or isinstance(step, bool) or step <= 0:
        return None
    return hardware_flops(m) / step


def peak_of(m: Measured) -> float | None:
    """The datasheet dense peak of ``m``'s GPU at its precision, TFLOP/s; None where unknown."""
    return peaks.peak_tflops(m.gpu, m.precision)[0] if m.gpu else None


def peer_key(m: Measured) -> tuple[Any, ...]:
    """The records whose rate ``m``'s is held against: the same datasheet peak (else GPU kind), device
    type, precision, compile, attention kernel, dense or MoE and, for a MoE, experts kernel (the keys
    :data:`flopsweep.nearest.RULE` puts ahead of the backend; a dense model's ``experts`` is meaningless)."""
    return (
        peak_of(m) or m.gpu,
        m.device,
        m.precision,
        m.compile,
        m.attention,
        m.moe,
        m.experts if m.moe else None,
    )


MIN_PEERS = 3
"""Records of its peers besides itself that a record's rate is held against; with fewer its share is 1.0
(not judged): one other record is no rate of the kind."""


def judged(m: Measured) -> bool:
    """Whether ``m`` is one :func:`bound` judges: ``ok``, with a step, its optimizer on the GPU (a host
    optimizer's step is per parameter: :data:`flopsweep.nearest_measured.HOST`), not one-GPU ZeRO-3 (its
    floor is modelled: :mod:`flopsweep.zero3_floor`), its whole-step rate not over its GPU's datasheet peak
    (no compute rate as read, :func:`flopsweep.nearest.transfer` passes it over)."""
    rate, peak = whole_rate(m), peak_of(m)
    return (
        m.record.get("status") == "ok"
        and m.backend[2] != HOST
        and not zero3_floor.applies(m.record)
        and rate is not None
        and (peak is None or rate <= peak * 1e12)
    )


def shares(pool: Sequence[Measured]) -> dict[str, float]:
    """Each :func:`judged` record of ``pool`` by name: its :func:`whole_rate` over the median of its
    peers' in ``pool`` (:func:`peer_key`, itself included; 1.0 with under :data:`MIN_PEERS` others)."""
    groups: dict[tuple[Any, ...], list[float]] = {}
    rated = [(m, r) for m in pool if judged(m) and (r := whole_rate(m))]
    for m, r in rated:
        groups.setdefault(peer_key(m), []).append(r)
    return {
        m.name: r / statistics.median(g) if len(g := groups[peer_key(m)]) > MIN_PEERS else 1.0
        for m, r in rated
    }


def bound(pool: Sequence[Measured]) -> dict[str, float]:
    """The host-bound records of ``pool`` by name, with their share of the peers' median rate
    (:func:`shares` under :data:`HOST_BOUND_SHARE`)."""
    return {name: share for name, share in shares(pool).items() if share < HOST_BOUND_SHARE}


def _model(m: Measured) -> tuple[Any, ...]:
    return (value_at(m.record, ("config", "model", "name")), m.n_params)


def host_work_differs(target: Measured, m: Measured) -> str:
    """The first way ``target``'s host work per micro batch differs from ``m``'s, in words (``""``: the
    same): the model and its parameters, backend and its knobs, optimizer, compile, precision, attention
    and experts kernel, checkpointing policy (a recompute runs the forward's operators again), world
    size and degrees. The tokens do not count: the host launches the same operators for any shape."""
    keys = (
        ("model", _model),
        ("backend", lambda x: (x.backend, x.knobs)),
        ("compile", lambda x: x.compile),
        ("precision", lambda x: x.precision),
        ("attention", lambda x: x.attention),
        ("model.experts", lambda x: x.experts),
        ("activation_checkpointing", lambda x: x.policy),
        ("world size", lambda x: x.world),
        ("degrees", lambda x: {k: v for k, v in x.workload.degrees.items() if v != 1}),
    )
    return next((key for key, of in keys if of(target) != of(m)), "")


def _compiled(m: Measured) -> bool:
    """Whether ``m`` ran ``compile=true`` (:attr:`Measured.compile` is the key as JSON)."""
    try:
        return bool(json.loads(m.compile))
    except (TypeError, ValueError):
        return False


def lower_bound(target: Measured, m: Measured) -> bool:
    """Whether ``m``'s host work is a lower bound on an eager ``target``'s that is otherwise the same: ``m``
    compiled, on the target's device type, and :func:`host_work_differs` naming only the compile setting.
    ``compile_scope=block`` compiles each block's operators into fused kernels launched from one graph and
    leaves FSDP2's hooks (unshard, reshard, reduce-scatter and their copies) eager around them, so compiling
    removes host work and adds none that grows with it (Qwen3-1.7B FSDP2 at sequence 128 on one H100: 0.227 s
    eager, 0.135 s compiled); the eager step is at least the compiled one's host work. The reverse is no
    bound."""
    return (
        _compiled(m)
        and not _compiled(target)
        and m.device == target.device
        and m.setup != target.setup
        and host_work_differs(dataclasses.replace(target, compile=m.compile), m) == ""
    )


def floor_records(
    target: Measured, full: Sequence[Measured], pool: Sequence[Measured], shares_of: dict[str, float]
) -> list[Measured]:
    """The host-bound records (``shares_of``) that may floor ``target``: those of ``full`` (its candidates,
    nearest first), then for an eager target the compiled ones of ``pool`` whose host work is a
    :func:`lower_bound` on its own (in ``pool``'s order), each once."""
    mine = [m for m in full if m.name in shares_of]
    seen = {m.name for m in mine}
    return mine + [m for m in pool if m.name in shares_of and m.name not in seen and lower_bound(target, m)]


def _mfu(m: Measured) -> str:
    rate, peak = whole_rate(m), peak_of(m)
    return f"MFU {rate / (peak * 1e12):.1%}" if rate and peak else "MFU unknown"


def floor(
    target: Measured,
    ranked: Sequence[Measured],
    shares_of: dict[str, float],
    own_of: Callable[[Measured], float | None],
    first: Measured | None,
) -> tuple[float, str]:
    """The floor on ``target``'s compute from the host-bound records ``ranked`` (nearest first), and its
    words: the median :attr:`~flopsweep.nearest.Transferred.own_s` (``own_of``) of the first set-up whose
    host work is the target's (:func:`host_work_differs`), times the grad accumulation ratio. ``(0.0,
    words)`` where none is (said only where a host-bound record was passed over: ``first`` the nearest
    record of the rule run over every record, None where the host-bound records were kept); ``(0.0, "")``
    without host-bound records."""
    if not ranked:
        return 0.0, ""
    for m in ranked:
        compiled = lower_bound(target, m)
        if host_work_differs(target, m) and not compiled:
            continue
        same = [x for x in ranked if (x.setup or x.name, x.gpu) == (m.setup or m.name, m.gpu)]
        owns = [s for x in same if (s := own_of(x)) is not None and s > 0]
        if not owns:
            continue
        step = value_at(m.record, ("metrics", "iteration_time_s", "mean"))
        ratio = target.workload.grad_accum / m.workload.grad_accum
        seconds = statistics.median(owns) * ratio
        scaled = f" x{figure(ratio)} grad accumulation" if ratio != 1 else ""
        same_work = (
            "compiled, a lower bound on the eager run's host work (the same model, backend, policy and world "
            "size; compiling fuses the blocks' operators and leaves FSDP2's hooks eager)"
            if compiled
            else "the same model, backend, compile, policy and world size"
        )
        return seconds, (
            f"host-bound reference {m.name} ({_mfu(m)}, {figure(shares_of[m.name], 2)} x its peers' "
            f"median rate): "
            f"its {figure(step)} s step a floor, {figure(seconds)} s of compute{scaled} (less its optimizer "
            f"and exposed communication; {same_work}: the host's per-operator work, unscaled by the tokens "
            f"or any GPU ratio), the compute the larger of it and the compute-bound rate's "
            f"(docs/prediction-nearest.md)"
        )
    if first is None or first.name not in shares_of:
        return 0.0, ""
    return 0.0, (
        f"host-bound reference {first.name} ({_mfu(first)}, {figure(shares_of[first.name], 2)} x "
        f"its peers' median "
        f"rate) passed over: its {host_work_differs(target, first)} not the run's, so its step is no floor "
        f"for it; the nearest compute-bound record's rate (docs/prediction-nearest.md)"
    )
