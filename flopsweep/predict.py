"""The step-time model's calibration from records, and the model's one public face.

The model itself (:class:`Workload`, :func:`transfers`, :func:`predict`: docs/prediction.md)
is :mod:`flopsweep.steptime`, re-exported here, so that ``flopsweep.predict.X`` is
every name of the two. This module holds the side that reads records (the job, ``plan=true`` and
``python -m analysis --predict`` share it): which record calibrates a run
(:func:`pick_calibration`, :func:`calibration_key`), the :class:`Workload` of a record, the
optimizer rates, overlaps and bus bandwidths that profiled records imply (a record's own prediction
from them: :func:`flopsweep.predict_record.predict_record`). Torch-free. Units: seconds, bytes, GB/s
(1e9 bytes/s), FLOP.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from flopsweep import identity, peaks, recompute_read, zero3_floor
from flopsweep.backend_specs import backend_spec
from flopsweep.calibration_order import (  # noqa: F401 - MICRO_BATCH, micro_batch_distance: flopsweep.predict.X
    MICRO_BATCH,
    key_micro_batch,
    loose_key,
    micro_batch_distance,
    seconds_apart,
    started_seconds,
)
from flopsweep.config import typed_form
from flopsweep.identity import CALIBRATION_KEYS  # re-exported: the calibration's match
from flopsweep.record import value_at
from flopsweep.steptime import (  # noqa: F401 - flopsweep.predict.X, as every caller uses them
    ASSUMED_NVLINK_SHARE,
    COLLECTIVES,
    DATASHEET_GEMM_FRACTION,
    DEFAULT_OVERLAP,
    FP32,
    HOST_HEAD_RULE,
    MODELLED,
    NO_INTER_NODE_FIX,
    NO_INTRA_NODE_FIX,
    NVLINK_GBPS,
    PARAM_BYTES,
    UNCALIBRATED_GEMM_FRACTION,
    UNKNOWN_OVERLAP,
    Compute,
    Link,
    Prediction,
    PredictionError,
    ProbeTimes,
    Transfer,
    Workload,
    assumed_link,
    busbw_factor,
    calibrated_overlap,
    comm_seconds,
    compute_from_calibration,
    compute_from_probe,
    compute_uncalibrated,
    data_parallel_transfers,
    default_overlap,
    exposed_optimizer_s,
    foreign_bandwidth,
    link_from_probe,
    optimizer_shards,
    predict,
    transfers,
)
from flopsweep.text import figure

# Records: the calibration side (the job, ``plan=true`` and ``analysis --predict`` share it).

VIEW_SYSTEM_KEYS = ("world_size", "nproc_per_node", "parallel", "hostname", "device_name", "interconnect")
"""The ``system`` keys a prediction reads of a record (:func:`calibration_view`)."""


def _scalars(tree: Any) -> dict[str, Any]:
    """The keys of a dict whose values are JSON scalars (text, numbers, bools, null)."""
    if not isinstance(tree, dict):
        return {}
    return {k: v for k, v in tree.items() if v is None or isinstance(v, str | int | float | bool)}


def calibration_view(record: dict[str, Any]) -> dict[str, Any]:
    """What the prediction reads of a record, to keep in place of the whole parsed file
    (``predict.calibration=`` and ``python -m analysis --predict`` hold every record at once):
    ``status``, ``schema_version``, ``run.id`` and ``run.started_at``, the ``config`` and ``model``
    sections, :data:`VIEW_SYSTEM_KEYS` of ``system``, and of ``metrics`` its scalars,
    ``iteration_time_s`` without its ``values`` (one per measured step), ``breakdown`` and
    ``predicted``. A prediction from views equals the prediction from the records
    (``tests/unit/test_analysis_safety_4.py``)."""
    system, run = record.get("system"), record.get("run")
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
    kept = _scalars(metrics)
    if isinstance(metrics.get("iteration_time_s"), dict):
        kept["iteration_time_s"] = _scalars(metrics["iteration_time_s"])
    for key in ("breakdown", "predicted"):
        if isinstance(metrics.get(key), dict):
            kept[key] = metrics[key]
    return {
        "schema_version": record.get("schema_version"),
        "status": record.get("status"),
        "run": {k: run[k] for k in ("id", "started_at") if k in run} if isinstance(run, dict) else {},
        "config": record.get("config"),
        "model": record.get("model"),
        "system": {k: system[k] for k in VIEW_SYSTEM_KEYS if k in system} if isinstance(system, dict) else {},
        "metrics": kept,
    }


def backend_of(record: dict[str, Any]) -> str:
    """The record's backend with its ZeRO stage (``deepspeed-3``): what overlap and bandwidth
    calibrations group by."""
    backend = value_at(record, ("config", "backend")) or {}
    name = value_at(record, ("config", "backend", "name"))
    spec = backend_spec(name)
    return spec.calibration_group(backend) if spec else str(name)


def calibration_key(
    record: dict[str, Any], *, micro_batch: bool = True, only: tuple[str, ...] | None = None
) -> str:
    """The :data:`CALIBRATION_KEYS` of a record (or of ``{"config": asdict(cfg)}``) as one text
    (:func:`flopsweep.identity.calibration_key`); without the micro batch when ``micro_batch`` is
    False; with ``only`` (one of the keys), that one value."""
    return identity.calibration_key(record, micro_batch=micro_batch, only=only)


def backend_differences(record: dict[str, Any], calibration: dict[str, Any]) -> list[str]:
    """The backend settings (``config.backend``) in which ``calibration`` differs from ``record``:
    the name (alone when it differs), the ZeRO stage and every knob (a knob that a record
    predates reads as its schema's default, :data:`flopsweep.options.OPTION_SCHEMAS`: the
    behaviour it ran with), as
    ``"backend.KEY VALUE vs CALIBRATION'S"`` texts; empty when they agree."""
    a = backend_knobs(value_at(record, ("config", "backend")) or {})
    b = backend_knobs(value_at(calibration, ("config", "backend")) or {})
    if a.get("name") != b.get("name"):  # another backend: its knobs are not comparable
        return [f"backend.name {a.get('name')} vs {b.get('name')}"]
    keys = sorted((a.keys() | b.keys()) - {"name"})
    return [f"backend.{k} {a.get(k)} vs {b.get(k)}" for k in keys if a.get(k) != b.get(k)]


def backend_knobs(backend: dict[str, Any]) -> dict[str, Any]:
    """``backend`` (a record's ``config.backend``) with the knobs it lacks filled from its option's schema
    defaults (``OPTION_SCHEMAS["backend"]`` by ``name``; an unknown name is kept as it is): two records
    written before and after a knob was added compare alike (:func:`flopsweep.nearest`)."""
    import dataclasses

    from flopsweep.options import OPTION_SCHEMAS

    schema = OPTION_SCHEMAS["backend"].get(str(backend.get("name")))
    defaults = {
        f.name: f.default
        for f in (dataclasses.fields(schema) if schema else ())
        if f.default is not dataclasses.MISSING
    }
    return defaults | dict(backend)


def calibration_differences(record: dict[str, Any], calibration: dict[str, Any]) -> list[str]:
    """What a calibration record does not share with the run it would calibrate: each of
    :data:`CALIBRATION_KEYS` (model, attention, precision, checkpointing, compile, device, host offload,
    optimizer in backward and kernel, micro batch) and
    :func:`backend_differences`, as ``"KEY VALUE vs CALIBRATION'S"`` texts. Empty: a calibration
    of the same set-up; anything else is a borrowed record, not a calibration."""

    out = []
    for path in CALIBRATION_KEYS:
        mine, theirs = (json.loads(calibration_key(r, only=path)) for r in (record, calibration))
        if mine != theirs:
            a, b = _short(mine), _short(theirs)
            a, b = (a, b) if a != b else (json.dumps(mine, default=str), json.dumps(theirs, default=str))
            out.append(f"{'.'.join(path[1:])} {a} vs {b}")
    listed = {d.split(" ", 1)[0] for d in out}  # a host offload knob is one of both
    return out + [d for d in backend_differences(record, calibration) if d.split(" ", 1)[0] not in listed]


def _short(value: Any) -> str:
    """A config value for a one-line message (a policy dict by its name)."""
    if isinstance(value, dict):
        value = value.get("name", value)
    return str(value)


def world_of(record: dict[str, Any]) -> int | None:
    """The record's ``system.world_size`` (ranks in the run) when it is an int of at least 1 (not a
    bool), else None (a run that never launched, an older or damaged record)."""
    world = value_at(record, ("system", "world_size"))
    return world if isinstance(world, int) and not isinstance(world, bool) and world > 0 else None


def pick_calibration(
    key: str,
    world: int,
    backend: str | None,
    records: Iterable[tuple[str, dict[str, Any]]],
    *,
    backend_config: dict[str, Any] | None = None,
    hostname: str | None = None,
    micro_batch: bool = True,
    same_backend: bool = False,
    started_at: str | None = None,
    same_world: bool = False,
) -> tuple[str, dict[str, Any]] | None:
    """The calibration of a run (``key`` from :func:`calibration_key`, on ``world`` ranks): an
    ``ok`` record of ``records`` (``(name, record)`` pairs) with the same key at a smaller world
    size and a step time; the same backend first, then the same ZeRO stage (of ``backend_config``),
    then the nearest micro batch (:func:`micro_batch_distance`: with ``micro_batch`` False), then
    the same host (``hostname``: the same machine's GPUs, clocks and power limit), then the
    same backend knobs (``backend_config``), then the largest world size, then the nearest in time
    to ``started_at`` (ISO 8601, the run's ``run.started_at``: the same lease of a machine whose
    lent copies share one hostname), then the latest started, then the first name (only records alike
    in all of these: neither a name nor the listing order picks among set-ups). None when there is
    none. With ``micro_batch`` False, any micro batch matches ``key``: a full key
    (:func:`calibration_key`) puts the micro batch nearest its own first, one made without the micro
    batch leaves them unordered by it. With ``same_backend``, only a record of the same backend, stage and
    knobs (:func:`backend_differences` empty against ``backend_config``) counts: the strict
    calibration of the two-GPU check. With ``same_world``, a record on ``world`` ranks counts too
    (then first, as the largest): the job and ``plan=true`` predict from the best record there is,
    and a measured step of the set-up itself is that; the analysis keeps to smaller world sizes,
    whose predictions test the model rather than repeat a measurement."""
    wanted = None if micro_batch else key_micro_batch(key)
    key = key if micro_batch or wanted is None else loose_key(key)
    fits = [
        (name, r)
        for name, r in records
        if r.get("status") == "ok"
        and calibrates_world(world_of(r), world, same_world=same_world)
        and isinstance(value_at(r, ("metrics", "iteration_time_s", "mean")), int | float)
        and calibration_key(r, micro_batch=micro_batch) == key
    ]
    own = {"config": {"backend": backend_config}}
    if same_backend:
        fits = [(n, r) for n, r in fits if backend_config and not backend_differences(own, r)]
    if not fits:
        return None
    stage = backend_of(own) if backend_config else backend
    fits.sort(
        key=lambda nr: (
            value_at(nr[1], ("config", "backend", "name")) != backend,
            backend_of(nr[1]) != stage,
            micro_batch_distance(value_at(nr[1], MICRO_BATCH), wanted),
            hostname is None or value_at(nr[1], ("system", "hostname")) != hostname,
            backend_config is None or bool(backend_differences(own, nr[1])),
            value_at(nr[1], ("config", "backend")) != backend_config,  # knobs it predates: after
            -(world_of(nr[1]) or 0),
            seconds_apart(value_at(nr[1], ("run", "started_at")), started_at),
            -started_seconds(value_at(nr[1], ("run", "started_at"))),
            nr[0],
        )
    )
    return fits[0]


def calibrates_world(calibration: int | None, world: int, *, same_world: bool = False) -> bool:
    """Whether a record on ``calibration`` ranks (None: unknown, read as ``world``) may calibrate a
    run on ``world``: a smaller world size, or with ``same_world`` also the same one
    (:func:`pick_calibration`)."""
    ranks = calibration or world
    return ranks <= world if same_world else ranks < world


def workload_from_record(record: dict[str, Any], *, degrees: dict[str, int] | None = None) -> Workload:
    """The :class:`Workload` of a record (its config, ``model.n_params``, ``system.parallel`` and
    the FLOPs of its metrics, the recompute as what ran: :func:`flopsweep.recompute_read.ran_flops`);
    ``degrees`` replaces its layout (FLOPs scale with ``dp``).

    Raises:
        PredictionError: a record without the counts the model needs.
    """
    cfg, m, metrics = record.get("config") or {}, record.get("model") or {}, record.get("metrics") or {}
    own = value_at(record, ("system", "parallel")) or {"dp_shard": world_of(record) or 1}
    n_params, model_flops = m.get("n_params"), metrics.get("model_flops_per_iteration")
    if not isinstance(n_params, int) or not isinstance(model_flops, int | float):
        raise PredictionError(
            f"model.n_params={typed_form(n_params)}: a calibration record without model.n_params or "
            "metrics.model_flops_per_iteration cannot calibrate. Fix: give predict.calibration=PATH records "
            "a flopsweep run wrote (they carry both)"
        )
    hardware_flops = recompute_read.ran_flops(  # an older record's compiled recompute as what ran
        record, float(metrics.get("hardware_flops_per_iteration") or model_flops), float(model_flops)
    )
    own_dp = int(own.get("dp_replicate", 1) or 1) * int(own.get("dp_shard", 1) or 1)
    new = dict(degrees or own)
    scale = int(new.get("dp_replicate", 1) or 1) * int(new.get("dp_shard", 1) or 1) / own_dp
    backend, batch, parallel = cfg.get("backend") or {}, cfg.get("batch") or {}, cfg.get("parallel") or {}
    return Workload(
        backend=backend.get("name", "single"),
        zero_stage=backend.get("zero_stage"),
        precision=(cfg.get("precision") or {}).get("name", "bf16"),
        n_params=n_params,
        n_layer=int(m.get("n_layer") or cfg.get("model", {}).get("n_layer") or 1),
        n_embd=int(m.get("n_embd") or cfg.get("model", {}).get("n_embd") or 1),
        seq_len=int(m.get("seq_len") or cfg.get("model", {}).get("seq_len") or 1),
        micro_batch_size=int(batch.get("micro_batch_size") or 1),
        grad_accum=int(batch.get("grad_accum") or 1),
        degrees={k: int(v) for k, v in new.items() if isinstance(v, int)},
        pp_microbatches=parallel.get("pp_microbatches"),
        pp_stages_per_rank=int(parallel.get("pp_stages_per_rank") or 1),
        reshard_after_forward=bool(backend.get("reshard_after_forward", True)),
        model_flops=float(model_flops) * scale,
        hardware_flops=float(hardware_flops) * scale,
    )


def optimizer_family(record: dict[str, Any]) -> str | None:
    """Which optimizer a record's step runs, for :func:`optimizer_rate`: ``torch`` (``AdamW`` of
    ``single``, ``ddp``, ``fsdp``), ``deepspeed-fused`` or ``deepspeed-torch``
    (``backend.optimizer_impl``; a record before the key ran the fused one); None when it steps on
    the host (``cpu_offload``, ``offload_optimizer``), which no GPU rate describes."""
    backend = value_at(record, ("config", "backend")) or {}
    spec = backend_spec(backend.get("name"))
    return spec.optimizer_family(backend) if spec else "torch"


def _separates_optimizer(b: Any) -> bool:
    """A profile whose ``optimizer_s`` is the optimizer's whole work: CUDA profiles before
    ``optimizer_from`` undercount it (docs/metrics.md, "Profiling")."""
    return (
        isinstance(b, dict)
        and (b.get("step_s") or 0) > 0
        and b.get("optimizer_s") is not None
        and (b.get("view") != "cuda" or "optimizer_from" in b)
    )


def optimizer_rate(
    records: Iterable[tuple[str, dict[str, Any]]], family: str, device_name: str | None = None
) -> tuple[float, str] | None:
    """Seconds of optimizer step per parameter a rank updates, for ``family``
    (:func:`optimizer_family`) on ``device_name``: each ok record's profiled ``optimizer_s`` (scaled to
    its mean step) over its parameters per rank (``n_params / (tp x pp x shard)``), median over the
    records whose profile separates the optimizer (:func:`_separates_optimizer`); without any, over the
    CUDA profiles before ``optimizer_from``, which undercount it (``lower bound`` in the source); with
    the records named. A memory-bound step: it does not depend on the model or the world size, only on
    the GPU and the optimizer, so each record's rate is multiplied by its GPU's datasheet memory
    bandwidth over ``device_name``'s (:func:`memory_tbps`; ``x1.43 memory bandwidth 4.8/3.35 TB/s`` in
    the source: H200 records for an H100) where both are known, else left as measured (the source says
    which). ``device_name`` None: no GPU named, every rate as measured. None without a profiled record
    of ``family``."""
    for whole in (True, False):
        found = _optimizer_rates(records, family, whole=whole)
        if found:
            names = ", ".join(n for n, _, _ in found[:3])
            what = "median" if whole else "lower bound (profiles before optimizer_from): median"
            factors, how = bandwidth_factors([gpu for _, _, gpu in found], device_name)
            rates = [v * f for (_, v, _), f in zip(found, factors, strict=True)]
            return _median(rates), f"{what} of {len(found)} ({names}){how}"
    return None


def memory_tbps(device_name: str | None) -> tuple[float | None, str]:
    """``(TB/s, words)``: the datasheet memory bandwidth of ``device_name``
    (:attr:`flopsweep.peak_row.PeakRow.memory_tbps` at the size and form the name gives) and the row's
    name; ``(None, why)`` for a name the peak table lacks, a row without a published figure (A10G,
    A800, H800), or a name without the size its figure depends on (``A100``)."""
    row = peaks.lookup(device_name) if device_name else None
    if row is None:
        return None, f"{device_name!r} is not in the peak table"
    if row.memory_tbps is None:
        return None, f"no datasheet memory bandwidth for {row.name}"
    pcie = "pcie" in peaks.normalize_device_name(str(device_name)).split()
    tbps = row.memory_tbps.at(peaks.memory_sizes_gb(str(device_name)), pcie)
    if tbps is None:
        return (
            None,
            f"{str(device_name).strip()!r} does not give the memory size {row.name}'s bandwidth depends on",
        )
    return tbps, row.name


def bandwidth_factors(gpus: Sequence[str | None], device_name: str | None) -> tuple[list[float], str]:
    """Each measured GPU's (``system.device_name``) factor onto ``device_name`` for a memory-bound time,
    its datasheet memory bandwidth over the target's (:func:`memory_tbps`; 1 where either is unknown), and
    the words for a source: ``; x1.43 memory bandwidth 4.8/3.35 TB/s (H200 SXM on H100 SXM)`` per factor
    not 1, ``; unscaled: why`` where one is unknown; all 1 and no words with ``device_name`` None."""
    if device_name is None:
        return [1.0] * len(gpus), ""
    target, to = memory_tbps(device_name)
    if target is None:
        return [1.0] * len(gpus), f"; unscaled by memory bandwidth: {to}" if gpus else ""
    factors, words = [], []
    for gpu in gpus:
        own, name = memory_tbps(gpu)
        factor = own / target if own is not None else 1.0
        factors.append(factor)
        if own is None:
            said = f"unscaled by memory bandwidth: {name}"
        else:
            said = (
                f"x{figure(factor)} memory bandwidth {figure(own, 6)}/{figure(target, 6)} TB/s "
                f"({name} on {to})"
            )
        if (own is None or factor != 1.0) and said not in words:
            words.append(said)
    return factors, "".join(f"; {w}" for w in words)


def _optimizer_rates(
    records: Iterable[tuple[str, dict[str, Any]]], family: str, *, whole: bool
) -> list[tuple[str, float, str | None]]:
    """:func:`optimizer_rate`'s ``(name, seconds per parameter, system.device_name)``; ``whole``: only
    profiles that separate the optimizer, else only those that undercount it."""
    pairs = []
    for name, r in records:
        b = value_at(r, ("metrics", "breakdown"))
        step = value_at(r, ("metrics", "iteration_time_s", "mean"))
        if r.get("status") != "ok" or optimizer_family(r) != family or not isinstance(b, dict):
            continue
        if (b.get("step_s") or 0) <= 0 or not (b.get("optimizer_s") or 0) > 0:
            continue
        if _separates_optimizer(b) != whole:
            continue
        try:
            w = workload_from_record(r)
        except PredictionError:
            continue
        per_rank = w.n_params / (w.degree("tp") * w.degree("pp") * optimizer_shards(w))
        gpu = value_at(r, ("system", "device_name"))
        if isinstance(step, int | float) and per_rank > 0:
            rate = b["optimizer_s"] * step / b["step_s"] / per_rank
            pairs.append((name, rate, gpu if isinstance(gpu, str) else None))
    return pairs


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


HOST_BOUND = 0.2
"""The share of a calibration's profiled step in which the GPU idles (``breakdown.idle_s / step_s``)
above which its prediction's source says it is host-bound: the model has no host term, so the
idle is carried over as compute. The H200 records: DDP and FSDP2 one-GPU calibrations idle 2-4%
and predict within 5%; DeepSpeed's idle 27-50% on one GPU against 10-35% on two, and its pairs miss
by 9-40% (benchmarks/RESULTS.md, "Predicted step time")."""


def measured_parts(
    name: str,
    record: dict[str, Any],
    *,
    rate: tuple[float, str] | None = None,
    target: Workload | None = None,
) -> tuple[float, float | None, float, str]:
    """``(step, optimizer, exposed, how)`` of a measured record: its mean step time; its optimizer
    and exposed communication from its profile (``metrics.breakdown``, scaled to the mean step) when
    it has one; an optimizer that the record's profile does not separate is ``rate`` (seconds per
    parameter a rank updates, :func:`optimizer_rate`, and its source) times the record's parameters
    per rank, else None (it stays in the compute); without a profile, a multi-rank record's exposed
    communication is the model's own, at its probe's bandwidths. A one-GPU ZeRO-3 record's step is
    given less its floor (:func:`flopsweep.zero3_floor.record_floor`; where the fitted one would leave
    nothing, what leaves its executed FLOPs at its GEMM rate), which does not scale with the work,
    unless the ``target`` it is carried to is ZeRO-3 on several ranks
    (:func:`flopsweep.zero3_floor.kept_for`: not modelled there, carried over as before). ``how``
    says what was assumed (the rate, a host-bound profile: :data:`HOST_BOUND`, the floor), for a
    ``source``.

    Raises:
        PredictionError: a record without the counts the model needs (:func:`workload_from_record`).
    """
    cal = workload_from_record(record)
    step = float(value_at(record, ("metrics", "iteration_time_s", "mean")))
    b = value_at(record, ("metrics", "breakdown"))
    optimizer = exposed = None
    how = ""
    if isinstance(b, dict) and (b.get("step_s") or 0) > 0:
        ratio = step / b["step_s"]
        optimizer = b["optimizer_s"] * ratio if _separates_optimizer(b) else None
        exposed = (b.get("exposed_comm_s") or 0.0) * ratio
    if optimizer is None and rate is not None:
        optimizer = rate[0] * cal.n_params / (cal.degree("tp") * cal.degree("pp") * optimizer_shards(cal))
        how = f" (optimizer {figure(rate[0] * 1e12)} ps per parameter a rank updates: {rate[1]})"
    work = step - (optimizer or 0.0) - (exposed or 0.0)
    floor, why = (
        (0.0, "")
        if zero3_floor.kept_for(target)
        else zero3_floor.record_floor(record, cal.n_params, work_s=work, hardware_flops=cal.hardware_flops)
    )
    floored = bool(floor) and work - floor > 0
    if floored:
        step -= floor
        how += f"; its ZeRO-3 floor {figure(floor)} s taken out (flopsweep.zero3_floor{why})"
    if (
        isinstance(b, dict)
        and (b.get("step_s") or 0) > 0
        and (b.get("idle_s") or 0) / b["step_s"] > HOST_BOUND
    ):
        kept = "less its ZeRO-3 floor" if floored else "unchanged (no host term)"
        idles = b["idle_s"] / b["step_s"]
        how += f"; host-bound: the GPU idles {idles:.0%} of its profiled step, carried over {kept}"
    if exposed is None and cal.world_size > 1:
        link = link_from_probe(value_at(record, ("system", "interconnect")), source=name)
        soft, hard = comm_seconds(transfers(cal, gpus_per_node=cal.world_size), link)
        share = default_overlap(cal.backend)
        rough = step - soft - hard
        exposed = max(soft * (1 - share), soft - rough) + hard
    return step, optimizer, exposed or 0.0, how


def calibration_compute(
    target: Workload,
    name: str,
    record: dict[str, Any],
    *,
    compute_scale: float = 1.0,
    rate: tuple[float, str] | None = None,
) -> Compute:
    """:func:`compute_from_calibration` from a calibration record: its step, optimizer and exposed
    communication as :func:`measured_parts` reads them (``rate``: the optimizer's seconds per
    parameter a rank updates where the profile does not separate it)."""
    step, optimizer, exposed, how = measured_parts(name, record, rate=rate, target=target)
    return compute_from_calibration(
        target,
        calibration=workload_from_record(record),
        iteration_time_s=step,
        source=name + how,
        optimizer_s=optimizer,
        exposed_comm_s=exposed,
        compute_scale=compute_scale,
    )


def overlap_from_records(
    backend: str, records: Iterable[tuple[str, dict[str, Any]]]
) -> tuple[float, str] | None:
    """:func:`calibrated_overlap` over the ``ok`` multi-rank records with a profile whose backend
    (:func:`backend_of`: ``fsdp``, ``deepspeed-3``; a bare ``deepspeed`` matches every stage) is
    ``backend``."""
    return calibrated_overlap(
        (name, value_at(r, ("metrics", "breakdown")))
        for name, r in records
        if r.get("status") == "ok"
        and (world_of(r) or 1) > 1
        and backend in (backend_of(r), value_at(r, ("config", "backend", "name")))
    )


def calibrated_busbw(
    records: Iterable[tuple[str, dict[str, Any]]], *, backend: str | None = None
) -> tuple[float, str] | None:
    """The bus bandwidth (GB/s) that profiled multi-rank records imply: each record's data-parallel
    bytes x factor (:func:`transfers`) over its profiled ``comm_s``, median over records; with the
    records named. The communication of a profile runs beside compute, so this is the bandwidth
    the collectives get inside a step, not the link's bare speed. With ``backend``, only its
    records (:func:`backend_of`). None without such records."""
    pairs = []
    for name, r in records:
        if backend is not None and backend_of(r) != backend:
            continue
        b = value_at(r, ("metrics", "breakdown"))
        if (
            r.get("status") != "ok"
            or (world_of(r) or 1) < 2
            or not isinstance(b, dict)
            or not (b.get("comm_s") or 0) > 0
        ):
            continue
        try:
            w = workload_from_record(r)
        except PredictionError:
            continue
        moved = sum(
            x.count * x.bytes * busbw_factor(x.collective, x.group)
            for x in transfers(w, gpus_per_node=w.world_size)
        )
        if moved > 0:
            pairs.append((name, moved / b["comm_s"] / 1e9))
    if not pairs:
        return None
    values = sorted(v for _, v in pairs)
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    return median, f"profiled: median of {len(pairs)} ({', '.join(n for n, _ in pairs[:3])})"
