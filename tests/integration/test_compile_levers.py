"""``compile_scope=model`` trains: the whole model compiled by Inductor on the CPU gives the eager
model's losses and gradient norms, on ``single`` in this process and on DDP over two gloo ranks
(each rank compiles its own copy). One block (``model.n_layer=1``) keeps the compile short."""

from __future__ import annotations

import pytest
import torch

ARGS = [
    "model=llama-tiny",
    "model.n_layer=1",
    "device=cpu",
    "precision=fp32",
    "activation_checkpointing=full",
    "optim.lr=1e-2",
]


def _two_steps(cfg) -> tuple[list[float], float, torch.nn.Module]:
    """Two steps of ``cfg``'s ``single`` trainer on the batches ``one_rank.steps`` gives every run
    (two global batches of 2 from seed 1234): ``(losses, first grad norm, model)``."""
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


@pytest.mark.slow
def test_whole_model_compile_trains_as_eager_on_single_and_ddp(hydra_compose) -> None:
    from helpers import make_plan
    from one_rank import steps

    from flopsweep.plan import Environment

    env = Environment(cpu_count=4)
    eager = make_plan(hydra_compose(ARGS), env).cfg
    whole = make_plan(hydra_compose([*ARGS, "compile=true", "compile_scope=model"]), env).cfg
    want, want_norm, _ = _two_steps(eager)
    got, got_norm, model = _two_steps(whole)
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
