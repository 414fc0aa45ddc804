"""Enumerate set-ups, drop those that do not fit or are refused, predict the rest, rank them.

Torch-free; the API ``plan=true plan_clusters=[...]`` (:mod:`flopsweep.job.plandecide`) and the
tuner (``hydra/sweeper=tune``) share::

    clusters = [parse_cluster("H100:8x8")]                  # flopsweep.clusters
    space = Space.from_config(cfg.space)                    # or Space(backends=("fsdp",), ...)
    result = candidates(cfg, space, clusters, records=())   # -> Candidates
    ranked = rank(result.rows, cfg.objective)               # ok rows, best first; rank and best set
    result.dropped                                          # {"over memory": n, "refused: ...": n, ...}

- :func:`setups` lists every combination of ``space`` (:class:`Setup`: backend option, layout,
  checkpointing policy, precision, micro batch); :func:`setup_config` makes the job's config for one
  on one cluster (the job's other keys kept: model, attention, compile, ``batch.global_batch_size``).
- :func:`evaluate` places it as ``plan=true plan_gpu=`` does
  (:func:`flopsweep.job.placement.plan_environment`), validates it (:func:`flopsweep.plan.plan`:
  every rule of :mod:`flopsweep.rules`; a refusal is a row of status ``refused`` with the one
  line), estimates its peak memory per rank
  (:func:`flopsweep.memory.peak_bytes`; over ``(1 - space.min_headroom)`` of the GPU's memory: status
  ``over memory``) and predicts its step (:func:`flopsweep.forecast.prediction`; the network's bus
  bandwidth across nodes, :class:`flopsweep.clusters.Network`, unless ``predict.inter_node_gbps``
  is set). DeepSpeed set-ups import DeepSpeed (and torch) for ZeRO's memory estimate
  (:mod:`flopsweep.zero_memory` calls DeepSpeed's own estimators); the others are torch-free.
- :class:`Row` holds the figures: tokens/s per GPU, MFU, model TFLOPs per GPU, J/token (at the GPU's
  assumed board power, :data:`flopsweep.clusters.ASSUMED_POWER_W`), dollars per million tokens and
  the budget (:func:`flopsweep.cost.budget`: ``days = tokens / tokens_per_s / 86400``, ``gpu_hours =
  days x 24 x world``, ``usd = gpu_hours x cost.usd_per_gpu_hour``), memory per rank and headroom,
  the prediction's source and its expected error (:func:`expected_error`).
- :func:`rank` orders the ``ok`` rows by ``objective=`` (:func:`flopsweep.objective.planned`), numbers
  them (``rank`` 1 = best) and marks the best of each cluster (``best``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from flopsweep import cost, forecast, objective
from flopsweep.clusters import Cluster
from flopsweep.config import ConfigError, ParallelConfig, RunConfig

BACKEND_OPTIONS = ("single", "ddp", "fsdp", "deepspeed", "zero1", "zero2", "zero3")
"""``space.backends`` values: the ``backend=`` options (``deepspeed`` is ZeRO-3, as its default)."""
POLICIES = ("none", "selective", "full")
"""``space.checkpointing`` values without knobs of their own (``every_n`` and ``memory_budget`` need them)."""
LAYOUT = re.compile(r"dp|hsdp|(tp|pp|ep)(\d+)")
"""``space.layouts`` values: ``dp``, ``hsdp``, ``tpN``, ``ppN``, ``epN`` (expert parallel over FSDP2's
ranks: an MoE model's; the rules refuse it on a dense one)."""

EXPECTED_ERROR = {
    "probe": 0.05,
    "calibration": 0.05,
    "flops": 0.15,
}
"""Expected |error| of a predicted step by where its compute comes from (``compute_source``):
calibrated or probed 5% (RESULTS.md: 21 one-H200 runs, median 3.5%; FSDP2 and DDP pairs within
4.8%); from the datasheet 15% (0.45 of the peak, where our H200 runs reach 0.43-0.52 HFU)."""
DEEPSPEED_ERROR = 0.4
"""DeepSpeed's engine and host overheads are not modelled: its pairs miss by 9-75% (RESULTS.md,
the two-GPU check: ZeRO-1/2 +9%, ZeRO-3 up to +40%, Llama 3.1 8B ZeRO-3 +75%)."""
ASSUMED_NETWORK_ERROR = 0.1
"""Added where a collective crosses nodes at an assumed (not probed) bandwidth: a ring's share of the
line rate, per-call latency ignored."""


@dataclass(frozen=True, kw_only=True)
class Space:
    """The set-ups to enumerate: every combination of the tuples (``space.*``,
    :class:`flopsweep.config.SpaceConfig`)."""

    backends: tuple[str, ...] = ("single", "ddp", "fsdp", "zero1", "zero2", "zero3")
    layouts: tuple[str, ...] = ("dp", "hsdp", "tp2", "tp4", "tp8", "pp2")
    checkpointing: tuple[str, ...] = POLICIES
    precisions: tuple[str, ...] = ("bf16",)
    micro_batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    min_headroom: float = 0.1
    """Share of the GPU's memory the estimate must leave free."""

    @classmethod
    def from_config(cls, space: Any) -> Space:
        """The :class:`Space` of ``cfg.space``, each value checked (:meth:`check`)."""
        made = cls(
            backends=tuple(space.backends),
            layouts=tuple(space.layouts),
            checkpointing=tuple(space.checkpointing),
            precisions=tuple(space.precisions),
            micro_batches=tuple(int(m) for m in space.micro_batches),
            min_headroom=float(space.min_headroom),
        )
        made.check()
        return made

    def check(self) -> None:
        """Raises ConfigError (one line naming the ``space.*`` key, the value and the fix) for an
        empty list, an unknown backend, layout, policy or precision, a micro batch below 1, a
        headroom outside [0, 1)."""
        from flopsweep.precision import PRECISIONS

        lists = {
            "backends": (self.backends, BACKEND_OPTIONS),
            "checkpointing": (self.checkpointing, POLICIES),
            "precisions": (self.precisions, tuple(PRECISIONS)),
        }
        for key, (values, known) in lists.items():
            bad = [v for v in values if v not in known] or ([] if values else ["(empty)"])
            if bad:
                raise ConfigError(
                    f"space.{key}",
                    list(values),
                    f"{bad[0]} is not one of {', '.join(known)}",
                    "list some of those",
                )
        bad = [v for v in self.layouts if not LAYOUT.fullmatch(v) or v.endswith(("tp0", "pp0", "ep0"))]
        if bad or not self.layouts:
            raise ConfigError(
                "space.layouts",
                list(self.layouts),
                "takes dp, hsdp, tpN, ppN and epN",
                "e.g. space.layouts=[dp,hsdp,tp2]",
            )
        if not self.micro_batches or min(self.micro_batches) < 1:
            raise ConfigError(
                "space.micro_batches",
                list(self.micro_batches),
                "needs micro batches of 1 or more",
                "e.g. [1,2,4]",
            )
        if not 0 <= self.min_headroom < 1:
            raise ConfigError("space.min_headroom", self.min_headroom, "is a share in [0, 1)", "e.g. 0.1")


@dataclass(frozen=True, kw_only=True)
class Setup:
    """One set-up of the space, on any cluster."""

    backend: str
    layout: str
    checkpointing: str
    precision: str
    micro_batch: int

    def parallel(self, cluster: Cluster) -> ParallelConfig | None:
        """The ``parallel.*`` of :attr:`layout` on ``cluster``; None where it is no set-up of its
        own there (``hsdp`` on one node is ``dp``; a degree above the world size)."""
        if self.layout == "dp":
            return ParallelConfig()
        if self.layout == "hsdp":
            if cluster.nnodes == 1:
                return None
            return ParallelConfig(dp_replicate=cluster.nnodes, dp_shard=cluster.gpus_per_node)
        kind, n = self.layout[:2], int(self.layout[2:])
        if n > cluster.world_size or cluster.world_size % n:
            return None
        return ParallelConfig(**{kind: n})

    def overrides(self, cluster: Cluster) -> list[str]:
        """The command-line overrides that run this set-up on ``cluster`` (its launcher aside)."""
        par = self.parallel(cluster) or ParallelConfig()
        out = [
            f"backend={self.backend}",
            f"activation_checkpointing={self.checkpointing}",
            f"precision={self.precision}",
            f"batch.micro_batch_size={self.micro_batch}",
        ]
        default = ParallelConfig()
        for key in ("dp_replicate", "dp_shard", "tp", "pp", "ep"):
            if getattr(par, key) != getattr(default, key):
                out.append(f"parallel.{key}={getattr(par, key)}")
        out += [f"nproc_per_node={cluster.gpus_per_node}", f"nnodes={cluster.nnodes}"]
        return out


def setups(space: Space) -> list[Setup]:
    """Every combination of ``space``, in its lists' order (backends outermost)."""
    return [
        Setup(backend=b, layout=lay, checkpointing=c, precision=p, micro_batch=m)
        for b in space.backends
        for lay in space.layouts
        for c in space.checkpointing
        for p in space.precisions
        for m in space.micro_batches
    ]


@dataclass(kw_only=True)
class Row:
    """One set-up on one cluster: what :func:`evaluate` found. Units in the names; blank (None)
    where not known (an ``over memory`` row has no prediction)."""

    cluster: str
    setup: Setup
    status: str = "ok"
    """``ok``; ``over memory`` (the estimate leaves less than ``space.min_headroom``); ``refused``
    (validation's one line in ``reason``); ``no prediction`` (the step model gave none: ``reason``)."""
    reason: str = ""
    world_size: int = 0
    layout: str = ""
    """:meth:`flopsweep.layout.Layout.label`: ``dp64``, ``dp8x8``, ``dp32 tp2``."""
    grad_accum: int | None = None
    global_batch: int | None = None
    """Sequences per optimizer step."""
    est_peak_gib_per_rank: float | None = None
    gpu_memory_gib: float | None = None
    headroom_gib: float | None = None
    predicted_iteration_time_s: float | None = None
    predicted_tokens_per_s: float | None = None
    predicted_tokens_per_s_per_gpu: float | None = None
    predicted_mfu: float | None = None
    predicted_tflops_per_gpu: float | None = None
    predicted_exposed_comm_s: float | None = None
    predicted_joules_per_token: float | None = None
    predicted_usd_per_million_tokens: float | None = None
    budget_days: float | None = None
    budget_gpu_hours: float | None = None
    budget_usd: float | None = None
    budget_energy_kwh: float | None = None
    compute_source: str = ""
    prediction_source: str = ""
    expected_error: float | None = None
    """Expected |error| of the predicted step, a share (:func:`expected_error`)."""
    overrides: list[str] = field(default_factory=list)
    rank: int | None = None
    best: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The row as ``plan.csv`` and ``plan_format=json`` write it (:data:`COLUMNS`)."""
        s = self.setup
        out = {k: getattr(self, k) for k in ROW_FIELDS}
        out.update(
            backend=s.backend,
            space_layout=s.layout,
            checkpointing=s.checkpointing,
            precision=s.precision,
            micro_batch=s.micro_batch,
            overrides=" ".join(self.overrides),
        )
        return {c: out.get(c) for c in COLUMNS}


ROW_FIELDS = tuple(f.name for f in dataclasses.fields(Row) if f.name not in ("setup", "overrides"))
COLUMNS = (
    "rank",
    "best",
    "cluster",
    "status",
    "backend",
    "space_layout",
    "layout",
    "checkpointing",
    "precision",
    "micro_batch",
    *(f for f in ROW_FIELDS if f not in ("rank", "best", "cluster", "status", "reason")),
    "reason",
    "overrides",
)
"""``plan.csv``'s columns under ``plan_clusters``: ``rank`` (1 = best), ``best`` (the best of its
cluster), the dollars (``budget_usd``, ``predicted_usd_per_million_tokens``) and days (``budget_days``)."""


@dataclass(kw_only=True)
class Candidates:
    """What :func:`candidates` returns: every row (``ok`` and dropped) and the count dropped per reason."""

    rows: list[Row]
    dropped: Counter = field(default_factory=Counter)

    @property
    def ok(self) -> list[Row]:
        return [r for r in self.rows if r.status == "ok"]


def setup_config(cfg: RunConfig, setup: Setup, cluster: Cluster) -> RunConfig | None:
    """``cfg`` with ``setup`` on ``cluster``: the backend, policy and precision options at their
    defaults (the job's own knobs kept when it picked the same option), the micro batch (the job's
    ``batch.global_batch_size`` kept: validation derives the grad accumulation), the layout, the
    cluster's nodes and GPUs, ``plan_gpu`` its GPU, and its network's bandwidth across nodes unless
    ``predict.inter_node_gbps`` is set (a network named in the cluster wins). None where the layout is
    no set-up on this cluster (:meth:`Setup.parallel`)."""
    from flopsweep.checks import option_schemas
    from flopsweep.deepspeed_config import ZERO_SHORTHANDS

    parallel = setup.parallel(cluster)
    if parallel is None:
        return None
    schemas = option_schemas()
    stage = ZERO_SHORTHANDS.get(setup.backend)
    name = "deepspeed" if stage is not None else setup.backend
    backend = cfg.backend if cfg.backend.name == name else schemas["backend"][name](name=name)
    if stage is not None:
        backend = dataclasses.replace(backend, zero_stage=stage)
    if cfg.precision.name == setup.precision:
        precision = cfg.precision
    else:
        precision = schemas["precision"][setup.precision](name=setup.precision)
    ckpt = schemas["activation_checkpointing"][setup.checkpointing](name=setup.checkpointing)
    batch = dataclasses.replace(cfg.batch, name="fixed", micro_batch_size=setup.micro_batch)
    if type(batch).__name__ != "BatchConfig":  # batch=auto's schema: the plan fixes the micro batch
        from flopsweep.config import BatchConfig

        batch = BatchConfig(
            micro_batch_size=setup.micro_batch,
            grad_accum=cfg.batch.grad_accum,
            global_batch_size=cfg.batch.global_batch_size,
        )
    predict = cfg.predict
    if cluster.network_named or not predict.inter_node_gbps:
        predict = dataclasses.replace(predict, inter_node_gbps=cluster.network.inter_node_gbps)
    predict = dataclasses.replace(predict, gpus_per_node=None, nnodes=None)
    return dataclasses.replace(
        cfg,
        backend=backend,
        precision=precision,
        activation_checkpointing=ckpt,
        batch=batch,
        parallel=dataclasses.replace(parallel, pp_schedule=cfg.parallel.pp_schedule),
        nnodes=cluster.nnodes,
        nproc_per_node=str(cluster.gpus_per_node),
        device="cuda",
        plan=True,
        plan_gpu=cluster.gpu,
        plan_gpu_memory_gib=None,
        predict=predict,
    )


def expected_error(made: dict[str, Any], backend: str, cluster: Cluster) -> float:
    """The expected |error| of a prediction (a share): :data:`EXPECTED_ERROR` by its compute's
    source, at least :data:`DEEPSPEED_ERROR` for a DeepSpeed backend, plus
    :data:`ASSUMED_NETWORK_ERROR` on several nodes linked by an assumed bandwidth."""
    err = EXPECTED_ERROR.get(str(made.get("compute_source") or "flops"), EXPECTED_ERROR["flops"])
    if backend.startswith(("zero", "deepspeed")):
        err = max(err, DEEPSPEED_ERROR)
    if cluster.nnodes > 1 and "predict.inter_node_gbps" in str(made.get("bandwidth_source") or ""):
        err += ASSUMED_NETWORK_ERROR
    return err


def evaluate(
    cfg: RunConfig,
    setup: Setup,
    cluster: Cluster,
    records: Sequence[tuple[str, dict[str, Any]]] = (),
    *,
    min_headroom: float = 0.1,
) -> Row | None:
    """``setup`` on ``cluster`` (see the module docstring); None where it is no set-up there."""
    from flopsweep.gpu_memory import planned_gpu_bytes
    from flopsweep.job.placement import plan_environment
    from flopsweep.memory import estimate, peak_bytes
    from flopsweep.plan import Environment, plan

    one = setup_config(cfg, setup, cluster)
    if one is None:
        return None
    row = Row(
        cluster=cluster.label, setup=setup, world_size=cluster.world_size, overrides=setup.overrides(cluster)
    )
    one, env, _ = plan_environment(one, Environment(cpu_count=os.cpu_count() or 1))
    choices = {
        "backend": setup.backend,
        "precision": setup.precision,
        "activation_checkpointing": setup.checkpointing,
    }
    try:
        p = plan(one, env, choices=choices)
    except ConfigError as exc:
        row.status, row.reason = "refused", str(exc).removeprefix("Invalid config: ")
        return row
    m = p.cfg.model
    row.layout = p.layout.label(p.cfg.parallel.pp_schedule)
    row.grad_accum = p.cfg.batch.grad_accum
    row.global_batch = p.layout.global_batch(p.cfg.batch.micro_batch_size, p.cfg.batch.grad_accum)
    peak = peak_bytes(p.cfg, p.layout, estimate(p.cfg, p.layout))
    capacity = planned_gpu_bytes(cluster.gpu, None)[0]
    row.est_peak_gib_per_rank = peak / 2**30
    row.gpu_memory_gib = capacity / 2**30
    row.headroom_gib = (capacity - peak) / 2**30
    if peak > (1 - min_headroom) * capacity:
        row.status = "over memory"
        share = f"{1 - min_headroom:.0%} of {capacity / 2**30:.1f} GiB"
        row.reason = f"estimated {peak / 2**30:.1f} GiB per rank, over {share} (space.min_headroom)"
        return row
    unprobed = {"fallback": "plan=true runs no compute probe (a run with predict.probe=true does)"}
    made = forecast.prediction(
        p.cfg,
        p.layout,
        records,
        gpus_per_node=cluster.gpus_per_node,
        device_name=cluster.gpu,
        compute_probe=unprobed,
    )
    row.prediction_source = "; ".join(s for s in (made.get("source"), made.get("bandwidth_source")) if s)
    step, rate = made.get("iteration_time_s"), made.get("tokens_per_s")
    if not step or not rate:
        row.status, row.reason = "no prediction", str(made.get("source") or "")
        return row
    _figures(row, made, p, cluster, m)
    return row


def _figures(row: Row, made: dict[str, Any], p: Any, cluster: Cluster, m: Any) -> None:
    """Fill ``row``'s predicted and budget figures from the prediction ``made``."""
    from flopsweep.flops import peak_tflops

    world = cluster.world_size
    rate = float(made["tokens_per_s"])
    row.predicted_iteration_time_s = float(made["iteration_time_s"])
    row.predicted_tokens_per_s = rate
    row.predicted_tokens_per_s_per_gpu = rate / world
    row.predicted_mfu = made.get("mfu")
    matmul = "bf16" if p.cfg.precision.name.startswith("fp8") else p.cfg.precision.name
    peak = peak_tflops(cluster.gpu, matmul)[0]
    row.predicted_tflops_per_gpu = (
        None if row.predicted_mfu is None or peak is None else row.predicted_mfu * peak
    )
    row.predicted_exposed_comm_s = made.get("exposed_comm_s")
    power = cluster.power_w
    row.predicted_joules_per_token = None if power is None else power * world / rate
    usd = p.cfg.cost.usd_per_gpu_hour
    row.predicted_usd_per_million_tokens = cost.usd_per_million_tokens(usd, world=world, tokens_per_s=rate)
    spent = cost.budget(
        p.cfg.budget.tokens,
        tokens_per_s=rate,
        world=world,
        joules_per_token=row.predicted_joules_per_token,
        usd_per_gpu_hour=usd,
    )
    if spent:
        row.budget_days, row.budget_gpu_hours = spent["days"], spent["gpu_hours"]
        row.budget_usd, row.budget_energy_kwh = spent["usd"], spent["energy_kwh"]
    row.compute_source = str(made.get("compute_source") or "")
    row.expected_error = expected_error(made, row.setup.backend, cluster)


