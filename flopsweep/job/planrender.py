"""The plan's table as the terminal shows it, torch-free: its rows' cells (:func:`table_lines`: the set-up
(:func:`setup_label`), the figures in at most 7 characters (:func:`si_figure`, :func:`count_figure`)), the
whole output of one plan (:func:`render`) and the override line that runs a set-up (:func:`override_line`).
Shared by one job's plan (:mod:`flopsweep.job.plandecide`) and a sweep's (:mod:`flopsweep.job.plansweep`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from flopsweep import objective
from flopsweep.cli import COMMAND
from flopsweep.job.planfit import width, wrapped, wrapped_all  # the one width of a plan's tables
from flopsweep.job.planwhy import dropped_counts, none_reason  # noqa: F401 - dropped_counts re-exported
from flopsweep.nearest import scaled_from, unmeasured_degrees
from flopsweep.override_parsing import override_key, set_key
from flopsweep.plan_space import UNMEASURED, Row

if TYPE_CHECKING:
    from flopsweep.config import RunConfig
    from flopsweep.plan_space import Candidates


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


KEPT_PICKS = ("batch",)
"""Config-group picks of :data:`SETUP_KEYS` that a set-up's override line keeps from the job's own
overrides: the set-up sets ``batch.micro_batch_size``, not the group (``batch=fixed`` over a sweep
file's ``override /batch: auto``; ``batch=auto`` beside ``plan_clusters`` is refused before Hydra)."""


SETUP_LEGEND = (
    "set-up: backend, layout (dp8, tp2, pp2...), activation checkpointing (- none, sel selective, full), "
    "mbN micro batch, gaN grad accumulation, the precision when not bf16"
)
"""The legend line of the table's ``set-up`` column (:func:`setup_label`), in both plans' outputs."""


def setup_legend(rows: list[Row]) -> str:
    """:data:`SETUP_LEGEND`, and where a row's set-up took ``compile`` from ``space.compile``, what its
    ``compiled`` or ``eager`` says (a space without it prints the legend as before)."""
    if any(r.setup is not None and r.setup.compile is not None for r in rows):
        return f"{SETUP_LEGEND}, compiled or eager (space.compile)"
    return SETUP_LEGEND


def best_lines(header: str, lines: list[str], unranked: list[str] = ()) -> list[str]:
    """The header of the best set-ups' command lines and those lines, then ``unranked``
    (:func:`unranked_lines`: each cluster that ranks none, and why), or ``none`` after it when no set-up
    fits (the header stood alone, with nothing under it)."""
    if not lines:
        return [f"{header.partition(', the command')[0]}: none (no set-up fits)"]
    return [header, *lines, *unranked]


def unranked_lines(
    rows: list[Row], labels: dict[str, str] | None = None, why: Callable[[str, list[Row]], str] | None = None
) -> list[str]:
    """One line under the best set-ups' commands for each cluster (``labels``, the plan's clusters and
    why the space's first set-up left out there is none, then any other a row names) that ranks no set-up
    while another cluster ranks some: ``  H100:1x8:ib400: none: all 450 dropped (refused: parallel.tp 225,
    over memory 132, ...), 318 refused by the rules; among the 132 they accept, the commonest reason (132
    of 132): over memory (the least: ...). Fix: ... plan_clusters=[H100:4x8:ib400,H200:8x8:ib400] ...``,
    the reason a plan of that cluster alone gives (``why``: :func:`unranked`); a cluster of no row,
    ``none: no set-up of the space is placed on it (<why>)``. A plan of two clusters had left the one of
    none out of the table and of the best's lines, unsaid (docs/reliability-9.md, session 39). Empty when
    every cluster ranks one, or none does (:func:`flopsweep.job.planwhy.nothing_line` says that plan's
    reason)."""
    return [f"  {label}: none: {reason}" for label, reason in unranked(rows, labels, why)]


def unranked(
    rows: list[Row], labels: dict[str, str] | None = None, why: Callable[[str, list[Row]], str] | None = None
) -> list[tuple[str, str]]:
    """``(cluster label, why it ranks none)`` of each cluster :func:`unranked_lines` names, in its order
    (``plan_format=json``'s ``best`` entries of ``"command": null``). ``why(label, its rows)``: a cluster's
    reason as a one-cluster plan says it (:func:`flopsweep.job.planwhy.cluster_why`: the commonest
    cause among the set-ups the rules accept, over memory's fix checked on that cluster); None: the same
    line from the rows alone (:func:`flopsweep.job.planwhy.none_reason`, a sweep's table). Its own
    selection had said the first refused row's reason whenever a refusal was the top count
    (``backend='single': runs at most 1 rank`` for 15 of 450 set-ups, typed back nothing fits) while
    the 132 set-ups the rules accept were all over memory (docs/reliability-12.md, session 41)."""
    ranked = {r.cluster for r in rows if r.rank is not None}
    if not ranked:
        return []
    if why is None:

        def why(label: str, own: list[Row]) -> str:
            return none_reason(own)

    out = []
    labels = labels or {}
    for label in dict.fromkeys([*labels, *(r.cluster for r in rows if r.cluster)]):
        if label in ranked:
            continue
        own = [r for r in rows if r.cluster == label and r.setup is not None]
        if not own:
            away = labels.get(label) or "its nodes and GPUs per node"
            out.append((label, f"no set-up of the space is placed on it ({away})"))
            continue
        out.append((label, why(label, own)))
    return out


def setup_label(row: Row) -> str:
    """``fsdp dp8x8 sel mb4`` (``ga2`` with grad accumulation, the precision when not bf16, ``compiled``
    or ``eager`` where ``space.compile`` gave the set-up its ``compile``)."""
    s = row.setup
    ckpt = {"none": "-", "selective": "sel", "full": "full"}.get(s.checkpointing, s.checkpointing)
    parts = [s.backend, row.layout, ckpt, f"mb{s.micro_batch}"]
    if row.grad_accum and row.grad_accum > 1:
        parts.append(f"ga{row.grad_accum}")
    if s.precision != "bf16":
        parts.append(s.precision)
    if s.compile is not None:
        parts.append("compiled" if s.compile else "eager")
    return " ".join(parts)


HEADER = (
    ("#", 4),
    ("all", 4),
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


def scaled_gpu(row: Row) -> str | None:
    """The GPU kind whose records ``row``'s compute was scaled from (its expected error unmeasured:
    :data:`flopsweep.plan_assess.UNMEASURED`), else None."""
    gpu = scaled_from(row.prediction_source) if row.expected_error is None else None
    return gpu if gpu and UNMEASURED.format(gpu=gpu) in row.prediction_source else None


def _cells(row: Row) -> list[str]:
    source = {"flops": "datasheet", "calibration": "calibrated", "probe": "probe", "nearest": "nearest"}.get(
        row.compute_source, "?"
    )
    if row.compute_source == "nearest" and scaled_from(row.prediction_source):
        source = "nearest, scaled"
    return [
        f"{row.cluster_rank}{'*' if row.best else ''}",
        str(row.rank),
        row.cluster,
        setup_label(row),
        count_figure(row.predicted_tokens_per_s_per_gpu),
        "" if row.predicted_mfu is None else f"{row.predicted_mfu:.0%}",
        si_figure(row.predicted_joules_per_token),
        si_figure(row.predicted_usd_per_million_tokens, money=True),
        count_figure(row.budget_days),
        si_figure(row.budget_gpu_hours),
        si_figure(row.budget_usd, money=True),
        f"{row.est_peak_gib_per_rank:.1f}",
        f"{row.headroom_gib:.1f}{'!' if row.memory_edge else ''}",
        "?" if row.expected_error is None else f"±{row.expected_error:.0%}",
        source,
    ]


def shown_rows(ranked: list[Row], top: int) -> list[Row]:
    """The rows the table shows: the ``top`` best of each cluster, in rank order."""
    shown, per = [], {}
    for row in ranked:
        if per.get(row.cluster, 0) < top:
            shown.append(row)
            per[row.cluster] = per.get(row.cluster, 0) + 1
    return shown


HIDDEN_FIRST = ("J/tok", "GPU-h", "all", "free", "days", "source", "err", "MFU")
"""The columns :func:`table_lines` hides, in this order, until the table fits
:func:`flopsweep.job.planfit.width` (a cluster name of 25 characters made it 162 wide): each said again
in another (``GPU-h`` in ``days``, ``free`` in ``GiB``, ``all`` in ``#``) or least read, ``source``
before the figures, ``MFU`` (which the README promises) last; the line under the table names them, and
``plan.csv`` keeps every column."""


def table_lines(
    ranked: list[Row],
    top: int,
    job: Callable[[Row], str] | None = None,
    *,
    fit: bool = True,
    most: int | None = None,
) -> list[str]:
    """The shown rows (:func:`shown_rows`) as fixed-width lines; ``job``: a sweep's plan, the job's
    label of each row, in a ``job`` column after the cluster (:mod:`flopsweep.job.plansweep`). ``fit``:
    wider than ``most`` characters (None: :func:`flopsweep.job.planfit.width`), the columns of
    :data:`HIDDEN_FIRST` are hidden, in order, until it fits, and a last line names them (``hidden to
    fit 160 columns: J/tok (plan.csv keeps every column)``)."""
    header = list(HEADER)
    rows = [_cells(r) for r in shown_rows(ranked, top)]
    if job is not None:
        header.insert(3, ("job", 3))
        for cells, row in zip(rows, shown_rows(ranked, top), strict=True):
            cells.insert(3, job(row))
    cells = [[h for h, _ in header], *rows]
    widths = [max(w, *(len(c[i]) for c in cells)) for i, (_, w) in enumerate(header)]
    most = width() if most is None else most
    hidden: list[str] = []
    for name in HIDDEN_FIRST if fit else ():
        if sum(widths) + 2 * (len(widths) - 1) <= most:
            break
        i = cells[0].index(name)
        hidden.append(name)
        del widths[i]
        for one in cells:
            del one[i]
    out = [
        "  ".join(
            c.ljust(w) if cells[0][i] in ("cluster", "set-up", "job", "source") else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells_row, widths, strict=True))
        ).rstrip()
        for cells_row in cells
    ]
    if hidden:
        out.append(f"hidden to fit {most} columns: {', '.join(hidden)} (plan.csv keeps every column)")
    return out


