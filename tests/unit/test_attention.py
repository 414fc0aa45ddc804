"""Attention options against one reference (CPU, fp32), block layouts, density and validation.

The reference is an explicit masked softmax, ``reference_attention``, with the token mask
built from the same block layout as the option under test (for the dense kernels, the
causal layout, whose token mask is the plain causal mask).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from helpers import validate

from flopsweep import blocksparse_kernels as bsp
from flopsweep.attention import BlockSparseConfig, KernelUnavailable, attention_density
from flopsweep.attention_kernels import (
    BlockSparseAttention,
    build_attention_fn,
    check_kernel,
    layout_of,
    reference_attention,
)
from flopsweep.config import AttentionConfig, ConfigError, ModelConfig, RunConfig

T, BS = 75, 16  # 5 blocks: the last one is partial (75 is not a multiple of 16)
LAYOUT_KW = {"window_blocks": 2, "global_blocks": 1, "random_blocks": 1, "stride_blocks": 2}


def _sparse(layout: str, **kw) -> BlockSparseConfig:
    return BlockSparseConfig(
        **{
            "name": "blocksparse",
            "layout": layout,
            "block_size": BS,
            "impl": "gather",
            "seed": 5,
            **LAYOUT_KW,
            **kw,
        }
    )


def _qkv(seed: int = 0, T: int = T) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 3, T, 16, generator=g) for _ in range(3)]


def _fwd_bwd(fn, q, k, v) -> list[torch.Tensor]:
    q, k, v = (t.clone().requires_grad_(True) for t in (q, k, v))
    y = fn(q, k, v)
    grad_out = torch.randn(y.shape, generator=torch.Generator().manual_seed(99))
    (y * grad_out).sum().backward()
    return [y.detach(), q.grad, k.grad, v.grad]


def _assert_match(got, want, label):
    for a, b, what in zip(got, want, ("y", "dq", "dk", "dv"), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=f"{label} {what}")


# ---------------------------------------------------------------- correctness vs the reference


@pytest.mark.parametrize("name", ["standard", "sdpa", "sdpa-math"])
def test_dense_options_match_reference_on_causal_layout(name):
    q, k, v = _qkv()
    mask = bsp.token_mask(bsp.block_layout(bsp.n_blocks(T, BS), layout="causal"), T, BS)
    assert torch.equal(mask, torch.ones(T, T, dtype=torch.bool).tril())
    want = _fwd_bwd(lambda a, b, c: reference_attention(a, b, c, mask), q, k, v)
    _assert_match(_fwd_bwd(build_attention_fn(name), q, k, v), want, name)


@pytest.mark.parametrize("layout", bsp.LAYOUTS)
def test_blocksparse_gather_matches_reference(layout):
    cfg = _sparse(layout)
    mask = bsp.token_mask(layout_of(cfg, T), T, BS)
    q, k, v = _qkv(seed=1)
    want = _fwd_bwd(lambda a, b, c: reference_attention(a, b, c, mask), q, k, v)
    _assert_match(_fwd_bwd(build_attention_fn(cfg), q, k, v), want, f"gather {layout}")


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("layout", bsp.LAYOUTS)
def test_flex_block_mask_matches_layout_and_reference_forward(layout):
    # FlexAttention has no CPU backward, but its eager forward checks the BlockMask we build.
    from torch.nn.attention.flex_attention import flex_attention

    cfg = _sparse(layout, block_size=128)
    seq = 600  # 5 blocks of 128, the last partial
    blocks = layout_of(cfg, seq)
    block_mask = bsp.flex_block_mask(blocks, seq, 128, "cpu")
    assert torch.equal(block_mask.to_dense()[0, 0].bool(), blocks)
    q, k, v = _qkv(seed=2, T=seq)
    with torch.no_grad():
        got = flex_attention(q, k, v, block_mask=block_mask)
    want = reference_attention(q, k, v, bsp.token_mask(blocks, seq, 128))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_blocksparse_causal_model_equals_standard_model():
    cfg = ModelConfig(name="odd", n_layer=2, n_embd=48, n_head=3, seq_len=45, vocab_size=61)
    from flopsweep.models.gpt2 import GPT

    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len + 1), generator=g)

    results = []
    for attention in ("standard", _sparse("causal")):
        torch.manual_seed(3)
        model = GPT(cfg, attention)
        loss = model(tokens)
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (loss0, g0), (loss1, g1) = results
    torch.testing.assert_close(loss1, loss0, atol=1e-5, rtol=1e-5)
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], atol=1e-5, rtol=1e-4, msg=n)


def test_gather_computes_only_the_layout_blocks():
    """The gathered matmuls scale with the kept blocks: local (2 of 8 blocks) vs causal."""
    from torch.utils.flop_counter import FlopCounterMode

    seq = 8 * BS
    q, k, v = _qkv(T=seq)
    totals = {}
    for layout in ("causal", "local"):
        with FlopCounterMode(display=False) as counter:
            build_attention_fn(_sparse(layout))(q, k, v)
        totals[layout] = counter.get_total_flops()
    # QK^T and AV: 2 * 2 * B * nh * hs * (query tokens x gathered key tokens) = rows x K blocks x BS
    per_key = 2 * 2 * 2 * 3 * 16 * seq * BS
    assert totals["causal"] == per_key * 8
    assert totals["local"] == per_key * 2


def test_blocksparse_impl_auto_takes_gather_on_cpu():
    fn = build_attention_fn(BlockSparseConfig(name="blocksparse"))
    assert isinstance(fn, BlockSparseAttention) and fn.impl(torch.device("cpu")) == "gather"
    assert fn.impl(torch.device("cuda")) == "flex"


# ---------------------------------------------------------------- layouts and density


@pytest.mark.parametrize("n", [1, 2, 5, 16, 64])
def test_causal_density_is_n_n_plus_1_over_2(n):
    layout = bsp.block_layout(n, layout="causal")
    assert bsp.density(layout) == n * (n + 1) / 2 / n**2


@pytest.mark.parametrize(("n", "w"), [(8, 2), (64, 18), (16, 4), (3, 5)])
def test_local_density(n, w):
    expect = sum(min(i + 1, w) for i in range(n)) / n**2
    assert bsp.density(bsp.block_layout(n, layout="local", window_blocks=w)) == expect


def test_strided_layout_by_hand():
    # chunks of 2 blocks: own chunk, plus block 1 and 3 (the last of each earlier chunk)
    got = bsp.block_layout(5, layout="strided", stride_blocks=2).int()
    want = torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 1, 1, 1, 0], [0, 1, 0, 1, 1]])
    assert torch.equal(got, want)


def test_bigbird_layout_count_and_seed():
    n, w, g, r = 12, 2, 1, 2
    a = bsp.block_layout(n, layout="bigbird", window_blocks=w, global_blocks=g, random_blocks=r, seed=7)
    base = bsp.block_layout(n, layout="bigbird", window_blocks=w, global_blocks=g, random_blocks=0)
    extra = [min(r, int((~base[i, :i]).sum())) for i in range(n)]
    assert int(a.sum()) == int(base.sum()) + sum(extra)
    assert bool((a | base).eq(a).all())  # the random blocks only add to the local and global ones
    assert torch.equal(
        a, bsp.block_layout(n, layout="bigbird", window_blocks=w, global_blocks=g, random_blocks=r, seed=7)
    )  # every rank builds the same
    assert not torch.equal(
        a, bsp.block_layout(n, layout="bigbird", window_blocks=w, global_blocks=g, random_blocks=r, seed=8)
    )
    assert base[:, 0].all() and int(base.sum()) == 1 + 2 * (n - 1) + (n - 2)  # window 2 + global column


@pytest.mark.parametrize("layout", bsp.LAYOUTS)
@pytest.mark.parametrize("n", [1, 7, 20])
def test_every_layout_is_causal_with_diagonal(layout, n):
    blocks = bsp.block_layout(n, layout=layout, window_blocks=1, stride_blocks=3, seed=1)
    assert blocks.dtype == torch.bool and blocks.shape == (n, n)
    assert blocks.diagonal().all()
    assert not blocks.triu(1).any()


def test_unknown_layout_raises():
    with pytest.raises(ValueError, match="layout"):
        bsp.block_layout(4, layout="diagonal")


def test_attention_density_of_options():
    assert attention_density(AttentionConfig(name="sdpa"), 2048) == 1.0
    assert attention_density(AttentionConfig(name="flex"), 2048) == 1.0
    assert attention_density(BlockSparseConfig(name="blocksparse"), 2048) == 136 / 256  # 16 blocks
    local = BlockSparseConfig(name="blocksparse", layout="local", window_blocks=18)
    assert attention_density(local, 8192) == pytest.approx(0.2439, abs=1e-4)  # the GPU sweep's ~25%


# ---------------------------------------------------------------- validation


def _cpu(attention: AttentionConfig, **kw) -> RunConfig:
    return dataclasses.replace(RunConfig(device="cpu"), attention=attention, **kw)


def _invalid(cfg: RunConfig, key: str) -> str:
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert info.value.key == key and "Fix:" in str(info.value)
    return str(info.value)


def test_validate_resolves_impl_seed_and_density():
    model = ModelConfig(seq_len=200)
    out = validate(
        _cpu(BlockSparseConfig(name="blocksparse", layout="bigbird", block_size=16), model=model, seed=4)
    ).attention
    assert (out.impl, out.seed) == ("gather", 4)
    expect = bsp.density(bsp.block_layout(13, layout="bigbird", seed=4))
    assert out.density == expect < 1.0
    again = validate(_cpu(out, model=model, seed=4)).attention  # idempotent
    assert again == out
    assert validate(_cpu(AttentionConfig(name="sdpa"))).attention.density == 1.0


def test_flex_on_cpu_is_invalid():
    assert "no backward pass on the CPU" in _invalid(_cpu(AttentionConfig(name="flex")), "attention")


def test_blocksparse_flex_on_cpu_is_invalid():
    msg = _invalid(_cpu(BlockSparseConfig(name="blocksparse", impl="flex")), "attention.impl")
    assert "impl=gather" in msg


def test_xformers_on_cpu_is_invalid():
    assert "CUDA" in _invalid(_cpu(AttentionConfig(name="xformers")), "attention")


def test_xformers_not_installed_is_invalid_on_cuda(monkeypatch):
    import importlib.util

    from flopsweep.attention import check_support

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="not installed") as info:
        check_support(
            AttentionConfig(name="xformers"), device="cuda", precision="bf16", run_seed=0, seq_len=128
        )
    assert info.value.key == "attention"


def test_blocksparse_flex_block_size_must_be_a_multiple_of_128():
    from flopsweep.attention import check_support

    kw = {"precision": "bf16", "run_seed": 0, "seq_len": 2048}
    with pytest.raises(ConfigError) as info:
        check_support(BlockSparseConfig(block_size=64, impl="flex"), device="cuda", **kw)
    assert info.value.key == "attention.block_size"
    ok = check_support(BlockSparseConfig(block_size=64), device="cpu", **kw)
    assert ok.impl == "gather"


@pytest.mark.parametrize(
    ("field", "value", "key"),
    [
        ("layout", "diagonal", "attention.layout"),
        ("impl", "triton", "attention.impl"),
        ("block_size", 0, "attention.block_size"),
        ("window_blocks", 0, "attention.window_blocks"),
        ("random_blocks", -1, "attention.random_blocks"),
        ("stride_blocks", 0, "attention.stride_blocks"),
        ("density", 0.5, "attention.density"),
        ("seed", -1, "attention.seed"),
        ("seed", 2**70, "attention.seed"),
        ("block_size", 4096, "attention.block_size"),  # longer than gpt-tiny's 128 tokens
    ],
)
def test_bad_blocksparse_values(field, value, key):
    attention = dataclasses.replace(BlockSparseConfig(name="blocksparse"), **{field: value})
    assert repr(value) in _invalid(_cpu(attention), key)


@pytest.mark.parametrize("key", ["impl", "layout", "window_blocks", "block_size"])
def test_blocksparse_keys_only_for_blocksparse(key):
    """A '+attention.KEY=...' override on a dense kernel names the option the key belongs to."""
    cfg = _cpu(AttentionConfig(name="sdpa"))
    setattr(cfg.attention, key, 1)  # what OmegaConf.to_object does with '+attention.KEY=1'
    assert "attention=blocksparse" in _invalid(cfg, f"attention.{key}")


# ---------------------------------------------------------------- availability at run time


def test_check_kernel_unavailable_sdpa_cudnn_on_cpu():
    # (validation rejects it first; the probe is what catches a CUDA kernel that cannot run)
    with pytest.raises(KernelUnavailable, match="attention=sdpa-cudnn cannot run on cpu with float32"):
        check_kernel(
            AttentionConfig(name="sdpa-cudnn"), head_dim=16, dtype=torch.float32, device=torch.device("cpu")
        )
    check_kernel(
        AttentionConfig(name="sdpa-math"), head_dim=16, dtype=torch.float32, device=torch.device("cpu")
    )  # runs: no error


def test_check_kernel_xformers_missing(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_xformers(name, *args, **kwargs):
        if name.startswith("xformers"):
            raise ImportError("No module named 'xformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_xformers)
    with pytest.raises(KernelUnavailable, match="xformers"):
        check_kernel(
            AttentionConfig(name="xformers"), head_dim=16, dtype=torch.float32, device=torch.device("cpu")
        )


def test_collect_maps_kernel_unavailable_to_invalid(tmp_path: Path):
    from flopsweep.outcome import collect

    error = {
        "type": "KernelUnavailable",
        "message": "attention=xformers cannot run",
        "phase": "init",
        "rank": 0,
        "traceback": None,
        "oom": False,
        "time": 1.0,
    }
    (tmp_path / "rank0_error.json").write_text(json.dumps(error))
    outcome = collect(tmp_path, {0: 1}, 1)
    assert outcome.status == "invalid" and outcome.error["message"] == "attention=xformers cannot run"
    error["type"] = "RuntimeError"
    (tmp_path / "rank0_error.json").write_text(json.dumps(error))
    assert collect(tmp_path, {0: 1}, 1).status == "error"


# ---------------------------------------------------------------- metrics


def _ranks(step_s: float) -> list[dict]:
    return [
        {
            "rank": 0,
            "device": "cpu",
            "step_times_s": [step_s] * 3,
            "losses": [6.0] * 4,
            "peak_cuda_allocated_bytes": None,
            "peak_cuda_reserved_bytes": None,
            "peak_host_rss_bytes": 1,
        }
    ]


def test_model_flops_count_only_the_blocks_computed():
    """Model and hardware FLOPs scale the attention term by the layout's density; eq. 3 stays dense."""
    from flopsweep.flops import flops_per_iteration
    from flopsweep.metrics import FLOPS_CONVENTION, compute_metrics
    from flopsweep.models.gpt2 import model_flops

    model = ModelConfig(n_layer=2, n_embd=64, n_head=4, seq_len=256, vocab_size=100)
    local = BlockSparseConfig(name="blocksparse", layout="local", block_size=32, window_blocks=2)
    sparse = validate(_cpu(local, model=model))
    dense = validate(_cpu(AttentionConfig(name="sdpa"), model=model))
    rho = sparse.attention.density
    assert rho == (1 + 2 * 7) / 64
    for cfg, density in ((sparse, rho), (dense, 1.0)):
        m = compute_metrics(cfg, _ranks(0.5))
        assert m["tflops_per_device"] == pytest.approx(flops_per_iteration(2, 64, 256, 100, 4) / 0.5e12)
        tokens = 4 * 256
        assert m["model_flops_per_iteration"] == model_flops(model, tokens, density)
        attention = 12 * 2 * 64 * 256 * tokens
        weights = 6 * tokens * (2 * 12 * 64 * 64 + 100 * 64)
        assert m["model_flops_per_iteration"] == pytest.approx(weights + attention * density, rel=1e-12)
        assert m["flops_convention"] == FLOPS_CONVENTION
    assert (
        compute_metrics(sparse, _ranks(0.5))["model_tflops_per_device"]
        < compute_metrics(dense, _ranks(0.5))["model_tflops_per_device"]
    )


