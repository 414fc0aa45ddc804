"""fp8 numerics on a GPU of compute capability >= 8.9
(``python -m pytest -m gpu tests/unit/test_fp8_gpu.py``).

The first-step loss of an fp8 model (torchao float8 training, tensorwise or rowwise) is within
1e-2 of the bf16 model's from the same seed and data: fp8 changes the arithmetic, not the model.
"""

from __future__ import annotations

import pytest
import torch

from flopsweep.config import AttentionConfig
from flopsweep.models.gpt2 import GPT, GPT2Config
from flopsweep.models.llama import Llama, LlamaConfig

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9),
        reason="needs a CUDA GPU of compute capability >= 8.9",
    ),
]

SHAPES = {
    "gpt": (GPT, GPT2Config(n_layer=4, n_embd=1024, n_head=16, seq_len=512, vocab_size=32768)),
    "llama": (
        Llama,
        LlamaConfig(
            n_layer=4, n_embd=1024, n_head=16, n_kv_head=4, ffn_dim=2816, seq_len=512, vocab_size=32768
        ),
    ),
}


def build_model(shape: str, device: str) -> torch.nn.Module:
    """The test's model of ``shape`` on ``device`` (``tests/unit/test_gpu_tests_build.py`` builds it on
    the meta device in CI, which has no GPU)."""
    cls, cfg = SHAPES[shape]
    with torch.device(device):
        return cls(cfg, AttentionConfig(name="sdpa"))


def _first_loss(shape: str, recipe: str | None) -> float:
    from flopsweep import fp8

    cfg = SHAPES[shape][1]
    torch.manual_seed(0)
    model = build_model(shape, "cuda")
    if recipe is not None:
        assert fp8.convert(model, recipe)  # every block linear converted
    tokens = torch.randint(
        0, cfg.vocab_size, (4, cfg.seq_len + 1), generator=torch.Generator().manual_seed(1)
    )
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(tokens.cuda())
    loss.backward()  # the backward of float8 linears runs too
    return loss.item()


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_fp8_first_loss_matches_bf16(shape: str, recipe: str) -> None:
    pytest.importorskip("torchao")
    assert _first_loss(shape, recipe) == pytest.approx(_first_loss(shape, None), abs=1e-2)
