"""Session 39 (docs/reliability-10.md #622): ``plan_format=json``'s ``best`` list left out a cluster that
ranks no set-up while another ranks some, which the table names (``L4:1x1:eth100: none: all 15 set-ups
dropped ...``, ``planrender.unranked_lines``). The JSON now carries it: ``{"cluster": ..., "command":
null, "none": <the table's reason>}`` (a sweep's: ``"job": null`` too). A real plan on this CPU machine."""

from __future__ import annotations

import json
from pathlib import Path

ARGS = [
    "plan=true",
    "plan_clusters=[H100:8,L4:1]",
    "model=llama3.1-8b",
    "space.backends=[fsdp]",
    "space.checkpointing=[none]",
    "space.micro_batches=[1]",
    "space.layouts=[dp]",
]


def _plan(hydra_compose, tmp_path: Path, fmt: str) -> dict:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = [*ARGS, f"plan_format={fmt}"]
    return decide_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given))


def test_a_cluster_that_ranks_none_is_in_the_jsons_best_with_the_tables_reason(hydra_compose, tmp_path: Path):
    best = json.loads(_plan(hydra_compose, tmp_path, "json")["plan_text"])["best"]
    assert [b["cluster"] for b in best] == ["H100:1x8:ib400", "L4:1x1:eth100"]
    assert best[0]["command"].startswith("flopsweep model=llama3.1-8b") and "none" not in best[0]
    assert best[1]["command"] is None
    assert best[1]["none"].startswith(
        "all 1 dropped; the commonest reason (1 of 1): over memory"
    )  # session 41
    table = _plan(hydra_compose, tmp_path / "t", "table")["plan_text"]
    assert f"  L4:1x1:eth100: none: {best[1]['none']}" in table.splitlines()
