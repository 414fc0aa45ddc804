"""What the nearest-set-up prediction (:mod:`flopsweep.nearest`) compares of a record or of a target about
to run (:class:`Measured`, :func:`describe`), and the keys it groups records by: the set-up
(:func:`setup_of`), the set-up whatever its checkpointing policy (:func:`base_key`) and the GPU kind
(:func:`gpu_kind`). Torch-free."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from flopsweep import identity, peaks, recompute_read
from flopsweep.record import value_at
from flopsweep.workload import PredictionError, Workload

HOST = "host"
""":attr:`Measured.backend`'s optimizer family of a run whose optimizer steps on the host (FSDP2's
``cpu_offload``, ZeRO-Offload: :func:`flopsweep.predict.optimizer_family` None). Such a step is bound
by the host's AdamW over the fp32 states and the parameters and gradients crossing to and from it
each step, which scale with the parameters a rank updates, not with the FLOPs: between two such runs
the whole step carries over per parameter (one H200: Llama 3.2 1B FSDP2 ``cpu_offload`` 2.2-2.4 ns
per parameter, Llama 3.1 8B at 29 blocks 2.4 ns)."""


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What :func:`flopsweep.nearest.candidates` compares of one record (or of a target about to run): the
    set-up (:func:`flopsweep.identity.setup_key`: the config less the rank count, with the GPU's name), the
    GPU kind (the peak table's row name, else the name as given), and the keys of
    :data:`flopsweep.nearest.RULE`."""

    name: str
    record: dict[str, Any]
    setup: str | None
    gpu: str | None
    device: str
    precision: str
    compile: str
    attention: str
    experts: str
    """``model.experts`` of ``model=hf`` MoE configs (``eager`` loops over the experts, ``grouped_mm`` one
    grouped GEMM: OLMoE-1B-7B FSDP2 on one H200 ran 28 against 175 TFLOP/s); ``None`` for other models."""
    moe: bool
    """A mixture of experts (``model.n_active_params`` below ``n_params``, or ``top_k`` > 0)."""
    backend: tuple[str, str, str]
    """``(name, calibration group such as deepspeed-3, optimizer family or`` :data:`HOST` ``)``."""
    knobs: str
    policy: str
    n_params: int
    tokens: int
    """Tokens per micro batch: ``micro_batch_size x seq_len``."""
    world: int
    workload: Workload
    base: str | None = None
    """The set-up whatever its checkpointing policy (:func:`base_key`): the records one target's
    policy siblings share (:func:`flopsweep.nearest.order` sorts by it ahead of the policy)."""
    edge: bool | None = None
    """Whether a target is at the memory edge by today's memory estimate (:func:`estimated_edge`: set by
    :func:`flopsweep.forecast.prediction` for the job, ``plan=true`` and the tuner, and by
    ``benchmarks/nearest_loo.py``); None where unknown (:func:`describe` leaves it so). A target off the
    edge (False) takes a record that ran unsteady at the edge last
    (:func:`flopsweep.nearest.unsteady_edge`)."""


def gpu_kind(device_name: Any) -> str | None:
    """The peak table's row name of ``device_name`` (``NVIDIA H200`` and ``H200`` are ``H200 SXM``), else
    the name itself; None without one."""
    if not isinstance(device_name, str) or not device_name.strip():
        return None
    row = peaks.lookup(device_name)
    return row.name if row else device_name.strip()