def scaled_lines(ranked: list[Row], top: int) -> list[str]:
    """The lines under the table for rows whose compute was scaled from another GPU kind, and for rows
    whose expected error is unmeasured (``err ?``): across GPU kinds or for a layout degree no record
    ran (:data:`flopsweep.plan_assess.UNMEASURED_DEGREE`), when a shown row is one."""
    shown, per = [], {}
    for row in ranked:
        per[row.cluster] = per.get(row.cluster, 0) + 1
        if per[row.cluster] <= top:
            shown.append(row)
    gpus = sorted({g for r in shown if (g := scaled_gpu(r))})
    measured = sorted(
        {
            g
            for r in shown
            if r.compute_source == "nearest" and (g := scaled_from(r.prediction_source)) and not scaled_gpu(r)
        }
    )
    degrees = sorted(
        {d for r in shown if r.expected_error is None for d in unmeasured_degrees(r.prediction_source)}
    )
    lines = []
    if measured:
        lines.append(
            f"nearest, scaled: measured on {', '.join(measured)} and scaled by the datasheet peak ratio; "
            "its err is the error measured carrying records across these GPU kinds "
            "(flopsweep.plan_assess.ACROSS_KINDS_ERROR)"
        )
    if gpus:
        lines.append(
            f"err ?, nearest, scaled: measured on {', '.join(gpus)} and scaled by the datasheet peak ratio; "
            "the error of a prediction carried across these GPU kinds is unmeasured "
            "(not the ±5% of the same kind)"
        )
    if degrees:
        lines.append(
            f"err ?, no record of {' or '.join(degrees)} > 1: the nearest record ran it at 1, so what the "
            "degree costs beyond its modelled traffic is unmeasured (flopsweep.plan_assess.UNMEASURED_DEGREE)"
        )
    return lines


