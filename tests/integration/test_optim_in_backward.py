"""``optim.in_backward``: AdamW stepped per parameter in its post-accumulate-grad hook.

Real training on the CPU (llama-tiny, fp32): the fused-into-backward path gives the losses and
weights of the usual step (both without clipping) on ``single`` and on FSDP2 over two gloo ranks;
every refusal names its key; the memory figures are in ``tests/unit/test_memory.py``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch
from unit.test_optim_in_backward import BASE, _train  # shared with the unit tier

from flopsweep.layout import Layout


def _fsdp_rank(rank: int, world: int, cfgs: dict, init: str, out: str) -> None:
    """One FSDP2 rank: train each config of ``cfgs`` and write its losses and whether a gradient
    outlived backward to ``out/<name>-<rank>.json``."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        for name, cfg in cfgs.items():
            losses, weights, trainer = _train(cfg, Layout(dp_shard=world), rank)
            left = [p.grad is not None for p in trainer.model.parameters()]
            result = {
                "losses": losses,
                "weights": [w.flatten()[:64].tolist() for w in weights],
                "grads": left,
            }
            (Path(out) / f"{name}-{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_fsdp2_in_backward_trains_as_the_usual_step(hydra_compose) -> None:
    """Two gloo ranks, FSDP2 over ``dp_shard``: FSDP2 fires the hooks of its sharded parameters after
    each reduce-scatter, and the in-backward step gives the usual step's losses (1e-5) and weights."""
    import torch.multiprocessing as mp
    from helpers import validate

    from flopsweep.plan import Environment

    env = Environment(cpu_count=4)
    args = [*BASE, "backend=fsdp", "nproc_per_node=2"]
    cfgs = {
        "usual": validate(hydra_compose(args), env),
        "fused": validate(hydra_compose([*args, "optim.in_backward=true"]), env),
    }
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_fsdp_rank, args=(2, cfgs, f"file://{tmp}/store", tmp), nprocs=2, join=True)
        got = {f.stem: json.loads(f.read_text()) for f in Path(tmp).glob("*.json")}
    for rank in (0, 1):
        usual, fused = got[f"usual-{rank}"], got[f"fused-{rank}"]
        assert fused["losses"] == pytest.approx(usual["losses"], abs=1e-5)
        assert usual["losses"][-1] < usual["losses"][0] - 0.1
        for w, r in zip(fused["weights"], usual["weights"], strict=True):
            assert w == pytest.approx(r, abs=1e-6)
        assert not any(fused["grads"])  # every gradient was freed in backward
