"""``optim.overlap_forward``: AdamW per unit on a side CUDA stream, beside the next forward.

On the CPU: the units (every trainable parameter once, the root first, then each block in order), every
refusal names its key, the step-time term and the blocks' share. On a GPU (``-m gpu``): the overlapped
step trains as the one-stream step, eager and compiled, and leaves no gradient.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from flopsweep import overlap_forward, rules
from flopsweep.config import ConfigError

LLAMA = ["model=llama-tiny", "precision=fp32", "optim.lr=1e-2"]


def test_units_hold_every_parameter_once_root_first_then_each_block(hydra_compose) -> None:
    from flopsweep.models import family
    from flopsweep.optim_overlap import split_units
    from flopsweep.parallelize import make_model

    for model_name in ("llama-tiny", "gpt-tiny"):  # gpt2 ties its head to the embedding: one matrix
        cfg = hydra_compose([f"model={model_name}", "device=cpu"])
        model = make_model(cfg, torch.device("cpu"))
        blocks = family(cfg.model).blocks(model)
        units = split_units(model, blocks)
        assert [name for name, _ in units] == ["root", *(f"block {i}" for i in range(len(blocks)))]
        ids = [id(p) for _, params in units for p in params]
        assert sorted(ids) == sorted(id(p) for p in model.parameters() if p.requires_grad)
        assert len(ids) == len(set(ids))
        for (_, params), block in zip(units[1:], blocks, strict=True):
            assert {id(p) for p in params} == {id(p) for p in block.parameters()}
    with pytest.raises(ValueError, match="no blocks"):
        split_units(model, [])


@pytest.mark.parametrize(
    ("overrides", "key", "fix"),
    [
        (["backend=fsdp"], "optim.overlap_forward", "pick backend=single"),
        (["device=cpu"], "optim.overlap_forward", "set device=cuda on a GPU"),
        (["optim.in_backward=true", "optim.grad_clip=0"], "optim.in_backward", "set optim.in_backward=false"),
        (["precision=fp16"], "precision", "set precision=bf16"),
        (["compile=true", "compile_scope=model"], "compile_scope", "set compile_scope=block"),
        (["compile=true", "compile_mode=reduce-overhead"], "compile_mode", "pick compile_mode=default"),
    ],
)
def test_each_refusal_names_its_key_and_fix(hydra_compose, overrides, key, fix) -> None:
    cfg = hydra_compose(["model=llama-tiny", "device=cuda", "optim.overlap_forward=true", *overrides])
    with pytest.raises(ConfigError) as err:
        rules.check(cfg)
    assert err.value.key == key
    assert fix in str(err.value) and "optim.overlap_forward=false" in str(err.value)


def test_the_placed_check_refuses_auto_resolved_to_the_cpu(hydra_compose) -> None:
    cfg = hydra_compose(["model=llama-tiny", "optim.overlap_forward=true"])
    rules.check(cfg) if cfg.device != "cpu" else None
    with pytest.raises(ConfigError, match="the run is on the CPU"):
        overlap_forward.check_placed(cfg, "cpu")
    overlap_forward.check_placed(cfg, "cuda")  # on a GPU: allowed
    rules.check(
        hydra_compose(["model=llama-tiny", "device=cuda", "optim.overlap_forward=true", "compile=true"])
    )


def test_exposed_optimizer_hides_the_blocks_share_up_to_the_forward() -> None:
    # 0.1 s of optimizer, 87% of it the blocks': hidden behind a 0.2 s forward, 0.013 s left
    assert overlap_forward.exposed_optimizer_s(0.1, 0.2, 0.87) == pytest.approx(0.013)
    # a forward shorter than the blocks' steps hides only its own length
    assert overlap_forward.exposed_optimizer_s(0.1, 0.05, 0.87) == pytest.approx(0.05)
    assert overlap_forward.exposed_optimizer_s(0.1, 0.2, 0.0) == pytest.approx(0.1)
    assert overlap_forward.exposed_optimizer_s(0.1, -1.0, 2.0) == pytest.approx(0.1)  # clamped


def test_blocks_share_of_llama_8b_and_off(hydra_compose) -> None:
    """Llama 3.1 8B: 32 blocks of 218.1 M parameters of 8.03 B (the embedding and the untied head 1.05 B)."""
    on = hydra_compose(["model=llama3.1-8b", "optim.overlap_forward=true"])
    assert overlap_forward.blocks_share(on) == pytest.approx(32 * 218_112_000 / 8_030_261_248, rel=1e-6)
    assert overlap_forward.blocks_share(hydra_compose(["model=llama3.1-8b"])) == 0.0


def test_the_step_time_model_takes_the_hidden_share_off_the_optimizer() -> None:
    from flopsweep.steptime import Compute, Link, Workload, predict

    counts = {"n_params": 10, "n_layer": 2, "n_embd": 4, "seq_len": 8, "micro_batch_size": 1}
    w = Workload(backend="single", model_flops=3.0, hardware_flops=3.0, **counts)
    compute = Compute(compute_s=0.6, optimizer_s=0.1, source="test", kind="probe")
    link = Link(source="test")
    plain = predict(w, compute, link, gpus_per_node=1)
    overlapped = predict(dataclasses.replace(w, overlap_share=0.8), compute, link, gpus_per_node=1)
    assert plain.iteration_time_s == pytest.approx(0.7)
    # forward 0.6 / 3 = 0.2 s hides 0.08 s of the 0.1 s: 0.02 s left on the step
    assert overlapped.optimizer_s == pytest.approx(0.02) and overlapped.iteration_time_s == pytest.approx(
        0.62
    )


def _train(cfg, steps: int = 4):
    from flopsweep.backends import build_trainer
    from flopsweep.layout import Layout

    torch.manual_seed(0)
    trainer = build_trainer(cfg, torch.device("cuda"), Layout())
    gen = torch.Generator().manual_seed(1234)
    tokens = torch.randint(0, cfg.model.vocab_size, (4, cfg.model.seq_len + 1), generator=gen).cuda()
    losses = [trainer.step([tokens, tokens]) for _ in range(steps)]  # two micro batches: grad accumulation
    if hasattr(trainer, "drain"):
        trainer.drain()
    torch.cuda.synchronize()
    return [float(x) for x in losses], [p.detach().clone() for p in trainer.model.parameters()], trainer


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("compiled", [False, True])
def test_overlapped_step_trains_as_the_one_stream_step_on_a_gpu(hydra_compose, compiled) -> None:
    from helpers import validate

    from flopsweep.backends import optimizer_facts
    from flopsweep.optim_overlap import OverlappedOptimizer

    base = [*LLAMA, "device=cuda", "backend=single", f"compile={str(compiled).lower()}"]
    ref_losses, ref_weights, _ = _train(validate(hydra_compose(base)))
    losses, weights, trainer = _train(validate(hydra_compose([*base, "optim.overlap_forward=true"])))
    assert isinstance(trainer.optimizer, OverlappedOptimizer)
    assert optimizer_facts(trainer)["overlap_forward"] is True
    assert losses == pytest.approx(ref_losses, abs=1e-5)
    assert ref_losses[-1] < ref_losses[0] - 0.1  # it trained: equal losses mean something
    assert all(torch.allclose(w, r, atol=1e-6) for w, r in zip(weights, ref_weights, strict=True))
    assert all(p.grad is None for p in trainer.model.parameters())
    assert trainer.last_grad_norm is not None  # clipped at 1.0 as the one-stream step is
