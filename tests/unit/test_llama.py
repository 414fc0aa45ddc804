"""The Llama-3 family of flopsweep.models.llama: shapes, parameter counts, FLOPs, GQA, RoPE (CPU)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch
import yaml
from helpers import cpu_sdpa_flops
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    _CHECKPOINT_WRAPPED_MODULE,
    CheckpointWrapper,
)
from torch.utils.checkpoint import set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode

from flopsweep.backends import wrap_blocks
from flopsweep.checkpointing import recompute_mode
from flopsweep.config import AttentionConfig, CheckpointingConfig, ConfigError, RunConfig
from flopsweep.metrics import hardware_flops
from flopsweep.models import MODELS, llama
from flopsweep.models.llama import LlamaConfig
from flopsweep.options import EveryNConfig

CONF = Path(__file__).resolve().parents[2] / "conf" / "model"
SIZES = ("llama-tiny", "llama3.2-1b", "llama3.2-3b", "llama3.1-8b", "llama3.1-70b")
# The Llama 3 model cards' counts (Hugging Face safetensors metadata).
MODEL_CARD_PARAMS = {
    "llama3.2-1b": 1_235_814_400,
    "llama3.2-3b": 3_212_749_824,
    "llama3.1-8b": 8_030_261_248,
    "llama3.1-70b": 70_553_706_496,
}


def _size(name: str, **overrides) -> LlamaConfig:
    """The config of ``conf/model/<name>.yaml`` (its keys over LlamaConfig's defaults)."""
    doc = yaml.safe_load((CONF / f"{name}.yaml").read_text())
    assert doc.pop("defaults") == ["/schema/model/base_llama@_here_", "_self_"]
    return dataclasses.replace(LlamaConfig(**doc), **overrides)


def _tokens(cfg: LlamaConfig, batch: int = 2, seed: int = 123) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len + 1), generator=g)


def _build(cfg: LlamaConfig, attention: str = "sdpa", checkpointing: str = "none") -> llama.Llama:
    """``llama.build`` (the kernel gets k/v with ``n_kv_head`` heads, unrepeated: GQA), then the
    blocks wrapped by the checkpointing policy as a run wraps them (``backends.wrap_blocks``)."""
    model = llama.build(cfg, AttentionConfig(name=attention))
    return wrap_blocks(model, _run(cfg, checkpointing))


def _run(cfg: LlamaConfig, checkpointing: str) -> RunConfig:
    return RunConfig(model=cfg, activation_checkpointing=CheckpointingConfig(name=checkpointing))


# ---- shapes and parameter counts ----------------------------------------------------------------


def test_defaults_are_llama_tiny_and_family_is_registered():
    assert _size("llama-tiny") == LlamaConfig()
    assert MODELS["llama"].config is LlamaConfig
    assert MODELS["llama"].eq3_flops(LlamaConfig(), 8, True) is None


@pytest.mark.parametrize("name", SIZES)
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_n_params_matches_module(name, tied):
    cfg = _size(name, tie_embeddings=tied)
    llama.check(cfg)
    with torch.device("meta"):
        model = llama.build(cfg, AttentionConfig(name="sdpa"))
    assert sum(p.numel() for p in model.parameters()) == llama.n_params(cfg)
    assert llama.info(cfg)["n_params"] == llama.n_params(cfg)
    assert (model.output is None) == tied
    assert llama.tied_parameters(model) == ([model.tok_embeddings.weight] if tied else [])
    assert len(llama.blocks(model)) == cfg.n_layer


@pytest.mark.parametrize("name", sorted(MODEL_CARD_PARAMS))
def test_n_params_of_the_model_cards(name):
    assert llama.n_params(_size(name)) == MODEL_CARD_PARAMS[name]


