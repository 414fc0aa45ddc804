"""Session 37 new-user trial of ``model=hf`` families and a cluster plan's ties (docs/reliability-6.md
#416-#421): OPT and BLOOM counted on the meta device, a family without ``sdpa`` refused naming it, a
sequence past a learned position table refused (past RoPE's: a warning), and a tie of predicted
throughput ranking the set-up that recomputes less first."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest
import torch

from flopsweep import plan_space as ps
from flopsweep.checks import validate
from flopsweep.config import AttentionConfig, ConfigError, RunConfig
from flopsweep.models import hf, hf_nn
from flopsweep.models.hf import HFConfig

OPT = {
    "architectures": ["OPTForCausalLM"],
    "model_type": "opt",
    "hidden_size": 64,
    "ffn_dim": 128,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 2048,
    "vocab_size": 512,
    "word_embed_proj_dim": 64,
}
BLOOM = {
    "architectures": ["BloomForCausalLM"],
    "model_type": "bloom",
    "hidden_size": 64,
    "n_head": 4,
    "n_layer": 2,
    "vocab_size": 512,
}
GQA_SIZES = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 512,
    "num_key_value_heads": 4,
}
"""The sizes of a tiny model of a Llama-like family (StableLM, Cohere): one dict, never changed."""
FAMILIES = {
    "gpt_bigcode": {"n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 512, "n_positions": 256},
    "falcon": {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 512},
    "gptj": {"n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 512, "n_positions": 256, "rotary_dim": 8},
    "stablelm": GQA_SIZES,
    "cohere": GQA_SIZES,
}


def _file(tmp_path: Path, name: str, content: dict) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(content))
    return str(path)


@pytest.mark.parametrize(("name", "content"), [("opt", OPT), ("bloom", BLOOM)])
def test_opt_and_bloom_are_counted_on_the_meta_device_as_a_run_calls_them(
    tmp_path: Path, name: str, content: dict
) -> None:
    # before: a 4-D mask made OPT's positions and BLOOM's ALiBi 4-D ("too many values to unpack")
    from torch.utils.flop_counter import FlopCounterMode

    cfg = HFConfig(config=_file(tmp_path, name, content), seq_len=16)
    hf.check(cfg)
    with torch.device("meta"):
        model = hf_nn.build(cfg, AttentionConfig(name="standard"))
        tokens = torch.zeros(1, 17, dtype=torch.long)
    with FlopCounterMode(display=False) as counter:
        model(tokens).backward()  # no mask: as the training step calls it
    assert hf_nn.counted_flops(hf.source(cfg), 16, "none") == counter.get_total_flops() > 0


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_more_causal_lm_families_pass_validation(tmp_path: Path, family: str) -> None:
    cfg = HFConfig(config=_file(tmp_path, family, {"model_type": family, **FAMILIES[family]}), seq_len=64)
    hf.check(cfg)
    assert cfg.n_layer == 2 and cfg.n_embd == 64


@pytest.mark.parametrize(
    ("family", "content"),
    [
        ("bloom", BLOOM),
        (
            "mpt",
            {
                "model_type": "mpt",
                "d_model": 64,
                "n_heads": 4,
                "n_layers": 2,
                "vocab_size": 512,
                "max_seq_len": 256,
            },
        ),
    ],
)
def test_a_family_without_sdpa_is_refused_naming_it(tmp_path: Path, family: str, content: dict) -> None:
    path = _file(tmp_path, family, content)
    with pytest.raises(ConfigError) as err:
        validate(RunConfig(device="cpu", model=HFConfig(config=path, seq_len=16)))
    line = str(err.value)
    assert "\n" not in line and "attention='sdpa'" in line and f"the {family} family" in line
    assert "attention=standard" in line and path not in line  # the family's, not the user's file
    validate(
        RunConfig(
            device="cpu", model=HFConfig(config=path, seq_len=16), attention=AttentionConfig(name="standard")
        )
    )


def test_a_sequence_past_a_learned_position_table_is_refused(tmp_path: Path) -> None:
    path = _file(tmp_path, "opt8", {**OPT, "max_position_embeddings": 8})
    with pytest.raises(ConfigError) as err:
        hf.check(HFConfig(config=path, seq_len=128))
    line = str(err.value)
    assert "\n" not in line and "model.seq_len=128" in line and "max_position_embeddings=8" in line
    assert "opt family" in line and "model.seq_len=8 or less" in line
    hf.check(HFConfig(config=path, seq_len=8))


def test_a_sequence_past_a_precomputed_position_table_is_refused(tmp_path: Path) -> None:
    """GPT-J keeps its rotary sines in a buffer of ``n_positions`` rows: the run's ``IndexError`` past them
    (re-trial, session 37), where the other RoPE families extrapolate."""
    path = _file(tmp_path, "gptj8", {"model_type": "gptj", **FAMILIES["gptj"], "n_positions": 8})
    with pytest.raises(ConfigError) as err:
        hf.check(HFConfig(config=path, seq_len=128))
    line = str(err.value)
    assert "gptj family keeps a table of 8 positions" in line and "model.seq_len=8" in line
    hf.check(HFConfig(config=path, seq_len=8))


def test_a_sequence_past_rope_positions_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    qwen = json.loads((Path(hf.__file__).parent / "hf_configs" / "qwen3-tiny.json").read_text())
    path = _file(tmp_path, "qwen8", {**qwen, "max_position_embeddings": 8})
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        hf.check(HFConfig(config=path, seq_len=128))
    assert any(
        "model.seq_len=128 is above max_position_embeddings=8" in r.getMessage() and "qwen3" in r.getMessage()
        for r in caplog.records
    )


def test_a_tie_ranks_the_set_up_that_recomputes_less_first() -> None:
    # a communication-bound step hides the recompute: none, selective and full predict alike (the
    # trial's llama-tiny on H100:8x3), and full's smaller memory ranked it first before session 37
    setup = ps.Setup(backend="fsdp", layout="dp", checkpointing="none", precision="bf16", micro_batch=16)
    rows = [
        ps.Row(
            cluster="H100:8x3",
            setup=dataclasses.replace(setup, checkpointing=policy),
            predicted_tokens_per_s_per_gpu=55.2e6,
            predicted_tokens_per_s=55.2e6 * 24,
            predicted_mfu=0.18,
            est_peak_gib_per_rank=gib,
            expected_error=0.15,
        )
        for policy, gib in (("full", 0.025), ("selective", 0.030), ("none", 0.035))
    ]
    ranked = ps.rank(rows, "tokens_per_s_per_device")
    assert [r.setup.checkpointing for r in ranked] == ["none", "selective", "full"]
    assert ranked[0].best and [r.cluster_rank for r in ranked] == [1, 2, 3]