def edge_lines(ranked: list[Row], top: int, column: str) -> list[str]:
    """The lines under the table on the memory edge (:attr:`flopsweep.plan_space.Row.memory_edge`), when
    a shown row or a cluster's first is at it: what ``!`` means, and for each such cluster whether its
    best (``*``) passed over its first for a row off the edge within
    :data:`flopsweep.memory_edge.EDGE_MARGIN` of its ``column`` (the objective's,
    :func:`flopsweep.objective.planned`), or is at the edge itself (no such row): the table never
    recommends a set-up at the edge unsaid."""
    from flopsweep.memory_edge import EDGE_HEADROOM, EDGE_MARGIN, retried_words

    firsts = [r for r in ranked if r.cluster_rank == 1 and r.memory_edge]
    if not firsts and not any(r.memory_edge for r in shown_rows(ranked, top)):
        return []
    lines = [
        f"free !: at the memory edge, under {EDGE_HEADROOM:.0%} of the GPU's memory free: allocator retries "
        f"possible ({retried_words(None)}, up to 0.7 s a step), not in the prediction; plan.csv: memory_edge"
    ]
    for first in firsts:
        best = next(r for r in ranked if r.cluster == first.cluster and r.best)
        said, free = f"#{first.cluster_rank} {setup_label(first)}", f"{first.headroom_gib:.1f} GiB free"
        if best is first:
            lines.append(
                f"{first.cluster}: its best, {said}, is at the memory edge ({free}): no set-up off it within "
                f"{EDGE_MARGIN:.0%} of its {column}; set one off it from the table, or run it and watch "
                "metrics.cuda_alloc_retries"
            )
            continue
        gap = abs(getattr(best, column) / getattr(first, column) - 1) if getattr(first, column) else 0.0
        lines.append(
            f"{first.cluster}: best * is #{best.cluster_rank} {setup_label(best)}, off the memory edge and "
            f"{gap:.1%} behind {said}, at the edge ({free}; within {EDGE_MARGIN:.0%}: "
            "memory_edge.EDGE_MARGIN)"
        )
    return lines


