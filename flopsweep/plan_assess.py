"""Judge one composed set-up on one machine: the rules, the memory estimate and the step-time
prediction, into a :class:`Row`. The one place ``plan=true plan_clusters=[...]``
(:func:`flopsweep.plan_space.evaluate`, a cluster of the peak table) and the tuner
(``hydra/sweeper=tune``, the hardware at hand) judge a set-up; :mod:`flopsweep.plan_space`
enumerates them. Torch-free but for DeepSpeed set-ups (ZeRO's memory estimate imports DeepSpeed).

- :func:`assess`: :func:`flopsweep.plan.plan` (a refusal: ``refused``), the peak per rank
  (:func:`flopsweep.memory.peak_bytes`) over ``(1 - space.min_headroom)`` of the machine's memory
  (``over memory``), then :func:`predict`.
- :func:`predict`: :func:`flopsweep.forecast.prediction` into the row's figures: tokens/s (and per
  GPU), MFU, model TFLOPs per GPU, J/token (at :data:`flopsweep.clusters.ASSUMED_POWER_W`), dollars per
  million tokens and the budget (:func:`flopsweep.cost.budget`: ``days = tokens / tokens_per_s / 86400``,
  ``gpu_hours = days x 24 x world``, ``usd = gpu_hours x`` the row's ``usd_per_gpu_hour``: its cluster's
  ``@PRICE``, else ``cost.usd_per_gpu_hour``), the expected
  error (:func:`expected_error`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flopsweep import cost, forecast
from flopsweep.clusters import Cluster
from flopsweep.config import ConfigError, RunConfig, typed_form
from flopsweep.memory_edge import at_edge, edge_note
from flopsweep.text import figure, percent

log = logging.getLogger(__name__)

EXPECTED_ERROR = {
    "probe": 0.05,
    "calibration": 0.05,
    "nearest": 0.05,
    "flops": 0.15,
}
"""Expected |error| of a predicted step by where its compute comes from (``compute_source``):
calibrated or probed 5% (RESULTS.md: 21 one-H200 runs, median 3.5%; FSDP2 and DDP pairs within
4.8%); from the nearest measured set-up 5% (RESULTS.md, leave-one-set-up-out over 196 one-H200
records: median 3.7%, p90 22%); from the datasheet 15% (0.45 of the peak, where our H200 runs reach
0.43-0.52 HFU)."""
DEEPSPEED_ERROR = 0.4
"""DeepSpeed's engine and host overheads are not modelled: its pairs miss by 9-75% (RESULTS.md,
the two-GPU check: ZeRO-1/2 +9%, ZeRO-3 up to +40%, Llama 3.1 8B ZeRO-3 +75%)."""
ASSUMED_NETWORK_ERROR = 0.1
"""Added where a collective crosses nodes at an assumed (not probed) bandwidth: a ring's share of the
line rate, per-call latency ignored."""


@dataclass(frozen=True, kw_only=True)
class Machine:
    """Where set-ups are judged (:func:`assess`): a cluster of ``plan_clusters`` (:func:`machine`) or
    the hardware at hand (the tuner's)."""

    label: str
    nnodes: int
    gpus_per_node: int
    device_name: str | None
    """The GPU's name for the peak table; None on the CPU (no MFU, TFLOPs from the model's FLOPs)."""
    capacity: tuple[int, str] | None
    """Memory per rank (bytes) and where the figure comes from; None: unknown (nothing pruned by memory)."""
    power_w: float | None = None
    """Board power per GPU a predicted J/token assumes (:data:`flopsweep.clusters.ASSUMED_POWER_W`)."""


def machine(cluster: Cluster) -> Machine:
    """The :class:`Machine` of a ``plan_clusters`` cluster: its GPU's memory (the peak table's)."""
    from flopsweep.gpu_memory import planned_gpu_bytes

    capacity = planned_gpu_bytes(cluster.gpu, None)[0]
    return Machine(
        label=cluster.label,
        nnodes=cluster.nnodes,
        gpus_per_node=cluster.gpus_per_node,
        device_name=cluster.gpu,
        capacity=(capacity, cluster.gpu),
        power_w=cluster.power_w,
    )


@dataclass(kw_only=True)
class Row:
    """One set-up on one cluster: what :func:`evaluate` found. Units in the names; blank (None)
    where not known (an ``over memory`` row has no prediction)."""

    cluster: str
    """The :class:`Machine`'s label (a cluster's ``H100:8x8:ib400``)."""
    setup: Any
    """The :class:`flopsweep.space.Setup`; None for a tuning sweep's set-up given as sweep axes."""
    status: str = "ok"
    """``ok``; ``invalid`` (a ``-m`` plan job's keys refused: one row, no set-up); ``no set-up left`` (a
    ``-m`` plan job that ranked none: one row, no set-up, its line in ``reason``); ``refused`` (validation's
    line in ``reason``); ``over memory`` (below ``space.min_headroom``); ``no prediction`` (``reason``)."""
    reason: str = ""
    """Why a row is not ``ok``, in one line: a refusal's ``KEY=VALUE: why. Fix: fix``, the estimate
    against the GPU's memory, the step model's ``no prediction: KEY=VALUE: why. Fix: fix``."""
    world_size: int = 0
    """Ranks (GPUs) of the set-up: the cluster's nodes x GPUs per node."""
    layout: str = ""
    """:meth:`flopsweep.layout.Layout.label`: ``dp64``, ``dp8x8``, ``dp32 tp2``."""
    grad_accum: int | None = None
    """Micro batches per optimizer step and rank (``batch.grad_accum``; from ``batch.global_batch_size``
    where that is set)."""
    global_batch: int | None = None
    """Sequences per optimizer step."""
    est_peak_gib_per_rank: float | None = None
    """The memory estimate's peak per rank, GiB (:func:`flopsweep.memory.peak_bytes`)."""
    gpu_memory_gib: float | None = None
    """The GPU's memory, GiB, as the driver reports it (:attr:`flopsweep.peak_row.PeakRow.memory_gib`)."""
    headroom_gib: float | None = None
    """What the estimate leaves free of the GPU's memory, GiB (``gpu_memory_gib - est_peak_gib_per_rank``)."""
    memory_edge: bool = False
    """The estimate leaves under :data:`flopsweep.memory_edge.EDGE_HEADROOM` (13%) of the GPU's memory free
    (:func:`flopsweep.memory_edge.at_edge`): allocator retries possible, which the predicted step counts
    not; the table's ``free`` ends in ``!``, and its ``prediction_source`` says so."""
    predicted_iteration_time_s: float | None = None
    """The predicted optimizer step, seconds (:func:`flopsweep.forecast.prediction`)."""
    predicted_tokens_per_s: float | None = None
    """Predicted tokens per second over the whole cluster."""
    predicted_tokens_per_s_per_gpu: float | None = None
    """Predicted tokens per second per GPU (``predicted_tokens_per_s / world_size``)."""
    predicted_mfu: float | None = None
    """Predicted MFU, a share of the GPU's dense peak (bf16's for fp8)."""
    predicted_tflops_per_gpu: float | None = None
    """Predicted model TFLOP/s per GPU (MFU x the peak; without a peak, the model FLOPs over the step)."""
    predicted_exposed_comm_s: float | None = None
    """The predicted communication a step waits for (not hidden behind compute), seconds."""
    predicted_joules_per_token: float | None = None
    """GPU board power x GPUs / tokens per second, J (:data:`flopsweep.clusters.ASSUMED_POWER_W`); blank
    for a GPU without a listed power."""
    usd_per_gpu_hour: float | None = None
    """The price the row's dollars are at, US dollars per GPU-hour: its cluster's ``@PRICE``
    (``plan_clusters=[H100:8x8@2.49]``), else ``cost.usd_per_gpu_hour``; blank without one."""
    predicted_usd_per_million_tokens: float | None = None
    """``usd_per_gpu_hour x GPUs / 3600 / tokens per second x 1e6``, dollars; blank without a price."""
    budget_days: float | None = None
    """Days to train ``budget.tokens`` (``budget.tokens / tokens per second / 86400``); blank without it."""
    budget_gpu_hours: float | None = None
    """GPU-hours to train ``budget.tokens`` (days x 24 x GPUs)."""
    budget_usd: float | None = None
    """Dollars to train ``budget.tokens`` (GPU-hours x ``usd_per_gpu_hour``)."""
    budget_energy_kwh: float | None = None
    """GPU energy to train ``budget.tokens``, kWh (J/token x tokens / 3.6e6)."""
    compute_source: str = ""
    """Where the predicted compute comes from: ``calibration``, ``nearest``, ``probe``, ``layers`` or
    ``flops`` (the datasheet; :attr:`flopsweep.workload.Compute.kind`)."""
    prediction_source: str = ""
    """The prediction's sources in words: its compute, bandwidths (the link in a node, the network
    across nodes named with why) and what was assumed."""
    expected_error: float | None = None
    """Expected |error| of the predicted step, a share (:func:`expected_error`); None where unmeasured
    (scaled from another GPU kind, or a layout degree its record ran at 1)."""
    memory_fix: str = ""
    """An ``over memory`` row: the levers its config has not pulled, each estimated to fit within
    ``(1 - space.min_headroom)`` of the GPU's memory (:func:`flopsweep.memory_fix.gpu_memory_fix`, as the
    single-machine plan's ``memory_fix``), none over the cluster's GPUs (nodes x GPUs per node); blank for
    another row."""
    overrides: list[str] = field(default_factory=list)
    """The overrides that run the set-up on its cluster (:meth:`flopsweep.space.Setup.overrides`),
    one text joined by spaces in ``plan.csv``."""
    rank: int | None = None
    """The row's place among every ranked row of the plan, all clusters together (1 = best):
    :func:`flopsweep.plan_space.rank`; blank (None) for a row not ranked (dropped, or no value)."""
    cluster_rank: int | None = None
    """The row's place among the ranked rows of its own cluster (1 = its best, then 2, 3, ... with no
    gaps); what the terminal table's ``#`` column shows."""
    best: bool = False
    """The best row of its cluster: ``cluster_rank`` 1, unless that row is at the memory edge
    (:attr:`memory_edge`) and one off it is within :data:`flopsweep.memory_edge.EDGE_MARGIN` (5%) of its
    objective and tokens/s: then the first such (:func:`flopsweep.memory_edge.off_edge_pick`)."""

    def as_dict(self) -> dict[str, Any]:
        """The row as ``plan.csv`` and ``plan_format=json`` write it (:data:`COLUMNS`)."""
        s = self.setup
        out = {k: getattr(self, k) for k in ROW_FIELDS}
        out["overrides"] = " ".join(self.overrides)
        if s is not None:
            out.update(
                backend=s.backend,
                space_layout=s.layout,
                checkpointing=s.checkpointing,
                precision=s.precision,
                compile=s.compile,
                micro_batch=s.micro_batch,
            )
        return {c: out.get(c) for c in COLUMNS}


ROW_FIELDS = tuple(f.name for f in dataclasses.fields(Row) if f.name not in ("setup", "overrides"))
SETUP_COLUMNS: dict[str, str] = {
    "backend": "the set-up's `space.backends` value (a `backend=` option; `zero1`..`zero3`: a ZeRO stage)",
    "space_layout": (
        "its `space.layouts` value (`dp`, `hsdp`, `tpN`, `ppN`, `cpN`, `epN`); `layout`: its degrees"
    ),
    "checkpointing": "its `space.checkpointing` policy (`activation_checkpointing=`)",
    "precision": "its `space.precisions` value (`precision=`)",
    "compile": "its `space.compile` value (`compile=`); blank: the job's own `compile`, kept",
    "micro_batch": "its `space.micro_batches` value (`batch.micro_batch_size`)",
}
"""The ``plan.csv`` columns of the :class:`flopsweep.space.Setup` (:meth:`Row.as_dict`), each with
what it means (``docs/reference/plan.md``); the other columns are :class:`Row`'s fields, their
docstrings."""
_HEAD = (
    "rank",
    "cluster_rank",
    "best",
    "cluster",
    "status",
    "backend",
    "space_layout",
    "layout",
    "checkpointing",
    "precision",
    "compile",
    "micro_batch",
)
COLUMNS = (
    *_HEAD,
    *(f for f in ROW_FIELDS if f not in (*_HEAD, "reason")),  # each once: ``layout`` was twice
    "reason",
    "overrides",
)
"""``plan.csv``'s columns under ``plan_clusters``: ``rank`` (1 = best of all clusters together),
``cluster_rank`` (1 = best of its cluster, numbered 1..n within each cluster), ``best`` (the best of its
cluster), the price (``usd_per_gpu_hour``: the cluster's ``@PRICE`` or ``cost.usd_per_gpu_hour``), the dollars
(``budget_usd``, ``predicted_usd_per_million_tokens``) and days (``budget_days``)."""


UNMEASURED = (
    "expected error unmeasured: the compute was measured on {gpu} and scaled to this GPU by the datasheet "
    "peak ratio; no run has checked a prediction carried from {gpu} to this GPU kind"
)
"""What a row predicted from another GPU kind's records says in its ``prediction_source`` where
:data:`ACROSS_KINDS_ERROR` has no figure for the pair (:func:`expected_error` gives it none)."""

UNMEASURED_DEGREE = (
    "expected error unmeasured: no record of {degrees} > 1 stood for it (the nearest ran at 1); "
    "what the degree costs beyond its modelled traffic no run has checked"
)
"""What a row predicted from the nearest set-up says in its ``prediction_source`` where its layout runs a
degree (``parallel.tp``, ``pp``, ``cp``, ``ep``) above 1 that the nearest record ran at 1
(:func:`unmeasured_layout`; :func:`expected_error` gives it none). The shipped records all ran 1 of each."""

ACROSS_KINDS_ERROR = {
    ("H200 SXM", "H100 SXM"): 0.08,
}
"""Expected |error| of a step predicted from the nearest set-up measured on another GPU kind and scaled by
the datasheet peak ratio, by (measured on, predicted for) as :func:`flopsweep.nearest_measured.gpu_kind`
names them; a pair not here is unmeasured (:data:`UNMEASURED`). H200 -> H100: the 43 one-H100 records of
2026-12-05 (``benchmarks/results/h100/session25``) predicted from the H200 records alone (``python
benchmarks/nearest_loo.py h100 --from h200``): median 7.1%, p90 16.5% (single 5.9% and 9.8%, FSDP2 6.6%
and 13.6%; DeepSpeed worse, :data:`DEEPSPEED_ERROR` covers it), mostly under the measured step: the two
share a bf16 peak (ratio 1), and the H100's HBM is 3.35 TB/s to the H200's 4.8."""


def across_kinds(made: dict[str, Any], gpu: str | None) -> tuple[str | None, float | None]:
    """``(measured_on, error)`` of a nearest prediction carried across GPU kinds: the kind its records
    were measured on (:func:`flopsweep.nearest.scaled_from`) and :data:`ACROSS_KINDS_ERROR` for that kind
    and ``gpu`` (the GPU predicted for), None where unmeasured; ``(None, None)`` for a prediction of the
    same kind or from another source."""
    from flopsweep.nearest import scaled_from
    from flopsweep.nearest_measured import gpu_kind

    if made.get("compute_source") != "nearest":
        return None, None
    measured_on = scaled_from(str(made.get("source") or ""))
    if measured_on is None:
        return None, None
    return measured_on, ACROSS_KINDS_ERROR.get((gpu_kind(measured_on) or "", gpu_kind(gpu) or ""))


def unmeasured_layout(made: dict[str, Any]) -> list[str]:
    """The degrees of a nearest prediction's layout above 1 that its nearest record ran at 1
    (:func:`flopsweep.nearest.unmeasured_degrees`: ``["parallel.cp"]``); empty for another source."""
    from flopsweep.nearest import unmeasured_degrees

    return (
        unmeasured_degrees(str(made.get("source") or "")) if made.get("compute_source") == "nearest" else []
    )


def expected_error(made: dict[str, Any], backend: str, nnodes: int, gpu: str | None = None) -> float | None:
    """The expected |error| of a prediction (a share): :data:`EXPECTED_ERROR` by its compute's
    source, at least :data:`DEEPSPEED_ERROR` for a DeepSpeed backend (``zero*``, ``deepspeed``),
    plus :data:`ASSUMED_NETWORK_ERROR` on several nodes linked by an assumed bandwidth. Where the
    nearest set-up was measured on another GPU kind and scaled by the datasheet peak ratio
    (:func:`across_kinds`), the measured error of that pair of kinds for ``gpu`` (the GPU predicted
    for, a device name) in place of the source's, or None (not measured: the 5% of
    :data:`EXPECTED_ERROR` is the error of one-H200 records predicting one-H200 runs). None too where the
    layout runs a degree above 1 that the nearest record ran at 1 (:func:`unmeasured_layout`: its 5% was
    measured on records of none)."""
    measured_on, across = across_kinds(made, gpu)
    if (measured_on is not None and across is None) or unmeasured_layout(made):
        return None
    err = EXPECTED_ERROR.get(str(made.get("compute_source") or "flops"), EXPECTED_ERROR["flops"])
    if across is not None:
        err = across
    if backend.startswith(("zero", "deepspeed")):
        err = max(err, DEEPSPEED_ERROR)
    if nnodes > 1 and "predict.inter_node_gbps" in str(made.get("bandwidth_source") or ""):
        err += ASSUMED_NETWORK_ERROR
    return err


UNPROBED = {"fallback": "plan=true runs no compute probe (a run with predict.probe=true does)"}


def assess(
    cfg: RunConfig,
    env: Any,
    where: Machine,
    *,
    choices: dict[str, str] | None,
    setup: Any,
    overrides: list[str],
    records: Sequence[tuple[str, dict[str, Any]]] = (),
    min_headroom: float = 0.1,
) -> tuple[Row, Any]:
    """Judge one composed set-up on ``where``: the one place both ``plan=true`` and the tuner apply
    the rules, the memory estimate and the prediction. Returns the :class:`Row` and the
    :class:`flopsweep.plan.Plan` (None unless the row is ``ok`` or ``no prediction``).

    - validation and resolution on ``env`` (:func:`flopsweep.plan.plan`: every rule of
      :mod:`flopsweep.rules`, ``batch.global_batch_size`` against micro batch x data-parallel degree
      included): a refusal is a ``refused`` row, its one line in ``reason`` (``Invalid config: `` dropped);
    - the peak per rank (:func:`flopsweep.memory.peak_bytes`) over ``(1 - min_headroom)`` of
      ``where.capacity``: ``over memory`` (an estimate that raises is logged and prunes nothing);
    - the prediction (:func:`predict`).
    """
    from flopsweep.memory import estimate, peak_bytes
    from flopsweep.memory_fix import gpu_memory_fix
    from flopsweep.plan import plan

    world = where.nnodes * where.gpus_per_node
    row = Row(
        cluster=where.label,
        setup=setup,
        world_size=world,
        overrides=overrides,
        usd_per_gpu_hour=cfg.cost.usd_per_gpu_hour,  # the cluster's @PRICE (setup_config), or the job's
    )
    try:
        p = plan(cfg, env, choices=choices)
    except ConfigError as exc:
        row.status, row.reason = "refused", str(exc).splitlines()[0].removeprefix("Invalid config: ")
        return row, None
    row.world_size = p.world_size
    row.layout = p.layout.label(p.cfg.parallel.pp_schedule)
    row.grad_accum = p.cfg.batch.grad_accum
    row.global_batch = p.layout.global_batch(p.cfg.batch.micro_batch_size, p.cfg.batch.grad_accum)
    try:
        peak = peak_bytes(p.cfg, p.layout, estimate(p.cfg, p.layout))
    except Exception as exc:  # noqa: BLE001 - an estimate that cannot be made prunes nothing
        log.warning("memory estimate of %s: %s", " ".join(overrides) or where.label, exc)
        peak = None
    row.est_peak_gib_per_rank = None if peak is None else peak / 2**30
    if where.capacity is not None and peak is not None:
        capacity, what = where.capacity
        row.gpu_memory_gib = capacity / 2**30
        row.headroom_gib = (capacity - peak) / 2**30
        row.memory_edge = at_edge(peak, capacity)
        if peak > (1 - min_headroom) * capacity:
            row.status = "over memory"
            share = f"{percent(1 - min_headroom)} of {figure(capacity / 2**30)} GiB"
            fits = f"over {share} ({what}; space.min_headroom={typed_form(min_headroom)})"
            row.reason = f"estimated {figure(peak / 2**30)} GiB per rank, {fits}"
            gpus = (where.nnodes, where.gpus_per_node)  # a fix within the cluster's GPUs
            row.memory_fix = gpu_memory_fix(p.cfg, (1 - min_headroom) * capacity, gpus)
            return row, None
    predict(row, p, where, records)
    return row, p


def predict(row: Row, p: Any, where: Machine, records: Sequence[tuple[str, dict[str, Any]]] = ()) -> Row:
    """Fill ``row``'s predicted figures from :func:`flopsweep.forecast.prediction` of the plan ``p``
    on ``where`` calibrated by ``records`` (the tuner calls it again with its measured records: the
    refit); ``no prediction`` where the step model gives none. On a GPU with a peak (``where.device_name``)
    the plan's runs are unprobed (:data:`UNPROBED`). A set-up at the memory edge (the row's estimate
    leaves under :data:`flopsweep.memory_edge.EDGE_HEADROOM` of ``gpu_memory_gib``) has
    :func:`flopsweep.memory_edge.edge_note` after its ``prediction_source``: its step counts no
    allocator retry."""
    made = forecast.prediction(
        p.cfg,
        p.layout,
        records,
        gpus_per_node=where.gpus_per_node,
        device_name=where.device_name,
        compute_probe=UNPROBED if where.device_name else None,
    )
    row.prediction_source = "; ".join(s for s in (made.get("source"), made.get("bandwidth_source")) if s)
    if not made.get("iteration_time_s") or not made.get("tokens_per_s"):
        row.status, row.reason = "no prediction", str(made.get("source") or "")
        return row
    row.status, row.reason = "ok", ""
    _figures(row, made, p, where)
    if row.est_peak_gib_per_rank is not None and row.gpu_memory_gib is not None:  # assess's figures
        edge = edge_note(row.est_peak_gib_per_rank * 2**30, row.gpu_memory_gib * 2**30, p.cfg.backend.name)
        row.prediction_source = "; ".join(s for s in (row.prediction_source, edge) if s)
    return row


def _figures(row: Row, made: dict[str, Any], p: Any, where: Machine) -> None:
    """Fill ``row``'s predicted and budget figures from the prediction ``made``. TFLOPs per GPU:
    MFU x the GPU's peak, or without a peak (the CPU) the model's FLOPs a step over ``t_step x world
    x 1e12`` (:meth:`flopsweep.models.Family.model_flops`)."""
    from flopsweep.flops import peak_tflops
    from flopsweep.models import family

    world = p.world_size
    rate = float(made["tokens_per_s"])
    step = float(made["iteration_time_s"])
    row.predicted_iteration_time_s = step
    row.predicted_tokens_per_s = rate
    row.predicted_tokens_per_s_per_gpu = rate / world
    row.predicted_mfu = made.get("mfu")
    matmul = "bf16" if p.cfg.precision.name.startswith("fp8") else p.cfg.precision.name
    peak = peak_tflops(where.device_name, matmul)[0] if where.device_name else None
    if row.predicted_mfu is not None and peak is not None:
        row.predicted_tflops_per_gpu = row.predicted_mfu * peak
    else:
        m = p.cfg.model
        tokens = row.global_batch * m.seq_len if row.global_batch else rate * step
        flops = family(m).model_flops(m, tokens, p.cfg.attention.density or 1.0)
        row.predicted_tflops_per_gpu = flops / (step * world * 1e12)
    row.predicted_exposed_comm_s = made.get("exposed_comm_s")
    power = where.power_w
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
    row.expected_error = expected_error(made, p.cfg.backend.name, where.nnodes, where.device_name)
    measured_on, across = across_kinds(made, where.device_name)
    if measured_on is not None and across is None:
        row.prediction_source += f"; {UNMEASURED.format(gpu=measured_on)}"
    if degrees := unmeasured_layout(made):
        row.prediction_source += f"; {UNMEASURED_DEGREE.format(degrees=' or '.join(degrees))}"
