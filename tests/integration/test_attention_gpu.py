"""Attention kernels on a CUDA GPU in bf16 against the fp32 reference on the same mask.

Run on the GPU machine: ``python -m pytest -m gpu tests/integration/test_attention_gpu.py``.

Tolerance: a bf16 kernel cannot match fp32 to 1e-5. Each kernel's largest error against
the fp32 reference (on the bf16 inputs upcast) must stay within twice the error of the
explicit reference itself run in bf16, plus 1e-3: the kernel may be as inexact as bf16
arithmetic makes the reference, but not a mask or a block off (that gives O(1) errors).
``blocksparse impl=gather`` gets four times (its bf16 scatter-add of dk and dv).
"""

from __future__ import annotations

import pytest
import torch

from flopsweep import blocksparse_kernels as bsp
from flopsweep.attention import BlockSparseConfig, KernelUnavailable
from flopsweep.attention_kernels import build_attention_fn, check_kernel, layout_of, reference_attention
from flopsweep.config import AttentionConfig, ModelConfig

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

B, NH, T, HS = 2, 4, 1000, 128  # 1000 is not a multiple of the 128-token block
DENSE = ["standard", "sdpa", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "flex"]
SPARSE_KW = {"window_blocks": 2, "global_blocks": 1, "random_blocks": 1, "stride_blocks": 2, "seed": 3}


@pytest.fixture(autouse=True, scope="module")
def _many_compiles():
    # Every layout is a new mask_mod, so a new compile of flex_attention; lift the
    # recompile limit so that the tests never run the unfused fallback.
    import torch._dynamo

    old = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 64
    yield
    torch._dynamo.config.recompile_limit = old


def _qkv(seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(B, NH, T, HS, device="cuda", generator=g).to(torch.bfloat16) for _ in range(3)]


def _fwd_bwd(fn, q, k, v, dtype) -> list[torch.Tensor]:
    q, k, v = (t.detach().to(dtype, copy=True).requires_grad_(True) for t in (q, k, v))
    y = fn(q, k, v)
    g = torch.Generator(device="cuda").manual_seed(7)
    grad_out = torch.randn(y.shape, device="cuda", generator=g).to(dtype)
    y.backward(grad_out)
    return [t.float() for t in (y.detach(), q.grad, k.grad, v.grad)]


def _check(fn, mask: torch.Tensor, label: str, seed: int = 0, factor: float = 2.0) -> None:
    q, k, v = _qkv(seed)

    def ref(a, b, c):
        return reference_attention(a, b, c, mask)

    exact = _fwd_bwd(ref, q, k, v, torch.float32)
    ref_bf16 = _fwd_bwd(ref, q, k, v, torch.bfloat16)
    got = _fwd_bwd(fn, q, k, v, torch.bfloat16)
    for what, e, r, g in zip(("y", "dq", "dk", "dv"), exact, ref_bf16, got, strict=True):
        bound = factor * (r - e).abs().max().item() + 1e-3
        err = (g - e).abs().max().item()
        assert err <= bound, f"{label} {what}: max error {err:.3g} > {bound:.3g}"


def _causal_mask() -> torch.Tensor:
    return torch.ones(T, T, dtype=torch.bool, device="cuda").tril()


@pytest.mark.parametrize("name", DENSE)
def test_dense_kernels_bf16(name):
    _check(build_attention_fn(name), _causal_mask(), name)


@pytest.mark.parametrize("impl", ["flex", "gather"])
@pytest.mark.parametrize("layout", bsp.LAYOUTS)
def test_blocksparse_bf16(layout, impl):
    cfg = BlockSparseConfig(name="blocksparse", layout=layout, impl=impl, **SPARSE_KW)
    blocks = layout_of(cfg, T).cuda()
    assert bsp.density(blocks) < 1.0
    # gather's backward scatter-adds the gradients of k and v from every query block that
    # used a key block, in bf16: one rounding per addition, hence a looser factor.
    _check(
        build_attention_fn(cfg),
        bsp.token_mask(blocks, T, cfg.block_size),
        f"{layout} {impl}",
        seed=1,
        factor=2.0 if impl == "flex" else 4.0,
    )


def test_flex_block_mask_is_built_once_per_seq_len():
    fn = build_attention_fn(BlockSparseConfig(name="blocksparse", layout="local", impl="flex"))
    q, k, v = _qkv()
    fn(q, k, v)
    mask = fn.flex.block_mask(T, q.device)
    fn(q, k, v)
    assert fn.flex.block_mask(T, q.device) is mask
    assert torch.equal(mask.to_dense()[0, 0].bool(), layout_of(fn.cfg, T).cuda())


def test_probe_accepts_bf16_and_rejects_flash_in_fp32():
    device = torch.device("cuda")
    for name in ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math"):
        check_kernel(AttentionConfig(name=name), head_dim=HS, dtype=torch.bfloat16, device=device)
    with pytest.raises(KernelUnavailable, match="sdpa-flash cannot run"):
        check_kernel(AttentionConfig(name="sdpa-flash"), head_dim=HS, dtype=torch.float32, device=device)


def test_xformers_runs_or_is_reported_unavailable():
    cfg = AttentionConfig(name="xformers")
    try:
        check_kernel(cfg, head_dim=HS, dtype=torch.bfloat16, device=torch.device("cuda"))
    except KernelUnavailable as exc:
        assert "xformers" in str(exc)
        pytest.skip(f"xformers unavailable (as DESIGN.md expects on the H200 image): {exc}")
    _check(build_attention_fn(cfg), _causal_mask(), "xformers")


AUTOCAST_MODEL = ModelConfig(name="small", n_layer=2, n_embd=256, n_head=2, seq_len=300, vocab_size=1000)
"""The GPT of :func:`test_model_trains_under_autocast` (its construction is checked on the CPU too:
tests/unit/test_gpu_tests_build.py)."""


def autocast_options(attention: str) -> list:
    """The dense reference and the kernel under test, as the GPT takes them: ``blocksparse`` with
    impl=flex (the GPU kernel, whose causal layout is dense), ``flex`` as it is."""
    if attention == "blocksparse":
        return ["sdpa", BlockSparseConfig(name="blocksparse", impl="flex")]
    return ["sdpa", AttentionConfig(name=attention)]


@pytest.mark.parametrize("attention", ["flex", "blocksparse"])
def test_model_trains_under_autocast(attention):
    """The kernels inside the GPT under bf16 autocast: the causal layout gives the dense loss."""
    from flopsweep.models.gpt2 import GPT

    cfg = AUTOCAST_MODEL
    tokens = torch.randint(
        0,
        cfg.vocab_size,
        (2, cfg.seq_len + 1),
        device="cuda",
        generator=torch.Generator(device="cuda").manual_seed(0),
    )
    losses = []
    for option in autocast_options(attention):
        torch.manual_seed(0)
        model = GPT(cfg, option).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(tokens)
        loss.backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
        losses.append(loss.item())
    assert losses[1] == pytest.approx(losses[0], abs=2e-2)
