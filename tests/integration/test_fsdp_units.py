"""``backend.end_units`` on two gloo ranks: FSDP2 with the embedding and the final norm with the head
as units of their own trains as FSDP2 with them in the root's group (the same losses and gradient
norm), compiled per block (the compiled loss head graph-breaks at the head unit's FSDP2 hooks)."""

from __future__ import annotations

import pytest

ARGS = [
    "model=llama-tiny",
    "model.tie_embeddings=false",
    "model.n_layer=1",
    "device=cpu",
    "precision=fp32",
    "backend=fsdp",
    "nproc_per_node=2",
    "compile=true",
]


@pytest.mark.slow
def test_end_units_train_as_the_roots_group_on_two_ranks(hydra_compose) -> None:
    from helpers import make_plan
    from one_rank import steps

    from flopsweep.plan import Environment

    env = Environment(cpu_count=4)
    off = make_plan(hydra_compose(ARGS), env)
    on = make_plan(hydra_compose([*ARGS, "backend.end_units=true"]), env)
    want = steps(off.cfg, off.layout, global_batch=2)
    got = steps(on.cfg, on.layout, global_batch=2)
    assert want[0]["grad_norm"] > 0 and want[0]["loss"][0] != want[0]["loss"][1]
    for g, w in zip(got, want, strict=True):
        assert g["loss"] == pytest.approx(w["loss"], abs=1e-5)
        assert g["grad_norm"] == pytest.approx(w["grad_norm"], rel=1e-5)
