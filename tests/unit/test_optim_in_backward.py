"""``optim.in_backward``: AdamW stepped per parameter in its post-accumulate-grad hook.

Real training on the CPU (llama-tiny, fp32): the fused-into-backward path gives the losses and
weights of the usual step (both without clipping) on ``single`` and on FSDP2 over two gloo ranks;
every refusal names its key; the memory figures are in ``tests/unit/test_memory.py``.
"""

from __future__ import annotations

import pytest
import torch

from flopsweep.config import ConfigError
from flopsweep.layout import Layout

STEPS = 4


BATCH = 4
"""Sequences per step over every data-parallel rank."""


BASE = ["model=llama-tiny", "device=cpu", "precision=fp32", "optim.grad_clip=0", "optim.lr=1e-2"]
"""A learning rate large enough that the weights and losses move visibly in four steps."""


def _batches(cfg) -> list[torch.Tensor]:
    """``STEPS`` times one fixed batch ``[BATCH, seq_len + 1]`` of token ids (memorised: the loss
    falls, so that equal losses show equal steps)."""
    gen = torch.Generator().manual_seed(1234)
    tokens = torch.randint(0, cfg.model.vocab_size, (BATCH, cfg.model.seq_len + 1), generator=gen)
    return [tokens] * STEPS


def _train(
    cfg, layout: Layout, rank: int = 0, device: str = "cpu"
) -> tuple[list[float], list[torch.Tensor], object]:
    """``STEPS`` steps of ``cfg``'s trainer on this data-parallel rank's share of each batch:
    ``(losses, the full weights after them, the trainer)``."""
    from flopsweep.backends import build_trainer

    trainer = build_trainer(cfg, torch.device(device), layout)
    per = BATCH // layout.dp
    losses = []
    for tokens in _batches(cfg):
        losses.append(trainer.step([tokens[rank * per : (rank + 1) * per].to(device)]))
    weights = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in trainer.model.parameters()]
    return [float(x) for x in losses], [w.detach().clone() for w in weights], trainer


def test_single_in_backward_trains_as_the_usual_step(hydra_compose) -> None:
    """Same seed, same data, no clip: the per-parameter AdamW in backward gives the usual step's
    losses (1e-5) and weights (1e-6); after each step no gradient is left and nothing is clipped."""
    from helpers import validate

    from flopsweep.backends import optimizer_facts
    from flopsweep.optim_in_backward import OptimizerInBackward

    usual = validate(hydra_compose([*BASE, "backend=single"]))
    fused = validate(hydra_compose([*BASE, "backend=single", "optim.in_backward=true"]))
    ref_losses, ref_weights, ref_trainer = _train(usual, Layout())
    losses, weights, trainer = _train(fused, Layout())
    assert isinstance(trainer.optimizer, OptimizerInBackward)
    # system.optimizer: torch's AdamW, its for-loop on CPU tensors (foreach resolved as torch does)
    adamw = {"class": "torch.optim.adamw.AdamW", "fused": False, "foreach": False}
    assert optimizer_facts(ref_trainer) == {**adamw, "in_backward": False, "overlap_forward": False}
    assert optimizer_facts(trainer) == {**adamw, "in_backward": True, "overlap_forward": False}
    n = len(list(trainer.model.parameters()))
    assert len(trainer.optimizer.optimizers) == len(trainer.optimizer.handles) == n
    assert losses == pytest.approx(ref_losses, abs=1e-5)
    assert ref_losses[-1] < ref_losses[0] - 0.1  # the steps did train: equal losses mean something
    assert all(torch.allclose(w, r, atol=1e-6) for w, r in zip(weights, ref_weights, strict=True))
    assert all(p.grad is None for p in trainer.model.parameters())
    assert trainer.last_grad_norm is None
    # each parameter was stepped once per step: AdamW's step count is the number of steps
    assert {float(o.state[o.param_groups[0]["params"][0]]["step"]) for o in trainer.optimizer.optimizers} == {
        float(STEPS)
    }
    trainer.optimizer.remove()  # detached: backward leaves the gradients again
    trainer.model(_batches(fused)[0]).backward()
    assert all(p.grad is not None for p in trainer.model.parameters())


