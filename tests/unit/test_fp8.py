"""fp8 conversion plan and torchao Float8Linear swap of flopsweep.fp8 (CPU, no GPU)."""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

from flopsweep import fp8
from flopsweep.config import ModelConfig
from flopsweep.models.gpt2 import GPT

BLOCK_LINEARS = ["attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"]


TINY_NAMES = [f"h.{i}.{n}" for i in range(2) for n in BLOCK_LINEARS]


NARROW = ModelConfig(name="narrow", n_layer=2, n_embd=24, n_head=4, seq_len=16, vocab_size=64)


def _tiny() -> GPT:
    torch.manual_seed(0)
    return GPT(ModelConfig(), "sdpa")


def _mixed() -> nn.Module:
    """One Linear of each outcome: converted, refused for shape, refused as LM head."""
    return nn.ModuleDict(
        {"ok": nn.Linear(32, 64), "odd": nn.Linear(32, 40), "lm_head": nn.Linear(64, 512, bias=False)}
    )


def test_recipes():
    assert fp8.RECIPES == {"fp8": "tensorwise", "fp8-rowwise": "rowwise"}


def test_plan_gpt_tiny_converts_every_block_linear():
    plan = fp8.conversion_plan(_tiny())
    assert plan == [(name, True, "") for name in TINY_NAMES]  # the tied LM head is no module


def test_plan_refuses_shapes_not_divisible_by_16():
    plan = fp8.conversion_plan(GPT(NARROW, "sdpa"))
    assert [name for name, _, _ in plan] == TINY_NAMES
    assert all(not ok and reason == "shape not divisible by 16" for _, ok, reason in plan)


def test_plan_mixed_reasons():
    assert fp8.conversion_plan(_mixed()) == [
        ("ok", True, ""),
        ("odd", False, "shape not divisible by 16"),
        ("lm_head", False, "LM head"),
    ]
    assert fp8.conversion_plan(_mixed(), exclude={"ok"})[0] == ("ok", False, "LM head")


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "fp8", "fp8-rowwise"])
def test_convert_gpt_tiny_swaps_block_linears(recipe):
    pytest.importorskip("torchao")
    model = _tiny()
    weights = {n: m.weight for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    converted = fp8.convert(model, recipe)
    assert converted == TINY_NAMES
    modules = dict(model.named_modules())
    for name in TINY_NAMES:
        assert type(modules[name]).__name__ == "Float8Linear"
        assert modules[name].weight is weights[name]  # master weight kept (fp32 here)
        assert modules[name].weight.dtype == torch.float32
    for name in ("wte", "wpe", "ln_f", "h.0.ln_1", "h.1.ln_2"):
        assert type(modules[name]).__name__ in ("Embedding", "LayerNorm")
    granularity = modules["h.0.mlp.c_fc"].config.cast_config_weight.scaling_granularity.name
    assert granularity == ("TENSORWISE" if fp8.RECIPES.get(recipe, recipe) == "tensorwise" else "AXISWISE")


def test_convert_mixed_leaves_refused_modules():
    pytest.importorskip("torchao")
    model = _mixed()
    assert fp8.convert(model, "tensorwise") == ["ok"]
    assert type(model["ok"]).__name__ == "Float8Linear"
    assert type(model["odd"]) is nn.Linear
    assert type(model["lm_head"]) is nn.Linear


def test_convert_narrow_converts_nothing():
    pytest.importorskip("torchao")
    model = GPT(NARROW, "sdpa")
    assert fp8.convert(model, "rowwise") == []
    assert not any(type(m).__name__ == "Float8Linear" for m in model.modules())


def test_convert_fsdp_all_gather_flag():
    pytest.importorskip("torchao")
    model = _tiny()
    fp8.convert(model, "tensorwise", fsdp_float8_all_gather=True)
    assert model.h[0].attn.c_attn.config.enable_fsdp_float8_all_gather
    fp8.precompute_scales(model)  # not FSDP-sharded: torchao finds no DTensor weight, returns
    with pytest.raises(ValueError, match="tensorwise"):
        fp8.convert(_tiny(), "rowwise", fsdp_float8_all_gather=True)
    with pytest.raises(ValueError, match="unknown fp8 recipe"):
        fp8.convert(_tiny(), "mxfp8")


def test_precompute_scales_noop_without_float8():
    fp8.precompute_scales(_tiny())


def test_converted_model_trains_a_step_on_cpu():
    """torch 2.13 CPU has a ``torch._scaled_mm`` CPU kernel, so Float8Linear runs here."""
    pytest.importorskip("torchao")
    model = _tiny()
    fp8.convert(model, "tensorwise")
    # 2 x 16 positions: _scaled_mm needs a multiple of 16 rows; its CPU kernel takes about 0.5 s per
    # matmul at the model's full 2 x 128 (18 s a step), a fifth of that here
    tokens = torch.randint(0, 512, (2, 17), generator=torch.Generator().manual_seed(1))
    loss = model(tokens)
    loss.backward()
    assert torch.isfinite(loss)
    assert model.h[0].mlp.c_fc.weight.grad is not None


def test_requirement_cpu_names_the_requirement():
    problem = fp8.requirement_problem("cpu", None)
    assert problem is not None and "compute capability 8.9" in problem and "cpu" in problem
    assert "\n" not in problem


def test_requirement_cuda_capability():
    problem = fp8.requirement_problem("cuda", (8, 0))
    assert problem is not None and "8.9" in problem and "sm_80" in problem
    assert fp8.requirement_problem("cuda", None) is not None


def test_requirement_cuda_hopper_accepted():
    pytest.importorskip("torchao")
    assert fp8.requirement_problem("cuda", (9, 0)) is None
    assert fp8.requirement_problem("cuda", (8, 9)) is None
    assert fp8.requirement_problem("cuda", (12, 0)) is None


def test_requirement_without_torchao(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchao", None)
    monkeypatch.setitem(sys.modules, "torchao.float8", None)
    problem = fp8.requirement_problem("cuda", (9, 0))
    assert problem is not None and "pip install -e '.[fp8]'" in problem
