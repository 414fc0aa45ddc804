"""A plan's line for a cluster that places no set-up lists the layouts the model takes there
(docs/reliability-10.md #600, session 39's re-trial of #480 and #520): ``plan=true
'plan_clusters=[H100:2x8,A100-40GB:8]' 'space.layouts=[tp3,hsdp]'`` had said of the A100 cluster ``Fix: list
a layout these ranks take (dp, tp2, tp4, tp8)``, and gpt-tiny's 4 heads refuse every ``tp8`` set-up: the fix
#480 had replaced in the command line's line, left in the cluster's line and the plan's nothing line."""

from __future__ import annotations

import csv
from pathlib import Path

SMALL = ["space.backends=[fsdp]", "space.checkpointing=[none]", "space.micro_batches=[1]"]


def _decide(hydra_compose, tmp_path: Path, args: list[str]) -> dict:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = ["plan=true", "model=gpt-tiny", *SMALL, *args]
    return decide_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given))


def test_a_cluster_that_places_none_lists_the_layouts_its_model_takes(hydra_compose, tmp_path):
    given = ["plan_clusters=[H100:2x8,A100-40GB:8]", "space.layouts=[tp3,hsdp]"]
    out = _decide(hydra_compose, tmp_path, given)
    line = next(x for x in out["plan_text"].splitlines() if x.startswith("  A100-40GB:1x8:ib200: none: "))
    assert "tp3 needs its degree 3 to divide the 8 ranks" in line
    assert "Fix: list a layout these ranks take (dp, tp2, tp4), or run on a multiple of 3 ranks" in line

    # the fix typed back on that cluster: every layout it lists plans an ok set-up for gpt-tiny
    again = tmp_path / "again"
    again.mkdir()
    out = _decide(hydra_compose, again, ["plan_clusters=[A100-40GB:8]", "space.layouts=[dp,tp2,tp4]"])
    with open(again / "plan.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["space_layout"] for r in rows if r["status"] == "ok"} == {"dp", "tp2", "tp4"}


def test_the_unplaced_lines_fix_is_of_the_model_and_hsdps_line_is_unchanged():
    import dataclasses

    from flopsweep.clusters import parse_cluster
    from flopsweep.config import RunConfig
    from flopsweep.layout_fit import cluster_unplaced
    from flopsweep.space import Space, unplaced

    tiny = RunConfig()  # gpt-tiny: 4 heads
    space = dataclasses.replace(Space(), layouts=("tp3",), backends=("fsdp",), micro_batches=(1,))
    a100 = parse_cluster("A100-40GB:8")
    lines = cluster_unplaced(tiny, space, a100)
    assert lines and all("these ranks take (dp, tp2, tp4)," in x for x in lines)
    hsdp = dataclasses.replace(space, layouts=("hsdp",))
    assert cluster_unplaced(tiny, hsdp, a100) == unplaced(hsdp, 1, 8)  # its fix names no layout of a degree
    placed_all = dataclasses.replace(space, layouts=("dp", "tp2"))
    assert cluster_unplaced(tiny, placed_all, a100) == []
