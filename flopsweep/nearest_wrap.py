"""One-rank data parallel wrapping in the nearest-set-up prediction (:mod:`flopsweep.nearest`): a model's
record before a record of the target's backend, the backend's own cost carried as a measured term.

On one rank, ``ddp``, ZeRO-1 and ZeRO-2 run the forward and backward of ``single`` (or FSDP2's, which
shards nothing there) with a data parallel wrapper around them: DDP's bucket copies, DeepSpeed's flat
gradient partition and its copies, their optimizers. The compute rate of such a step is the model's
(eager Llama runs more small kernels per FLOP than eager GPT-2: RoPE, RMSNorm, SwiGLU), the wrapper's
cost a term per parameter. So for a compiled one-rank target of a wrapping backend (:data:`WRAPPING`),
:func:`flopsweep.nearest.order` takes a record of the target's model family (``model.arch``), then
the nearest model (:func:`flopsweep.nearest.model_gap`), among the one-rank-alike backends
(:data:`ONE_RANK`; for FSDP2 :data:`FSDP_ALIKE`), before the backend, and :func:`overhead` adds the
wrapper's cost measured in the nearest set-up that ran both backends:

    t_w = (c_B - c_A) / P x P_t        c: a record's step less its optimizer and exposed communication

``A`` the nearest record's backend, ``B`` the target's, ``P`` the pair's parameters, ``P_t`` the
target's (session 32: eight one-H200 set-ups no record ran; docs/prediction-nearest.md). FSDP2 on one rank
(session 39) runs bf16 parameters with no autocast and copies them through its all-gathers and
reduce-scatters: over ``single`` +4.1 ps (H100) and +4.8 ps (H200) a parameter compiled, but faster eager
(``benchmarks/fsdp_single_pairs.py``, docs/prediction-host-optimizer.md); so its pair is one of the target's
compile setting first, then a steady one. An eager target keeps
the backend first: an eager step carries a cost per step of its many small kernels that a rate per FLOP
carried from another micro batch does not hold (Llama 3.2 3B DDP eager at micro batch 2 from the 3B ZeRO-1
eager record at 4: -37%, against -20% from gpt-1.3b DDP eager). Torch-free; seconds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from flopsweep.nearest_measured import HOST, Measured, closest
from flopsweep.noise import noisy
from flopsweep.record import value_at
from flopsweep.text import figure

WRAPPING = ("ddp", "deepspeed-1", "deepspeed-2", "fsdp")
"""Backend groups (:attr:`Measured.backend` ``[1]``) whose one-rank step is another's wrapped: the
targets :func:`model_first` reorders."""

ONE_RANK = ("single", "ddp", "deepspeed-1", "deepspeed-2", "fsdp")
"""Backend groups whose one-rank forward and backward is ``single``'s (ZeRO-3's is floor-bound:
:mod:`flopsweep.zero3_floor`; an optimizer on the host is per parameter: :data:`HOST`)."""


FSDP_ALIKE = ("single", "fsdp")
"""Backend groups whose records a compiled one-rank FSDP2 target takes ahead of its backend: ``single``'s
(FSDP2's step is it and a cost per parameter), not DDP's or ZeRO's (their own wrappers')."""


def cv_of(m: Measured) -> object:
    """``m``'s step coefficient of variation (``metrics.iteration_time_s.cv``), None when unknown."""
    return value_at(m.record, ("metrics", "iteration_time_s", "cv"))


def family(m: Measured) -> str:
    """``m``'s model family: ``model.arch`` (``llama``, ``gpt2``), the model's name for ``hf`` models."""
    arch = value_at(m.record, ("config", "model", "arch"))
    if arch in (None, "hf"):
        return str(value_at(m.record, ("config", "model", "name")))
    return str(arch)


def wrapped(target: Measured) -> bool:
    """Whether ``target`` is one rank of a wrapping backend (:data:`WRAPPING`), its optimizer on the GPU."""
    return target.world == 1 and target.backend[1] in WRAPPING and target.backend[2] != HOST


