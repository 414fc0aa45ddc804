"""The job's side of the prediction: from a run's config, its calibration files and its probe to
:func:`flopsweep.predict.predict` (``metrics.predicted`` and ``plan=true``'s predicted columns).

The model itself is :mod:`flopsweep.predict` (torch-free, shared with the analysis); this module
adds what only the job has: the model family's counts for a config, and the calibration files
named by ``predict.calibration``. It imports no torch.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import socket
from collections.abc import Callable, Collection, Sequence
from typing import Any

from flopsweep import (
    cpu_probe,
    expert_parallel,
    flops,
    nearest,
    nearest_host,
    nearest_measured,
    offload_time,
    overlap_forward,
    shipped,
    state_copies,
    zero3_floor,
)
from flopsweep import predict as pr
from flopsweep.calibration_files import calibration_records
from flopsweep.checkpointing import recompute_mode
from flopsweep.clusters import example_gpu
from flopsweep.config import CheckpointingConfig, ConfigError, RunConfig
from flopsweep.forecast_link import link
from flopsweep.fp8_cast import cast_time
from flopsweep.identity import HOST_OFFLOAD
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.probe_fallback import CPU_FELL_BACK, FELL_BACK, LAYERS_FELL_BACK
from flopsweep.record import value_at
from flopsweep.text import figure, plural, printable

log = logging.getLogger(__name__)


def workload(cfg: RunConfig, layout: Layout) -> pr.Workload:
    """The :class:`~flopsweep.predict.Workload` of ``cfg`` on ``layout``, counted by its model
    family (parameters, model and hardware FLOPs of one step). The hardware FLOPs are the record's
    (:func:`flopsweep.metrics.hardware_flops`: ``every_n`` recomputes only its share of the blocks);
    where no formula gives them (``memory_budget``: the compiler decides) they are the model FLOPs, as
    :func:`flopsweep.predict.workload_from_record` reads such a record (:func:`_prediction` then
    predicts only from a calibration of the same policy and budget)."""
    from flopsweep.attention import KERNELS
    from flopsweep.metrics import executed_flops, hardware_flops

    m, b = cfg.model, cfg.batch
    fam = family(m)
    tokens = layout.global_batch(b.micro_batch_size, b.grad_accum) * m.seq_len
    density = cfg.attention.density if cfg.attention.density is not None else 1.0
    model_flops = fam.model_flops(m, tokens, density)
    return pr.Workload(
        backend=cfg.backend.name,
        zero_stage=getattr(cfg.backend, "zero_stage", None),
        precision=cfg.precision.name,
        n_params=fam.n_params(m),
        n_layer=m.n_layer,
        n_embd=m.n_embd,
        seq_len=m.seq_len,
        micro_batch_size=b.micro_batch_size,
        grad_accum=b.grad_accum,
        degrees=layout.as_dict(),
        pp_microbatches=cfg.parallel.pp_microbatches,
        pp_stages_per_rank=int(getattr(cfg.parallel, "pp_stages_per_rank", None) or 1),
        reshard_after_forward=bool(getattr(cfg.backend, "reshard_after_forward", True)),
        model_flops=model_flops,
        hardware_flops=hardware_flops(cfg, tokens, density) or model_flops,
        executed_flops=executed_flops(cfg, tokens) if KERNELS[cfg.attention.name].skips_masked else None,
        top_k=expert_parallel.top_k(m),
        overlap_share=overlap_forward.blocks_share(cfg),
    )


def prediction_records(cfg: RunConfig) -> list[tuple[str, dict[str, Any]]]:
    """The records the job, ``plan=true`` and the tuner predict ``cfg`` from: ``predict.calibration``'s
    (:func:`calibration_records`); with it null and ``predict.measured`` true, the shipped records
    (:func:`flopsweep.shipped.records`; :func:`prediction` sets them aside for a run that is not on
    CUDA); else none.

    Raises:
        ConfigError: as :func:`calibration_records`; naming ``predict.measured`` when the shipped file
            cannot be read (a broken install).
    """
    p = cfg.predict
    if p.calibration:
        return calibration_records(p.calibration)
    return shipped_records() if getattr(p, "measured", False) else []


def shipped_records() -> list[tuple[str, dict[str, Any]]]:
    """:func:`flopsweep.shipped.records`, its error as :class:`ConfigError` naming ``predict.measured``."""
    try:
        return shipped.records()
    except shipped.ShippedError as exc:
        why = f"cannot read the shipped records ({exc})"
        raise ConfigError("predict.measured", True, why, MEASURED_FIX) from None


MEASURED_FIX = "reinstall flopsweep, or set predict.measured=false (the FLOPs estimate)"
"""The fix a ``predict.measured`` error names."""


def unmatched(cfg: RunConfig, world: int, records: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """Why none of the ``predict.calibration`` records calibrates ``cfg`` on ``world`` ranks: the
    nearest record (the fewest differences, :func:`flopsweep.predict.calibration_differences`,
    micro batch aside: another one would have been scaled) and what it does not share, or that
    none ran on ``world`` ranks or fewer, or is ok with a step time."""
    mine = {"config": _config_dict(cfg)}
    usable = [
        (n, r)
        for n, r in records
        if r.get("status") == "ok"
        and isinstance(value_at(r, ("metrics", "iteration_time_s", "mean")), int | float)
    ]
    if not usable:
        return f"none of its {len(records)} records is ok with a step time"
    smaller = [(n, r) for n, r in usable if pr.calibrates_world(pr.world_of(r), world, same_world=True)]
    if not smaller:
        return f"none of its {len(usable)} ok records ran on {plural(world, 'rank')} or fewer"

    def differs(r: dict[str, Any]) -> list[str]:  # a backend's knobs and the micro batch do not count
        return [
            d
            for d in pr.calibration_differences(mine, r)
            if not d.startswith(("batch.micro_batch_size", "backend."))
            or d.startswith(SAME_GROUP + OFFLOADED)
        ]

    name, record = min(smaller, key=lambda nr: (len(differs(nr[1])), nr[0]))
    return f"the nearest, {name}, differs in {'; '.join(differs(record))}"


SAME_GROUP = ("backend.name", "backend.zero_stage")
"""What a calibration record of the job and ``plan=true`` shares with the run besides
:data:`flopsweep.predict.CALIBRATION_KEYS`: the backend and its ZeRO stage
(:func:`flopsweep.predict.backend_of`); a record of another backend is the nearest set-up's to use
(:mod:`flopsweep.nearest`), which carries its rate over rather than its step."""


OFFLOADED = tuple(f"backend.{knob} " for knob in HOST_OFFLOAD)
"""The host offload knobs of :data:`flopsweep.predict.CALIBRATION_KEYS`, as :func:`unmatched` names them:
a backend knob that makes another kind of step, so it counts among the differences."""


def prediction(
    cfg: RunConfig,
    layout: Layout,
    records: Sequence[tuple[str, dict[str, Any]]],
    *,
    gpus_per_node: int,
    device_name: str | None,
    probe: Sequence[dict[str, Any]] | None = None,
    gemm_tflops: float | None = None,
    compute_probe: dict[str, Any] | None = None,
    layer_probe: dict[str, Any] | None = None,
    device_given: str | None = None,
) -> dict[str, Any]:
    """``metrics.predicted`` of ``cfg`` on ``layout``: with ``predict.layer_probe``, the run's step
    extrapolated from its shallow copies (``layer_probe``, :func:`flopsweep.layer_probe.extrapolate`;
    kept under ``layer_probe``; one that fell back names why in ``source``); else with
    ``predict.probe``, from the compute probe's pieces (``compute_probe``,
    :func:`flopsweep.predict.compute_from_probe`; kept under ``probe``; a probe that fell back names
    why in ``source``, and the rest below is used), else calibrated from the best of ``records``
    (:func:`flopsweep.predict.pick_calibration`; of the same micro batch, else of another, its
    compute scaled by tokens), else uncalibrated at the measured GEMM rate
    (``gemm_tflops``) or, without one, the datasheet peak of ``device_name`` (bf16's for an fp8 run:
    its source says so, :data:`FP8_AS_BF16`). ``device_given``: ``device`` as the command gave it
    (:attr:`flopsweep.layout.Plan.device_given`; None: ``cfg.device``), which an uncalibrated line's
    ``plan_gpu`` fix reads: ``drop device=cpu`` only where it was given.

    Returns:
        :meth:`flopsweep.predict.Prediction.as_dict`, or ``{iteration_time_s: None,
        tokens_per_s: None, source: "no prediction: <why>"}`` when the inputs give none (or the
        model fails: a prediction never costs a run its record).
    """
    pieces = (compute_probe or {"fallback": "no rank ran the compute probe"}) if cfg.predict.probe else None
    layered = None
    if getattr(cfg.predict, "layer_probe", False):
        layered = layer_probe or {"fallback": "no rank ran the layer probe"}
    elif cpu_probe.ran(layer_probe):  # a CPU run's own step, timed by default (flopsweep.cpu_probe)
        layered = layer_probe
    try:
        made = _prediction(
            cfg,
            layout,
            records,
            gpus_per_node,
            device_name,
            probe,
            gemm_tflops,
            pieces,
            layered,
            device_given,
        )
    except Exception as exc:  # noqa: BLE001 - a prediction never costs a run its record
        log.warning("no prediction: %s: %s", type(exc).__name__, exc)
        why = (  # house form: the key, its value, why, the fix
            f"no prediction: model={cfg.model.name}: the step model failed ({type(exc).__name__}: {exc}). "
            "Fix: give predict.calibration=PATH (a record of this set-up), and report the failure"
        )
        made = {"iteration_time_s": None, "tokens_per_s": None, "source": why}
    if layered is not None:
        made = {**made, "layer_probe": layered}
    return made if pieces is None else {**made, "probe": pieces}


def _probed(target: pr.Workload, pieces: dict[str, Any] | None) -> tuple[pr.Compute | None, str]:
    """The compute from the probe's ``pieces`` (None without ``predict.probe``), or None and why it
    fell back (``"compute probe fell back: ..."``, for the source of the estimate used instead)."""
    if pieces is None:
        return None, ""
    if pieces.get("fallback"):
        return None, f"{FELL_BACK}{pieces['fallback']}"
    try:
        made = pr.compute_from_probe(target, pr.ProbeTimes.of(pieces))
    except pr.PredictionError as exc:
        return None, f"{FELL_BACK}{exc}"
    note = pieces.get("optimizer_note")
    return (dataclasses.replace(made, source=f"{made.source}; {note}") if note else made), ""


def _layered(cfg: RunConfig, layered: dict[str, Any] | None) -> tuple[pr.Compute | None, str]:
    """The whole step from the layer probe (None without ``predict.layer_probe``), or None and why it
    could not be used (``"layer probe fell back: ..."``)."""
    if layered is None:
        return None, ""
    from flopsweep.layer_probe import extrapolate

    cpu = cpu_probe.ran(layered)
    try:
        step, how = extrapolate(layered, cfg.model.n_layer)
    except ValueError as exc:
        return None, f"{CPU_FELL_BACK if cpu else LAYERS_FELL_BACK}{exc}"
    how = cpu_probe.said(how) if cpu else how
    return pr.Compute(compute_s=step, optimizer_s=0.0, source=how, kind="layers"), ""


def _prediction(
    cfg: RunConfig,
    layout: Layout,
    records: Sequence[tuple[str, dict[str, Any]]],
    gpus_per_node: int,
    device_name: str | None,
    probe: Sequence[dict[str, Any]] | None,
    gemm_tflops: float | None,
    pieces: dict[str, Any] | None = None,
    layered: dict[str, Any] | None = None,
    device_given: str | None = None,
) -> dict[str, Any]:
    target = workload(cfg, layout)
    if cfg.device != "cuda":  # a CPU run is never predicted from the shipped GPU records
        records = [(n, r) for n, r in records if not shipped.is_shipped(r)]
    named = [(n, r) for n, r in records if not shipped.is_shipped(r)]  # the user's, and the tuner's own
    probed, fell_back = _layered(cfg, layered)
    if probed is None:
        by_pieces, why = _probed(target, pieces)
        probed, fell_back = by_pieces, "; ".join(t for t in (fell_back, why) if t)
    own = _config_dict(cfg)["backend"]
    group = pr.backend_of({"config": {"backend": own}})
    kind = nearest_measured.gpu_kind(device_name)
    same_group = [  # another backend: the nearest's; a shipped record only of the run's GPU kind
        (n, r)
        for n, r in records
        if pr.backend_of(r) == group
        and (
            kind is None
            or not shipped.is_shipped(r)
            or nearest_measured.gpu_kind(value_at(r, ("system", "device_name"))) == kind
        )
    ]
    config = _config_dict(cfg)
    hosts = functools.cache(lambda: nearest_host.bound(_pool(records)))  # no step of theirs scales by tokens
    picked = _calibration(config, layout.world_size, same_group, own, hosts)
    sibling = (
        None  # (policy, hardware FLOPs over its, as run): a policy sibling's calibration, scaled by FLOPs
    )
    priced = (
        *SIBLING_POLICIES,
        *offload_time.HOST_POLICIES,
    )  # a host policy's step: a sibling's + its copies
    if not picked and not probed and cfg.activation_checkpointing.name in priced:
        for policy in (p for p in SIBLING_POLICIES if p != cfg.activation_checkpointing.name):
            if picked := _calibration(
                {**config, CKPT: {"name": policy}}, layout.world_size, same_group, own, hosts
            ):
                its = dataclasses.replace(cfg, activation_checkpointing=CheckpointingConfig(name=policy))
                ran = [w.hardware_flops for w in (target, workload(its, layout))]  # recompute as runs
                sibling = policy, ran[0] / ran[1]
                break
    if not picked and not probed and recompute_mode(cfg) == "unknown":
        why = (
            f"no prediction: activation_checkpointing={cfg.activation_checkpointing.name}: the compiler "
            "decides the recompute, which no FLOP count knows. Fix: give predict.calibration=PATH (a "
            "record of the same policy and budget)"
        )
        return {"iteration_time_s": None, "tokens_per_s": None, "source": why}
    missed = ""
    if named and not picked:  # the shipped records are not the user's to be told of
        why = unmatched(cfg, layout.world_size, named)
        missed = (  # else the tuner's own records: a set-up not measured yet, no WARNING (its normal course)
            f"predict.calibration={cfg.predict.calibration} matches nothing: {why}"
            if cfg.predict.calibration
            else f"none of the {len(named)} measured record(s) is this set-up's own to calibrate it ({why})"
        )
    near, far, neighbour = None, "", None
    if not probed and not picked and records:  # the nearest measured set-up, ahead of the FLOPs estimate
        near, far, neighbour = _nearest(cfg, target, records, device_name, _edge(cfg, layout, device_name))
        if (
            neighbour is not None and not device_name
        ):  # no GPU named: the nearest record's, as a calibration's
            device_name = (neighbour.record.get("system") or {}).get("device_name")
    if missed and cfg.predict.calibration:
        how = "predicted from the nearest set-up" if near is not None else "predicted uncalibrated"
        warn_once(missed.split(" nothing: ")[0], f"{printable(missed)}; {how}")
    device_name = device_name or (picked[1].get("system") or {}).get("device_name") if picked else device_name
    matmul = "bf16" if cfg.precision.name.startswith("fp8") else cfg.precision.name  # as metrics._peaks
    peak = flops.peak_tflops(device_name, matmul)[0] if device_name else None
    try:
        if probed:
            compute = probed
        elif picked:
            family = pr.optimizer_family(picked[1])
            on = (picked[1].get("system") or {}).get("device_name") or device_name  # the step's GPU
            rate = pr.optimizer_rate(records, family, on) if family else None
            compute = pr.calibration_compute(
                target, *picked, compute_scale=cfg.predict.compute_scale, rate=rate
            )
            if sibling is not None:
                ac, ratio = cfg.activation_checkpointing.name, figure(sibling[1], 4)
                said = SIBLING_BASE.format(ac, sibling[0], ratio)
                compute = dataclasses.replace(
                    compute, compute_s=compute.compute_s * sibling[1], source=f"{compute.source}; {said}"
                )
            if shipped.is_shipped(picked[1]):
                compute = _said_shipped(compute, "calibrated")
        elif near is not None:
            compute = near
            if neighbour is not None and shipped.is_shipped(neighbour.record):
                compute = _said_shipped(compute, "nearest")
        elif gemm_tflops:  # an eager fp8 run's float8 casts on top (flopsweep.fp8_cast), as below
            cast = cast_time({"config": config}, target, pr.memory_tbps(device_name))
            compute = pr.compute_uncalibrated(target, gemm_tflops=gemm_tflops, cast=cast)
        else:
            what = f"{' '.join(device_name.split())} datasheet" if device_name else "measured"
            compute = pr.compute_uncalibrated(
                target,
                gemm_tflops=peak,
                what=what,
                calibration=cfg.predict.calibration,
                gpu=example_gpu(cfg.plan_clusters),
                device=device_given or cfg.device,
                cast=cast_time({"config": config}, target, pr.memory_tbps(device_name)),
            )
        if not probed and not picked and near is None and records:
            compute = dataclasses.replace(compute, source=f"{compute.source}; {far}")
        if zero3_floor.applies_to(own, layout.world_size, cfg.device):  # DeepSpeed's own, on one GPU
            compute = zero3_floor.with_floor(compute, target.n_params)
        base = offload_time.base_policy(picked, sibling, near, neighbour, probed)
        compute = offload_time.with_host_copies(cfg, layout, target.grad_accum, compute, base, device_name)
        compute = state_copies.with_state_copies(cfg.backend, target, compute, device_name, cfg.device)
        overlap = (
            (cfg.predict.overlap, "predict.overlap")
            if cfg.predict.overlap is not None
            else pr.overlap_from_records(pr.backend_of({"config": {"backend": own}}), records)
        )
        result = pr.predict(
            target,
            compute,
            link(
                cfg, probe, picked[1] if picked else None, named, device_name
            ),  # another machine's probe: not
            gpus_per_node=gpus_per_node,
            overlap=overlap,
            peak_tflops=peak,
            budget_tokens=cfg.budget.tokens,
        )
    except pr.PredictionError as exc:
        why = "; ".join([f"no prediction: {exc}", *(t for t in (missed, fell_back) if t)])
        return {"iteration_time_s": None, "tokens_per_s": None, "source": why}
    made = result.as_dict()
    if fell_back:
        made["source"] += f"; {fell_back}"
    if (
        matmul != cfg.precision.name and not probed and not picked and near is None and not gemm_tflops
    ):  # a datasheet's bf16 peak
        made["source"] += f"; {FP8_AS_BF16.format(precision=cfg.precision.name)}"
    if missed:
        made["source"] += f"; {missed}"
    return made


_WARNED: set[str] = set()
"""The heads :func:`warn_once` has said in this process."""


def warn_once(head: str, line: str) -> None:
    """Log ``line`` as a warning the first time this process meets ``head`` (``predict.calibration=PATH``):
    a plan or a tuner predicts many set-ups from one set of records, and said the same line for each
    (``predict.calibration=None matches nothing`` three times in one tuning); every prediction's
    ``source`` still says why for its own set-up. Later ones go to the debug log."""
    if head in _WARNED:
        log.debug("%s", line)
        return
    _WARNED.add(head)
    log.warning("%s", line)


SHIPPED_WORDS = " (shipped records)"
"""What a ``source`` from a shipped record (:mod:`flopsweep.shipped`) says after its first word:
``nearest (shipped records): h200/...``, ``calibrated (shipped records): h200/...``."""


def _said_shipped(compute: pr.Compute, word: str) -> pr.Compute:
    """``compute`` with :data:`SHIPPED_WORDS` after its source's first ``word``."""
    head = f"{word}: "
    if not compute.source.startswith(head):
        return compute
    return dataclasses.replace(compute, source=f"{word}{SHIPPED_WORDS}: {compute.source[len(head) :]}")