# ---------------------------------------------------------------- the GPU sweeps


@pytest.mark.parametrize(
    ("sweep", "seq_len", "micro", "expect"),
    [
        ("blocksparse-2k", 2048, 8, {"causal": 136 / 256, "local": 58 / 256, "strided": 0.25}),
        ("blocksparse-8k", 8192, 2, {"causal": 2080 / 4096, "local": 999 / 4096}),
    ],
)
def test_gpu_sweeps_compose_with_their_densities(hydra_compose, sweep, seq_len, micro, expect):
    """The sweep files compose, and the local layout runs at about 25% density."""
    for layout, density in expect.items():
        cfg = hydra_compose([f"+sweep={sweep}", f"attention.layout={layout}"])
        m = cfg.model
        assert (m.name, m.seq_len, cfg.batch.micro_batch_size) == ("gpt-1.3b", seq_len, micro)
        assert cfg.attention.name == "blocksparse" and cfg.device == "cuda"
        assert attention_density(cfg.attention, seq_len) == pytest.approx(density, abs=1e-12)
    assert 0.2 < expect["local"] < 0.3


XFORMERS_REFUSAL = """No operator found for `memory_efficient_attention_forward` with inputs:
     query       : shape=(1, 128, 2, 64) (torch.bfloat16)
     key         : shape=(1, 128, 2, 64) (torch.bfloat16)
     value       : shape=(1, 128, 2, 64) (torch.bfloat16)
     attn_bias   : <class 'xformers.ops.fmha.attn_bias.LowerTriangularMask'>
     p           : 0.0
`fa3F@0.0.0` is not supported because:
    requires device with capability > (9, 0) but your GPU has capability (9, 0) (too old)
`fa2F@2.5.7-pt` is not supported because:
    xFormers wasn't build with CUDA support
`cutlassF-pt` is not supported because:
    xFormers wasn't build with CUDA support
"""


