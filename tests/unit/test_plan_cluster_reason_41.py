"""Session 41 (docs/reliability-12.md #880): a multi-cluster plan's line for a cluster that ranks no set-up
gives the reason a plan of that cluster alone gives: the commonest cause among the set-ups the rules accept
(over memory here), its fix checked on that cluster and said in the plan's whole ``plan_clusters`` list. It
had said the first refused row's reason (``backend='single': runs at most 1 rank ... Fix: set
nproc_per_node=1 ...``) because a refusal was the top count. Real plans, on this CPU machine."""

from __future__ import annotations

import re
from pathlib import Path

SPACE = [
    "model=llama3.1-70b",
    "space.backends=[single,ddp,fsdp]",  # 7 of 12 refused on 1x8: refused: parallel.tp the top count
    "space.layouts=[dp,tp2,tp4,tp8]",
    "space.checkpointing=[full]",
    "space.micro_batches=[1]",
]


def _decide(hydra_compose, tmp_path: Path, clusters: str) -> dict:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = ["plan=true", f"plan_clusters={clusters}", *SPACE]
    return decide_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given))


def _none_line(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"  {label}: none: "))


def test_a_cluster_of_none_says_over_memory_not_a_refusal_and_its_fix_plans_it(hydra_compose, tmp_path):
    out = _decide(hydra_compose, tmp_path / "a", "[H100:8,H200:64]")
    line = _none_line(out["plan_text"], "H100:1x8:ib400")
    assert "refused by the rules; among the" in line
    assert "the commonest reason" in line and "over memory (the least: estimated" in line
    assert "backend='single'" not in line and "nproc_per_node=1" not in line
    fix = re.search(r"plan_clusters=\[[^\]]+\]", line).group(0)
    assert fix == "plan_clusters=[H100:4x8:ib400,H200:8x8:ib400]"  # the other cluster kept
    again = _decide(hydra_compose, tmp_path / "b", fix.partition("=")[2])  # typed back
    assert {r["cluster"] for r in again["best"]} == {"H100:4x8:ib400", "H200:8x8:ib400"}
    assert ": none: " not in again["plan_text"]


def test_the_line_is_the_one_cluster_plans_reason(hydra_compose, tmp_path):
    alone = _decide(hydra_compose, tmp_path / "a", "[H100:8]")["nothing"]
    both = _none_line(
        _decide(hydra_compose, tmp_path / "b", "[H100:8,H200:64]")["plan_text"], "H100:1x8:ib400"
    )
    said = alone.removeprefix("plan: no set-up fits and is predicted: ")
    assert both.removeprefix("  H100:1x8:ib400: none: ") == said.replace(
        "plan_clusters=[H100:4x8:ib400]", "plan_clusters=[H100:4x8:ib400,H200:8x8:ib400]"
    )
