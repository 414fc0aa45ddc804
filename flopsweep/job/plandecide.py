"""``plan=true plan_clusters=[...]``: the plan that decides. Every set-up of ``space`` on every
named cluster (:mod:`flopsweep.plan_space`), the ones that fit and are not refused predicted and
ranked by ``objective=``, printed as one table of at most :data:`WIDTH` columns (``space.top`` rows
per cluster, the best of each marked ``*``), the defaults it used and the override line that runs
the best of each cluster; every row (dropped ones too, with why) in ``plan.csv``; ``plan_format=csv``
or ``json`` prints every row instead of the table. Starts nothing, writes no record.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flopsweep import comm_time, forecast, objective
from flopsweep.checks import _validate_cost, check_bounds
from flopsweep.cli import COMMAND
from flopsweep.clusters import Cluster, parse_cluster
from flopsweep.config import PLAN_FORMATS, ConfigError, RunConfig, require_choice
from flopsweep.dropped import CAUSE_FIXES, OVER_MEMORY
from flopsweep.job.plantable import PLAN_FILE, replace_plan_file
from flopsweep.job.result import JobInfo
from flopsweep.peaks import node_link
from flopsweep.plan_space import COLUMNS, Candidates, Row, Space, candidates, rank, unplaced
from flopsweep.plan_space import nothing_line as space_nothing_line

WIDTH = 160
"""The terminal table's widest line (characters)."""
FORMATS = PLAN_FORMATS
"""``plan_format=`` values (:data:`flopsweep.config.PLAN_FORMATS`)."""
SPACE_KEYS = ("backends", "layouts", "checkpointing", "precisions", "micro_batches", "min_headroom", "top")
RUN_KEYS = (
    *("plan", "plan_clusters", "plan_format", "plan_gpu", "plan_gpu_memory_gib", "nnodes", "nproc_per_node"),
)
"""Override keys the override line of a set-up replaces (with the set-up's own, :meth:`Setup.overrides`)."""
SETUP_KEYS = (
    "backend",
    "activation_checkpointing",
    "precision",
    "batch",
    "batch.micro_batch_size",
    "parallel",
)


def checked(cfg: RunConfig) -> tuple[list[Cluster], Space]:
    """The clusters and the space of a decide plan, every key checked first.

    Raises:
        ConfigError: one line: a bad cluster name (:func:`flopsweep.clusters.parse_cluster`), a price
            or budget out of range (:func:`flopsweep.checks.check_bounds` first: a value that is not
            finite, ``cost.usd_per_gpu_hour=inf``, is refused once, not in every set-up's row), an
            unknown ``plan_format``, a ``space.*`` value, an objective a plan cannot predict
            (:func:`flopsweep.objective.planned`).
    """
    require_choice("plan_format", cfg.plan_format, FORMATS)
    check_bounds(cfg)
    _validate_cost(cfg)
    objective.planned(cfg.objective)
    space = Space.from_config(cfg.space)
    if cfg.space.top < 1:
        raise ConfigError("space.top", cfg.space.top, "must be at least 1", "set e.g. space.top=5")
    names = [str(name) for name in cfg.plan_clusters]
    if any(not n.strip() for n in names) and any(n.strip() for n in names):  # [H100:8,'']: one line
        kept = ",".join(n.strip() for n in names if n.strip())
        raise ConfigError("plan_clusters", names, "holds an empty name", f"drop it: plan_clusters=[{kept}]")
    clusters = [parse_cluster(name) for name in names]
    space.size_problem(len(clusters), f" on {len(clusters)} cluster(s)")
    labels = [c.label for c in clusters]
    if len(set(labels)) < len(labels):
        twice = next(label for label in labels if labels.count(label) > 1)
        raise ConfigError(
            "plan_clusters", list(cfg.plan_clusters), f"names {twice} twice", "name each cluster once"
        )
    return clusters, space


