"""A cluster of ``plan_clusters`` that ranks no set-up while another does is named under the best's
commands with why (docs/reliability-9.md #520): ``[L4:1,H100:8]`` for Llama 3.1 8B had shown H100 rows
alone, the L4 left out of the table and of ``best of each cluster`` unsaid."""

from __future__ import annotations

from pathlib import Path

SMALL = ["space.backends=[single,fsdp]", "space.checkpointing=[full]", "space.micro_batches=[1]"]


def _decide(hydra_compose, tmp_path: Path, args: list[str]) -> dict:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = ["plan=true", "model=llama3.1-8b", *SMALL, *args]
    return decide_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given))


def _best_block(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("best of each cluster"))
    return [line for line in lines[start + 1 :] if line.startswith("  ")]


def test_a_cluster_where_nothing_fits_is_named_with_its_least_memory_set_up(hydra_compose, tmp_path):
    out = _decide(hydra_compose, tmp_path, ["plan_clusters=[L4:1,H100:8]"])
    block = _best_block(out["plan_text"])
    assert block[0].startswith("  H100:1x8:ib400: flopsweep model=llama3.1-8b ")
    assert len(block) == 2
    line = block[1]
    # session 41 (docs/reliability-12.md): the reason a plan of L4 alone gives, its fix in the whole list
    assert line.startswith(
        "  L4:1x1:eth100: none: all 2 dropped; the commonest reason (2 of 2): over memory "
    )
    assert "GiB per rank" in line and "plan_clusters=[L4:2x8:eth100,H100:1x8:ib400]" in line
    assert out["ranked"] >= 1


def test_a_cluster_that_places_no_set_up_says_why_and_its_fix(hydra_compose, tmp_path):
    out = _decide(hydra_compose, tmp_path, ["plan_clusters=[H100:8,H100:16]", "space.layouts=[hsdp]"])
    block = _best_block(out["plan_text"])
    assert block[0].startswith("  H100:2x8:ib400: flopsweep -m model=llama3.1-8b ")
    assert block[1].startswith("  H100:1x8:ib400: none: no set-up of the space is placed on it (")
    assert "hsdp needs several nodes" in block[1]
    assert "Fix: name a cluster of several nodes in plan_clusters (e.g. H100:2x8)" in block[1]


def test_every_cluster_ranking_one_adds_no_line(hydra_compose, tmp_path):
    out = _decide(hydra_compose, tmp_path, ["plan_clusters=[H100:8,H200:8]"])
    block = _best_block(out["plan_text"])
    assert sorted(line.split(":")[0].strip() for line in block) == ["H100", "H200"]
    assert not any(": none:" in line for line in block)


def test_a_sweeps_table_names_the_cluster_that_no_job_ranks_on():
    from flopsweep.job.planrender import unranked_lines
    from flopsweep.plan_space import Row
    from flopsweep.space import Setup

    setup = Setup(backend="fsdp", layout="dp", checkpointing="full", precision="bf16", micro_batch=1)
    ok = Row(cluster="H100:1x8:ib400", setup=setup, status="ok", rank=1)
    over = [
        Row(
            cluster="L4:1x1:eth100",
            setup=setup,
            status="over memory",
            est_peak_gib_per_rank=g,
            layout="dp1",
            memory_fix=f"fix at {g}",
            reason=f"estimated {g} GiB per rank, over 90% of 22 GiB",
        )
        for g in (60.0, 48.0)
    ]
    refused = Row(cluster="L4:1x1:eth100", setup=setup, status="refused", reason="parallel.tp=2: no. Fix: x")
    lines = unranked_lines([ok, *over, refused])
    assert lines == [  # session 41: the reason of the set-ups the rules accept, as a one-cluster plan's
        "  L4:1x1:eth100: none: all 3 dropped (over memory 2, refused: parallel.tp 1), 1 refused by the "
        "rules; among the 2 they accept, the commonest reason (2 of 2): over memory (the least: estimated "
        "48.0 GiB per rank, over 90% of 22 GiB). Fix: list set-ups that need less memory per rank (smaller "
        "space.micro_batches, full in space.checkpointing, fsdp or zero3 in space.backends, tp, pp or cp in "
        "space.layouts), or lower space.min_headroom; or name GPUs with more memory, or more of them, in "
        "plan_clusters"
    ]
    assert unranked_lines([*over, refused]) == []  # none ranks anywhere: the plan's nothing line says it
