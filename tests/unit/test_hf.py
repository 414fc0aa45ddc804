"""model=hf: any transformers causal LM from its config.json (issue 28), on the CPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from flopsweep import rules
from flopsweep.config import AttentionConfig, ConfigError, RunConfig
from flopsweep.job import JobInfo, plan_job
from flopsweep.models import hf, llama
from flopsweep.models.hf import HFConfig
from flopsweep.models.llama import LlamaConfig

pytest.importorskip("transformers")


TINY = ["qwen3-tiny", "mistral-tiny", "qwen3-moe-tiny", "moonlight-tiny", "olmoe-tiny"]


MOE = {"qwen3-moe-tiny", "moonlight-tiny", "olmoe-tiny"}


H200_BYTES = 141 * 10**9  # the H200's HBM3e, as NVIDIA's datasheet gives it


def checked(config: str, **kw: object) -> HFConfig:
    cfg = HFConfig(config=config, **kw)
    hf.check(cfg)
    return cfg


def test_every_tiny_config_is_shipped_beside_its_full_size() -> None:
    shipped = {p.stem for p in hf.SHIPPED.glob("*.json")}
    assert set(TINY) <= shipped
    assert {
        "qwen3-1.7b",
        "mistral-7b-v0.1",
        "mistral-7b-v0.3",
        "qwen3-30b-a3b",
        "moonlight-16b-a3b",
        "olmoe-1b-7b",
        "llama3.2-1b",
    } <= shipped


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
    """Qwen3-30B-A3B, Moonlight-16B-A3B and OLMoE-1B-7B: totals and active parameters of their model cards."""
    qwen = checked("qwen3-30b-a3b")
    assert hf.n_params(qwen) / 1e9 == pytest.approx(30.5, abs=0.1)
    assert hf.n_active_params(qwen) / 1e9 == pytest.approx(3.3, abs=0.1)
    moon = checked("moonlight-16b-a3b")
    assert hf.n_params(moon) / 1e9 == pytest.approx(16.0, abs=0.1)
    assert 2.8e9 < hf.n_active_params(moon) < 3.0e9
    # OLMoE-1B-7B: "6.9B total, 1.3B active" (arXiv 2409.02060, table 1); 64 experts, top 8.
    olmoe = checked("olmoe-1b-7b")
    assert (hf.n_params(olmoe), hf.n_active_params(olmoe)) == (6_919_161_856, 1_282_017_280)


def test_mistral_7b_v01_counts_and_its_difference_from_v03() -> None:
    """Mistral-7B-v0.1: 7.24 B parameters (32,000-token vocabulary, untied head); v0.3 only adds 768
    tokens to both embeddings (2 x 768 x 4096 parameters)."""
    v01, v03 = checked("mistral-7b-v0.1"), checked("mistral-7b-v0.3")
    assert hf.n_params(v01) == 7_241_732_096
    assert hf.n_params(v03) - hf.n_params(v01) == 2 * 768 * 4096
    assert v01.name == "mistralai/Mistral-7B-v0.1" and (v01.n_layer, v01.n_embd) == (32, 4096)


@pytest.mark.parametrize(
    ("config", "fits"),
    [
        ("mistral-7b-v0.1", True),
        ("olmoe-1b-7b", True),
        ("qwen3-30b-a3b", False),
        ("moonlight-16b-a3b", False),
    ],
)
def test_plan_rows_name_the_model_and_say_which_full_size_configs_fit_one_h200(
    hydra_compose, tmp_path: Path, config: str, fits: bool
) -> None:
    """``plan=true`` for ``model=hf`` on one GPU with FSDP2, bf16, micro batch 1, sequence 2048: the row's
    ``model`` is the config's ``_name_or_path`` (blank before issue 28's follow-up), and the estimate
    (16 bytes per parameter of fp32 weights, gradients and AdamW moments, plus activations and
    logits) stays under one H200's 141 GB for the two configs shipped for it, not for the larger MoEs."""
    overrides = [
        "model=hf",
        f"model.config={config}",
        "model.seq_len=2048",
        "device=cuda",
        "backend=fsdp",
        "precision=bf16",
        "batch.micro_batch_size=1",
    ]
    for sub in ("0", "1"):
        (tmp_path / sub).mkdir()
    info = JobInfo(job_dir=tmp_path / "0", overrides=overrides, job_num=None)
    row = plan_job(hydra_compose(overrides), info)["plan"]
    assert row["status"] == "ok", row["note"]
    assert row["seq_len"] == 2048  # the plan shows it: model=hf's default is 128
    assert row["model"] == json.loads((hf.SHIPPED / f"{config}.json").read_text())["_name_or_path"]
    assert (float(row["est_peak_gib_per_rank"]) * 2**30 < H200_BYTES) is fits, row
    bad = JobInfo(job_dir=tmp_path / "1", overrides=["model.config=nope"], job_num=None)
    refused = plan_job(hydra_compose(["model=hf", "model.config=nope"]), bad)["plan"]
    assert (refused["status"], refused["model"]) == ("invalid", "nope")


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
    gpt2 = tmp_path / "gpt2.json"  # a causal LM, but its class is GPT2LMHeadModel: the message says so
    gpt2.write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    for value, words in [
        (str(tmp_path / "nope.json"), "does not exist"),
        (str(bad), "not valid JSON"),
        (str(bert), "builds *ForCausalLM classes only"),
        (str(t5), "not a causal language model"),
        (str(gpt2), "builds *ForCausalLM classes only"),
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


def test_an_experts_implementation_on_a_dense_model_is_refused() -> None:
    """model.experts picks how an MoE layer runs: on a dense config (qwen3-tiny) nothing reads it, and
    a sweep over it would measure one model under several names; refused in one line. The default
    passes on a dense model, and every implementation on an MoE one."""
    for experts in ("grouped_mm", "batched_mm"):
        with pytest.raises(ConfigError) as err:
            hf.check(HFConfig(config="qwen3-tiny", experts=experts))
        message = str(err.value)
        assert message.startswith(f"Invalid config: model.experts='{experts}': ") and "\n" not in message
        assert "qwen3-tiny is a dense model" in message and "Fix: drop model.experts" in message
    hf.check(HFConfig(config="qwen3-tiny", experts="eager"))
    for experts in ("eager", "grouped_mm", "batched_mm"):
        hf.check(HFConfig(config="qwen3-moe-tiny", experts=experts))
    assert [hf.is_moe(hf.load(c).data) for c in ("qwen3-tiny", "olmoe-tiny", "moonlight-tiny")] == [
        False,
        True,
        True,
    ]


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


def _variant(tmp_path: Path, name: str, **changes: object) -> str:
    """A copy of qwen3-tiny's config.json with ``changes``; its path."""
    data = json.loads((hf.SHIPPED / "qwen3-tiny.json").read_text())
    data.update(changes)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"num_hidden_layers": 10**12}, "num_hidden_layers"),
        ({"num_hidden_layers": 100000}, "num_hidden_layers"),
        ({"hidden_size": 10**9}, "hidden_size"),
        ({"intermediate_size": 10**15}, "intermediate_size"),
        ({"num_hidden_layers": "2"}, "num_hidden_layers"),
        ({"num_hidden_layers": 2.5}, "num_hidden_layers"),
        ({"num_hidden_layers": True}, "num_hidden_layers"),
        ({"head_dim": None, "num_attention_heads": 3}, "head_dim"),
        ({"rms_norm_eps": "small"}, "rms_norm_eps"),
    ],
)
def test_raw_json_values_are_refused_before_transformers_builds_anything(
    tmp_path: Path, changes: dict, field: str
) -> None:
    """A num_hidden_layers of 10^12 hung (transformers filled per-layer lists) and a string, a fraction
    or a null field gave huggingface_hub's StrictDataclassFieldValidationError as a traceback: each is
    one ConfigError line naming model.config and the JSON field, the fix naming the field too."""
    with pytest.raises(ConfigError) as err:
        hf.check(HFConfig(config=_variant(tmp_path, "bad", **changes)))
    message = str(err.value)
    assert message.startswith("Invalid config: model.config=") and "\n" not in message, message
    assert field in message.split("Fix:")[1], message
    assert "model.n_layer" not in message