def decide_job(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """``plan=true`` with ``plan_clusters``: the table, ``plan.csv`` in the job directory, and the
    text to print (``plan_text``: the table, or every row as CSV or JSON).

    Returns:
        ``{"status": "plan", "plan_file": path, "plan_text": text, "best": [row dicts]}``, or
        ``{"status": "invalid", "error": {"message": line}}`` for a key :func:`checked` refuses.
    """
    try:
        clusters, space = checked(cfg)
        records = forecast.prediction_records(cfg)
    except ConfigError as exc:
        return {"status": "invalid", "error": {"message": str(exc)}, "plan": {}}
    n = len(clusters)

    def progress(label: str, rows: int) -> None:
        done = progress.count = getattr(progress, "count", 0) + 1
        print(f"plan: {label} done ({done}/{n} clusters, {rows} set-ups so far)", file=sys.stderr, flush=True)

    result = candidates(cfg, space, clusters, records, progress=progress)
    ranked = rank(result.rows, cfg.objective)
    others = [r for r in result.rows if r.rank is None]
    path = Path(info.job_dir) / PLAN_FILE
    replace_plan_file(path, [r.as_dict() for r in [*ranked, *others]], columns=COLUMNS)
    notes = defaults_used(cfg, info.overrides, clusters, records)
    best = [r for r in ranked if r.best]
    lines = [override_line(r, info.overrides) for r in best]
    if cfg.plan_format == "csv":
        text = path.read_text().rstrip("\n")  # run.py prints it with the one newline
    elif cfg.plan_format == "json":
        text = json.dumps(
            {
                "objective": cfg.objective,
                "better": objective.planned(cfg.objective)[1],
                "defaults": notes,
                "dropped": dict(result.dropped),
                "best": [{"cluster": r.cluster, "command": c} for r, c in zip(best, lines, strict=True)],
                "rows": [r.as_dict() for r in [*ranked, *others]],
            },
            indent=1,
        )
    else:
        text = render(ranked, result, cfg, notes, lines, str(path))
    out = {
        "status": "plan",
        "plan_file": str(path),
        "plan_text": text,
        "plan": {},
        "best": [r.as_dict() for r in best],
    }
    if not ranked:  # a contradictory space: say why, and run.py exits 1
        away = [why for c in clusters for why in unplaced(space, c.nnodes, c.gpus_per_node)]
        out["nothing"] = nothing_line(result.rows, away)
    return out


def nothing_line(rows: list[Row], unplaced: list[str] | None = None) -> str:
    """One line for a plan that ranks no set-up: how many were dropped and the commonest reason
    (:func:`flopsweep.plan_space.nothing_line`, the tuner's too), among the rows (the set-ups the table
    counts), else among ``unplaced``, why each set-up a cluster does not place is none there
    (:func:`flopsweep.plan_space.unplaced`): 15 set-ups over memory once lost to the 15 ``hsdp``
    names one node does not place, "the commonest reason (15 of 90): hsdp ...". Each cause's fix
    (:mod:`flopsweep.dropped`): over memory's with ``plan_clusters`` added; a collective with no bus
    bandwidth: ``predict.intra_node_gbps`` / ``predict.inter_node_gbps``."""
    reasons = [  # a reason that names its status already (no prediction: ...) is said once
        r.reason if r.reason.startswith(r.status) else f"{r.status}: {r.reason}" if r.reason else r.status
        for r in rows
    ] or list(unplaced or [])
    if not reasons:
        return "plan: no set-up to rank (the space and clusters give none); see docs/plan.md"
    fix = "widen space.* (backends, layouts, micro batches) or plan_clusters"
    more = "or name GPUs with more memory, or more of them, in plan_clusters"
    fixes = {OVER_MEMORY: f"{CAUSE_FIXES[OVER_MEMORY]}; {more}"}
    return space_nothing_line(
        reasons, who="plan", headline="no set-up fits and is predicted", fix=fix, fixes=fixes
    )


def in_node_lines(gpus: Iterable[str]) -> list[str]:
    """The defaults lines of the bus bandwidth in a node, one per GPU name as the clusters give it
    (an ``A100-80GB`` is assumed SXM4, an ``A100-PCIe-80GB`` is not): :data:`ASSUMED_NVLINK_SHARE
    <flopsweep.comm_time.ASSUMED_NVLINK_SHARE>` of its link per direction
    (:func:`flopsweep.peaks.node_link`), the datasheet and what was assumed, ``in a node of
    A100-80GB: 210 GB/s busbw, 0.7 x A100 SXM4 NVLink 300 GB/s per direction (NVIDIA A100 datasheet,
    SXM4: NVLink 600 GB/s); SXM4 assumed: ...``; a GPU the peak table does not know: set
    ``predict.intra_node_gbps``."""
    share = comm_time.ASSUMED_NVLINK_SHARE
    out = []
    for gpu in gpus:
        found = node_link(gpu)
        if found is None:
            out.append(f"in a node of {gpu}: no figure for its link; set predict.intra_node_gbps=GBPS")
            continue
        said = f"in a node of {gpu}: {share * found.gbps:g} GB/s busbw, {share:g} x {found.said}"
        said += f" {found.gbps:g} GB/s per direction ({found.link.datasheet})"
        out.append(said + (f"; {found.assumed}" if found.assumed else ""))
    return out


def _si(x: float | None, money: bool = False) -> str:
    """``1.17M``, ``317k``, ``2.4``; ``$2.94M``; blank for None."""
    if x is None:
        return ""
    sign = "$" if money else ""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{sign}{x / scale:.3g}{unit}"
    return f"{sign}{x:.3g}"


def setup_label(row: Row) -> str:
    """``fsdp dp8x8 sel mb4`` (``ga2`` with grad accumulation, the precision when not bf16)."""
    s = row.setup
    ckpt = {"none": "-", "selective": "sel", "full": "full"}.get(s.checkpointing, s.checkpointing)
    parts = [s.backend, row.layout, ckpt, f"mb{s.micro_batch}"]
    if row.grad_accum and row.grad_accum > 1:
        parts.append(f"ga{row.grad_accum}")
    if s.precision != "bf16":
        parts.append(s.precision)
    return " ".join(parts)


HEADER = (
    ("#", 4),
    ("cluster", 16),
    ("set-up", 26),
    ("tok/s/GPU", 9),
    ("MFU", 5),
    ("J/tok", 5),
    ("$/Mtok", 7),
    ("days", 6),
    ("GPU-h", 6),
    ("budget$", 7),
    ("GiB", 5),
    ("free", 5),
    ("err", 4),
    ("source", 10),
)


def _cells(row: Row) -> list[str]:
    source = {"flops": "datasheet", "calibration": "calibrated", "probe": "probe", "nearest": "nearest"}.get(
        row.compute_source, "?"
    )
    return [
        f"{row.rank}{'*' if row.best else ''}",
        row.cluster,
        setup_label(row),
        f"{row.predicted_tokens_per_s_per_gpu:,.0f}",
        "" if row.predicted_mfu is None else f"{row.predicted_mfu:.0%}",
        "" if row.predicted_joules_per_token is None else f"{row.predicted_joules_per_token:.3g}",
        ""
        if row.predicted_usd_per_million_tokens is None
        else f"${row.predicted_usd_per_million_tokens:.3g}",
        "" if row.budget_days is None else f"{row.budget_days:,.0f}",
        _si(row.budget_gpu_hours),
        _si(row.budget_usd, money=True),
        f"{row.est_peak_gib_per_rank:.1f}",
        f"{row.headroom_gib:.1f}",
        f"±{row.expected_error:.0%}",
        source,
    ]


def table_lines(ranked: list[Row], top: int) -> list[str]:
    """The shown rows (the ``top`` best of each cluster, in rank order) as fixed-width lines."""
    shown, per = [], {}
    for row in ranked:
        if per.get(row.cluster, 0) < top:
            shown.append(row)
            per[row.cluster] = per.get(row.cluster, 0) + 1
    cells = [[h for h, _ in HEADER], *[_cells(r) for r in shown]]
    widths = [max(w, *(len(c[i]) for c in cells)) for i, (_, w) in enumerate(HEADER)]
    left = {1, 2, 13}
    return [
        "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells_row, widths, strict=True))
        ).rstrip()
        for cells_row in cells
    ]