SIBLING_POLICIES = ("none", "full", "selective")
"""The checkpointing policies of one set-up that a plan ranks side by side (``space.checkpointing``'s
default), in the order a sibling's calibration is looked for: the policies whose cost is their FLOPs
first (:data:`flopsweep.nearest.DISPATCH_POLICIES` last)."""

SIBLING_BASE = (
    "activation_checkpointing={} from its policy sibling {}'s calibration, the compute scaled by the "
    "hardware FLOPs (recompute included) x{} (docs/prediction-nearest.md)"
)
"""What a calibrated source adds where the record is a policy sibling's (:func:`_prediction`): the
policies of one set-up are predicted from one record, so their order is their counted work's."""

CKPT = "activation_checkpointing"


def _calibration(
    config: dict[str, Any],
    world: int,
    same_group: Sequence[tuple[str, dict[str, Any]]],
    own: Any,
    hosts: Callable[[], Collection[str]] = frozenset,
) -> tuple[str, dict[str, Any]] | None:
    """:func:`flopsweep.predict.pick_calibration` of ``config`` (a run's config dict) on ``world`` ranks
    over ``same_group``: the same micro batch first, else the nearest other one (:func:`flopsweep.predict.
    micro_batch_distance`, whatever the names or their order) scaled by tokens, never a host-bound
    record's (``hosts``: their names, :func:`flopsweep.nearest_host.bound`; its step does not grow with the
    tokens: the nearest set-up takes it as a floor)."""
    picked = None
    key = pr.calibration_key({"config": config})  # the full key: the loose pick takes the nearest micro batch
    for exact in (True, False):
        picked = picked or pr.pick_calibration(
            key,
            world,
            str((config.get("backend") or {}).get("name")),
            same_group if exact else [(n, r) for n, r in same_group if n not in hosts()],
            backend_config=own,
            hostname=socket.gethostname(),
            micro_batch=exact,
            same_world=True,  # a record of the set-up itself, the best calibration there is
        )
    return picked