def _plan_row(hydra_compose, tmp_path: Path, overrides: list[str]) -> dict:
    job = tmp_path / str(len(list(tmp_path.iterdir())))
    job.mkdir()
    return plan_job(hydra_compose(overrides), JobInfo(job_dir=job, overrides=overrides, job_num=None))["plan"]


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["activation_checkpointing=memory_budget"], "activation_checkpointing"),
        (["attention=flex"], "attention"),
    ],
)
def test_every_fix_suggested_for_hf_passes_for_hf(hydra_compose, tmp_path: Path, overrides, key) -> None:
    """memory_budget without compile suggested selective, and flex on the CPU sdpa-math: both refused
    for model=hf. Every option a fix names now plans ok for model=hf."""
    base = ["model=hf", "device=cpu"]
    refused = _plan_row(hydra_compose, tmp_path, [*base, *overrides])
    assert refused["status"] == "invalid", refused
    fix = refused["reason"].split("Fix:")[1]
    listed = re.search(rf"{key}=([\w-]+(?:(?:, | or )[\w-]+)*)", fix).group(1)  # "every_n or full"
    picks = re.split(r", | or ", listed)
    assert picks and "selective" not in picks and "sdpa-math" not in picks, fix
    for pick in picks:
        row = _plan_row(hydra_compose, tmp_path, [*base, f"{key}={pick}"])
        assert row["status"] == "ok", (pick, row["note"])
