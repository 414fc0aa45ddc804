"""``compile_scope=model`` trains: the whole model compiled by Inductor on the CPU gives the eager
model's losses and gradient norms, on ``single`` in this process and on DDP over two gloo ranks
(each rank compiles its own copy). One block (``model.n_layer=1``) keeps the compile short."""

from __future__ import annotations

import pytest
from one_rank import in_process

ARGS = [
    "model=llama-tiny",
    "model.n_layer=1",
    "device=cpu",
    "precision=fp32",
    "activation_checkpointing=full",
    "optim.lr=1e-2",
]


@pytest.mark.slow
def test_whole_model_compile_trains_as_eager_on_single_and_ddp(hydra_compose) -> None:
    from helpers import make_plan
    from one_rank import steps

    from flopsweep.plan import Environment

    env = Environment(cpu_count=4)
    eager = make_plan(hydra_compose(ARGS), env).cfg
    whole = make_plan(hydra_compose([*ARGS, "compile=true", "compile_scope=model"]), env).cfg
    want, want_norm, _ = in_process(eager)
    got, got_norm, model = in_process(whole)
    assert model._compiled_call_impl is not None  # the module itself ran compiled
    assert got == pytest.approx(want, abs=1e-5) and got_norm == pytest.approx(want_norm, rel=1e-5)
    assert want_norm > 0 and want[0] != want[1]

    ddp = make_plan(
        hydra_compose([*ARGS, "compile=true", "compile_scope=model", "backend=ddp", "nproc_per_node=2"]), env
    )
    for r in steps(ddp.cfg, ddp.layout, global_batch=2):  # each rank one sequence of each batch
        assert r["loss"] == pytest.approx(want, abs=1e-4) and r["grad_norm"] == pytest.approx(
            want_norm, abs=1e-4
        )