def describe(
    name: str, record: dict[str, Any], workload: Workload | None = None, *, device_name: str | None = None
) -> Measured | None:
    """The :class:`Measured` of ``record`` (a record, or ``{"config": ..., "system": ...}`` of a target),
    its :class:`Workload` ``workload`` or the record's; ``device_name`` in place of ``system.device_name``.
    None when the record has no config or no counts (:func:`flopsweep.predict.workload_from_record`)."""
    from flopsweep.predict import backend_knobs, backend_of, optimizer_family, workload_from_record

    config = record.get("config")
    if not isinstance(config, dict):
        return None
    try:
        w = workload or workload_from_record(record)
    except (PredictionError, TypeError, ValueError):
        return None
    device_name = device_name or value_at(record, ("system", "device_name"))
    system = {**(record.get("system") or {}), "device_name": device_name}
    setup = setup_of({**record, "system": system})
    only = lambda path: identity.calibration_key(record, only=path)  # noqa: E731 - today's form of a key
    backend = config.get("backend") if isinstance(config.get("backend"), dict) else {}
    return Measured(
        name=name,
        record=record,
        setup=setup,
        gpu=gpu_kind(device_name),
        device=str(config.get("device") or "cuda"),
        precision=w.precision,
        compile=only(("config", "compile")),
        attention=only(("config", "attention")),
        experts=str(value_at(record, ("config", "model", "experts"))),
        moe=_moe(record, w),
        backend=(str(backend.get("name")), backend_of(record), optimizer_family(record) or HOST),
        knobs=json.dumps(
            backend_knobs(backend), sort_keys=True, default=str
        ),  # a knob it predates: its default
        policy=_policy(json.loads(only(("config", "activation_checkpointing")))),
        n_params=w.n_params,
        tokens=w.micro_batch_size * w.seq_len,
        world=w.world_size,
        workload=w,
        base=base_key({**record, "system": system}),
    )


def estimated_edge(peak_gib: Any, device_name: str | None) -> bool | None:
    """Whether an estimated peak of ``peak_gib`` GiB per rank is at the memory edge of the GPU ``device_name``
    (:func:`flopsweep.memory_edge.at_edge`, its capacity :func:`flopsweep.memory_edge.device_capacity_bytes`);
    None where the estimate or the GPU's memory is unknown."""
    from flopsweep import memory_edge

    capacity = memory_edge.device_capacity_bytes(device_name)
    if not isinstance(peak_gib, int | float) or isinstance(peak_gib, bool) or capacity is None:
        return None
    return memory_edge.at_edge(peak_gib * memory_edge.GIB, capacity)


def base_key(record: dict[str, Any]) -> str | None:
    """:func:`flopsweep.identity.setup_key` of ``record`` with its checkpointing policy set to ``none``
    (its stored ``run`` keys left out): one key for the records of a set-up at every policy, on the same
    GPU; None for a record without a config or of a schema it cannot read."""
    config = record.get("config")
    if not isinstance(config, dict):
        return None
    plain = {k: v for k, v in record.items() if k != "run"}
    plain["config"] = {**config, "activation_checkpointing": {"name": "none"}}
    return setup_of(plain)


def _moe(record: dict[str, Any], w: Workload) -> bool:
    active = value_at(record, ("model", "n_active_params"))
    return w.top_k > 0 or (isinstance(active, int) and 0 < active < w.n_params)


def _policy(value: Any) -> str:
    """A checkpointing policy's name (a policy dict by its ``name``)."""
    return str(value.get("name", "")) if isinstance(value, dict) else str(value)


def device_of(m: Measured) -> str | None:
    """``m``'s ``system.device_name`` (a target's: the GPU it is predicted on), None where none is named."""
    name = value_at(m.record, ("system", "device_name"))
    return name if isinstance(name, str) and name.strip() else None


def setup_of(record: dict[str, Any]) -> str | None:
    """:func:`flopsweep.identity.setup_key` of a record or its view (whose ``schema_version`` is None
    where the record had none: read as current); None for a schema it cannot read."""
    if "schema_version" in record and record["schema_version"] is None:
        record = {k: v for k, v in record.items() if k != "schema_version"}
    try:
        return identity.setup_key(record)
    except Exception:  # noqa: BLE001 - an unknown schema: a set-up of its own
        return None


def pool_of(records: Iterable[tuple[str, dict[str, Any]]]) -> list[Measured]:
    """:func:`describe` of each record that has what :func:`flopsweep.nearest.candidates` compares (others
    are left out)."""
    return [m for n, r in records if (m := describe(n, r)) is not None]


