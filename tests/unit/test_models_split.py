"""The model families' split: a torch-free shape module, a torch module built from the shared decoder
parts (``flopsweep.models.layers``), and the family record that loads the latter by import path."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from flopsweep import flops
from flopsweep.config import AttentionConfig
from flopsweep.models import MODELS, gpt2, layers, llama
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.models.llama import LlamaConfig

GPT_TINY = GPT2Config(n_layer=2, n_embd=64, n_head=4, seq_len=32, vocab_size=128)
LLAMA_TINY = LlamaConfig(n_layer=2, n_embd=64, n_head=4, n_kv_head=2, ffn_dim=96, seq_len=32, vocab_size=128)


@pytest.mark.parametrize("tied", [True, False])
def test_the_inventory_is_the_parameter_count(tied):
    """Each weight of the inventory exists in the built module: its sum is ``n_params`` (GPT-2's the
    published ``flops.n_params`` formula) and the module's own count."""
    llama_cfg = LlamaConfig(**{**LLAMA_TINY.__dict__, "tie_embeddings": tied})
    for shape, cfg in ((gpt2, GPT_TINY), (llama, llama_cfg)):
        w = shape.inventory(cfg)
        total = cfg.n_layer * (w["block_matmul"] + w["block_other"])
        total += w["embedding"] + w["positions"] + w["final_norm"] + w.get("head", 0)
        module = MODELS[cfg.arch].build(cfg, AttentionConfig(name="sdpa"))
        assert total == shape.n_params(cfg) == sum(p.numel() for p in module.parameters())
    assert gpt2.n_params(GPT_TINY) == flops.n_params(2, 64, 32, 128)


def test_a_family_loads_its_torch_module_by_path():
    """The family record holds the torch module's path and the plan's name; ``build``, ``blocks``,
    ``tied_parameters`` and the plan come from that module; the shape module's lazy names too."""
    fam = MODELS["llama"]
    assert fam.torch_module == "flopsweep.models.llama_nn" and fam.parallelize == "tensor_parallel_plan"
    assert fam.build is fam.torch().build is llama.build
    assert fam.tensor_parallel_plan is llama.TENSOR_PARALLEL_PLAN and fam.zero3_leaf_modules is None
    assert MODELS["hf"].tensor_parallel_plan is None and MODELS["hf"].zero3_leaf_modules is not None
    assert MODELS["gpt2"].n_active_params(GPT_TINY) == gpt2.n_params(GPT_TINY)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        gpt2.nothing  # noqa: B018


def test_both_families_are_built_from_the_shared_parts():
    """GPT-2 and Llama share the block, the attention wrapper, the MLPs, the initialised linears and
    the LM base; their submodule names stay the families' own (plans and checkpoints key on them)."""
    gpt = MODELS["gpt2"].build(GPT_TINY, AttentionConfig(name="sdpa"))
    lla = MODELS["llama"].build(LLAMA_TINY, AttentionConfig(name="sdpa"))
    for model, blocks, names in ((gpt, gpt.h, ("ln_1", "attn", "ln_2", "mlp")), (lla, lla.layers, None)):
        assert isinstance(model, layers.CausalLM) and list(model.block_list()) == list(blocks)
        assert all(isinstance(b, layers.PreNormBlock) for b in blocks)
        assert isinstance(blocks[0].NAMES and getattr(blocks[0], blocks[0].NAMES[1]), layers.SelfAttention)
        if names:
            assert [n for n, _ in blocks[0].named_children()] == list(names)
    assert isinstance(gpt.h[0].mlp, layers.GeluMLP) and isinstance(lla.layers[0].feed_forward, layers.SwiGLU)
    assert isinstance(lla.layers[0].attention_norm, nn.RMSNorm) and isinstance(gpt.h[0].ln_1, nn.LayerNorm)
    assert all(isinstance(m, layers.Linear) for m in gpt.modules() if isinstance(m, nn.Linear))
    assert lla.layers[0].attention.wq.bias is None and gpt.h[0].attn.c_attn.bias is not None


def test_the_loss_is_the_shared_fp32_cross_entropy():
    """``forward`` = embed, the blocks with ``block_args``, then the head's loss; the loss is
    ``layers.next_token_loss`` of the logits (fp32), for both families."""
    torch.manual_seed(0)
    tokens = torch.randint(0, 128, (2, 33))
    for cfg in (GPT_TINY, LLAMA_TINY):
        model = MODELS[cfg.arch].build(cfg, AttentionConfig(name="sdpa"))
        positions = torch.arange(32)
        x = model.embed(tokens[:, :-1], positions)
        args = model.block_args(positions)
        for block in model.block_list():
            x = block(x, *args)
        logits = model.logits(x)
        want = nn.functional.cross_entropy(logits.float().reshape(-1, 128), tokens[:, 1:].reshape(-1))
        assert torch.equal(model(tokens), want)
        assert torch.equal(layers.next_token_loss(logits, tokens[:, 1:]), want)


def test_norm_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="unknown norm 'batchnorm'"):
        layers.norm("batchnorm", 8)
