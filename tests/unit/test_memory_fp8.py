"""The memory estimate under fp8 (torchao's float8 Linears, ``precision=fp8`` and ``fp8-rowwise``) and
the comparison's correction for the layer probe's ZeRO-3 copies (``benchmarks/memory_estimate.py``):
each term's arithmetic, against the bf16 estimate of the same set-up."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from flopsweep.activation_memory import bytes_per_token
from flopsweep.backends import DeepSpeedConfig
from flopsweep.config import BackendConfig, PrecisionConfig, RunConfig
from flopsweep.fp8 import fp8_linear_elements
from flopsweep.layout import Layout
from flopsweep.memory import autocast_cached, estimate
from flopsweep.models import family
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.models.llama import LlamaConfig

LLAMA_1B = LlamaConfig(
    name="llama3.2-1b", n_layer=16, n_embd=2048, n_head=32, n_kv_head=8, ffn_dim=8192, seq_len=2048,
    vocab_size=128256,
)  # fmt: skip
GPT_13B = GPT2Config(name="gpt-1.3b", n_layer=24, n_embd=2048, n_head=16, seq_len=2048, vocab_size=50304)
LLAMA_LINEARS = 2 * 2048 * 2048 + 2 * 2048 * 512 + 3 * 2048 * 8192
"""One Llama 3.2 1B block's converted weights: wq, wo (h x h), wk, wv (h x kv), w1, w3, w2 (h x ffn)."""


def _cfg(model, precision: str, *, compile: bool = False, backend=None, ac: str = "none") -> RunConfig:
    cfg = dataclasses.replace(
        RunConfig(),
        model=model,
        precision=PrecisionConfig(name=precision),
        backend=backend or BackendConfig(name="single"),
        compile=compile,
        device="cuda",
    )
    cfg.batch.micro_batch_size = 8
    if ac != "none":
        from flopsweep.checkpointing import CheckpointingConfig

        cfg = dataclasses.replace(cfg, activation_checkpointing=CheckpointingConfig(name=ac))
    return cfg


def test_the_families_count_the_linears_torchao_converts() -> None:
    """Llama: seven matrices per block; GPT: ``12 h^2``; a dimension not divisible by 16 is not converted."""
    llama = family(LLAMA_1B).memory(LLAMA_1B)
    assert llama["fp8_linear_params"] == LLAMA_LINEARS == 60_817_408
    assert llama["fp8_compiled_inputs"] == 2 * 2048 + 8192
    gpt = family(GPT_13B).memory(GPT_13B)
    assert gpt["fp8_linear_params"] == 12 * 2048**2 and gpt["fp8_compiled_inputs"] == 6 * 2048
    assert fp8_linear_elements((16, 32), (24, 32), (32, 40)) == 16 * 32


@pytest.mark.parametrize("precision", ["fp8", "fp8-rowwise"])
def test_fp8_keeps_no_autocast_copy_of_the_converted_weights(precision) -> None:
    """``single`` eager: the start of backward is bf16's less ``2 B`` per converted weight (Llama 3.2 1B:
    1.81 GiB, as measured on the H200); the activations and the step are bf16's."""
    bf16, fp8 = estimate(_cfg(LLAMA_1B, "bf16"), Layout()), estimate(_cfg(LLAMA_1B, precision), Layout())
    assert bf16.model_states - fp8.model_states == 2 * 16 * LLAMA_LINEARS
    assert (bf16.model_states - fp8.model_states) / 2**30 == pytest.approx(1.81, abs=0.01)
    assert (fp8.activations, fp8.logits, fp8.step_states) == (bf16.activations, bf16.logits, bf16.step_states)
    n = family(LLAMA_1B).n_params(LLAMA_1B)
    assert autocast_cached(_cfg(LLAMA_1B, precision), Layout()) == n - 16 * LLAMA_LINEARS  # the tied head's


def test_under_full_checkpointing_fp8_changes_no_autocast_copy() -> None:
    """Wrapped blocks keep no copies in bf16 either: nothing to take away, never below 0."""
    assert autocast_cached(_cfg(LLAMA_1B, "fp8", ac="full"), Layout()) == 0


