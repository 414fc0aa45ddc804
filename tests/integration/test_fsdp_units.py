"""FSDP2 on two gloo ranks trains as eager FSDP2 (the same losses and gradient norm) with
``backend.end_units`` (the embedding, and the final norm with the head, as units of their own),
compiled per block (the compiled loss head graph-breaks at the head unit's FSDP2 hooks), and with the
whole model compiled (``compile_scope=model``: the region breaks at every unit's hooks)."""

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
def test_end_units_and_whole_model_compile_train_as_eager_fsdp2(hydra_compose) -> None:
    from helpers import make_plan
    from one_rank import steps_of

    from flopsweep.plan import Environment

    env = Environment(cpu_count=4)
    off = make_plan(hydra_compose([*ARGS, "compile=false"]), env)  # eager: the reference
    on = make_plan(hydra_compose([*ARGS, "backend.end_units=true"]), env)
    whole = make_plan(hydra_compose([*ARGS, "compile_scope=model"]), env)
    # the three in one pair of ranks, one after another (CI time: each rank imports torch and starts
    # inductor's compile workers)
    plans = {"eager": off, "end_units": on, "whole": whole}
    found = steps_of({name: (plan.cfg, plan.layout) for name, plan in plans.items()})
    want, got = found["eager"], found["end_units"] + found["whole"]
    assert len(want) == 2 and want[0]["grad_norm"] > 0 and want[0]["loss"][0] != want[0]["loss"][1]
    for g, w in zip(got, want + want, strict=True):
        assert g["loss"] == pytest.approx(w["loss"], abs=1e-5)
        assert g["grad_norm"] == pytest.approx(w["grad_norm"], rel=1e-5)
