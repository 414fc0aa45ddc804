"""HSDP and tensor parallelism (FSDP2 x TP with sequence parallelism) against one rank.

Four gloo ranks on the CPU, fp32, real FSDP2 and real DTensor tensor parallelism: each layout gives
the first-step loss and gradient norm of the same model trained on one rank over the same global
batch, within 1e-4; and through ``run.py`` each writes an ``ok`` record with its layout.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from helpers import records, run_sweep

from flopsweep.layout import Layout

GLOBAL_BATCH = 4
"""Sequences of the one step: the one rank's micro batch, split over the data-parallel ranks."""


def _rank(rank: int, world: int, cases: dict, init: str, out: str) -> None:
    """One rank of every case of ``cases`` (``{name: (cfg, layout)}``, one world size), one after
    another: build the trainer of ``cfg`` on ``layout``, run one step over this rank's share of the
    global batch; writes ``{name: {loss, grad_norm}}`` to ``out/rank<R>.json``."""
    import torch
    import torch.distributed as dist

    from flopsweep.backends import build_trainer
    from flopsweep.tensor_parallel import grad_norm

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        results = {}
        for name, (cfg, layout) in cases.items():
            gen = torch.Generator().manual_seed(1234)
            tokens = torch.randint(
                0, cfg.model.vocab_size, (GLOBAL_BATCH, cfg.model.seq_len + 1), generator=gen
            )
            per_rank = GLOBAL_BATCH // layout.dp
            d = layout.dp_rank(rank)
            trainer = build_trainer(cfg, torch.device("cpu"), layout)
            loss = trainer.step([tokens[d * per_rank : (d + 1) * per_rank]])
            # The step's loss is this data-parallel rank's; the global loss is their mean.
            dist.all_reduce(loss)
            result = {"loss": loss.item() / layout.non_data_parallel_size / layout.dp}
            result["grad_norm"] = grad_norm(trainer.last_grad_norm)
            results[name] = result
        (Path(out) / f"rank{rank}.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def _steps(cases: dict) -> dict[str, list[dict]]:
    """Every rank's ``{loss, grad_norm}`` after one step of each case of ``cases`` (``{name: (cfg,
    layout)}``), by name: one set of ranks per world size runs its cases one after another (CI time:
    each spawned rank imports torch for seconds; each case built a fresh set of ranks before)."""
    import torch.multiprocessing as mp

    found: dict[str, list[dict]] = {}
    for world in sorted({layout.world_size for _, layout in cases.values()}):
        group = {name: case for name, case in cases.items() if case[1].world_size == world}
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(_rank, args=(world, group, f"file://{tmp}/store", tmp), nprocs=world, join=True)
            ranks = [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(world)]
        found.update({name: [r[name] for r in ranks] for name in group})
    return found


@pytest.fixture(scope="module")
def configs(hydra_compose):
    """The resolved fp32 CPU configs of ``gpt-tiny`` and ``llama-tiny`` with ``backend=fsdp``."""
    from helpers import validate

    from flopsweep.plan import Environment

    base = ["device=cpu", "precision=fp32", "backend=fsdp", "nproc_per_node=1"]
    variants = {
        "gpt-tiny": ["model=gpt-tiny"],
        "llama-tiny": ["model=llama-tiny"],
        # Other axes under a layout: recompute of TP blocks, and a block-sparse kernel on local heads.
        "llama-tiny+full": ["model=llama-tiny", "activation_checkpointing=full"],
        # Llama 3.1's separate head: ColwiseParallel over the vocabulary, loss parallel on its output.
        "llama-tiny+untied": ["model=llama-tiny", "model.tie_embeddings=false"],
        "gpt-tiny+blocksparse": ["model=gpt-tiny", "attention=blocksparse", "attention.block_size=16"],
    }
    return {
        name: validate(hydra_compose([*overrides, *base]), Environment(cpu_count=4))
        for name, overrides in variants.items()
    }


LAYOUTS = {
    "fsdp2xtp2": Layout(dp_shard=2, tp=2),
    "hsdp2x2": Layout(dp_replicate=2, dp_shard=2),
    "tp4": Layout(dp_shard=1, tp=4),
}


CASES = [
    ("gpt-tiny", "fsdp2xtp2"),
    ("gpt-tiny", "hsdp2x2"),
    ("gpt-tiny", "tp4"),  # 4 heads: one whole head (its q, k, v) per rank
    ("llama-tiny", "fsdp2xtp2"),  # 2 KV heads: one GQA group per rank
    ("llama-tiny", "hsdp2x2"),
    ("llama-tiny+full", "fsdp2xtp2"),
    ("llama-tiny+untied", "fsdp2xtp2"),
    ("gpt-tiny+blocksparse", "fsdp2xtp2"),
]
"""The layouts each model runs on four ranks, against the model on one rank."""


@pytest.fixture(scope="module")
def first_steps(configs) -> dict[str, list[dict]]:
    """One step of every model of :data:`CASES` on one rank (``one model``) and on each of its layouts
    (``model name``): every rank's ``{loss, grad_norm}``, all cases in two sets of ranks (one and four)."""
    cases = {f"one {model}": (configs[model], Layout()) for model in dict(CASES)}
    cases |= {f"{model} {name}": (configs[model], LAYOUTS[name]) for model, name in CASES}
    return _steps(cases)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "name"), CASES)
