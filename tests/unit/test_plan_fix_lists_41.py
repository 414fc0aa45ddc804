"""An over-memory fix of ``plan=true`` names each ``space.*`` list in full, and typed back the plan ranks a
set-up (docs/reliability-12.md #906)."""

from __future__ import annotations

import re
from pathlib import Path


def _decide(hydra_compose, tmp_path: Path, *args: str) -> dict:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = ["model=llama3.1-8b", "plan=true", *args]
    return decide_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given))


def test_the_least_memory_fix_lists_in_full_and_passes_typed_back(hydra_compose, tmp_path: Path) -> None:
    space = ["space.backends=[ddp]", "space.checkpointing=[none]", "space.micro_batches=[2,4]"]
    out = _decide(hydra_compose, tmp_path, "plan_clusters=[H100:1x8]", *space)
    fix = out["nothing"].split("Fix: ", 1)[1]
    assert fix.endswith(
        "(20.3 GiB per rank): space.backends=[ddp,fsdp] space.checkpointing=[none,full] "
        "space.micro_batches=[1,2,4]"
    ), fix
    assert "..." not in fix
    typed = re.findall(r"space\.\w+=\[[^\]]*\]", fix)
    (tmp_path / "again").mkdir()
    again = _decide(hydra_compose, tmp_path / "again", "plan_clusters=[H100:1x8]", *typed)
    assert "nothing" not in again and again["best"][0]["status"] == "ok"
