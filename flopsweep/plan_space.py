"""The space of set-ups: enumerate them, judge each on a machine, rank them. The one place
``plan=true plan_clusters=[...]`` (:mod:`flopsweep.job.plandecide`) and the tuner
(``hydra/sweeper=tune``, :mod:`hydra_plugins.flopsweep_tune.tuning`) take their set-ups from::

    clusters = [parse_cluster("H100:8x8")]                  # flopsweep.clusters
    space = Space.from_config(cfg.space)                    # flopsweep.space; or Space(backends=...)
    result = candidates(cfg, space, clusters, records=())   # -> Candidates
    ranked = rank(result.rows, cfg.objective)               # ok rows, best first; rank and best set
    result.dropped                                          # {"over memory": n, "refused: ...": n, ...}

- :mod:`flopsweep.space` holds the space itself: :func:`~flopsweep.space.setups` lists every combination
  of ``space`` (:class:`~flopsweep.space.Setup`: backend option, layout, checkpointing policy, precision,
  compile setting, micro batch); :func:`~flopsweep.space.placed` keeps those that are set-ups of their
  own on ``nnodes x gpus_per_node`` ranks (both the plan, per cluster, and the tuner, on the machine at
  hand, enumerate through it); :meth:`~flopsweep.space.Setup.setup_overrides` are its overrides
  (:data:`~flopsweep.space.SETUP_KEYS`).
- :func:`evaluate` makes the job's config for one on one cluster (:func:`setup_config`: the job's other
  keys kept: model, attention, ``batch.global_batch_size``, ``compile`` unless ``space.compile`` is
  given), places it as ``plan=true plan_gpu=`` does (:func:`flopsweep.job.placement.plan_environment`)
  and judges it with :func:`flopsweep.plan_assess.assess`, which the tuner calls on its composed configs
  too: the rules (a refusal is a ``refused`` row with the one line), the memory estimate against ``(1 -
  space.min_headroom)`` of the memory (``over memory``), the prediction and its figures
  (:class:`flopsweep.plan_assess.Row`: tokens/s, MFU, TFLOPs per GPU, J/token, dollars per million
  tokens, the budget). DeepSpeed set-ups import DeepSpeed (and torch) for ZeRO's memory estimate.
- :func:`rank` orders the ``ok`` rows by ``objective=`` (:func:`flopsweep.objective.planned`), numbers
  them across clusters (``rank`` 1 = best) and within each (``cluster_rank`` 1..n) and marks the best
  of each cluster (``best``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from flopsweep import objective
from flopsweep.clusters import Cluster
from flopsweep.config import RunConfig
from flopsweep.dropped import OVER_MEMORY, SPACE_KEY_OF, nothing_line  # noqa: F401 - the plan's and the tuner's names
from flopsweep.memory_edge import off_edge_pick
from flopsweep.plan_assess import (  # noqa: F401 - re-exported: the plan's and the tuner's names
    ASSUMED_NETWORK_ERROR,
    COLUMNS,
    DEEPSPEED_ERROR,
    EXPECTED_ERROR,
    ROW_FIELDS,
    UNMEASURED,
    UNPROBED,
    Machine,
    Row,
    assess,
    expected_error,
    machine,
    predict,
)
from flopsweep.space import Setup, Space, placed
from flopsweep.text import figure


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
    defaults (the job's own knobs kept when it picked the same option), its ``compile`` (the job's
    where None; ``compile_scope`` and ``compile_mode`` the job's, their defaults where False: they apply
    to the compiled set-ups of ``space.compile=[false,true]``), the micro batch (the job's
    ``batch.global_batch_size`` kept: validation derives the grad accumulation), the layout, the
    cluster's nodes and GPUs, ``plan_gpu`` its GPU, its network's bandwidth across nodes unless
    ``predict.inter_node_gbps`` is set (a network named in the cluster wins), and its ``@PRICE`` as
    ``cost.usd_per_gpu_hour`` where it names one (:attr:`flopsweep.clusters.Cluster.usd_per_gpu_hour`).
    None where the layout is no set-up on this cluster (:meth:`Setup.parallel`)."""
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
    price, _ = cluster.price(cfg.cost.usd_per_gpu_hour)
    return dataclasses.replace(
        cfg,
        cost=dataclasses.replace(cfg.cost, usd_per_gpu_hour=price),
        backend=backend,
        precision=precision,
        activation_checkpointing=ckpt,
        compile=cfg.compile if setup.compile is None else setup.compile,
        **({"compile_mode": "default", "compile_scope": "block"} if setup.compile is False else {}),
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
    if cluster.nnodes > 1 and (cluster.network_named or not cfg.predict.inter_node_gbps):
        row.prediction_source = row.prediction_source.replace(
            "predict.inter_node_gbps across nodes", network_said(cluster)
        )
    return row


def network_said(cluster: Cluster) -> str:
    """How a row names the bus bandwidth across nodes that its cluster's network gave (in place of
    ``predict.inter_node_gbps``, which :func:`setup_config` set from it): ``ib200 across nodes: 20
    GB/s busbw per GPU, the default network of A100 nodes (an A100/V100-generation training platform:
    ...; one 200 Gb/s NIC per GPU (DGX A100), 80% of 25 GB/s); set predict.inter_node_gbps or
    plan_clusters=GPU:NxG:NETWORK``: a default names why it is the GPU's
    (:data:`flopsweep.clusters.DEFAULT_NETWORKS`)."""
    from flopsweep.clusters import default_network_why

    net = cluster.network
    whose = (
        "named in the cluster"
        if cluster.network_named
        else f"the default network of {cluster.row.name} nodes ({default_network_why(cluster.row)})"
    )
    return (
        f"{net.name} across nodes: {figure(net.inter_node_gbps, 6)} GB/s busbw per GPU, {whose} "
        f"({net.source})"
        + ("" if cluster.network_named else "; set predict.inter_node_gbps or plan_clusters=GPU:NxG:NETWORK")
    )


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


RECOMPUTE_ORDER = {"none": 0, "casts": 1, "selective": 2, "memory_budget": 3, "every_n": 4, "full": 5}
"""Checkpointing policies by how much of the forward they recompute (the least first): on a tie of
the objective and tokens/s, :func:`rank` puts the one that recomputes less first (another policy: 3)."""


def rank(rows: Iterable[Row], objective_name: str) -> list[Row]:
    """The ``ok`` rows with a value for ``objective_name`` (:func:`flopsweep.objective.planned`),
    best first, numbered from 1 across every cluster (``rank``) and from 1 within each cluster
    (``cluster_rank``, no gaps); ``best`` marks the first of each cluster, or where that one is at the
    memory edge the first off it within 5% of its value and tokens/s
    (:func:`flopsweep.memory_edge.off_edge_pick`). Ties keep the higher
    predicted tokens per second (``@0``: every row's dollars tie at 0, and the fastest set-up, not the
    slowest, is best), then the less recompute (:data:`RECOMPUTE_ORDER`: a communication-bound step
    hides the recompute, ``steptime.predict``'s ``max(..., comm - compute)``, so ``none``, ``selective``
    and ``full`` predict alike), then the lower expected error (an unmeasured one last), then the
    smaller memory per rank. Rows without a value get no rank.

    Raises:
        ConfigError: as :func:`flopsweep.objective.planned`.
    """
    column, better = objective.planned(objective_name)
    sign = -1.0 if better == "higher" else 1.0
    valued = []
    for row in rows:
        row.rank, row.cluster_rank, row.best = None, None, False
        value = getattr(row, column)
        if row.status == "ok" and value is not None and not math.isnan(value):
            valued.append(row)
    valued.sort(
        key=lambda r: (
            sign * getattr(r, column),
            -(r.predicted_tokens_per_s or 0.0),  # a tie (every price 0): the fastest first
            RECOMPUTE_ORDER.get(getattr(r.setup, "checkpointing", ""), 3),  # then the least recompute
            math.inf if r.expected_error is None else r.expected_error,  # unmeasured: last of a tie
            r.est_peak_gib_per_rank or 0,
        )
    )
    within: dict[str, list[Row]] = {}
    for i, row in enumerate(valued, 1):
        within.setdefault(row.cluster, []).append(row)
        row.rank, row.cluster_rank = i, len(within[row.cluster])
    for rows_of in within.values():
        figures = [((getattr(r, column), r.predicted_tokens_per_s or 0.0), r.memory_edge) for r in rows_of]
        rows_of[off_edge_pick(figures)].best = True
    return valued