def test_info_has_every_key():
    cfg = _size("llama3.1-8b")
    info = llama.info(cfg)
    for key in ("name", "arch", "n_layer", "n_embd", "n_head", "n_kv_head", "ffn_dim", "seq_len"):
        assert info[key] == getattr(cfg, key)
    assert info["arch"] == "llama" and info["tie_embeddings"] is False and info["vocab_size"] == 128256


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"n_layer": 0}, "model.n_layer"),
        ({"ffn_dim": -1}, "model.ffn_dim"),
        ({"n_kv_head": 0}, "model.n_kv_head"),
        ({"n_embd": 130}, "model.n_embd"),  # 130 / 4 heads
        ({"n_kv_head": 3, "n_head": 4}, "model.n_kv_head"),
        # head dim 3 is odd: the family cannot know the key set, n_embd's fix (docs/reliability-11.md #781)
        ({"n_embd": 12, "n_head": 4, "n_kv_head": 1}, "model.n_embd"),
        ({"rope_theta": 0.0}, "model.rope_theta"),
    ],
)
def test_check_rejects(overrides, key):
    with pytest.raises(ConfigError) as err:
        llama.check(LlamaConfig(**overrides))
    assert err.value.key == key


# ---- FLOPs against FlopCounterMode --------------------------------------------------------------


def _counted_flops(model: llama.Llama, tokens: torch.Tensor, recompute: str) -> int:
    model.train()
    with set_checkpoint_early_stop(recompute != "full"), FlopCounterMode(display=False) as counter:
        model(tokens).backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("name", ["llama3.2-1b", "llama3.1-8b"])
@pytest.mark.parametrize("recompute", ["none", "early_stop", "full"])
def test_flops_match_flop_counter_on_meta(name, recompute):
    cfg = _size(name, seq_len=256)
    with torch.device("meta"):
        model = _build(cfg, "sdpa", "none" if recompute == "none" else "full")
        tokens = torch.randint(0, cfg.vocab_size, (1, cfg.seq_len + 1))
    counted = _counted_flops(model, tokens, recompute)
    expected = llama.hardware_flops(cfg, cfg.seq_len, 1.0, recompute)
    assert counted == pytest.approx(expected, rel=5e-3)
    if recompute == "none":
        assert llama.model_flops(cfg, cfg.seq_len) == expected


@pytest.mark.parametrize("recompute", ["none", "early_stop", "full"])
def test_flops_match_flop_counter_on_cpu(recompute):
    cfg = LlamaConfig()
    torch.manual_seed(0)
    policy = "none" if recompute == "none" else "full"
    model = _build(cfg, "standard", policy)
    tokens = _tokens(cfg, batch=2)
    # the mode the policy names for eager and compiled blocks alike (early_stop); full: the count records
    # before session 30 made of a compiled block (flopsweep.recompute_read)
    for compiled in (False, True):
        run = dataclasses.replace(_run(cfg, policy), compile=compiled)
        assert recompute_mode(run) == ("none" if recompute == "none" else "early_stop")
    counted = _counted_flops(model, tokens, recompute)
    assert counted == pytest.approx(
        llama.hardware_flops(cfg, tokens[:, 1:].numel(), 1.0, recompute), rel=5e-3
    )


def _policy_run(cfg: LlamaConfig, policy: CheckpointingConfig) -> RunConfig:
    return RunConfig(model=cfg, attention=AttentionConfig(name="sdpa"), activation_checkpointing=policy)


@pytest.mark.parametrize(
    "policy",
    [
        CheckpointingConfig(name="selective"),
        EveryNConfig(every=2),
        EveryNConfig(every=3),
        EveryNConfig(every=1),
    ],
    ids=lambda p: f"{p.name}{getattr(p, 'every', '')}",
)
def test_policy_flops_match_flop_counter_on_cpu(policy):
    """The run's hardware FLOPs (``metrics.hardware_flops``: the policy's mode on the share of blocks
    it wraps) against FlopCounterMode over one real step of the model ``wrap_blocks`` made: SDPA's CPU
    kernel (whose output ``selective`` saves), eager blocks with non-reentrant checkpoint's early stop."""
    cfg = LlamaConfig(n_layer=6)
    run = _policy_run(cfg, policy)
    torch.manual_seed(0)
    model = wrap_blocks(llama.build(cfg, run.attention), run).train()
    tokens = _tokens(cfg, batch=2)
    with FlopCounterMode(display=False, custom_mapping=cpu_sdpa_flops()) as counter:
        model(tokens).backward()
    expected = hardware_flops(run, tokens[:, 1:].numel(), 1.0)
    assert counter.get_total_flops() == pytest.approx(expected, rel=5e-3)
    assert expected > llama.model_flops(cfg, tokens[:, 1:].numel())  # something is recomputed