def render(
    ranked: list[Row], result: Candidates, cfg: RunConfig, notes: list[str], lines: list[str], path: str
) -> str:
    """The terminal output: the table, what was dropped, the defaults used, the best's override lines."""
    column, better = objective.planned(cfg.objective)
    none = ["no set-up fits and is predicted: see the dropped counts"]
    out = table_lines(ranked, cfg.space.top) if ranked else none
    total = len(result.rows)
    dropped = ", ".join(f"{k} {v}" for k, v in result.dropped.most_common())
    out += [
        "",
        f"ranked by objective={cfg.objective} ({column}, {better} is better); * = best of its cluster; "
        f"{cfg.space.top} shown per cluster (space.top)",
        f"{total} set-ups: {len(ranked)} ranked; dropped: {dropped or 'none'}",
        "tok/s/GPU, MFU predicted; J/tok at the GPU's board power; days, GPU-h, budget$: to train "
        "budget.tokens; GiB: estimated peak per rank, free: GPU memory less it; err: expected |error|",
        "defaults used:",
        *(f"  {n}" for n in notes),
        "best of each cluster, the command that runs it:",
        *(f"  {r.cluster}: {line}" for r, line in zip([r for r in ranked if r.best], lines, strict=True)),
        f"(plan: no worker started, no record written; every row in {path})",
    ]
    return "\n".join(out)


