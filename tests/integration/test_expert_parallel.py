"""Expert parallelism (experts split over the ``ep`` ranks, all-to-all dispatch and combine) against one rank.

Gloo ranks on the CPU, fp32, real FSDP2 and real all-to-alls with uneven splits: EP 2 x FSDP 2 on four
ranks (``dp_shard=4``, the experts sharded by FSDP2 over the two ranks holding the same ones) gives the
first-step loss and gradient norm, and the second step's loss, of the same MoE model trained on one rank
over the same global batch, within 1e-4; through ``run.py`` an EP 2 run writes an ``ok`` record with its
layout and its routing imbalance; a refused degree ends as an ``invalid``
record before any rank starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import records, run_sweep
from one_rank import same_as_one_rank

from flopsweep.layout import Layout

BASE = [
    "model=hf",
    "model.config=olmoe-tiny",
    "model.seq_len=32",
    "device=cpu",
    "precision=fp32",
    "backend=fsdp",
]
"""OLMoE's tiny config (8 experts, top 2, two layers) in fp32 on FSDP2."""


@pytest.mark.slow
def test_ep2_x_fsdp2_gives_the_steps_of_one_rank(hydra_compose) -> None:
    """EP 2 x FSDP 2 on four ranks: each rank holds 4 of the 8 experts of a layer, FSDP2 shards them
    over its ``ep_rest`` peer and the rest over all four."""
    from helpers import validate

    from flopsweep.plan import Environment

    cfg = validate(hydra_compose([*BASE, "nproc_per_node=1"]), Environment(cpu_count=4))
    same_as_one_rank(cfg, Layout(dp_shard=4, ep=2), global_batch=4)


@pytest.mark.slow
def test_an_ep_run_writes_an_ok_record_with_its_layout_and_imbalance(tmp_path: Path) -> None:
    """Through ``run.py``: OLMoE-tiny on two ranks with ``parallel.ep=2`` writes an ``ok`` record whose
    ``system.parallel`` has ``ep: 2``, a routing imbalance of at least 1 (the busiest expert over the
    mean) and at most the 8 experts."""
    result = run_sweep(
        tmp_path, *BASE, "nproc_per_node=2", "parallel.ep=2", "steps.warmup=1", "steps.measure=1"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (record,) = records(tmp_path)
    assert record["status"] == "ok", record["error"]
    assert record["system"]["parallel"] == {
        "dp_replicate": 1,
        "dp_shard": 2,
        "tp": 1,
        "pp": 1,
        "cp": 1,
        "ep": 2,
    }
    assert 1.0 <= record["metrics"]["routing_imbalance"] <= 8.0


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (
            ["parallel.ep=3", "nproc_per_node=3"],
            ["parallel.ep=3", "8 experts", "one of [2, 4, 8]", "parallel.ep=2"],
        ),
        (["model.config=qwen3-tiny"], ["parallel.ep=2", "dense", "parallel.ep=1"]),
        (["backend=ddp"], ["parallel.ep", "backend=fsdp"]),
    ],
)
def test_a_refused_ep_run_is_an_invalid_record_and_starts_no_worker(
    hydra_compose, tmp_path: Path, overrides: list[str], words: list[str]
) -> None:
    from flopsweep.job import JobInfo, run_job

    base = [*BASE, "nproc_per_node=2", "parallel.ep=2"]
    info = JobInfo(job_dir=tmp_path, overrides=[], job_num=0)  # a sweep's job keeps its refusal's record
    record = run_job(hydra_compose([*base, *overrides]), info)
    assert record["status"] == "invalid" and record["error"]["phase"] == "config"
    message = record["error"]["message"]
    assert "\n" not in message and all(w in message for w in words), message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # no rank's scratch files
