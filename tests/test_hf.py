"""model=hf: any transformers causal LM from its config.json (issue 28), on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import records, run_sweep
from torch.utils.flop_counter import FlopCounterMode

from flopsweep import rules
from flopsweep.config import AttentionConfig, ConfigError, RunConfig
from flopsweep.models import hf, llama
from flopsweep.options import HFConfig, LlamaConfig

pytest.importorskip("transformers")

TINY = ["qwen3-tiny", "mistral-tiny", "qwen3-moe-tiny", "moonlight-tiny"]
MOE = {"qwen3-moe-tiny", "moonlight-tiny"}


def checked(config: str, **kw: object) -> HFConfig:
    cfg = HFConfig(config=config, **kw)
    hf.check(cfg)
    return cfg


def test_every_tiny_config_is_shipped_beside_its_full_size() -> None:
    shipped = {p.stem for p in hf.SHIPPED.glob("*.json")}
    assert set(TINY) <= shipped
    assert {"qwen3-1.7b", "mistral-7b-v0.3", "qwen3-30b-a3b", "moonlight-16b-a3b", "llama3.2-1b"} <= shipped


def test_llama_32_1b_shape_matches_the_builtin_family() -> None:
    """Parameters and model FLOPs of transformers' LlamaForCausalLM (meta) equal llama3.2-1b's
    (tied embeddings both sides); the only extra counted matmul is RoPE's angle product."""
    ours = LlamaConfig(
        n_layer=16, n_embd=2048, n_head=32, n_kv_head=8, ffn_dim=8192, seq_len=2048, vocab_size=128256
    )
    theirs = checked("llama3.2-1b", seq_len=2048)
    assert hf.n_params(theirs) == llama.n_params(ours) == 1_235_814_400
    assert hf.n_active_params(theirs) == hf.n_params(theirs)
    tokens = 4 * 2048
    assert hf.model_flops(theirs, tokens) == pytest.approx(llama.model_flops(ours, tokens), rel=1e-6)
    info = hf.info(theirs)
    assert info["arch"] == "hf" and info["hf_architecture"] == "LlamaForCausalLM"
    assert info["name"] == "meta-llama/Llama-3.2-1B" and len(info["config_sha256"]) == 64


def test_moe_counts_active_parameters() -> None:
    """Qwen3-30B-A3B and Moonlight-16B-A3B: totals and active parameters of their model cards."""
    qwen = checked("qwen3-30b-a3b")
    assert hf.n_params(qwen) / 1e9 == pytest.approx(30.5, abs=0.1)
    assert hf.n_active_params(qwen) / 1e9 == pytest.approx(3.3, abs=0.1)
    moon = checked("moonlight-16b-a3b")
    assert hf.n_params(moon) / 1e9 == pytest.approx(16.0, abs=0.1)
    assert 2.8e9 < hf.n_active_params(moon) < 3.0e9


@pytest.mark.parametrize("recompute", ["none", "early_stop"])
@pytest.mark.parametrize("config", TINY)
def test_counted_flops_match_a_real_cpu_step(config: str, recompute: str) -> None:
    """The meta-device count (batched_mm experts: top-k per token) equals FlopCounterMode over a real
    CPU step with the experts loop transformers runs (eager), within 0.5%, with and without
    activation checkpointing (non-reentrant, each decoder layer)."""
    cfg = checked(config, seq_len=64)
    torch.manual_seed(0)
    model = hf.build(cfg, AttentionConfig(name="standard"))
    if recompute == "early_stop":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

        layers = hf.blocks(model)
        for i, block in enumerate(layers):
            layers[i] = checkpoint_wrapper(block, preserve_rng_state=False)
    tokens = torch.randint(
        0, cfg.vocab_size, (2, cfg.seq_len + 1), generator=torch.Generator().manual_seed(1)
    )
    with FlopCounterMode(display=False) as counter:
        model(tokens).backward()
    measured = counter.get_total_flops()
    predicted = hf.hardware_flops(cfg, 2 * cfg.seq_len, 1.0, recompute)
    assert predicted == pytest.approx(measured, rel=5e-3)
    if config in MOE:
        assert hf.n_active_params(cfg) < hf.n_params(cfg)