def alike(m: Measured, target: Measured | None = None) -> bool:
    """Whether ``m``'s backend runs ``single``'s forward and backward on one rank (:data:`ONE_RANK`); for an
    FSDP2 ``target``, whether ``m`` ran ``single`` or FSDP2 (:data:`FSDP_ALIKE`)."""
    if target is not None and target.backend[1] == "fsdp":
        return m.backend[1] in FSDP_ALIKE and m.backend[2] != HOST
    return m.backend[1] in ONE_RANK and m.backend[2] != HOST


def model_first(target: Measured, m: Measured, gap: Callable[[Measured, Measured], float]) -> tuple[Any, ...]:
    """:func:`flopsweep.nearest.order`'s keys ahead of the backend: for a compiled :func:`wrapped` target,
    a record of a backend not :func:`alike` last, then another model family, then the model ``gap``; a
    constant for any other target (the order unchanged)."""
    if not wrapped(target) or target.compile == "false":
        return (False, False, 0.0)
    if not alike(m, target):
        return (True, True, math.inf)
    return (False, family(m) != family(target), gap(target, m))


def _pair_key(m: Measured) -> tuple[Any, ...]:
    w = m.workload
    name = value_at(m.record, ("config", "model", "name"))
    return (str(name), m.n_params, m.tokens, w.seq_len, m.precision, m.compile, m.policy, m.attention, m.gpu)


def overhead(
    target: Measured,
    first: Measured,
    pool: Sequence[Measured],
    own_of: Callable[[Measured], float | None],
    gap: Callable[[Measured, Measured], float],
) -> tuple[float, str]:
    """Seconds the target's backend adds to (or takes from) the compute carried from ``first`` where
    ``target`` is :func:`wrapped` and ``first`` ran another :func:`alike` backend, and its words: the
    difference of the two backends' step less optimizer and exposed communication (``own_of``; a
    record's median over repeats) per parameter, in the nearest one-rank set-up of ``pool`` that ran
    both (the target's model family first, then by ``gap``, compile, policy and GPU kind; for FSDP2 the
    target's compile setting first, then steady records' (no ``noisy_steps``), then the family and ``gap``:
    its cost changes sign with compile; the median of ties), times the target's parameters. ``(0.0, "")``
    where it does not apply; ``(0.0, why)`` where no set-up ran both."""
    if not wrapped(target) or not alike(first, target) or first.backend[:2] == target.backend[:2]:
        return 0.0, ""
    mine, theirs = target.backend[:2], first.backend[:2]
    groups: dict[tuple[Any, ...], list[Measured]] = {}
    for m in pool:
        if m.world == 1 and m.backend[:2] in (mine, theirs) and m.backend[2] != HOST:
            groups.setdefault(_pair_key(m), []).append(m)
    found: list[tuple[tuple[Any, ...], float, Measured]] = []
    for ms in groups.values():
        b = [c for m in ms if m.backend[:2] == mine and (c := own_of(m)) is not None]
        a = [c for m in ms if m.backend[:2] == theirs and (c := own_of(m)) is not None]
        if a and b and ms[0].n_params > 0:
            m = ms[0]
            key = (family(m) != family(target), gap(target, m), m.compile != target.compile)
            if mine[1] == "fsdp":  # FSDP2 over single changes sign with compile; one stalled step moves it
                key = (m.compile != target.compile, any(noisy(cv_of(x)) for x in ms), *key[:2])
            key = (*key, m.policy != target.policy, m.gpu != target.gpu)
            found.append((key, (statistics.median(b) - statistics.median(a)) / m.n_params, m))
    names = f"{target.backend[1]} over {first.backend[1]}"
    if not found:
        return 0.0, f"{names}: no one-rank set-up ran both, nothing added"
    per, m, _ = closest(found)
    model = value_at(m.record, ("config", "model", "name"))
    where = f"{model} micro batch {m.workload.micro_batch_size} {m.policy}, compile {m.compile} on {m.gpu}"
    said = (
        f"{names}: {'+' if per >= 0 else ''}{figure(per * 1e12)} ps per parameter, as measured in "
        f"the nearest one-rank set-up that "
        f"ran both ({where})"
    )
    return per * target.n_params, said
