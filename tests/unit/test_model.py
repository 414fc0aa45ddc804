"""The GPT of flopsweep.models.gpt2 and the attention kernels of flopsweep.attention (CPU, fp32)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import _CHECKPOINT_WRAPPED_MODULE

from flopsweep.attention_kernels import build_attention_fn
from flopsweep.backends import build_model, wrap_blocks
from flopsweep.config import CheckpointingConfig, ModelConfig, RunConfig
from flopsweep.flops import n_params
from flopsweep.models.gpt2 import GPT

TINY = ModelConfig(name="gpt-tiny", n_layer=2, n_embd=128, n_head=4, seq_len=128, vocab_size=512)
ODD = ModelConfig(name="odd", n_layer=3, n_embd=96, n_head=3, seq_len=40, vocab_size=101)
ONE = ModelConfig(name="one", n_layer=1, n_embd=8, n_head=2, seq_len=5, vocab_size=7)


def _tokens(cfg: ModelConfig, batch: int = 2, seed: int = 123) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len + 1), generator=g)


@pytest.mark.parametrize("cfg", [TINY, ODD, ONE], ids=lambda c: c.name)
def test_param_count_matches_formula(cfg):
    model = GPT(cfg)
    counted = sum(p.numel() for p in model.parameters())
    assert counted == n_params(cfg.n_layer, cfg.n_embd, cfg.seq_len, cfg.vocab_size)


@pytest.mark.parametrize("cfg", [TINY, ODD], ids=lambda c: c.name)
def test_lm_head_is_tied(cfg):
    model = GPT(cfg)
    names = [n for n, _ in model.named_parameters()]
    assert not any("lm_head" in n or "head" == n.split(".")[0] for n in names)
    # exactly one (V, h) matrix: the token embedding, used again as the LM head
    top_level = sorted({n.split(".")[0] for n in names})
    assert top_level == ["h", "ln_f", "wpe", "wte"]
    vocab_mats = [
        n
        for n, p in model.named_parameters()
        if p.shape == (cfg.vocab_size, cfg.n_embd) and not n.startswith("h.")
    ]
    assert vocab_mats == ["wte.weight"]
    # the head really uses wte: the loss depends on wte rows of tokens that never occur as input
    tokens = torch.zeros(1, cfg.seq_len + 1, dtype=torch.long)
    tokens[0, -1] = 1  # only target, never an input
    model(tokens).backward()
    grad = model.wte.weight.grad
    assert grad is not None
    assert grad[2:].abs().sum() > 0  # rows 2.. only get gradient through the tied head


@pytest.mark.parametrize("cfg", [TINY, ODD], ids=lambda c: c.name)
def test_initial_loss_near_ln_vocab(cfg):
    torch.manual_seed(0)
    model = GPT(cfg)
    loss = model(_tokens(cfg))
    assert loss.dim() == 0
    assert torch.isfinite(loss)
    assert loss.dtype == torch.float32
    assert abs(loss.item() - math.log(cfg.vocab_size)) < 0.5


def _qkv(T=37, B=2, H=3, D=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, D, generator=g, dtype=torch.float32) for _ in range(3)]


def _run(name, q, k, v):
    q, k, v = (t.clone().requires_grad_(True) for t in (q, k, v))
    y = build_attention_fn(name)(q, k, v)
    g = torch.Generator().manual_seed(99)
    (y * torch.randn(y.shape, generator=g)).sum().backward()
    return y.detach(), q.grad, k.grad, v.grad


@pytest.mark.parametrize("T", [1, 37])
def test_attention_kernels_agree(T):
    q, k, v = _qkv(T=T)
    ref = _run("standard", q, k, v)
    for name in ("sdpa", "sdpa-math"):
        out = _run(name, q, k, v)
        for a, b, what in zip(ref, out, ("y", "dq", "dk", "dv"), strict=True):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5, msg=f"{name} {what}")


def test_attention_reference_values():
    # With T=1 the output is v; with q=0 row t averages v[:t+1].
    q, k, v = _qkv(T=5)
    torch.testing.assert_close(
        build_attention_fn("standard")(q[:, :, :1], k[:, :, :1], v[:, :, :1]), v[:, :, :1]
    )
    y = build_attention_fn("standard")(torch.zeros_like(q), k, v)
    expect = v.cumsum(dim=2) / torch.arange(1, 6).view(1, 1, 5, 1)
    torch.testing.assert_close(y, expect, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", ["standard", "sdpa", "sdpa-math"])
def test_attention_is_causal(name):
    fn = build_attention_fn(name)
    q, k, v = _qkv(T=37)
    y = fn(q, k, v)
    t = 20
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    q2[:, :, t:] += 5.0
    k2[:, :, t:] += 5.0
    v2[:, :, t:] -= 3.0
    y2 = fn(q2, k2, v2)
    torch.testing.assert_close(y2[:, :, :t], y[:, :, :t], atol=0, rtol=0)
    assert not torch.allclose(y2[:, :, t:], y[:, :, t:])


def test_unknown_attention_raises():
    with pytest.raises(ValueError):
        build_attention_fn("nope")


@pytest.mark.parametrize("attention", ["standard", "sdpa", "sdpa-math"])
def test_model_is_causal(attention):
    cfg = ODD
    torch.manual_seed(0)
    model = GPT(cfg, attention).eval()
    captured = []
    model.ln_f.register_forward_hook(lambda m, i, o: captured.append(o.detach()))
    tokens = _tokens(cfg, batch=1)
    t = 17
    changed = tokens.clone()
    changed[0, t] = (changed[0, t] + 1) % cfg.vocab_size
    with torch.no_grad():
        model(tokens)
        model(changed)
    a, b = captured
    torch.testing.assert_close(b[:, :t], a[:, :t], atol=0, rtol=0)
    assert not torch.allclose(b[:, t], a[:, t])


def test_model_attention_options_agree():
    cfg = ODD
    losses = []
    grads = []
    tokens = _tokens(cfg)
    for name in ("standard", "sdpa", "sdpa-math"):
        torch.manual_seed(3)
        model = GPT(cfg, name)
        loss = model(tokens)
        loss.backward()
        losses.append(loss.detach())
        grads.append({n: p.grad for n, p in model.named_parameters()})
    for loss, g in zip(losses[1:], grads[1:], strict=True):
        torch.testing.assert_close(loss, losses[0], atol=1e-5, rtol=1e-5)
        for n, grad in g.items():
            torch.testing.assert_close(grad, grads[0][n], atol=1e-5, rtol=1e-4, msg=n)


def _checkpointed(cfg, attention, policy):
    """The GPT with its blocks wrapped by the checkpointing ``policy``, as a run wraps them."""
    run = RunConfig(model=cfg, activation_checkpointing=CheckpointingConfig(name=policy))
    return wrap_blocks(GPT(cfg, attention), run)


def _loss_and_grads(cfg, policy, seed=7):
    torch.manual_seed(seed)
    model = _checkpointed(cfg, "sdpa", policy)
    model.train()
    loss = model(_tokens(cfg))
    loss.backward()
    # checkpoint_wrapper adds a path component to the parameter names; the state dict hides it
    unwrap = f".{_CHECKPOINT_WRAPPED_MODULE}"
    return loss.detach(), {n.replace(unwrap, ""): p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("cfg", [TINY, ODD], ids=lambda c: c.name)
def test_activation_checkpointing_same_loss_and_grads(cfg):
    loss0, g0 = _loss_and_grads(cfg, "none")
    loss1, g1 = _loss_and_grads(cfg, "full")
    torch.testing.assert_close(loss1, loss0, atol=1e-6, rtol=1e-6)
    assert g0.keys() == g1.keys()
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], atol=1e-6, rtol=1e-5, msg=n)


def test_activation_checkpointing_really_recomputes():
    # With AC on, each block's forward runs again in backward: more FLOPs per step.
    from torch.utils.flop_counter import FlopCounterMode

    totals = []
    for policy in ("none", "full"):
        torch.manual_seed(0)
        model = _checkpointed(ODD, "standard", policy).train()
        tokens = _tokens(ODD)
        with FlopCounterMode(display=False) as counter:
            model(tokens).backward()
        totals.append(counter.get_total_flops())
    without, with_ac = totals
    assert with_ac > without
    # the recomputed part is the blocks' forward (one third of their fwd+bwd), so the
    # ratio is below 4/3 (embedding/head are not recomputed) but well above 1
    assert 1.1 < with_ac / without <= 4 / 3 + 1e-9


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_same_seed_same_weights_different_seed_different():
    torch.manual_seed(11)
    a = _state(GPT(ODD))
    torch.manual_seed(11)
    b = _state(GPT(ODD))
    torch.manual_seed(12)
    c = _state(GPT(ODD))
    assert a.keys() == b.keys() == c.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=0, rtol=0)
    differing = [k for k in a if not torch.equal(a[k], c[k])]
    # every randomly initialised matrix differs (biases and LayerNorms are constant)
    assert "wte.weight" in differing and "wpe.weight" in differing
    assert all(k in differing for k in a if k.endswith(".weight") and a[k].dim() == 2)


def test_init_statistics():
    torch.manual_seed(0)
    model = GPT(TINY)
    assert model.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.h[0].attn.c_attn.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert torch.count_nonzero(model.h[0].attn.c_attn.bias) == 0


def test_build_model_seeds_from_config():
    cpu = torch.device("cpu")
    base = RunConfig(model=ODD, seed=5)
    a = _state(build_model(base, cpu))
    torch.manual_seed(999)  # global RNG state must not matter
    b = _state(build_model(base, cpu))
    c = _state(build_model(RunConfig(model=ODD, seed=6), cpu))
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=0, rtol=0)
    assert not torch.equal(a["wte.weight"], c["wte.weight"])
