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

from flopsweep.layout import Layout

GLOBAL_BATCH = 4
"""Sequences of the one step: the one rank's micro batch, split over the data-parallel ranks."""


def _rank(rank: int, world: int, cfg, layout: Layout, init: str, out: str) -> None:
    """One rank: build the trainer of ``cfg`` on ``layout``, run one step over this rank's share
    of the global batch, write ``{loss, grad_norm}`` to ``out/rank<R>.json``."""
    import torch
    import torch.distributed as dist

    from flopsweep.backends import build_trainer
    from flopsweep.tensor_parallel import grad_norm

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        gen = torch.Generator().manual_seed(1234)
        tokens = torch.randint(0, cfg.model.vocab_size, (GLOBAL_BATCH, cfg.model.seq_len + 1), generator=gen)
        per_rank = GLOBAL_BATCH // layout.dp
        d = layout.dp_rank(rank)
        trainer = build_trainer(cfg, torch.device("cpu"), layout)
        loss = trainer.step([tokens[d * per_rank : (d + 1) * per_rank]])
        # The step's loss is this data-parallel rank's; the global loss is their mean.
        dist.all_reduce(loss)
        result = {"loss": loss.item() / layout.non_data_parallel_size / layout.dp}
        result["grad_norm"] = grad_norm(trainer.last_grad_norm)
        (Path(out) / f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def _step(cfg, layout: Layout) -> list[dict]:
    """Every rank's ``{loss, grad_norm}`` after one step of ``cfg`` on ``layout``."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{tmp}/store"
        mp.spawn(_rank, args=(layout.world_size, cfg, layout, init, tmp), nprocs=layout.world_size, join=True)
        return [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(layout.world_size)]


@pytest.fixture(scope="module")
def configs(hydra_compose):
    """The resolved fp32 CPU configs of ``gpt-tiny`` and ``llama-tiny`` with ``backend=fsdp``."""
    from helpers import validate

    from flopsweep.plan import Environment

    base = ["device=cpu", "precision=fp32", "backend=fsdp", "nproc_per_node=1"]
    return {
        name: validate(hydra_compose([f"model={name}", *base]), Environment(cpu_count=4))
        for name in ("gpt-tiny", "llama-tiny")
    }


LAYOUTS = {
    "fsdp2xtp2": Layout(dp_shard=2, tp=2),
    "hsdp2x2": Layout(dp_replicate=2, dp_shard=2),
    "tp4": Layout(dp_shard=1, tp=4),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("gpt-tiny", "fsdp2xtp2"),
        ("gpt-tiny", "hsdp2x2"),
        ("gpt-tiny", "tp4"),  # 4 heads: one whole head (its q, k, v) per rank
        ("llama-tiny", "fsdp2xtp2"),  # 2 KV heads: one GQA group per rank
        ("llama-tiny", "hsdp2x2"),
    ],
)
def test_a_layout_gives_the_first_step_of_one_rank(configs, model: str, name: str) -> None:
    """Same weights, same global batch: FSDP 2 x TP 2, HSDP 2 x 2 and TP 4 on four ranks give the
    loss and the gradient norm (before clipping) of one rank within 1e-4."""
    cfg = configs[model]
    (one,) = _step(cfg, Layout())
    ranks = _step(cfg, LAYOUTS[name])
    for r in ranks:
        assert r["loss"] == pytest.approx(one["loss"], abs=1e-4), (r, one)
        assert r["grad_norm"] == pytest.approx(one["grad_norm"], abs=1e-4), (r, one)
    assert one["grad_norm"] > 0.0