def _nearest(
    cfg: RunConfig,
    target: pr.Workload,
    records: Sequence[tuple[str, dict[str, Any]]],
    device_name: str | None,
    edge: bool | None = None,
) -> tuple[pr.Compute | None, str, nearest_measured.Measured | None]:
    """:func:`flopsweep.nearest.nearest_compute` of ``cfg`` (its workload ``target``, on ``device_name``, at
    the memory edge by its estimate ``edge``: :func:`_edge`) over ``records``: the compute carried over from
    the nearest measured set-up that is not its own and that set-up's first record, or None, why none may
    stand for it, and None."""
    config = {"config": _config_dict(cfg), "system": {"device_name": device_name}}
    me = nearest_measured.describe("(this run)", config, target, device_name=device_name)
    if me is None:
        return None, "no nearest set-up: the run's config has no counts", None
    return nearest.nearest_compute(dataclasses.replace(me, edge=edge), _pool(records), records)


def _pool(records: Sequence[tuple[str, dict[str, Any]]]) -> list[nearest_measured.Measured]:
    """:func:`flopsweep.nearest_measured.pool_of` of ``records``, the shipped ones' made once a process."""
    named = [(n, r) for n, r in records if not shipped.is_shipped(r)]
    pool = nearest_measured.pool_of(named)
    return pool + list(shipped.pool()) if len(named) < len(records) else pool


def _edge(cfg: RunConfig, layout: Layout, device_name: str | None) -> bool | None:
    """Whether ``cfg`` on ``layout`` is at the memory edge of the GPU ``device_name`` by the memory estimate
    (:func:`flopsweep.memory.peak_bytes`, :func:`flopsweep.nearest_measured.estimated_edge`); None where the
    estimate fails or the GPU's memory is unknown (the nearest rule then keeps its order)."""
    from flopsweep.memory import peak_bytes

    try:
        peak = peak_bytes(cfg, layout)
    except Exception:  # noqa: BLE001 - no estimate: the edge unknown, as for a record without one
        return None
    return nearest_measured.estimated_edge(peak / 2**30, device_name)


FP8_AS_BF16 = "{precision} predicted as bf16: fp8 GEMM speed-up not modelled"
"""What an uncalibrated prediction of an fp8 run from a datasheet says in its source: its compute is
the bf16 peak's (as MFU's peak is), the fp8 GEMMs' speed-up unmodelled. A calibration record of the
same precision, or the run's own GEMM rate (measured in float8), models it and says nothing."""


def _config_dict(cfg: RunConfig) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