def closest(found: Sequence[tuple[Any, float, Measured]]) -> tuple[float, Measured, int]:
    """Of ``(key, value, record)`` triples (at least one), the median value of those whose key is least
    (the nearest set-ups that measured a factor or a term: :func:`flopsweep.nearest.dispatch`,
    :func:`flopsweep.nearest_wrap.overhead`), the first of those records (named in the source) and how
    many tie with it."""
    best = min(key for key, _, _ in found)
    near = [(value, m) for key, value, m in found if key == best]
    return statistics.median(v for v, _ in near), near[0][1], len(near) - 1


FULL_RECOMPUTE = 4 / 3
"""Hardware over model FLOPs of a record with full checkpointing made before
``hardware_flops_per_iteration`` was recorded: the forward (a third of the model FLOPs) runs again
(:func:`flopsweep.metrics.hardware_flops`)."""


def hardware_flops(m: Measured) -> float:
    """Hardware FLOPs per rank of one step of ``m``, the recompute as what ran (the workload's,
    :func:`flopsweep.recompute_read.ran_flops`); a record with full checkpointing that predates
    ``hardware_flops_per_iteration`` counts its model FLOPs x :data:`FULL_RECOMPUTE`, read alike."""
    w = m.workload
    flops = w.hardware_flops
    if (
        m.policy == "full"
        and w.hardware_flops == w.model_flops
        and "metrics" in m.record
        and value_at(m.record, ("metrics", "hardware_flops_per_iteration")) is None
    ):
        flops = recompute_read.ran_flops(m.record, w.model_flops * FULL_RECOMPUTE, w.model_flops)
    return flops / w.world_size


def executed_flops(m: Measured) -> float:
    """FLOPs per rank of one step of ``m`` that its attention kernel executed: :func:`hardware_flops` with
    the attention square halved where the kernel skips the masked tiles (a record's,
    :func:`flopsweep.zero3_floor.executed_flops`; a planned run's, ``Workload.executed_flops`` of
    :func:`flopsweep.forecast.workload`, :func:`flopsweep.metrics.executed_flops`). The FLOPs convention
    counts the full ``s^2`` square (docs/metrics.md), which a causal kernel halves: on hardware FLOPs, the
    Llama 3.2 3B record at 131,072 tokens (`h200/session20/seq-frontier/seq128k-3b`) ran 887 TFLOP/s, over its
    measured GEMM rate of 699; on these, 495. The nearest set-up carries a rate on these where the rate on
    hardware FLOPs is over the record's measured GEMM rate (:func:`gemm_rate`,
    :func:`flopsweep.nearest.transfer`). Per rank, FLOP."""
    from flopsweep import zero3_floor

    w, flops = m.workload, hardware_flops(m)
    if isinstance(m.record.get("metrics"), dict):  # a record: its kernel and recompute as recorded
        return zero3_floor.executed_flops(m.record, flops * w.world_size) / w.world_size
    if w.executed_flops is not None and w.hardware_flops > 0:  # a planned run: its workload's count
        return flops * w.executed_flops / w.hardware_flops
    return flops


def gemm_rate(m: Measured) -> float | None:
    """``m``'s measured dense GEMM rate (``metrics.measured_matmul_tflops``), FLOP/s; None where it measured
    none. No step's compute runs faster: :func:`flopsweep.nearest.transfer` reads a record whose rate on
    hardware FLOPs exceeds it as one whose count holds work its kernel skipped (the causal square's masked
    half), and carries the rate on :func:`executed_flops`, at most this."""
    gemm = value_at(m.record, ("metrics", "measured_matmul_tflops"))
    if isinstance(gemm, bool) or not isinstance(gemm, int | float) or not gemm > 0:
        return None
    return float(gemm) * 1e12


EXECUTED_WORDS = (
    "its rate on hardware FLOPs ran over its measured GEMM rate: the attention square counted as the kernel "
    "executed it, both sides, the rate at most that"
)
"""What a nearest source says where the record's rate is carried on executed FLOPs (:func:`gemm_rate`)."""