def candidates(
    cfg: RunConfig,
    space: Space,
    clusters: Iterable[Cluster],
    records: Sequence[tuple[str, dict[str, Any]]] = (),
    *,
    progress: Any = None,
) -> Candidates:
    """Every set-up of ``space`` on every cluster (:func:`evaluate`); ``dropped`` counts the rows
    that are not ``ok`` by status, and the refusals by their key (``refused: backend``).

    Args:
        records: the ``predict.calibration`` records (:func:`flopsweep.forecast.calibration_records`).
        progress: called with ``(cluster label, rows so far)`` after each cluster (a plan prints it).
    """
    out = Candidates(rows=[])
    all_setups = setups(space)
    for cluster in clusters:
        own = same_gpu(records, cluster)
        for setup in all_setups:
            row = evaluate(cfg, setup, cluster, own, min_headroom=space.min_headroom)
            if row is None:
                continue
            out.rows.append(row)
            if row.status == "refused":
                out.dropped[f"refused: {row.reason.split('=')[0]}"] += 1
            elif row.status != "ok":
                out.dropped[row.status] += 1
        if progress is not None:
            progress(cluster.label, len(out.rows))
    return out


def same_gpu(
    records: Sequence[tuple[str, dict[str, Any]]], cluster: Cluster
) -> list[tuple[str, dict[str, Any]]]:
    """The calibration records measured on ``cluster``'s GPU (``system.device_name``, the peak
    table's row): a record of another GPU would carry its speed over (``predict.compute_scale``
    is one figure for all clusters), so a cluster without a record of its GPU predicts uncalibrated."""
    from flopsweep.peaks import lookup

    return [
        (n, r)
        for n, r in records
        if lookup(str((r.get("system") or {}).get("device_name") or "")) is cluster.row
    ]


def rank(rows: Iterable[Row], objective_name: str) -> list[Row]:
    """The ``ok`` rows with a value for ``objective_name`` (:func:`flopsweep.objective.planned`),
    best first, numbered from 1 (``rank``); ``best`` marks the first of each cluster. Ties keep the
    lower expected error, then the smaller memory per rank. Rows without a value get no rank.

    Raises:
        ConfigError: as :func:`flopsweep.objective.planned`.
    """
    column, better = objective.planned(objective_name)
    sign = -1.0 if better == "higher" else 1.0
    valued = []
    for row in rows:
        row.rank, row.best = None, False
        value = getattr(row, column)
        if row.status == "ok" and value is not None and not math.isnan(value):
            valued.append(row)
    valued.sort(
        key=lambda r: (sign * getattr(r, column), r.expected_error or 0, r.est_peak_gib_per_rank or 0)
    )
    seen: set[str] = set()
    for i, row in enumerate(valued, 1):
        row.rank = i
        if row.cluster not in seen:
            row.best = True
            seen.add(row.cluster)
    return valued
