"""A plan sweep's table names a cluster that places no set-up (docs/reliability-10.md #607, session 39's
re-trial of #520): ``-m plan=true model=gpt-tiny,llama-tiny 'plan_clusters=[H100:2x8,A100-40GB:8]'
'space.layouts=[tp3,hsdp]'`` showed the H100 cluster's best command alone, the A100 cluster (no row in any
job: ``tp3`` divides no 8 ranks, ``hsdp`` needs nodes) left out unsaid, where a single plan names it."""

from __future__ import annotations

from pathlib import Path

SPACE = ["space.backends=[fsdp]", "space.checkpointing=[none]", "space.micro_batches=[1]"]


def _sweep(hydra_compose, root: Path, clusters: str, layouts: str) -> tuple[Path, object]:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job
    from flopsweep.job.plantable import start_plan_file

    shared = ["plan=true", f"plan_clusters={clusters}", f"space.layouts={layouts}", *SPACE]
    start_plan_file(root)
    for job, model in enumerate(("gpt-tiny", "llama-tiny")):
        given = [*shared, f"model={model}"]
        (root / str(job)).mkdir()
        decide_job(hydra_compose(given), JobInfo(job_dir=str(root / str(job)), overrides=given, job_num=job))
    return root / "plan.csv", hydra_compose.config(shared)


def _best(text: str) -> list[str]:
    from flopsweep.job.planfit import unwrapped

    lines = unwrapped(text)  # the notes wrapped at 160 columns read whole (docs/reliability-11.md #723)
    start = next(i for i, x in enumerate(lines) if x.startswith("best of each cluster over every job"))
    return [x for x in lines[start + 1 :] if x.startswith("  ")]


def test_a_sweeps_table_names_the_cluster_no_job_places_a_set_up_on(hydra_compose, tmp_path: Path) -> None:
    from flopsweep.job.plansweep import plan_lines

    plan, config = _sweep(hydra_compose, tmp_path, "[H100:2x8,A100-40GB:8]", "[tp3,hsdp]")
    best = _best(plan_lines(plan, config)[0])
    assert best[0].startswith("  H100:2x8:ib400: flopsweep -m ")
    assert best[1:] == [
        "  A100-40GB:1x8:ib200: none: no set-up of the space is placed on it (space.layouts: tp3 needs its "
        "degree 3 to divide the 8 ranks (nnodes=1 x 8 per node) (each job's run.log gives its fix))"
    ]


def test_hsdp_on_one_node_keeps_its_fix_and_every_cluster_placing_some_adds_no_line(hydra_compose, tmp_path):
    from flopsweep.job.plansweep import plan_lines

    (tmp_path / "a").mkdir()
    plan, config = _sweep(hydra_compose, tmp_path / "a", "[H100:8,H100:16]", "[hsdp]")
    best = _best(plan_lines(plan, config)[0])
    assert best[1] == (
        "  H100:1x8:ib400: none: no set-up of the space is placed on it (space.layouts: hsdp needs several "
        "nodes (nnodes=1; on one node it is dp). Fix: name a cluster of several nodes in plan_clusters (e.g. "
        "H100:2x8), or list dp)"
    )
    (tmp_path / "b").mkdir()
    plan, config = _sweep(hydra_compose, tmp_path / "b", "[H100:8,H100:16]", "[dp]")
    assert not any(": none: " in x for x in _best(plan_lines(plan, config)[0]))
