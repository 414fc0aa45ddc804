"""The space of set-ups: enumerate them, judge each on a machine, rank them. The one place
``plan=true plan_clusters=[...]`` (:mod:`flopsweep.job.plandecide`) and the tuner
(``hydra/sweeper=tune``, :mod:`hydra_plugins.flopsweep_tune.tuning`) take their set-ups from::

    clusters = [parse_cluster("H100:8x8")]                  # flopsweep.clusters
    space = Space.from_config(cfg.space)                    # or Space(backends=("fsdp",), ...)
    result = candidates(cfg, space, clusters, records=())   # -> Candidates
    ranked = rank(result.rows, cfg.objective)               # ok rows, best first; rank and best set
    result.dropped                                          # {"over memory": n, "refused: ...": n, ...}

- :func:`setups` lists every combination of ``space`` (:class:`Setup`: backend option, layout,
  checkpointing policy, precision, micro batch); :func:`placed` keeps those that are set-ups of their
  own on ``nnodes x gpus_per_node`` ranks (both the plan, per cluster, and the tuner, on the machine
  at hand, enumerate through it); :meth:`Setup.setup_overrides` are its overrides (:data:`SETUP_KEYS`).
- :func:`evaluate` makes the job's config for one on one cluster (:func:`setup_config`: the job's other
  keys kept: model, attention, compile, ``batch.global_batch_size``), places it as ``plan=true
  plan_gpu=`` does (:func:`flopsweep.job.placement.plan_environment`) and judges it with
  :func:`flopsweep.plan_assess.assess`, which the tuner calls on its composed configs too: the rules
  (a refusal is a ``refused`` row with the one line), the memory estimate against ``(1 -
  space.min_headroom)`` of the memory (``over memory``), the prediction and its figures
  (:class:`flopsweep.plan_assess.Row`: tokens/s, MFU, TFLOPs per GPU, J/token, dollars per million
  tokens, the budget). DeepSpeed set-ups import DeepSpeed (and torch) for ZeRO's memory estimate.
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

from flopsweep import objective
from flopsweep.clusters import Cluster
from flopsweep.config import ConfigError, ParallelConfig, RunConfig
from flopsweep.plan_assess import (  # noqa: F401 - re-exported: the plan's and the tuner's names
    ASSUMED_NETWORK_ERROR,
    COLUMNS,
    DEEPSPEED_ERROR,
    EXPECTED_ERROR,
    ROW_FIELDS,
    UNPROBED,
    Machine,
    Row,
    assess,
    expected_error,
    machine,
    predict,
)

BACKEND_OPTIONS = ("single", "ddp", "fsdp", "deepspeed", "zero1", "zero2", "zero3")
"""``space.backends`` values: the ``backend=`` options (``deepspeed`` is ZeRO-3, as its default)."""
POLICIES = ("none", "selective", "full")
"""``space.checkpointing`` values without knobs of their own (``every_n`` and ``memory_budget`` need them)."""
LAYOUT = re.compile(r"dp|hsdp|(tp|pp|ep)(\d+)")
"""``space.layouts`` values: ``dp``, ``hsdp``, ``tpN``, ``ppN``, ``epN`` (expert parallel over FSDP2's
ranks: an MoE model's; the rules refuse it on a dense one)."""


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
        """The :class:`Space` of ``cfg.space``, each value checked (:meth:`check`); a value listed
        twice counts once (``space.layouts=[dp,dp]`` made each set-up twice: rows and tuner jobs)."""
        made = cls(
            backends=tuple(dict.fromkeys(space.backends)),
            layouts=tuple(dict.fromkeys(space.layouts)),
            checkpointing=tuple(dict.fromkeys(space.checkpointing)),
            precisions=tuple(dict.fromkeys(space.precisions)),
            micro_batches=tuple(dict.fromkeys(int(m) for m in space.micro_batches)),
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
        """The ``parallel.*`` of :attr:`layout` on ``cluster`` (:meth:`parallel_on`)."""
        return self.parallel_on(cluster.nnodes, cluster.gpus_per_node)

    def parallel_on(self, nnodes: int, gpus_per_node: int) -> ParallelConfig | None:
        """The ``parallel.*`` of :attr:`layout` on ``nnodes`` nodes of ``gpus_per_node`` ranks; None
        where it is no set-up of its own there (``hsdp`` on one node is ``dp``; a degree that does
        not divide the world size)."""
        world = nnodes * gpus_per_node
        if self.layout == "dp":
            return ParallelConfig()
        if self.layout == "hsdp":
            if nnodes == 1:
                return None
            return ParallelConfig(dp_replicate=nnodes, dp_shard=gpus_per_node)
        kind, n = self.layout[:2], int(self.layout[2:])
        if n > world or world % n:
            return None
        return ParallelConfig(**{kind: n})

    def placement_problem(self, nnodes: int, gpus_per_node: int) -> str:
        """Why :attr:`layout` is no set-up of its own on ``nnodes`` x ``gpus_per_node`` ranks (what
        :meth:`parallel_on` returns None for), one line naming the layout; ``""`` where it is one."""
        if self.parallel_on(nnodes, gpus_per_node) is not None:
            return ""
        if self.layout == "hsdp":
            return (
                f"space.layouts: hsdp needs several nodes (nnodes={nnodes}; on one node it is dp). "
                "Fix: set nnodes=2 or more, or list dp"
            )
        kind, n, world = self.layout[:2], int(self.layout[2:]), nnodes * gpus_per_node
        takes = ", ".join(["dp", *(f"{kind}{d}" for d in range(2, world + 1) if world % d == 0)][:4])
        return (
            f"space.layouts: {self.layout} needs its degree {n} to divide the {world} ranks "
            f"(nnodes={nnodes} x {gpus_per_node} per node). Fix: list a layout these ranks take ({takes}), "
            f"or run on a multiple of {n} ranks"
        )

    def setup_overrides(self, nnodes: int, gpus_per_node: int) -> list[str]:
        """The overrides of this set-up's own keys (:data:`SETUP_KEYS`) on ``nnodes`` x
        ``gpus_per_node`` ranks: the backend, policy, precision, micro batch and the ``parallel.*``
        that differ from the defaults."""
        par = self.parallel_on(nnodes, gpus_per_node) or ParallelConfig()
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
        return out

    def overrides(self, cluster: Cluster) -> list[str]:
        """The command-line overrides that run this set-up on ``cluster`` (its launcher aside)."""
        out = self.setup_overrides(cluster.nnodes, cluster.gpus_per_node)
        return out + [f"nproc_per_node={cluster.gpus_per_node}", f"nnodes={cluster.nnodes}"]


SETUP_KEYS = (
    "backend",
    "activation_checkpointing",
    "precision",
    "batch.micro_batch_size",
    "parallel.dp_replicate",
    "parallel.dp_shard",
    "parallel.tp",
    "parallel.pp",
)
"""The keys a :class:`Setup` sets (:meth:`Setup.setup_overrides`): a tuning sweep over ``space.*``
refuses a command-line override of one of them (``hydra/sweeper=tune``, docs/tuning.md)."""


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


def placed(space: Space, nnodes: int, gpus_per_node: int) -> list[Setup]:
    """The set-ups of ``space`` that are set-ups of their own on ``nnodes`` x ``gpus_per_node`` ranks
    (:meth:`Setup.parallel_on`), in :func:`setups`' order: what ``plan=true`` evaluates on each
    cluster and what ``hydra/sweeper=tune`` judges on the machine at hand."""
    return [s for s in setups(space) if s.parallel_on(nnodes, gpus_per_node) is not None]


def unplaced(space: Space, nnodes: int, gpus_per_node: int) -> list[str]:
    """Why each set-up of ``space`` that :func:`placed` leaves out is no set-up on ``nnodes`` x
    ``gpus_per_node`` ranks (:meth:`Setup.placement_problem`), one line per set-up."""
    return [why for s in setups(space) if (why := s.placement_problem(nnodes, gpus_per_node))]


def nothing_line(reasons: Sequence[str], *, who: str, headline: str, fix: str) -> str:
    """One line for a space that leaves no set-up, as ``plan=true`` and the tuner print it:
    ``<who>: <headline>: all N dropped; the commonest reason (k of N): <reason>. Fix: <fix>`` (the
    reason's own ``Fix:`` when it has one). ``reasons``: one line per dropped set-up."""
    counts = Counter(r.rstrip(". ") for r in reasons)
    if not counts:
        return f"{who}: no set-up to rank (the space gives none). Fix: {fix}"
    reason, count = counts.most_common(1)[0]
    tail = "" if "Fix: " in reason else f". Fix: {fix}"
    refused = re.match(r"refused: ([\w.]+)=", reason)
    space_key = next((k for p, k in SPACE_KEY_OF if refused and refused.group(1).startswith(p)), None)
    if (
        space_key and tail == ""
    ):  # the rule's fix names a key the set-ups set, which space.* refuses beside it
        tail = f" (with space.*, {refused.group(1)} comes from {space_key}: change that list instead)"
    n = len(reasons)
    return f"{who}: {headline}: all {n} dropped; the commonest reason ({count} of {n}): {reason}{tail}"


SPACE_KEY_OF = (
    ("parallel.", "space.layouts"),
    ("batch.micro_batch_size", "space.micro_batches"),
    ("batch.grad_accum", "space.micro_batches"),
    ("backend", "space.backends"),
    ("activation_checkpointing", "space.checkpointing"),
    ("precision", "space.precisions"),
)
"""The ``space.*`` list behind each key a set-up sets (by prefix): where a rule's fix must be made
under the tuner or ``plan_clusters``."""


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
    pred = cfg.predict
    if cluster.network_named or not pred.inter_node_gbps:
        pred = dataclasses.replace(pred, inter_node_gbps=cluster.network.inter_node_gbps)
    pred = dataclasses.replace(pred, gpus_per_node=None, nnodes=None)
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
        predict=pred,
    )


def evaluate(
    cfg: RunConfig,
    setup: Setup,
    cluster: Cluster,
    records: Sequence[tuple[str, dict[str, Any]]] = (),
    *,
    min_headroom: float = 0.1,
) -> Row | None:
    """``setup`` on ``cluster`` (:func:`setup_config`, placed as ``plan=true plan_gpu=`` does, then
    :func:`assess`); None where it is no set-up there."""
    from flopsweep.job.placement import plan_environment
    from flopsweep.plan import Environment

    one = setup_config(cfg, setup, cluster)
    if one is None:
        return None
    one, env, _ = plan_environment(one, Environment(cpu_count=os.cpu_count() or 1))
    choices = {
        "backend": setup.backend,
        "precision": setup.precision,
        "activation_checkpointing": setup.checkpointing,
    }
    row, _ = assess(
        one,
        env,
        machine(cluster),
        choices=choices,
        setup=setup,
        overrides=setup.overrides(cluster),
        records=records,
        min_headroom=min_headroom,
    )
    return row


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
        records: the ``predict.calibration`` records, else the shipped ones
            (:func:`flopsweep.forecast.prediction_records`).
        progress: called with ``(cluster label, rows so far)`` after each cluster (a plan prints it).
    """
    out = Candidates(rows=[])
    for cluster in clusters:
        own = same_gpu(records, cluster)
        for setup in placed(space, cluster.nnodes, cluster.gpus_per_node):
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
    is one figure for all clusters), so a cluster without a record of its GPU predicts uncalibrated.
    Every shipped record (:mod:`flopsweep.shipped`) is kept: :func:`flopsweep.forecast.prediction`
    calibrates only from those of the cluster's GPU kind and scales the nearest set-up of another
    by the datasheet peak ratio, saying so."""
    from flopsweep.peaks import lookup
    from flopsweep.shipped import is_shipped

    return [
        (n, r)
        for n, r in records
        if is_shipped(r) or lookup(str((r.get("system") or {}).get("device_name") or "")) is cluster.row
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
