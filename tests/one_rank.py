"""Shared by the model-parallel integration tests: train a config on gloo ranks and on one rank, compare.

:func:`same_as_one_rank` runs two steps of a config on a layout (``torch.multiprocessing`` ranks,
gloo, the CPU) and on one rank over the same global batch, and asserts the same losses of both steps
and the same first-step gradient norm, within 1e-4; :func:`steps_of` runs many cases in one set of
ranks per world size, and :func:`assert_same` compares a case with its one-rank run.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest


def _rank(rank: int, world: int, cases: dict, init: str, out: str, global_batch: int) -> None:
    """One rank of every case of ``cases`` (``{name: (cfg, layout)}``, one world size), one after another:
    two steps of ``cfg`` on ``layout`` over this rank's share of the global batch; writes ``{name: {loss:
    [first, second], grad_norm}}`` (the mean losses of both steps, the first step's gradient norm) to
    ``out/rank<R>.json``."""
    import os

    import torch
    import torch.distributed as dist

    from flopsweep.backends import build_trainer
    from flopsweep.tensor_parallel import grad_norm

    # as the launcher sets them (flopsweep.worker.spawned_main): DeepSpeed's engine reads LOCAL_RANK
    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world)
    )
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        results = {}
        for name, (cfg, layout) in cases.items():
            gen = torch.Generator().manual_seed(1234)
            steps = [
                torch.randint(0, cfg.model.vocab_size, (global_batch, cfg.model.seq_len + 1), generator=gen)
                for _ in range(2)
            ]
            per_rank = global_batch // layout.dp
            d = layout.dp_rank(rank)
            trainer = build_trainer(cfg, torch.device("cpu"), layout)
            result: dict = {"loss": []}
            for i, tokens in enumerate(steps):
                loss = trainer.step([tokens[d * per_rank : (d + 1) * per_rank]])
                dist.all_reduce(loss)  # every rank's loss is its batch's (the cp ranks' mean): mean over all
                result["loss"].append(loss.item() / layout.world_size)
                if i == 0:  # DeepSpeed's engine clips in its own step and keeps no norm here: None
                    norm = getattr(trainer, "last_grad_norm", None)
                    result["grad_norm"] = None if norm is None else grad_norm(norm)
            results[name] = result
        (Path(out) / f"rank{rank}.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def steps_of(cases: dict, global_batch: int = 2) -> dict[str, list[dict]]:
    """Every rank's ``{loss: [first, second], grad_norm}`` over two steps of each case of ``cases``
    (``{name: (cfg, layout)}``), by name: one set of ranks per world size runs its cases one after
    another (each spawned rank imports torch for seconds: CI time)."""
    import torch.multiprocessing as mp

    found: dict[str, list[dict]] = {}
    for world in sorted({layout.world_size for _, layout in cases.values()}):
        group = {name: case for name, case in cases.items() if case[1].world_size == world}
        with tempfile.TemporaryDirectory() as tmp:
            init = f"file://{tmp}/store"
            mp.spawn(_rank, args=(world, group, init, tmp, global_batch), nprocs=world, join=True)
            ranks = [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(world)]
        found.update({name: [r[name] for r in ranks] for name in group})
    return found


def steps(cfg, layout, global_batch: int = 2) -> list[dict]:
    """Every rank's ``{loss: [first, second], grad_norm}`` over two steps of ``cfg`` on ``layout``."""
    return steps_of({"case": (cfg, layout)}, global_batch)["case"]


def assert_same(one: list[dict], ranks: list[dict]) -> None:
    """``ranks`` (a layout's, :func:`steps`) have the losses and first-step gradient norm of ``one`` (the one
    rank's) within 1e-4, and the one rank's two losses differ (its step changed the weights)."""
    (one,) = one
    for r in ranks:
        for got, want in zip(r["loss"], one["loss"], strict=True):
            assert got == pytest.approx(want, abs=1e-4), (r, one)
        assert r["grad_norm"] == pytest.approx(one["grad_norm"], abs=1e-4), (r, one)
    assert one["grad_norm"] > 0.0 and one["loss"][0] != one["loss"][1]


def same_as_one_rank(cfg, layout, global_batch: int = 2) -> None:
    """Two steps of ``cfg`` on ``layout`` give one rank's losses and first-step gradient norm (1e-4)."""
    from flopsweep.layout import Layout

    found = steps_of({"one": (cfg, Layout()), "layout": (cfg, layout)}, global_batch)
    assert_same(found["one"], found["layout"])


def in_process(cfg):
    """Two steps of ``cfg``'s trainer in this process, as one rank (the caller sets up the process
    group a backend needs), on two batches of 2 from seed 1234 as :func:`steps` draws them:
    ``(losses, first grad norm, model)``."""
    import torch

    from flopsweep.backends import build_trainer
    from flopsweep.layout import Layout
    from flopsweep.tensor_parallel import grad_norm

    gen = torch.Generator().manual_seed(1234)
    trainer = build_trainer(cfg, torch.device("cpu"), Layout())
    losses, norm = [], None
    for _ in range(2):
        tokens = torch.randint(0, cfg.model.vocab_size, (2, cfg.model.seq_len + 1), generator=gen)
        losses.append(float(trainer.step([tokens])))
        norm = norm if norm is not None else grad_norm(trainer.last_grad_norm)
    return losses, norm, trainer.model
