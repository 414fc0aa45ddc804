"""Why one cluster of a plan ranks no set-up while another ranks some: the reason a plan of that cluster
alone gives (:func:`flopsweep.job.plandecide.nothing_line` on its own rows), over memory's fix checked on
that cluster and said in the plan's whole ``plan_clusters`` list. The per-cluster line had picked its own
reason (the first refused row's, ``backend='single': runs at most 1 rank``, whenever a refusal was the
top count) where the plan of that cluster alone says over memory (docs/reliability-12.md, session 41)."""

from __future__ import annotations

import re
from collections.abc import Callable

from flopsweep.clusters import Cluster
from flopsweep.config import RunConfig
from flopsweep.dropped import OVER_MEMORY
from flopsweep.job.plandecide import NOTHING_HEADLINE, nothing_line
from flopsweep.job.planmemory import memory_fix
from flopsweep.job.planrender import dropped_counts
from flopsweep.plan_space import Row, Space


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