def render(
    ranked: list[Row],
    result: Candidates,
    cfg: RunConfig,
    notes: list[str],
    lines: list[str],
    path: str | None,
    networks: list[str] = (),
    left_out: int = 0,
    labels: dict[str, str] | None = None,
    why: Callable[[str, list[Row]], str] | None = None,
) -> str:
    """The terminal output: the table, what was dropped, the networks named, the defaults used, the
    best's override lines; ``path``: the ``plan.csv`` written (None: it could not be). ``left_out``: the
    set-ups of the space that no cluster places (a plan of no row: ``hsdp`` on one node), said beside the
    counts, whose ``0 set-ups`` read as a space of none. ``labels``: the plan's clusters, each that ranks
    none named under the best's commands with why (:func:`unranked_lines`; ``why``: its reason, as
    :func:`unranked` takes it)."""
    column, better = objective.planned(cfg.objective)
    none = ["no set-up fits and is predicted: see the dropped counts"]
    out = table_lines(ranked, cfg.space.top) if ranked else none
    total = len(result.rows)
    dropped = ", ".join(f"{k} {v}" for k, v in result.dropped.most_common())
    out += wrapped_all(
        [  # the notes at the table's width; the commands to copy never cut
            "",
            f"ranked by objective={cfg.objective} ({column}, {better} is better); {cfg.space.top} shown per "
            "cluster (space.top)",
            "#: rank within its cluster (1..n, * = its best; plan.csv's cluster_rank); all: rank among the "
            "set-ups of every cluster (plan.csv's rank)",
            setup_legend(ranked),
            f"{total} set-ups: {len(ranked)} ranked; dropped: {dropped or 'none'}"
            + (
                f"; {left_out} set-ups of the space left out: no cluster places them (why: the last line)"
                if left_out
                else ""
            ),
            "tok/s/GPU, MFU predicted; J/tok at the GPU's board power; days, GPU-h, budget$: to train "
            "budget.tokens; GiB: estimated peak per rank, free: GPU memory less it; err: expected |error|",
            *scaled_lines([r for r in ranked if r.rank is not None], cfg.space.top),
            *edge_lines(ranked, cfg.space.top, column),
            *networks,
            "defaults used:",
            *(f"  {n}" for n in notes),
        ]
    )
    out += best_lines(
        "best of each cluster, the command that runs it:",
        [f"  {r.cluster}: {line}" for r, line in zip([r for r in ranked if r.best], lines, strict=True)],
        unranked_lines(result.rows, labels, why),
    )
    out += wrapped(
        f"(plan: no worker started, no record written; every row in {path})"
        if path
        else "(plan: no worker started, no record written)"
    )
    return "\n".join(out)