def _given(overrides: list[str], key: str) -> bool:
    return any(o.lstrip("+~").split("=")[0] == key for o in overrides)


def defaults_used(
    cfg: RunConfig, overrides: list[str], clusters: list[Cluster], records: list[tuple[str, dict[str, Any]]]
) -> list[str]:
    """One line per default the plan used (a key not given on the command line, an assumed figure)."""
    out = []
    for key in SPACE_KEYS:
        if not _given(overrides, f"space.{key}"):
            value = getattr(cfg.space, key)
            shown = f"[{','.join(map(str, value))}]" if isinstance(value, list) else value
            out.append(f"space.{key}={shown}")
    if not _given(overrides, "objective"):
        out.append(f"objective={cfg.objective}")
    if cfg.batch.global_batch_size is None:
        out.append("batch.global_batch_size=null: global batch = micro batch x data-parallel degree")
    out.append(
        f"kept from the job: model.seq_len={cfg.model.seq_len}, attention={cfg.attention.name}, "
        f"compile={cfg.compile}"
    )
    for c in {c.row.name: c for c in clusters if not c.network_named and c.nnodes > 1}.values():
        net = c.network
        out.append(
            f"network of {c.row.name} nodes: {net.name}: {net.inter_node_gbps:g} GB/s busbw per GPU, "
            f"{net.source}"
        )
    if not cfg.predict.intra_node_gbps:  # each cluster's GPU, not one GPU's figure for all
        out += in_node_lines({c.gpu: c for c in clusters})
    if not records:
        out.append("compute: uncalibrated, 0.45 x the datasheet's dense peak (predict.calibration unset)")
    elif not cfg.predict.calibration:
        out.append(
            f"compute: the {len(records)} measured records flopsweep ships (predict.calibration unset; "
            "predict.measured=false: the FLOPs estimate)"
        )
    for c in {c.row.name: c for c in clusters}.values():
        if c.power_w:
            out.append(f"power: {c.power_w:g} W per {c.row.name} (its board power) for J/tok")
    if cfg.cost.usd_per_gpu_hour is None:
        out.append("cost.usd_per_gpu_hour=null: no dollars (set e.g. cost.usd_per_gpu_hour=2.5)")
    if cfg.budget.tokens is None:
        out.append("budget.tokens=null: no days or budget (set e.g. budget.tokens=15e12)")
    return out


def override_line(row: Row, overrides: list[str]) -> str:
    """``flopsweep`` (:data:`flopsweep.cli.COMMAND`) with the job's own overrides (less the plan's and
    the set-up's keys) and the set-up's (:meth:`flopsweep.plan_space.Setup.overrides`);
    ``hydra/launcher=slurm`` on several nodes."""

    def dropped(o: str) -> bool:
        key = o.lstrip("+~").split("=")[0]
        own = key.startswith(("space.", "parallel.", "predict.gpus_per", "predict.nnodes"))
        return own or key in RUN_KEYS or key in SETUP_KEYS

    kept = [o for o in overrides if not dropped(o)]
    line = [COMMAND, *kept, *row.overrides]
    if "nnodes=1" not in row.overrides:
        line.append("hydra/launcher=slurm")
    return " ".join(line)
