"""Why a plan ranks no set-up (:func:`nothing_line`: how many were dropped, the commonest reason, its fix),
and why one cluster of a plan ranks none while another ranks some: the reason a plan of that cluster alone
gives (:func:`none_reason`, :func:`cluster_why`), over memory's fix checked on that cluster and said in the
plan's whole ``plan_clusters`` list. The per-cluster line had picked its own reason (the first refused
row's, ``backend='single': runs at most 1 rank``, whenever a refusal was the top count) where the plan of
that cluster alone says over memory (docs/reliability-12.md, session 41). Torch-free; below
:mod:`flopsweep.job.plandecide` and :mod:`flopsweep.job.planrender`, which import it."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from flopsweep.clusters import Cluster
from flopsweep.config import RunConfig
from flopsweep.dropped import CAUSE_FIXES, OVER_MEMORY
from flopsweep.job.planmemory import memory_fix
from flopsweep.plan_space import Row
from flopsweep.plan_space import nothing_line as space_nothing_line
from flopsweep.space import Space


def none_reason(
    rows: list[Row], memory: str | None = None, space: Space | None = None, blank: str = ""
) -> str:
    """Why the set-ups ``rows`` of one cluster rank none, as a plan of that cluster alone says it
    (:func:`nothing_line` after its headline, the counts by reason beside ``all N dropped``):
    ``all 450 dropped (refused: parallel.tp 225, over memory 132, ...), 318 refused by the rules; among
    the 132 they accept, the commonest reason (132 of 132): over memory (...). Fix: ...``."""
    line = nothing_line(rows, None, memory, space, dropped=dropped_counts(rows), blank=blank)
    return line.removeprefix(f"plan: {NOTHING_HEADLINE}: ")


def cluster_why(
    cfg: RunConfig, space: Space, clusters: list[Cluster], records: list, blank: str = ""
) -> Callable[[str, list[Row]], str]:
    """``why(label, rows)`` for :func:`flopsweep.job.planrender.unranked`: :func:`none_reason` of a
    cluster's rows, over memory's fix :func:`memory_fix` checked on that cluster alone, its
    ``plan_clusters=[...]`` the plan's whole list with that cluster replaced (typed back, the other
    clusters stay planned): ``plan_clusters=[H100:4x8:ib400,H200:8x8:ib400]``."""
    by_label = {c.label: c for c in clusters}

    def why(label: str, rows: list[Row]) -> str:
        c = by_label.get(label)
        memory = None
        if c is not None and any(r.status == OVER_MEMORY for r in rows):
            memory = _in_plan(memory_fix(cfg, space, [c], records), c, clusters)
        return none_reason(rows, memory, space, blank)

    return why


def _in_plan(fix: str, cluster: Cluster, clusters: list[Cluster]) -> str:
    """``fix`` with its ``plan_clusters=[X]`` (one cluster, in place of ``cluster``) widened to the plan's
    list, ``cluster`` replaced by ``X`` and every other kept, each with its ``@PRICE``."""

    def named(c: Cluster) -> str:
        return c.label + ("" if c.usd_per_gpu_hour is None else f"@{c.usd_per_gpu_hour:.15g}")

    def widen(m: re.Match) -> str:
        kept = [m.group(1) if c is cluster else named(c) for c in clusters]
        return f"plan_clusters=[{','.join(dict.fromkeys(kept))}]"

    return re.sub(r"plan_clusters=\[([^\],]+)\]", widen, fix)


NOTHING_HEADLINE = "no set-up fits and is predicted"
"""What :func:`nothing_line` says after ``plan: ``, before the counts."""


def nothing_line(
    rows: list[Row],
    unplaced: list[str] | None = None,
    memory: str | None = None,
    space: Space | None = None,
    *,
    dropped: Counter | None = None,
    blank: str = "",
) -> str:
    """One line for a plan that ranks no set-up: how many were dropped and the commonest reason
    (:func:`flopsweep.plan_space.nothing_line`, the tuner's too), among the rows (the set-ups the table
    counts), else among ``unplaced``, why each set-up a cluster does not place is none there
    (:func:`flopsweep.space.unplaced`): 15 set-ups over memory once lost to the 15 ``hsdp``
    names one node does not place, "the commonest reason (15 of 90): hsdp ...". Each cause's fix
    (:mod:`flopsweep.dropped`): over memory's with ``plan_clusters`` added; a collective with no bus
    bandwidth: ``predict.intra_node_gbps`` / ``predict.inter_node_gbps``. ``memory``: over memory's
    fix as :func:`memory_fix` checked it (None: :data:`flopsweep.dropped.CAUSE_FIXES`' with
    ``plan_clusters``). ``space``: a rule's fix said in its lists
    (:func:`flopsweep.dropped.space_fix`). ``dropped``: the counts by reason (:attr:`Candidates.dropped
    <flopsweep.plan_space.Candidates>`); where they hold several, the top three follow ``all N dropped``
    (``all 75 dropped (refused: parallel.tp 45, refused: backend 15, refused: parallel.pp 15)``).
    ``blank``: the reason of an ``ok`` row, which :func:`flopsweep.plan_space.rank` leaves out only when its
    objective's value is blank (:func:`unpredicted_reason`; it had said "reason: ok")."""
    reasons = [  # a reason that names its status already (no prediction: ...) is said once
        (blank or "no prediction of the objective")
        if r.status == "ok"
        else r.reason
        if r.reason.startswith(r.status)
        else f"{r.status}: {r.reason}"
        if r.reason
        else r.status
        for r in rows
    ] or list(unplaced or [])
    if not reasons:
        return "plan: no set-up to rank (the space and clusters give none); see docs/plan.md"
    fix = "widen space.* (backends, layouts, micro batches) or plan_clusters"
    more = "or name GPUs with more memory, or more of them, in plan_clusters"
    fixes = {OVER_MEMORY: memory or f"{CAUSE_FIXES[OVER_MEMORY]}; {more}"}
    line = space_nothing_line(
        reasons, who="plan", headline=NOTHING_HEADLINE, fix=fix, fixes=fixes, space=space
    )
    if dropped and len(dropped) > 1:
        counts = ", ".join(f"{k} {v}" for k, v in dropped.most_common(3))
        more = ", ..." if len(dropped) > 3 else ""
        line = re.sub(r"(: all \d+ dropped)", lambda m: f"{m.group(1)} ({counts}{more})", line, count=1)
    return line


def dropped_counts(rows: list[Row]) -> Counter:
    """The rows not ``ok`` counted by reason (``refused: parallel.tp``, ``over memory``), as
    :func:`flopsweep.plan_space.candidates` counts them."""
    out: Counter = Counter()
    for r in rows:
        if r.status == "refused":
            out[f"refused: {r.reason.split('=')[0]}"] += 1
        elif r.status != "ok":
            out[r.status] += 1
    return out