def override_line(row: Row, overrides: list[str]) -> str:
    """``flopsweep`` (:data:`flopsweep.cli.COMMAND`) with the job's own overrides (less the plan's and
    the set-up's keys) and the set-up's (:meth:`flopsweep.space.Setup.overrides`);
    ``-m hydra/launcher=slurm`` on several nodes (a launcher runs only under ``-m``:
    :func:`flopsweep.override_multirun.sweeper_without_m_problem`). A row priced otherwise than the
    command line's ``cost.usd_per_gpu_hour`` (its cluster's ``@PRICE``) gets ``cost.usd_per_gpu_hour=`` its
    price, so that the run's own dollars are at it. A ``+sweep=`` file kept gets ``plan=false`` after it:
    the file may set ``plan: true``, and the command would plan again instead of training. Every other
    override of the job stays, in its order, but ``device=cpu`` (a cluster's row runs on its GPUs: the
    command kept it, session 43): a group pick the set-up sets no key of (``batch=fixed``,
    :data:`KEPT_PICKS`) too, else a ``+sweep=`` file's ``override /batch: auto`` would size the micro batch
    again instead of running the ranked one."""

    def dropped(o: str) -> bool:
        key = override_key(o)
        own = key.startswith(("space.", "parallel.", "predict.gpus_per", "predict.nnodes"))
        on_cpu = key == "device" and o.partition("=")[2].strip("'\"") == "cpu"  # a cluster's GPUs run it
        return own or on_cpu or key in RUN_KEYS or (key in SETUP_KEYS and key not in KEPT_PICKS)

    kept = [o for o in overrides if not dropped(o)]
    price = row.usd_per_gpu_hour
    given = [o for o in kept if set_key(o) == "cost.usd_per_gpu_hour"]
    if price is not None and not (given and _number(given[-1].partition("=")[2]) == price):
        kept = [o for o in kept if o not in given] + [f"cost.usd_per_gpu_hour={price:.15g}"]
    if any(set_key(o) == "sweep" for o in kept):  # its file may set plan: true
        kept.append("plan=false")
    line = [COMMAND, *kept, *row.overrides]
    if "nnodes=1" not in row.overrides:
        line[1:1] = ["-m"]
        line.append("hydra/launcher=slurm")
    return " ".join(line)


def _number(text: str) -> float | None:
    """A command line's number (``2.5``, ``'2.5'``), else None."""
    try:
        return float(text.strip().strip("'\""))
    except ValueError:
        return None


def si_figure(x: float | None, money: bool = False) -> str:
    """A figure of the table in at most 7 characters, its magnitude read right: ``2.4``, ``317k``,
    ``1.17M``, ``4.5B`` (1e9), ``2.9T`` (1e12), from 1e15 a power of ten (``2.72e16``: 27,200 trillion);
    ``$`` before dollars; blank for None. ``$2.72e+07B`` (2.72e16 dollars written as 27.2 million
    billions) read as 27 million."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    sign = "$" if money else ""
    if math.isinf(x) or abs(x) >= 1e15:
        return f"{sign}{exponent(x)}"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{sign}{x / scale:.3g}{unit}"
    return f"{sign}{exponent(x) if 0 < abs(x) < 1e-3 else format(x, '.3g')}"


def exponent(x: float) -> str:
    """``x`` to 3 significant digits as mantissa and power of ten without ``+`` or leading zeros:
    ``2.72e16``, ``5e-05`` -> ``5e-5``; ``inf`` as it is."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    mantissa, _, power = f"{x:.3g}".partition("e")
    if not power:
        return mantissa
    return f"{mantissa}e{int(power)}"


def count_figure(x: float | None, money: bool = False) -> str:
    """A count or duration as the table shows it: ``2,106`` (digits grouped) below a million, else
    :func:`si_figure` (``1.2M``, ``3.4e17``): 1e18 tokens at 1 token/s were 11,574,074,074,074 days,
    wider than the table; below 100, 3 significant digits (``45.3``, ``0.0181``, ``1.4e-10``): a fine-tuning
    budget of 1e9 tokens on 64 H100s, 26 minutes, had shown ``0`` days beside its GPU-h and dollars."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if abs(x) < 100:
        return si_figure(x, money)
    return f"{x:,.0f}" if abs(x) < 1e6 else si_figure(x, money)