@pytest.mark.parametrize("model", [LLAMA_1B, GPT_13B], ids=["llama", "gpt"])
def test_compiled_fp8_keeps_no_bf16_copy_of_the_float8_matmuls_inputs(model) -> None:
    """Compiled, per token and layer ``2 (2h + ffn)`` bytes fewer than compiled bf16; eager fp8 keeps what
    eager bf16 keeps (torchao saves the bf16 input)."""
    ffn = getattr(model, "ffn_dim", 4 * model.n_embd)
    _, bf16 = bytes_per_token(_cfg(model, "bf16", compile=True))
    for precision in ("fp8", "fp8-rowwise"):
        _, fp8 = bytes_per_token(_cfg(model, precision, compile=True))
        assert bf16 - fp8 == 2 * (2 * model.n_embd + ffn)
        assert bytes_per_token(_cfg(model, precision)) == bytes_per_token(_cfg(model, "bf16"))


def test_fsdp2_fp8_has_no_autocast_copies_to_take_away() -> None:
    """FSDP2 casts the parameters itself (no autocast cache): eager fp8 is estimated as bf16."""
    from flopsweep.backends import FSDPConfig

    fsdp = FSDPConfig()
    assert estimate(_cfg(LLAMA_1B, "fp8", backend=fsdp), Layout()) == dataclasses.replace(
        estimate(_cfg(LLAMA_1B, "bf16", backend=fsdp), Layout()),
        method=estimate(_cfg(LLAMA_1B, "fp8", backend=fsdp), Layout()).method,
    )


def _memory_estimate():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import memory_estimate

    return memory_estimate


def test_a_zero3_record_made_with_the_layer_probe_before_the_fix_held_its_copies() -> None:
    """16 B per parameter of the probe's 1- and 2-block copies (Llama 3.2 1B: 10.55 GiB, the measured gap),
    for ZeRO-3 records started before the fix only."""
    me = _memory_estimate()
    zero3 = _cfg(LLAMA_1B, "bf16", backend=DeepSpeedConfig(zero_stage=3))
    probed = {"predict": {"layer_probe": True}}
    before, after = "2026-12-04T16:02:53+00:00", me.PROBE_FREED_SINCE
    copies = sum(family(LLAMA_1B).n_params(dataclasses.replace(LLAMA_1B, n_layer=n)) for n in (1, 2))
    assert me.probe_copies_of_its_day(probed, zero3, Layout(), before) == 16 * copies
    assert 16 * copies / 2**30 == pytest.approx(10.55, abs=0.01)
    assert me.probe_copies_of_its_day(probed, zero3, Layout(dp_shard=2), before) == 8 * copies
    assert me.probe_copies_of_its_day(probed, zero3, Layout(), after) == 0
    assert me.probe_copies_of_its_day({"predict": {"layer_probe": False}}, zero3, Layout(), before) == 0
    zero2 = _cfg(LLAMA_1B, "bf16", backend=DeepSpeedConfig(zero_stage=2))
    assert me.probe_copies_of_its_day(probed, zero2, Layout(), before) == 0


def test_a_record_that_says_how_its_copies_were_released_is_dated_by_that_key() -> None:
    """``metrics.predicted.layer_probe.released`` (``layer_probe.RELEASED``) says the copies went, whatever
    the start time; a record without it is dated: under ``full`` checkpointing by the later fix
    (``RECOMPUTED_FREED_SINCE``: the copies' recomputed submodules stayed on DeepSpeed's stack until
    then); a value the script does not know is refused, not read as freed."""
    from flopsweep.checkpointing import CheckpointingConfig
    from flopsweep.layer_probe import RELEASED

    me = _memory_estimate()
    full = dataclasses.replace(
        _cfg(LLAMA_1B, "bf16", backend=DeepSpeedConfig(zero_stage=3)),
        activation_checkpointing=CheckpointingConfig(name="full"),
    )
    probed = {"predict": {"layer_probe": True}}
    between = me.PROBE_FREED_SINCE  # the root was freed by then, a recomputed block's Linear not yet
    copies = sum(family(LLAMA_1B).n_params(dataclasses.replace(LLAMA_1B, n_layer=n)) for n in (1, 4))
    assert me.probe_copies_of_its_day(probed, full, Layout(), between, [1, 4]) == 16 * copies
    assert me.probe_copies_of_its_day(probed, full, Layout(), me.RECOMPUTED_FREED_SINCE, [1, 4]) == 0
    assert me.probe_copies_of_its_day(probed, full, Layout(), between, [1, 4], RELEASED) == 0
    assert (
        me.probe_copies_of_its_day(probed, full, Layout(), "2026-12-01T00:00:00+00:00", None, RELEASED) == 0
    )
    with pytest.raises(ValueError, match="layer_probe.released='root_only'"):
        me.probe_copies_of_its_day(probed, full, Layout(), between, [1, 4], "root_only")