def test_refusals_name_model_config(tmp_path: Path) -> None:
    """A missing path, malformed JSON and a config that is no causal LM: one line naming model.config."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(
        json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"]})
    )
    t5 = tmp_path / "t5.json"
    t5.write_text(json.dumps({"model_type": "t5"}))
    for value, words in [
        (str(tmp_path / "nope.json"), "does not exist"),
        (str(bad), "not valid JSON"),
        (str(bert), "not a causal language model"),
        (str(t5), "not a causal language model"),
    ]:
        with pytest.raises(ConfigError) as err:
            hf.check(HFConfig(config=value))
        message = str(err.value)
        assert "model.config" in message and words in message and "\n" not in message


def test_a_shape_override_that_disagrees_with_the_file_and_a_link_loop_are_refused(tmp_path: Path) -> None:
    """model=hf takes its shape from model.config: model.n_layer=4 on a 2-layer config is refused in
    one line (a sweep over it would run one model under several names); the file's own value passes.
    A model.config that is a link loop is refused in one line, not a traceback."""
    with pytest.raises(ConfigError, match=r"model.n_layer=4: .*num_hidden_layers is 2"):
        hf.check(HFConfig(config="qwen3-tiny", n_layer=4))
    assert checked("qwen3-tiny").n_layer == 2
    agrees = HFConfig(config="qwen3-tiny", n_layer=2)
    hf.check(agrees)
    assert agrees.n_layer == 2
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    with pytest.raises(ConfigError) as err:
        hf.check(HFConfig(config=str(tmp_path / "a.json")))
    assert "model.config" in str(err.value) and "\n" not in str(err.value)


def test_attention_kernels_map_or_are_refused() -> None:
    """sdpa, standard and flex map to attn_implementation; flopsweep's own kernels are invalid."""
    for name in ("sdpa", "standard", "flex"):
        rules.hf_attention(RunConfig(model=HFConfig(), attention=AttentionConfig(name=name)))
    for name in ("sdpa-flash", "xformers", "blocksparse"):
        with pytest.raises(ConfigError, match="attn_implementation"):
            rules.hf_attention(RunConfig(model=HFConfig(), attention=AttentionConfig(name=name)))


def test_check_fills_the_shape_and_name_from_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    data = json.loads((hf.SHIPPED / "qwen3-tiny.json").read_text())
    del data["_name_or_path"]
    (folder / "config.json").write_text(json.dumps(data))
    cfg = checked(str(folder))
    assert (cfg.name, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.vocab_size) == ("my-model", 2, 128, 4, 512)
    assert checked("qwen3-tiny").name == "qwen3-tiny"


@pytest.mark.slow
def test_every_tiny_config_gives_one_first_step_loss_on_every_backend(tmp_path: Path) -> None:
    """Same seed, same data, fp32, for each tiny config: single equals DDP on one rank (the same batch),
    and DDP, FSDP2 and ZeRO-3 (MoE layers as ZeRO-3 leaves) on 2 gloo ranks give one first-step loss
    (the mean over both ranks' batches), each within 1e-4."""
    common = ("model=hf", f"model.config={','.join(TINY)}", "device=cpu", "precision=fp32")
    steps = ("steps.warmup=1", "steps.measure=1")
    groups = {
        "one": ("backend=single,ddp", "nproc_per_node=1"),
        "two": ("backend=ddp,fsdp,zero3", "nproc_per_node=2"),
    }
    recs = {}
    for sub, args in groups.items():
        proc = run_sweep(tmp_path / sub, *common, *args, *steps)
        assert proc.returncode == 0, proc.stderr[-3000:]
        recs[sub] = records(tmp_path / sub)
    assert (len(recs["one"]), len(recs["two"])) == (8, 12)
    every = recs["one"] + recs["two"]
    assert all(r["status"] == "ok" for r in every), [r["error"] for r in every if r["status"] != "ok"]
    for config in TINY:
        for sub, n in (("one", 2), ("two", 3)):
            mine = [r for r in recs[sub] if r["config"]["model"]["config"] == config]
            losses = [r["metrics"]["loss_first"] for r in mine]
            assert len(mine) == n and max(losses) - min(losses) < 1e-4, (config, sub, losses)
    for r in every:
        assert r["model"]["arch"] == "hf" and len(r["model"]["config_sha256"]) == 64
        assert r["model"]["n_active_params"] <= r["model"]["n_params"]
        assert r["metrics"]["model_flops_per_iteration"] > 0