def test_a_kernel_refusal_keeps_every_operators_reasons_and_drops_the_inputs() -> None:
    """An unavailable kernel's invalid record keeps the library's reasons (issue 30, class 13):
    xformers lists why each operator was refused after its dump of the inputs."""
    from flopsweep.attention import REASONS_CHARS, kernel_refusal_reasons

    text = kernel_refusal_reasons(XFORMERS_REFUSAL)
    assert text.startswith("No operator found for `memory_efficient_attention_forward`; `fa3F@0.0.0`")
    assert "shape=" not in text and "\n" not in text
    assert "too old" in text and text.count("xFormers wasn't build with CUDA support") == 2
    assert kernel_refusal_reasons("one line only.") == "one line only."
    assert len(kernel_refusal_reasons("x" * 10_000)) == REASONS_CHARS


def test_the_hardware_rules_of_a_planned_gpu():
    """``attention.hardware_problem`` (``plan=true plan_gpu=``): flash and cuDNN need NVIDIA
    capability 8.0 (torch's ``sdp_utils.cpp``: sm80 to sm121), cuDNN an NVIDIA GPU; the memory-efficient
    kernel runs on a V100, and an AMD GPU's capability (its gfx architecture) is not held to NVIDIA's."""
    from flopsweep.attention import KERNELS, hardware_problem

    v100 = dict(capability=(7, 0), vendor="nvidia", gpu="V100 SXM2")
    mi300x = dict(capability=(9, 4), vendor="amd", gpu="MI300X")
    a100 = dict(capability=(8, 0), vendor="nvidia", gpu="A100")
    assert "capability 8.0 or newer" in hardware_problem("sdpa-flash", **v100)
    assert "the V100 SXM2 is 7.0" in hardware_problem("sdpa-cudnn", **v100)
    assert hardware_problem("sdpa-efficient", **v100) is None and hardware_problem("sdpa", **v100) is None
    assert "NVIDIA GPUs only" in hardware_problem("sdpa-cudnn", **mi300x)
    assert hardware_problem("sdpa-flash", **mi300x) is None
    assert all(hardware_problem(name, **a100) is None for name in KERNELS)


@pytest.mark.parametrize("layout", bsp.LAYOUTS)
def test_torch_free_row_counts_equal_the_layout(layout):
    """``blocksparse.row_counts`` (validation's and the metrics' density, no torch) counts the blocks
    of every row of ``block_layout`` (the kernels'), bigbird's random blocks included, so the density
    and the gather padding are the same numbers either way."""
    from flopsweep import blocksparse

    for n in (1, 2, 5, 13, 40):
        for w, g, r, s in ((1, 0, 0, 1), (2, 1, 1, 2), (4, 3, 5, 4), (7, 1, 2, 5)):
            kw = {"window_blocks": w, "global_blocks": g, "random_blocks": r, "stride_blocks": s}
            tensor = bsp.block_layout(n, layout=layout, seed=n, **kw)
            counts = blocksparse.row_counts(n, layout=layout, **kw)
            assert tensor.sum(1).tolist() == counts, (n, kw)
            assert blocksparse.counts_density(counts) == bsp.density(tensor)
