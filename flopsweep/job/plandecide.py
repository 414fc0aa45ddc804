"""``plan=true plan_clusters=[...]``: the plan that decides. Every set-up of ``space`` on every
named cluster (:mod:`flopsweep.plan_space`), the ones that fit and are not refused predicted and
ranked by ``objective=``, printed as one table (:mod:`flopsweep.job.planrender`, at most 160 columns;
``space.top`` rows per cluster, the best of each marked ``*``), the defaults it used and the override
line that runs the best of each cluster; every row (dropped ones too, with why) in ``plan.csv``;
``plan_format=csv`` or ``json`` prints every row instead of the table. Starts nothing, writes no record.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flopsweep import comm_time, forecast, objective, strict_json
from flopsweep.checks import check_bounds, validate_cost
from flopsweep.choices import require_choice
from flopsweep.cluster_prices import decimal_comma_problem, entry_kind_problem, times_sign_problem
from flopsweep.clusters import Cluster, clusters_bound_problem, default_network_why, gpu_of, parse_cluster
from flopsweep.config import ConfigError, RunConfig
from flopsweep.dropped import OVER_MEMORY
from flopsweep.gpu_memory import canonical_gpu_name
from flopsweep.hydrafiles import to_job_log
from flopsweep.job.planmemory import memory_fix
from flopsweep.job.planrender import override_line, render, unranked
from flopsweep.job.plantable import NO_SET_UP_LEFT, PLAN_FILE, plan_csv, sweep_plan_file, write_plan
from flopsweep.job.planwhy import NOTHING_HEADLINE, cluster_why, nothing_line  # noqa: F401 - re-exported
from flopsweep.job.result import JobInfo
from flopsweep.layout_fit import NNODES_FIX, cluster_unplaced, clusters_fix  # noqa: F401 - NNODES_FIX re-exported
from flopsweep.limits import PLAN_FORMATS
from flopsweep.override_parsing import override_key, split_override
from flopsweep.peaks import form_taken, node_link
from flopsweep.plan_space import COLUMNS, Row, candidates, rank
from flopsweep.space import Space, placed, unplaced
from flopsweep.space_values import SPACE_KEYS
from flopsweep.text import figure

FORMATS = PLAN_FORMATS
"""``plan_format=`` values (:data:`flopsweep.limits.PLAN_FORMATS`)."""


def checked(cfg: RunConfig) -> tuple[list[Cluster], Space]:
    """The clusters and the space of a decide plan, every key checked first.

    Raises:
        ConfigError: one line: a bad cluster name (:func:`flopsweep.clusters.parse_cluster`), a price
            or budget out of range (:func:`flopsweep.checks.check_bounds` first: a value that is not
            finite, ``cost.usd_per_gpu_hour=inf``, is refused once, not in every set-up's row), an
            unknown ``plan_format``, a ``space.*`` value, an objective a plan cannot predict
            (:func:`flopsweep.objective.planned`) or whose keys are unset
            (:func:`flopsweep.objective.inputs_problem`: ``objective=usd_per_million_tokens`` with a cluster
            of no ``@PRICE`` and no ``cost.usd_per_gpu_hour``).
    """
    require_choice("plan_format", cfg.plan_format, FORMATS)
    check_bounds(cfg)
    validate_cost(cfg)
    objective.planned(cfg.objective)
    prices = {"cost.usd_per_gpu_hour": cfg.cost.usd_per_gpu_hour, "budget.tokens": cfg.budget.tokens}
    if unset := objective.inputs_problem(cfg.objective, {**prices, "plan_clusters": list(cfg.plan_clusters)}):
        raise unset  # one line, not every set-up's row refused by it
    space = Space.from_config(cfg.space)
    if cfg.space.top < 1:
        raise ConfigError("space.top", cfg.space.top, "must be at least 1", "set e.g. space.top=5")
    clusters = named_clusters(list(cfg.plan_clusters), cfg.predict.inter_node_gbps)
    space.size_problem(len(clusters), f" on {len(clusters)} cluster(s)")
    placed_nowhere_problem(space, clusters, cfg=cfg)
    return clusters, space


def placed_nowhere_problem(
    space: Space,
    clusters: list[Cluster],
    shown: str | None = None,
    cfg: RunConfig | list[RunConfig] | None = None,
) -> None:
    """Refuse a space none of whose set-ups any cluster places (``space.layouts=[tp3]`` on
    ``H100:8``: each layout's degree divides no cluster's ranks), which had printed an empty table,
    "dropped: none; 90 set-ups left out", then "all 90 dropped", exit 1. ``run.py``'s check before Hydra
    (:mod:`flopsweep.plan_command_line`, ``cfg`` the model its command line names:
    :func:`flopsweep.layout_fit.command_line_model`) and the job's (:func:`checked`) both call it.
    ``shown``: the list as typed (default: the space's own). ``cfg``: the job's config, or one per model a
    sweep's command line names (the fix lists the layouts each takes).

    The fix lists the layouts :func:`flopsweep.layout_fit.taken_layouts` gives on the first cluster: each
    placed there and accepted by the rules for ``cfg``'s model in at least one set-up of the space
    (:func:`flopsweep.layout_fit.plan_refusal`); gpt-tiny's 4 heads take no ``tp8``. A space that is
    placed but whose every layout the rules refuse for the model (``[ep2]`` for a dense one, which had
    planned, then exited 1) gets :func:`flopsweep.layout_fit.taken_nowhere_problem`'s line, the same fix.

    Raises:
        ConfigError: ``space.layouts=[tp3]: no cluster of plan_clusters places any of its layouts (on
            H100:1x8:ib400, tp3 needs its degree 3 to divide the 8 ranks). Fix: set
            space.layouts=[dp,tp2,tp4].``
    """
    from flopsweep.layout_fit import model_refusal, plan_refusal, taken_layouts, taken_nowhere_problem

    cfgs = cfg if isinstance(cfg, list) else [cfg or RunConfig()]
    if not clusters:
        return
    if any(placed(space, c.nnodes, c.gpus_per_node) for c in clusters):
        on = [c for c in clusters if placed(space, c.nnodes, c.gpus_per_node)]
        places = [(c.label, c.nnodes, c.gpus_per_node, [plan_refusal(one, c) for one in cfgs]) for c in on]
        if refused := taken_nowhere_problem(space, places, shown):  # [ep2] for a dense model
            raise refused
        return
    c = clusters[0]
    why = unplaced(space, c.nnodes, c.gpus_per_node)[0].removeprefix("space.layouts: ").split(". Fix:")[0]
    why = why.split(" (nnodes=")[0]  # the cluster's label says its nodes
    judges = [plan_refusal(one, c) for one in cfgs]
    takes = taken_layouts(space, c.nnodes, c.gpus_per_node, judges)
    if not takes and (own := model_refusal(space, c.nnodes, c.gpus_per_node, judges)) is not None:
        raise own  # not even dp: the model's own line (model.n_head=0) comes first
    raise ConfigError(
        "space.layouts",
        list(space.layouts),
        f"no cluster of plan_clusters places any of its layouts (on {c.label}, {why})",
        f"set space.layouts=[{','.join(takes or ['dp'])}]",
        shown or f"[{','.join(space.layouts)}]",
    )


def named_clusters(
    entries: list[object],
    inter_node_gbps: float | None = None,
    *,
    before_hydra: bool = False,
    here: tuple[str, int] | None = None,
) -> list[Cluster]:
    """The clusters ``plan_clusters`` names, each checked: at most
    :data:`flopsweep.clusters.MAX_PLAN_CLUSTERS` of them, each a name (no null or nested list:
    :func:`flopsweep.cluster_prices.entry_kind_problem`), no empty name beside others, each parsed
    (:func:`flopsweep.clusters.parse_cluster`), none named twice (:func:`same_as`).

    Args:
        before_hydra: ``run.py``'s check of the command line: an interpolation (Hydra's to resolve) is
            left out, for the job to check, and so is ``here`` unless ``here`` is given.
        here: this machine's ``(GPU name, GPU count)`` where known without torch: ``("", 0)`` where
            :func:`flopsweep.local_gpus.no_gpu_here` (``here`` is then the job's "this machine has no GPU").

    Raises:
        ConfigError: one line naming ``plan_clusters``, the value and the fix.
    """
    if kind := entry_kind_problem(entries, lambda kept: _once(kept, inter_node_gbps, here)):  # [H100:8,null]
        raise kind
    names = [str(name) for name in entries]
    clusters_bound_problem(names)  # 40 clusters took 37 s
    if comma := decimal_comma_problem(names):  # [H100:8@2,5]: not a cluster named 5
        raise comma
    if sign := times_sign_problem(names):  # ["H100:8×8"]: "gives no size"
        raise sign
    if any(not n.strip() for n in names) and any(n.strip() for n in names):  # [H100:8,'']: one line
        kept = ",".join(n.strip() for n in names if n.strip())
        raise ConfigError("plan_clusters", names, "holds an empty name", f"drop it: plan_clusters=[{kept}]")
    if before_hydra:
        names = [n for n in names if "${" not in n and (here or gpu_of(n).lower() != "here")]
    clusters = [parse_cluster(name, here) for name in names]
    seen: dict[tuple, Cluster] = {}
    for c in clusters:
        first = seen.setdefault(same_as(c, inter_node_gbps), c)
        if first is not c:
            prices = [x.usd_per_gpu_hour for x in (first, c)]
            said = (
                f"names {c.label} twice"
                if first.label == c.label
                else f"names one cluster twice: {first.label} and {c.label} are both {c.row.name} "
                "of the same memory, link in a node, shape and network"
                + (" (one node: no network used)" if c.nnodes == 1 else "")
            )
            if prices[0] != prices[1]:  # H100:8@2 and H100:8@3: one cluster, its dollars said twice
                shown = " and ".join("cost.usd_per_gpu_hour" if x is None else f"@{x:.15g}" for x in prices)
                said += f", priced {shown} (its rows would differ in dollars alone)"
            once = "name each cluster once" + (
                ", at the price you would pay" if prices[0] != prices[1] else ""
            )
            raise ConfigError("plan_clusters", list(names), said, once)
    return clusters


def _once(names: list[str], inter_node_gbps: float | None, here: tuple[str, int] | None) -> list[str]:
    """``names`` with each name of a cluster already listed (:func:`same_as`) dropped, the first kept: the
    list a fix may give back (a name that does not parse is kept, for its own line after)."""
    kept: list[str] = []
    seen: set[tuple] = set()
    for name in names:
        try:
            key: tuple = same_as(parse_cluster(name, here), inter_node_gbps)
        except (ConfigError, ValueError, KeyError):
            key = ("unparsed", name)
        if key not in seen:
            seen.add(key)
            kept.append(name)
    return kept


def same_as(cluster: Cluster, inter_node_gbps: float | None = None) -> tuple:
    """What a cluster's rows are made of: its GPU's peak-table row, memory and link in a node
    (:func:`flopsweep.peaks.node_link`), its shape and, on several nodes, the bus bandwidth across
    them (a default network's replaced by ``inter_node_gbps``, ``predict.inter_node_gbps``, as
    :func:`flopsweep.plan_space.setup_config` does). Two names with the same (``H100-80GB:8`` and
    ``H100-SXM:8``: both an H100 SXM of 80 GB on NVLink) are one cluster."""
    from flopsweep.gpu_memory import planned_gpu_bytes

    link = node_link(cluster.gpu)
    return (
        cluster.row.name,
        planned_gpu_bytes(cluster.gpu, None)[0],
        None if link is None else link.gbps,
        cluster.nnodes,
        cluster.gpus_per_node,
        None
        if cluster.nnodes == 1
        else cluster.network.inter_node_gbps
        if cluster.network_named or not inter_node_gbps
        else inter_node_gbps,
    )


def decide_job(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """``plan=true`` with ``plan_clusters``: the table, ``plan.csv`` in the job directory, and the
    text to print (``plan_text``: the table, or every row as CSV or JSON).

    Returns:
        ``{"status": "plan", "plan_file": path, "plan_text": text, "best": [row dicts]}``, or
        ``{"status": "invalid", "error": {"message": line}}`` for a key :func:`checked` refuses; under
        ``-m`` that job appends one row to the sweep's ``plan.csv``, ``status`` ``invalid`` and the line in
        ``reason`` (no set-up, no cluster), which :func:`flopsweep.job.plansweep.sweep_output` counts.
    """
    try:
        clusters, space = checked(cfg)
        records = forecast.prediction_records(cfg)
    except ConfigError as exc:
        if info.job_num is not None:  # -m: its one invalid row, so the sweep's table counts and names it
            from flopsweep.job.plansweep import append_job

            row = Row(cluster="", setup=None, status="invalid", reason=str(exc))
            append_job(sweep_plan_file(info), [row.as_dict()], info)
        return {"status": "invalid", "error": {"message": str(exc)}, "plan": {}, "plan_clusters": True}
    n = len(clusters)
    if note := ignored_line(info.overrides, clusters):
        print(note, file=sys.stderr, flush=True)

    def progress(label: str, rows: int) -> None:
        done = progress.count = getattr(progress, "count", 0) + 1
        print(f"plan: {label} done ({done}/{n} clusters, {rows} set-ups so far)", file=sys.stderr, flush=True)

    result = candidates(cfg, space, clusters, records, progress=progress)
    ranked = rank(result.rows, cfg.objective)
    others = [r for r in result.rows if r.rank is None]
    path = Path(info.job_dir) / PLAN_FILE
    every = [r.as_dict() for r in [*ranked, *others]]
    # None, or the line saying why not (the plan prints anyway); a single plan's never over a file there
    unwritten = write_plan(path, every, COLUMNS, overwrite=info.job_num is not None)
    notes = defaults_used(cfg, info.overrides, clusters, records)
    nets = network_lines(clusters)
    prices = price_lines(clusters, cfg.cost.usd_per_gpu_hour)
    if cfg.objective in ("usd_per_million_tokens", "budget_usd") and all(
        c.price(cfg.cost.usd_per_gpu_hour)[0] == 0 for c in clusters
    ):  # @0: no dollars tell the set-ups apart
        prices.append(
            f"price: 0 for every cluster, so every row ties at 0 dollars: objective={cfg.objective} ranks "
            "them by tokens/s (name the price you would pay, e.g. @2.5, to rank by dollars)"
        )
    best = [r for r in ranked if r.best]
    lines = [override_line(r, info.overrides) for r in best]
    whys = {c.label: _unplaced_why(cfg, space, c, clusters) for c in clusters}
    blank = unpredicted_reason(cfg.objective, clusters)  # an ok row unranked: its objective is blank
    per_cluster = cluster_why(cfg, space, clusters, records, blank)  # a cluster that ranks none: why
    if cfg.plan_format == "csv":
        text = plan_csv(every, COLUMNS, lines="\n").rstrip("\n")  # run.py prints it with the one newline
    elif cfg.plan_format == "json":  # strict: a non-finite figure is null, and its row's nulls says why
        text = strict_json.dumps(
            {
                "objective": cfg.objective,
                "better": objective.planned(cfg.objective)[1],
                "defaults": notes,
                "networks": nets,
                "prices": {
                    c.label: dict(
                        zip(("usd_per_gpu_hour", "source"), c.price(cfg.cost.usd_per_gpu_hour), strict=True)
                    )
                    for c in clusters
                },
                "dropped": dict(result.dropped),
                "best": [
                    *({"cluster": r.cluster, "command": c} for r, c in zip(best, lines, strict=True)),
                    *(
                        {"cluster": label, "command": None, "none": why}
                        for label, why in unranked(result.rows, whys, per_cluster)
                    ),
                ],
                "rows": every,
            },
            indent=1,
        )
    else:
        left_out = (
            0 if result.rows else sum(len(unplaced(space, c.nnodes, c.gpus_per_node)) for c in clusters)
        )
        text = render(
            ranked,
            result,
            cfg,
            notes,
            lines,
            None if unwritten else str(path),
            [*nets, *prices],
            left_out,
            whys,
            per_cluster,
        )
    out = {
        "status": "plan",
        "plan_file": str(path),
        "plan_text": text,
        "plan": {},
        "best": [r.as_dict() for r in best],
        "ranked": len(ranked),
        "dropped": dict(result.dropped),
        **({"unwritten": unwritten} if unwritten else {}),
    }
    job_rows = []
    if not ranked:  # a contradictory space: say why; run.py exits 1, a sweep names the job when it ends
        away = [why for c in clusters for why in cluster_unplaced(cfg, space, c)]  # fixes this model takes
        away = [why.replace(NNODES_FIX, clusters_fix(clusters)) for why in away]  # nnodes= is not used here
        memory = None
        if any(r.status == OVER_MEMORY for r in result.rows):
            memory = memory_fix(cfg, space, clusters, records)
        out["nothing"] = nothing_line(result.rows, away, memory, space, dropped=result.dropped, blank=blank)
        said = out["nothing"].removeprefix(f"plan: {NOTHING_HEADLINE}: ")
        job_rows = [Row(cluster="", setup=None, status=NO_SET_UP_LEFT, reason=said).as_dict()]
        text = f"{text}\n{out['nothing']}"
    to_job_log(text)  # the job's run.log keeps its own table (a sweep prints one of every job at its end)
    if info.job_num is not None:  # -m: its rows join the sweep's plan.csv, ranked with every job's
        from flopsweep.job.plansweep import append_job

        append_job(sweep_plan_file(info), every + job_rows, info)
    return out


def _unplaced_why(cfg: RunConfig, space: Space, cluster: Cluster, clusters: list[Cluster]) -> str:
    """Why the first set-up of ``space`` that ``cluster`` leaves out is none there (``hsdp`` on one node),
    its fix in ``plan_clusters``' words (:func:`clusters_fix`), a degree's the layouts ``cfg``'s model
    takes (:func:`flopsweep.layout_fit.cluster_unplaced`); empty where it places every one, or places some
    (its line, :func:`flopsweep.job.planrender.unranked_lines`, is then of its rows)."""
    if placed(space, cluster.nnodes, cluster.gpus_per_node):
        return ""
    away = cluster_unplaced(cfg, space, cluster)
    return away[0].replace(NNODES_FIX, clusters_fix(clusters)) if away else ""


IGNORED_KEYS = (
    "nnodes",
    "nproc_per_node",
    "predict.nnodes",
    "predict.gpus_per_node",
    "plan_gpu",
    "plan_gpu_memory_gib",
)
"""Keys of the one-row plan that ``plan_clusters`` replaces: each cluster's name gives its GPU (and so its
memory), its nodes and its GPUs per node."""


def ignored_line(overrides: list[str], clusters: list[Cluster]) -> str | None:
    """One line (stderr) naming the :data:`IGNORED_KEYS` the command line gave beside ``plan_clusters``,
    which the clusters' names decide instead (``nnodes=4`` beside ``H100:1x8:eth100`` was silently
    ignored), with the cluster to name instead; None when it gave none."""
    given = {}
    for o in overrides:
        _, key, value = split_override(o)
        if "=" in o and key in IGNORED_KEYS:
            given[key] = value
    if not given or not clusters:
        return None
    c = clusters[0]
    nodes = given.get("nnodes", given.get("predict.nnodes", ""))
    nodes = int(nodes) if nodes.isdigit() and int(nodes) > 0 else c.nnodes
    per = given.get("nproc_per_node", given.get("predict.gpus_per_node", ""))
    per = int(per) if per.isdigit() and int(per) > 0 else c.gpus_per_node
    gpu = canonical_gpu_name(given.get("plan_gpu", "").strip("'\"")).replace(" ", "-") or c.gpu
    example = f"{gpu}:{nodes}x{per}" + (f":{c.network.name}" if c.network_named else "")
    keys = ", ".join(f"{k}={v}" for k, v in given.items())
    verb = "is" if len(given) == 1 else "are"
    return (
        f"plan: {keys} {verb} not used: each cluster's name gives its GPU, nodes and GPUs per node "
        f"({', '.join(x.label for x in clusters[:3])}{', ...' if len(clusters) > 3 else ''}); "
        f"to plan that shape, name it there: plan_clusters=[{example}]"
    )


def unpredicted_reason(name: str, clusters: Iterable[Cluster]) -> str:
    """Why an ``ok`` row has no rank: the plan gives no value of ``objective=name``'s column for it
    (:func:`flopsweep.objective.planned`), with the cause where it is known (a J/token or kWh objective on a
    GPU without a listed board power, :data:`flopsweep.clusters.ASSUMED_POWER_W`) and a figure the plan
    predicts for every set-up as the fix: ``no prediction: objective=joules_per_token: plan.csv's
    predicted_joules_per_token is blank (no board power listed for A10G). Fix: ...``."""
    column = objective.planned(name)[0]
    why = more = ""
    if column in ("predicted_joules_per_token", "budget_energy_kwh"):
        unpowered = sorted({c.gpu for c in clusters if c.power_w is None})
        if unpowered:
            why = f" (no board power listed for {', '.join(unpowered)})"
            more = ", or name GPUs with a listed board power in plan_clusters (e.g. H100:1x8)"
    other = "tokens_per_s_per_device" if name != "tokens_per_s_per_device" else "tokens_per_s"
    return (
        f"no prediction: objective={name}: plan.csv's {column} is blank{why}. "
        f"Fix: rank by a figure the plan predicts for every set-up, e.g. objective={other}{more}"
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
        said = (
            f"in a node of {gpu}: {figure(share * found.gbps, 6)} GB/s busbw, {figure(share, 6)} "
            f"x {found.said}"
        )
        said += f" {figure(found.gbps, 6)} GB/s per direction ({found.link.datasheet})"
        out.append(said + (f"; {found.assumed}" if found.assumed else ""))
    return out


def network_lines(clusters: list[Cluster]) -> list[str]:
    """One line per network a cluster of several nodes names (``H100:8x8:100GBps``, ``...:eth100``):
    its bus bandwidth per GPU across nodes in GB/s and Gb/s, and what the name means, so that the
    unit of a ``NNNGBps`` or ``NNNGbps`` is plain where the plan prints it. A default network is
    said under ``defaults used`` (:func:`defaults_used`)."""
    out, seen = [], set()
    for c in clusters:
        net = c.network
        if c.nnodes == 1 or not c.network_named or net.name in seen:
            continue
        seen.add(net.name)
        out.append(
            f"network {net.name}: {figure(net.inter_node_gbps, 6)} GB/s = "
            f"{figure(net.inter_node_gbps * 8, 6)} Gb/s bus "
            f"bandwidth per GPU across nodes (nccl-tests' busbw; GB = gigabytes), {net.source}"
        )
    return out


def price_lines(clusters: list[Cluster], usd_per_gpu_hour: float | None) -> list[str]:
    """The price each cluster's dollars are at and where it comes from
    (:meth:`flopsweep.clusters.Cluster.price`), one line per price and source: ``price: 2.49 USD per
    GPU-hour for H100:8x8:ib400 (@2.49 in plan_clusters)``, ``price: 2.5 USD per GPU-hour for every
    cluster (cost.usd_per_gpu_hour)``; clusters without one: ``price: none for H200:1x8:ib400, no dollars
    (name one: H200:1x8:ib400@PRICE, or set cost.usd_per_gpu_hour)``. No line when no cluster has a price
    (``defaults used`` says ``cost.usd_per_gpu_hour=null``)."""
    groups: dict[tuple[float | None, str], list[str]] = {}
    for c in clusters:
        groups.setdefault(c.price(usd_per_gpu_hour), []).append(c.label)
    if all(price is None for price, _ in groups):
        return []
    out = []
    for (price, source), labels in groups.items():
        named = "every cluster" if len(groups) == 1 else ", ".join(labels)
        if price is None:
            out.append(
                f"price: none for {named}, no dollars (name one: {labels[0]}@PRICE, or set "
                "cost.usd_per_gpu_hour)"
            )
        else:
            out.append(f"price: {price:.15g} USD per GPU-hour for {named} ({source})")
    return out


def _given(overrides: list[str], key: str) -> bool:
    return any(override_key(o) == key for o in overrides)


def defaults_used(
    cfg: RunConfig, overrides: list[str], clusters: list[Cluster], records: list[tuple[str, dict[str, Any]]]
) -> list[str]:
    """One line per default the plan used (a key not given on the command line, an assumed figure)."""
    out = []
    for key in SPACE_KEYS:
        if not _given(overrides, f"space.{key}") and key != "compile":  # empty: the job's, said below
            value = getattr(cfg.space, key)
            shown = f"[{','.join(map(str, value))}]" if isinstance(value, list) else value
            out.append(f"space.{key}={shown}")
    if not _given(overrides, "objective"):
        out.append(f"objective={cfg.objective}")
    if cfg.batch.global_batch_size is None:
        out.append("batch.global_batch_size=null: global batch = micro batch x data-parallel degree")
    out.append(
        f"kept from the job: model.seq_len={cfg.model.seq_len}, attention={cfg.attention.name}"
        + ("" if cfg.space.compile else f", compile={cfg.compile}")
    )
    for c in {c.row.name: c for c in clusters if not c.network_named and c.nnodes > 1}.values():
        net = c.network
        out.append(
            f"network of {c.row.name} nodes: {net.name}: {figure(net.inter_node_gbps, 6)} GB/s "
            f"busbw per GPU, "
            f"{net.source}; the default of {default_network_why(c.row)}"
        )
    for gpu in {c.gpu: c for c in clusters}:  # H100: the SXM module's row; said once per name
        if taken := form_taken(gpu):
            out.append(taken)
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
            out.append(f"power: {figure(c.power_w, 6)} W per {c.row.name} (its board power) for J/tok")
    if cfg.cost.usd_per_gpu_hour is None and not all(c.usd_per_gpu_hour is not None for c in clusters):
        bare = [c.label for c in clusters if c.usd_per_gpu_hour is None]
        whose = "" if len(bare) == len(clusters) else f" for {', '.join(bare)} (no @PRICE)"
        out.append(f"cost.usd_per_gpu_hour=null: no dollars{whose} (set e.g. cost.usd_per_gpu_hour=2.5)")
    if cfg.budget.tokens is None:
        out.append("budget.tokens=null: no days or budget (set e.g. budget.tokens=15e12)")
    return out