def test_a_layout_gives_the_first_step_of_one_rank(first_steps, model: str, name: str) -> None:
    """Same weights, same global batch: FSDP 2 x TP 2, HSDP 2 x 2 and TP 4 on four ranks give the
    loss and the gradient norm (before clipping) of one rank within 1e-4."""
    (one,) = first_steps[f"one {model}"]
    ranks = first_steps[f"{model} {name}"]
    assert len(ranks) == 4
    for r in ranks:
        assert r["loss"] == pytest.approx(one["loss"], abs=1e-4), (r, one)
        assert r["grad_norm"] == pytest.approx(one["grad_norm"], abs=1e-4), (r, one)
    assert one["grad_norm"] > 0.0


def test_a_refused_layout_is_an_invalid_record_and_starts_no_worker(hydra_compose, tmp_path: Path) -> None:
    from flopsweep.job import JobInfo, run_job

    cfg = hydra_compose(
        ["model=llama-tiny", "backend=fsdp", "device=cpu", "nproc_per_node=4", "parallel.tp=4"]
    )
    record = run_job(
        cfg, JobInfo(job_dir=tmp_path, overrides=[], job_num=0)
    )  # a sweep's job: its record kept
    assert record["status"] == "invalid" and record["error"]["phase"] == "config"
    assert "parallel.tp=4" in record["error"]["message"] and "model.n_kv_head=2" in record["error"]["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # no rank's scratch files


@pytest.mark.slow
def test_layouts_write_ok_records_with_their_layout(tmp_path: Path) -> None:
    """Through ``run.py``, four gloo ranks, profiled: FSDP 4, FSDP 2 x TP 2, HSDP 2 x 2 and
    HSDP 2 x 1 x TP 2 on gpt-tiny, FSDP 2 x TP 2 on llama-tiny. Each writes an ``ok`` record naming
    its layout, with the loss of the layouts of the same data-parallel degree (the same global batch),
    tokens per step over the data-parallel ranks only, and a breakdown that counts communication
    (the tensor-parallel collectives are named as such)."""
    common = ["device=cpu", "precision=fp32", "backend=fsdp", "nproc_per_node=4", "steps.warmup=1"]
    common += ["steps.measure=2", "profile=true"]
    gpt = run_sweep(
        tmp_path / "gpt", *common, "model=gpt-tiny", "parallel.tp=1,2", "parallel.dp_replicate=1,2"
    )
    assert gpt.returncode == 0, gpt.stderr[-3000:]
    llama = run_sweep(tmp_path / "llama", *common, "model=llama-tiny", "parallel.tp=1,2")
    assert llama.returncode == 0, llama.stderr[-3000:]
    recs = records(tmp_path / "gpt") + records(tmp_path / "llama")
    assert len(recs) == 6
    losses: dict[tuple[str, int], list[float]] = {}
    per_token: dict[str, list[float]] = {}
    for r in recs:
        assert r["status"] == "ok", r["error"]
        asked = r["config"]["parallel"]
        tp, rep = asked["tp"], asked["dp_replicate"]
        dp = 4 // tp
        assert r["system"]["parallel"] == {
            "dp_replicate": rep,
            "dp_shard": dp // rep,
            "tp": tp,
            "pp": 1,
            "cp": 1,
            "ep": 1,
        }
        assert r["system"]["world_size"] == 4
        m, batch, seq = r["metrics"], r["config"]["batch"], r["config"]["model"]["seq_len"]
        assert m["tokens_per_step"] == batch["micro_batch_size"] * batch["grad_accum"] * dp * seq
        assert m["tokens_per_s_per_device"] == pytest.approx(m["tokens_per_s"] / 4)
        assert m["breakdown"]["comm_s"] > 0
        model = r["config"]["model"]["name"]
        # loss_first is a measured step's, after the warm-up's update: equal at equal global batch.
        losses.setdefault((model, dp), []).append(m["loss_first"])
        per_token.setdefault(model, []).append(m["model_flops_per_iteration"] / m["tokens_per_step"])
    assert sorted(losses) == [("gpt-tiny", 2), ("gpt-tiny", 4), ("llama-tiny", 2), ("llama-tiny", 4)]
    for key, values in losses.items():
        assert max(values) - min(values) < 1e-4, (key, values)
    for model, values in per_token.items():
        assert max(values) == pytest.approx(min(values)), model  # model FLOPs per token: layout-free