def test_the_fused_losss_chunk_is_gone_before_backward_rebuilds_the_top_block() -> None:
    """``full`` with ``loss.chunk_tokens``: the start of backward is the larger of the loss in forward
    (every block's input and the chunk's logits) and the top block rebuilt (its activations and the
    fused loss's fp32 gradients, no logits); the whole-logits loss counts its logits with the rebuild."""
    from flopsweep.activation_memory import forward_end_bytes, loss_kept_bytes
    from flopsweep.config import LossConfig

    llama3b = dataclasses.replace(LLAMA_1B, n_layer=28, n_embd=3072, n_head=24, seq_len=131072)
    cfg = dataclasses.replace(
        _cfg(llama3b, "bf16", ac="full"),
        loss=LossConfig(chunk_tokens=8192),
        backend=BackendConfig(name="fsdp"),
    )
    cfg.batch.micro_batch_size = 1
    est = estimate(cfg, Layout())
    boundary, layer = bytes_per_token(cfg)
    tokens = 131072
    assert forward_end_bytes(cfg) == est.forward_end_activations == 28 * boundary * tokens
    assert est.activations == (27 * boundary + layer) * tokens
    assert loss_kept_bytes(cfg) == est.loss_kept == 4 * 3072 * 128256 + 4 * tokens * 3072
    loss = est.forward_end_activations + est.logits
    rebuild = est.activations + est.loss_kept
    assert rebuild > loss and est.backward_start == est.model_states + rebuild
    whole = estimate(dataclasses.replace(cfg, loss=LossConfig()), Layout())
    assert whole.forward_end_activations == est.forward_end_activations and whole.loss_kept == 0
    assert whole.backward_start == whole.model_states + whole.activations + whole.logits


def test_the_end_of_forward_holds_autocasts_copies_of_every_weight_until_the_loss_is_done() -> None:
    """``single`` eager ``full`` (gpt-1.3b, 8192 tokens): the end of forward holds the 12 P states, the bf16
    copy of every weight (autocast's cache, cleared when the trainer's autocast exits after the loss), each
    block's input and the loss's 10 B a logit, above the start of backward (measured 22.64 GiB: 22.49); not
    compiled (a compiled block casts in its graph) and not under FSDP2 (no autocast)."""
    from flopsweep.activation_memory import FORWARD_LOGIT_BYTES

    cfg = _cfg(GPT_13B, "bf16", ac="full")
    cfg.batch.micro_batch_size = 4
    est = estimate(cfg, Layout())
    n, tokens = family(GPT_13B).n_params(GPT_13B), 4 * 2048
    assert est.forward_copies == 2 * n and FORWARD_LOGIT_BYTES[False] == 10
    assert (
        est.forward_end
        == 14 * n + 24 * tokens * 4 * 2048 + 10 * tokens * 50304
        == est.total
        > est.backward_start
    )
    assert est.total / 2**30 == pytest.approx(22.49, abs=0.01)
    assert estimate(dataclasses.replace(cfg, compile=True), Layout()).forward_copies == 0
    from flopsweep.backends import FSDPConfig

    assert estimate(dataclasses.replace(cfg, backend=FSDPConfig()), Layout()).forward_copies == 0