REFUSED = {
    "clip": (["backend=single", "optim.grad_clip=1.0"], "optim.grad_clip", "set optim.grad_clip=0"),
    "ddp": (["backend=ddp", "nproc_per_node=2"], "optim.in_backward", "pick backend=single or backend=fsdp"),
    "deepspeed": (["backend=zero2", "nproc_per_node=2"], "optim.in_backward", "backend=deepspeed steps"),
    "fp16": (["backend=single", "precision=fp16"], "optim.in_backward", "GradScaler"),
    "accum": (["backend=single", "batch.grad_accum=2"], "batch.grad_accum", "set batch.grad_accum=1"),
    "pipeline": (
        ["backend=fsdp", "nproc_per_node=2", "parallel.pp=2"],
        "parallel.pp",
        "pipeline schedule",
    ),
    "tp": (["backend=fsdp", "nproc_per_node=2", "parallel.tp=2"], "parallel.tp", "set parallel.tp=1"),
    "hsdp": (
        ["backend=fsdp", "nproc_per_node=2", "parallel.dp_replicate=2"],
        "parallel.dp_replicate",
        "HSDP",
    ),
    "offload": (
        ["backend=fsdp", "nproc_per_node=2", "backend.cpu_offload=true"],
        "backend.cpu_offload",
        "CPUOffloadPolicy",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED.values()), ids=list(REFUSED))
def test_what_cannot_step_in_backward_is_refused_before_launch(hydra_compose, case) -> None:
    """Each refusal is one :class:`ConfigError` naming the key and the fix, raised by validation."""
    from flopsweep.plan import validate

    overrides, key, words = case
    args = [o for o in BASE if not any(o.startswith(x.split("=")[0] + "=") for x in overrides)]
    with pytest.raises(ConfigError) as err:
        validate(hydra_compose([*args, *overrides, "optim.in_backward=true"]))
    assert err.value.key == key and words in str(err.value) and "optim.in_backward=false" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_global_batch_that_accumulates_is_refused_when_the_plan_resolves(hydra_compose) -> None:
    """``batch.global_batch_size`` sets ``grad_accum`` only when the world size is known: the plan
    refuses it there, and accepts the global batch of one micro batch."""
    from helpers import make_plan

    from flopsweep.plan import Environment

    env = Environment(cpu_count=4)
    args = [*BASE, "backend=single", "optim.in_backward=true", "batch.micro_batch_size=2"]
    with pytest.raises(ConfigError, match="from batch.global_batch_size=8") as err:
        make_plan(hydra_compose([*args, "batch.global_batch_size=8"]), env)
    assert err.value.key == "batch.grad_accum" and err.value.value == 4
    assert make_plan(hydra_compose([*args, "batch.global_batch_size=2"]), env).cfg.batch.grad_accum == 1


def _host_syncs(trainer, tokens: torch.Tensor) -> int:
    """How many synchronising CUDA calls one training step makes (``torch.cuda.set_sync_debug_mode``
    warns once per synchronising call; its own once-per-process notice,
    "... is a prototype feature and does not yet detect all synchronizing operations", is not one)."""
    import warnings

    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            trainer.step([tokens])
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) and "prototype" not in str(w.message) for w in caught)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_in_backward_trains_as_the_usual_step_without_a_host_sync(hydra_compose) -> None:
    """On a GPU (bf16 autocast, fused AdamW per parameter): the usual step's losses (1e-3), and a
    step that synchronises the host no more often than the usual one (``python -m pytest -m gpu
    tests/unit/test_optim_in_backward.py``)."""
    from helpers import validate

    args = [*BASE, "backend=single", "device=cuda", "precision=bf16", "nproc_per_node=1"]
    args = [a for a in args if a not in ("device=cpu", "precision=fp32")]
    usual = validate(hydra_compose(args))
    fused = validate(hydra_compose([*args, "optim.in_backward=true"]))
    ref_losses, _, ref_trainer = _train(usual, Layout(), device="cuda")
    losses, _, trainer = _train(fused, Layout(), device="cuda")
    assert losses == pytest.approx(ref_losses, abs=1e-3)
    assert ref_losses[-1] < ref_losses[0] - 0.1
    tokens = _batches(fused)[0].cuda()
    assert _host_syncs(trainer, tokens) <= _host_syncs(ref_trainer, tokens)


def test_the_analysis_tells_the_fused_step_apart_and_keeps_older_set_ups() -> None:
    """A record without the key and one with ``optim.in_backward: false`` are one set-up; ``true`` is
    another, shown in the ``optim_in_backward`` column."""
    from analysis.load import setup_id
    from flopsweep.columns import SETUP_SPECS, kind

    old = {"config": {"model": {"name": "llama-tiny"}, "optim": {"lr": 1e-4, "grad_clip": 0.0}}}
    usual = {"config": {**old["config"], "optim": {**old["config"]["optim"], "in_backward": False}}}
    fused = {"config": {**old["config"], "optim": {**old["config"]["optim"], "in_backward": True}}}
    assert setup_id(usual) == setup_id(old) != setup_id(fused)
    spec = next(s for s in SETUP_SPECS if s.path == "config.optim.in_backward")
    assert kind(spec) == "bool" and spec.identity