def test_selective_recomputes_wk_wo_w3():
    # selective recomputes the even matmuls (wk, wo, w3) and no attention: 2 T (h h_kv + h h_q + h f)
    cfg = LlamaConfig()
    T, h, kv = 1000, cfg.n_embd, cfg.n_kv_head * (cfg.n_embd // cfg.n_head)
    extra = llama.hardware_flops(cfg, T, 1.0, "selective") - llama.model_flops(cfg, T)
    assert extra == cfg.n_layer * 2 * T * (h * kv + h * h + h * cfg.ffn_dim)


def test_early_stop_skips_only_w2():
    # The three recompute modes differ by exactly w2's forward, 2 T h f per block.
    cfg = LlamaConfig()
    T = 1000
    full, early = (llama.hardware_flops(cfg, T, 1.0, r) for r in ("full", "early_stop"))
    assert full - early == cfg.n_layer * 2 * T * cfg.n_embd * cfg.ffn_dim
    with pytest.raises(ValueError):
        llama.hardware_flops(cfg, T, 1.0, "sometimes")


# ---- the model's numbers ------------------------------------------------------------------------


def _rope_reference(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Channels 2j and 2j + 1 at position t turned by t * theta^(-2j/hd), one pair at a time.

    ``x``: ``(B, nh, T, hd)``.
    """
    out = x.clone().double()
    hd = x.size(-1)
    for t in range(x.size(-2)):
        for j in range(hd // 2):
            angle = t * theta ** (-2 * j / hd)
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[..., t, 2 * j].double(), x[..., t, 2 * j + 1].double()
            out[..., t, 2 * j] = a * c - b * s
            out[..., t, 2 * j + 1] = a * s + b * c
    return out.to(x.dtype)


def _rotary(x: torch.Tensor, theta: float) -> torch.Tensor:
    """The model's RoPE on ``(B, nh, T, hd)`` (it takes ``(B, T, nh, hd)``)."""
    freqs = llama.RotaryEmbedding(x.size(-1), theta)(torch.arange(x.size(-2), device=x.device))
    return llama.apply_rotary(x.transpose(1, 2), freqs).transpose(1, 2)


def test_rope_matches_pairwise_rotation():
    x = torch.randn(2, 3, 17, 8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(_rotary(x, 10000.0), _rope_reference(x, 10000.0))


def test_rope_scores_depend_only_on_relative_position():
    T, hd = 40, 16
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(hd, generator=g), torch.randn(hd, generator=g)
    rq = _rotary(q.expand(1, 1, T, hd), 500000.0)[0, 0]
    rk = _rotary(k.expand(1, 1, T, hd), 500000.0)[0, 0]
    scores = rq @ rk.T  # scores[t, u] = <R_t q, R_u k>
    for offset in (-7, 0, 5, 20):
        diagonal = torch.diagonal(scores, offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(torch.diagonal(scores, 0)[:1], torch.diagonal(scores, 5)[:1])


def _reference_forward(model: llama.Llama, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama 3 written out with the model's weights: k/v heads repeated, explicit softmax.

    Returns the final hidden states (after the last RMSNorm) and the mean loss.
    """
    cfg = model.cfg
    idx, targets = tokens[:, :-1], tokens[:, 1:]
    B, T = idx.shape
    nh, nkv, hd = cfg.n_head, cfg.n_kv_head, cfg.n_embd // cfg.n_head

    def rms(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.norm_eps) * weight

    def heads(x, n):
        return x.view(B, T, n, hd).transpose(1, 2)

    x = model.tok_embeddings.weight[idx]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for block in model.layers:
        a, f = block.attention, block.feed_forward
        xn = rms(x, block.attention_norm.weight)
        q = _rope_reference(heads(xn @ a.wq.weight.T, nh), cfg.rope_theta)
        k = _rope_reference(heads(xn @ a.wk.weight.T, nkv), cfg.rope_theta)
        v = heads(xn @ a.wv.weight.T, nkv)
        k = torch.stack([k[:, i // (nh // nkv)] for i in range(nh)], dim=1)  # query head i -> kv head
        v = torch.stack([v[:, i // (nh // nkv)] for i in range(nh)], dim=1)
        scores = (q @ k.transpose(-1, -2) / math.sqrt(hd)).masked_fill(~causal, float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, nh * hd)
        x = x + y @ a.wo.weight.T
        xn = rms(x, block.ffn_norm.weight)
        gate, up = xn @ f.w1.weight.T, xn @ f.w3.weight.T
        x = x + (gate * torch.sigmoid(gate) * up) @ f.w2.weight.T
    x = rms(x, model.norm.weight)
    head = model.tok_embeddings.weight if model.output is None else model.output.weight
    logits = x @ head.T
    return x, torch.nn.functional.cross_entropy(logits.view(-1, cfg.vocab_size), targets.reshape(-1))


@pytest.mark.parametrize("n_kv_head", [1, 2, 4])
@pytest.mark.parametrize("attention", ["standard", "sdpa"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_gqa_forward_matches_reference(n_kv_head, attention, tied):
    cfg = LlamaConfig(
        n_embd=64, n_head=4, n_kv_head=n_kv_head, ffn_dim=96, seq_len=24, vocab_size=97, tie_embeddings=tied
    )
    torch.manual_seed(0)
    model = _build(cfg, attention).eval()
    final = []
    model.norm.register_forward_hook(lambda m, i, o: final.append(o.detach()))
    tokens = _tokens(cfg)
    with torch.no_grad():
        loss = model(tokens)
        ref_x, ref_loss = _reference_forward(model, tokens)
    torch.testing.assert_close(final[0], ref_x, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    assert model.layers[0].attention.wk.weight.shape == (n_kv_head * 16, 64)


def test_initial_loss_near_ln_vocab_and_causal():
    cfg = LlamaConfig()
    torch.manual_seed(0)
    model = _build(cfg).eval()
    final = []
    model.norm.register_forward_hook(lambda m, i, o: final.append(o.detach()))
    tokens = _tokens(cfg, batch=1)
    changed = tokens.clone()
    t = 50
    changed[0, t] = (changed[0, t] + 1) % cfg.vocab_size
    with torch.no_grad():
        loss = model(tokens)
        model(changed)
    assert loss.dtype == torch.float32 and loss.dim() == 0
    assert abs(loss.item() - math.log(cfg.vocab_size)) < 0.5
    torch.testing.assert_close(final[1][:, :t], final[0][:, :t], atol=0, rtol=0)
    assert not torch.allclose(final[1][:, t], final[0][:, t])


def test_activation_checkpointing_same_loss_and_grads():
    cfg = LlamaConfig()
    results = []
    for policy in ("none", "full"):
        torch.manual_seed(7)
        model = _build(cfg, "sdpa", policy).train()
        loss = model(_tokens(cfg))
        loss.backward()
        unwrap = f".{_CHECKPOINT_WRAPPED_MODULE}"
        grads = {n.replace(unwrap, ""): p.grad.clone() for n, p in model.named_parameters()}
        results.append((loss.detach(), grads))
    assert isinstance(llama.blocks(model)[0], CheckpointWrapper)  # the wrap ran
    (loss0, g0), (loss1, g1) = results
    torch.testing.assert_close(loss1, loss0, atol=1e-6, rtol=1e-6)
    assert g0.keys() == g1.keys()
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], atol=1e-6, rtol=1e-5, msg=n)


def test_init_is_in_reset_parameters():
    # Re-running every leaf's reset_parameters from the same seed gives the construction's
    # weights: what deepspeed.zero.Init relies on. Norm weights start at 1, matrices N(0, 0.02).
    cfg = LlamaConfig(tie_embeddings=False)
    torch.manual_seed(5)
    model = _build(cfg)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(5)
    for module in model.modules():
        if hasattr(module, "reset_parameters") and not list(module.children()):
            module.reset_parameters()
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k], atol=0, rtol=0, msg=k)
    assert torch.equal(model.norm.weight, torch.ones(cfg.n_embd))
    assert abs(model.layers[0].feed_forward.w1.weight.std().item() - 0.02) < 0.002
    assert not list(model.buffers())
