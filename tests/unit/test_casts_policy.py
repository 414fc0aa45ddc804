"""``activation_checkpointing=casts`` (issue 45): its facts in the registry, the memory estimate without the
blocks' autocast copies, its hardware FLOPs (no matmul recomputed: HFU equals MFU) and the rule that
refuses it where autocast keeps no copies. Its counts on the CPU:
tests/integration/test_casts_checkpointing.py."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep import checkpointing, metrics
from flopsweep.config import BackendConfig, CheckpointingConfig, ConfigError, RunConfig
from flopsweep.layout import Layout
from flopsweep.memory import estimate
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.plan import validate

H, L, NH, S, V = 2048, 24, 16, 2048, 50304
GPT_13B = GPT2Config(name="gpt-1.3b", n_layer=L, n_embd=H, n_head=NH, seq_len=S, vocab_size=V)
P = 1_315_819_520
"""gpt-1.3b's parameters (tests/unit/test_memory.py)."""


def _cfg(policy: str, compile_: bool = True) -> RunConfig:
    cfg = dataclasses.replace(
        RunConfig(),
        model=GPT_13B,
        backend=BackendConfig(name="single"),
        compile=compile_,
        activation_checkpointing=CheckpointingConfig(name=policy),
    )
    cfg.batch.micro_batch_size = 8
    return cfg


def test_casts_recomputes_no_matmul_and_keeps_what_none_keeps() -> None:
    casts, none = checkpointing.POLICIES["casts"], checkpointing.POLICIES["none"]
    assert casts.recompute(True) == casts.recompute(False) == "none"
    assert not casts.recomputes_forward and casts.recasts_weights and not none.recasts_weights
    assert casts.activations is none.activations and casts.forward_end is None
    for compile_ in (False, True):
        cfg = _cfg("casts", compile_)
        tokens = 8 * S
        assert metrics.hardware_flops(cfg, tokens, 1.0) == metrics.hardware_flops(
            _cfg("none", compile_), tokens, 1.0
        )


@pytest.mark.parametrize("compile_", [False, True], ids=["eager", "compiled"])
def test_casts_drops_the_blocks_autocast_copies_and_keeps_the_heads(compile_: bool) -> None:
    """``none`` keeps ``2 P`` of bf16 copies; ``casts`` the head's ``2 V h`` only, and the same activations.
    Eager, ``none``'s autocast cache holds every copy at the end of forward; ``casts`` turns it off in its
    blocks."""
    none, casts = estimate(_cfg("none", compile_), Layout()), estimate(_cfg("casts", compile_), Layout())
    assert none.model_states == 12 * P + 2 * P
    assert casts.model_states == 12 * P + 2 * V * H
    assert casts.activations == none.activations and casts.logits == none.logits
    assert casts.forward_copies == 0
    assert casts.total < none.total


@pytest.mark.parametrize(
    "overrides, says",
    [
        (["backend=fsdp"], "backend=fsdp keeps none"),
        (["backend=zero3"], "backend=deepspeed keeps none"),
        (["precision=fp32"], "precision=fp32 casts nothing"),
        (["precision=fp8"], "torchao's float8 Linears cast the blocks' weights themselves"),
        (["precision=fp8-rowwise"], "torchao's float8 Linears cast the blocks' weights themselves"),
    ],
)
def test_casts_without_autocast_copies_is_refused(hydra_compose, overrides: list[str], says: str) -> None:
    cfg = hydra_compose(["activation_checkpointing=casts", *overrides])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    message = str(err.value)
    assert err.value.key == "activation_checkpointing" and err.value.value == "casts"
    assert message.startswith("Invalid config: activation_checkpointing='casts': ") and says in message
    assert "Fix: set activation_checkpointing=none" in message and "\n" not in message


@pytest.mark.parametrize("backend", ["single", "ddp"])
def test_casts_under_autocast_over_fp32_weights_passes(hydra_compose, backend: str) -> None:
    cfg = hydra_compose(["activation_checkpointing=casts", f"backend={backend}", "precision=bf16"])
    assert cfg.activation_checkpointing.name == "casts" and validate(cfg) is cfg
