"""Context parallelism (Ulysses all-to-all over heads, load-balanced causal split) against one rank.

Gloo ranks on the CPU, fp32, real FSDP2 over ``dp_shard x cp`` and real all-to-alls: CP 2 on two
ranks and CP 2 x FSDP 2 (and CP 2 x TP 2) on four give the first-step loss and gradient norm of the
same model trained on one rank over the same global batch, within 1e-4, and the same loss at the
second step (the gradients of the first step, as applied by AdamW, are the one rank's); through
``run.py`` a CP 2 run writes an ``ok`` record with its layout; a refused kernel and a bad degree
end as ``invalid`` records before any rank starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import records, run_sweep
from one_rank import assert_same, steps_of

from flopsweep.layout import Layout


@pytest.fixture(scope="module")
def configs(hydra_compose):
    """The resolved fp32 CPU configs of ``gpt-tiny`` and ``llama-tiny`` (``backend=fsdp``), a
    sequence of 64 tokens (two layers, seconds per step)."""
    from helpers import validate

    from flopsweep.plan import Environment

    base = ["device=cpu", "precision=fp32", "backend=fsdp", "nproc_per_node=1", "model.seq_len=64"]
    variants = {
        "gpt-tiny": ["model=gpt-tiny"],
        "llama-tiny": ["model=llama-tiny"],
        # the recompute re-runs each block's all-to-alls in backward
        "llama-tiny+full": ["model=llama-tiny", "activation_checkpointing=full"],
        # the head fused with its loss over the rank's own tokens, in chunks
        "gpt-tiny+chunked": ["model=gpt-tiny", "loss.chunk_tokens=24"],
    }
    return {
        name: validate(hydra_compose([*overrides, *base]), Environment(cpu_count=4))
        for name, overrides in variants.items()
    }


CP2 = ["gpt-tiny", "llama-tiny", "llama-tiny+full", "gpt-tiny+chunked"]
"""The configs CP 2 runs on two ranks; llama-tiny runs CP 2 x FSDP 2 and CP 2 x TP 2 on four too."""


@pytest.fixture(scope="module")
def cp_steps(configs) -> dict[str, list[dict]]:
    """Two steps of each config of :data:`CP2` on one rank (``one model``) and on CP 2 (``cp2 model``),
    and llama-tiny's on CP 2 x FSDP 2 and CP 2 x TP 2: every rank's ``{loss, grad_norm}``, each world
    size's cases in one set of ranks (``one_rank.steps_of``; CI time: 7 ranks, where a set per test
    started 22)."""
    cases = {f"one {model}": (configs[model], Layout()) for model in CP2}
    cases |= {f"cp2 {model}": (configs[model], Layout(dp_shard=1, cp=2)) for model in CP2}
    cases["cp2xfsdp2"] = (configs["llama-tiny"], Layout(dp_shard=2, cp=2))
    cases["cp2xtp2"] = (configs["llama-tiny"], Layout(dp_shard=1, cp=2, tp=2))
    return steps_of(cases)


@pytest.mark.slow
@pytest.mark.parametrize("model", CP2)
def test_cp2_gives_the_steps_of_one_rank(cp_steps, model: str) -> None:
    """CP 2 on two ranks (FSDP2 over the cp ranks): one rank's losses of two steps and gradient norm.
    llama-tiny's 2 key/value heads are split, one per rank."""
    assert len(cp_steps[f"cp2 {model}"]) == 2
    assert_same(cp_steps[f"one {model}"], cp_steps[f"cp2 {model}"])


@pytest.mark.slow
def test_cp2_x_fsdp2_gives_the_steps_of_one_rank(cp_steps) -> None:
    """CP 2 x FSDP 2 on four ranks: FSDP2 shards over ``dp_shard x cp`` (torchtitan's ``dp_shard_cp``)."""
    assert len(cp_steps["cp2xfsdp2"]) == 4
    assert_same(cp_steps["one llama-tiny"], cp_steps["cp2xfsdp2"])


@pytest.mark.slow
def test_cp2_x_tp2_gives_the_steps_of_one_rank(cp_steps) -> None:
    """CP 2 x TP 2 on four ranks: each tensor-parallel rank's 2 query heads split over cp, its one
    key/value head repeated to them first (fewer key/value heads than cp ranks)."""
    assert len(cp_steps["cp2xtp2"]) == 4
    assert_same(cp_steps["one llama-tiny"], cp_steps["cp2xtp2"])


@pytest.mark.slow
def test_a_cp_run_writes_an_ok_record_with_its_layout(tmp_path: Path) -> None:
    """Through ``run.py``: gpt-tiny on two ranks with ``parallel.cp=2`` writes an ``ok`` record whose
    ``system.parallel`` has ``cp: 2``, tokens per step of one data-parallel rank, and the
    prediction's all-to-all among its transfers."""
    result = run_sweep(
        tmp_path,
        "model=gpt-tiny",
        "model.seq_len=64",
        "device=cpu",
        "precision=fp32",
        "backend=fsdp",
        "nproc_per_node=2",
        "parallel.cp=2",
        "steps.warmup=1",
        "steps.measure=1",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (record,) = records(tmp_path)
    assert record["status"] == "ok", record["error"]
    parallel = record["system"]["parallel"]
    assert parallel == {"dp_replicate": 1, "dp_shard": 1, "tp": 1, "pp": 1, "cp": 2, "ep": 1}
    m, batch = record["metrics"], record["config"]["batch"]
    assert m["tokens_per_step"] == batch["micro_batch_size"] * batch["grad_accum"] * 64


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (
            ["attention=blocksparse", "attention.block_size=16"],
            ["attention='blocksparse'", "parallel.cp=1", "attention=sdpa"],
        ),
        (["parallel.cp=3", "nproc_per_node=3"], ["parallel.cp=3", "model.n_head=4"]),
    ],
)
def test_a_refused_cp_run_is_an_invalid_record_and_starts_no_worker(
    hydra_compose, tmp_path: Path, overrides: list[str], words: list[str]
) -> None:
    from flopsweep.job import JobInfo, run_job

    base = ["model=llama-tiny", "backend=fsdp", "device=cpu", "nproc_per_node=2", "parallel.cp=2"]
    info = JobInfo(job_dir=tmp_path, overrides=[], job_num=0)  # a sweep's job keeps its refusal's record
    record = run_job(hydra_compose([*base, *overrides]), info)
    assert record["status"] == "invalid" and record["error"]["phase"] == "config"
    message = record["error"]["message"]
    assert "\n" not in message and all(w in message for w in words), message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # no rank's scratch files
