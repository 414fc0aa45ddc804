"""model=hf against hostile and changing ``config.json`` files (issue 40, classes 6-8), on the CPU.

- Class 6: every hostile file is one ``ConfigError`` line naming ``model.config`` (validation builds
  the model once on the meta device), and an ``invalid`` record.
- Class 7: the ranks build from the bytes validation read; ``resume=true`` runs a changed file again.
- Class 8: the memory estimate counts the module's registered buffers, and the launch refuses a run
  whose host-memory estimate exceeds the free host memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopsweep import hostmem
from flopsweep.checks import validate
from flopsweep.config import AttentionConfig, ConfigError, RunConfig
from flopsweep.models import hf
from flopsweep.models.hf import HFConfig

pytest.importorskip("transformers")


GIB = 2**30


QWEN = json.loads((hf.SHIPPED / "qwen3-tiny.json").read_text())


MOE = json.loads((hf.SHIPPED / "qwen3-moe-tiny.json").read_text())


LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 192,
    "num_hidden_layers": 2,
    "vocab_size": 256,
}


LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
"""Llama 3.1's RoPE scaling (its config.json)."""


NEO = {
    "model_type": "gpt_neo",
    "architectures": ["GPTNeoForCausalLM"],
    "hidden_size": 64,
    "num_heads": 4,
    "num_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 1024,
    "attention_types": [[["global", "local"], 1]],
    "window_size": 256,
}
"""GPT-Neo in its own field names (``num_layers``, ``num_heads``: the config class maps them)."""


def _file(tmp_path: Path, name: str, content: dict | str) -> str:
    """``content`` (a dict as JSON, or the file's text as is) written to ``tmp_path/name.json``."""
    path = tmp_path / f"{name}.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


QWEN_TEXT = json.dumps(QWEN)[:-1]  # the object without its closing brace: raw JSON text appended


def _qwen_with(key: str) -> str:
    """:data:`QWEN_TEXT` less ``key``: the raw text appended gives it once (a key given twice is refused)."""
    return json.dumps({k: v for k, v in QWEN.items() if k != key})[:-1]


HOSTILE = {
    # name: (the file: a dict, or raw text; words the one line holds)
    "5000-deep array": ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "at most 16 levels, flopsweep's limit"),
    "20-deep object": (
        {**QWEN, "extra": json.loads('{"a":' * 20 + "1" + "}" * 20)},
        "flopsweep reads at most 16 levels",
    ),
    # a number past MAX_INT names the bound of its field, not MAX_INT
    "hidden_size 10^12": (
        {**QWEN, "hidden_size": 10**12},
        "hidden_size=1000000000000, beyond the bound of 65536",
    ),
    "gpt-neo num_layers 10^12": ({**NEO, "num_layers": 10**12}, "beyond the bound of 1024"),
    "max_position_embeddings 10^10": (
        {**QWEN, "max_position_embeddings": 10**10},
        "beyond the bound of 16777216",
    ),
    "num_experts 10^11": ({**MOE, "num_experts": 10**11}, "beyond the bound of 16384"),
    # quantised weights: flopsweep measures unquantised training
    "bitsandbytes quantization_config": (
        {**QWEN, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}},
        "has quantization_config (quant_method 'bitsandbytes'): it describes quantised weights",
    ),
    "fp8 quantization_config": (
        {**QWEN, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
        "quant_method 'fp8'",
    ),
    "quantization_config without a method": (
        {**QWEN, "quantization_config": {"bits": 4}},
        "quantization_config",
    ),
    "quantization_config in text_config": (
        {**QWEN, "text_config": {"quantization_config": {"quant_method": "awq"}}},
        "text_config.quantization_config",
    ),
    "top-level array": ("[1, 2]", "not an object"),
    "head_dim 0": ({**QWEN, "head_dim": 0}, "head_dim=0"),
    "head_dim -1": ({**QWEN, "head_dim": -1}, "head_dim=-1"),
    "negative intermediate_size": ({**QWEN, "intermediate_size": -5}, "intermediate_size=-5"),
    "negative hidden_size": ({**QWEN, "hidden_size": -128}, "hidden_size=-128"),
    "zero max_position_embeddings": ({**QWEN, "max_position_embeddings": 0}, "max_position_embeddings"),
    "max_position_embeddings 10^9": ({**QWEN, "max_position_embeddings": 10**9}, "beyond the bound"),
    "negative sliding_window": ({**QWEN, "sliding_window": -4}, "sliding_window"),
    "kv heads not dividing heads": ({**QWEN, "num_key_value_heads": 3}, "does not divide"),
    "zero kv heads": ({**QWEN, "num_key_value_heads": 0}, "num_key_value_heads"),
    "heads not dividing hidden": ({**LLAMA, "hidden_size": 100, "num_attention_heads": 3}, "hidden size"),
    "gpt-neo heads not dividing hidden": ({**NEO, "num_heads": 3}, "num_heads"),
    "gpt-neo num_layers 10^6": ({**NEO, "num_layers": 10**6}, "num_layers=1000000"),
    "gpt-neo window 0": ({**NEO, "window_size": 0}, "window_size"),
    "unknown hidden_act": (
        {**QWEN, "hidden_act": "swishy"},
        "hidden_act='swishy', an activation transformers",
    ),
    "unknown activation_function": (
        {**QWEN, "activation_function": "nope"},
        "activation_function='nope', an activation transformers",
    ),
    "null hidden_act": ({**QWEN, "hidden_act": None}, "hidden_act"),
    "unknown rope_type": ({**QWEN, "rope_scaling": {"rope_type": "spiral", "factor": 2.0}}, "spiral"),
    "list as rope_type": (
        {**QWEN, "rope_parameters": {"rope_type": ["yarn"]}},
        "rope_type=['yarn'], not a string",
    ),
    "string rope factor": (
        {**QWEN, "rope_scaling": {"rope_type": "linear", "factor": "x"}},
        "rope_scaling.factor='x', not a number",
    ),
    "string rope_theta": ({**QWEN, "rope_theta": "big"}, "rope_theta='big', not a number"),
    "list eps": ({**QWEN, "rms_norm_eps": [1e-6]}, "rms_norm_eps=[1e-06], not a number"),
    "object initializer_range": ({**QWEN, "initializer_range": {}}, "initializer_range={}, not a number"),
    "string llama3 low_freq_factor": (
        {**LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": "1"}},
        "rope_scaling.low_freq_factor='1', not a number",
    ),
    "negative yarn factor": ({**QWEN, "rope_scaling": {"rope_type": "yarn", "factor": -2.0}}, "factor"),
    "negative rope_theta": ({**QWEN, "rope_theta": -5}, "rope_theta=-5"),
    "pad_token_id past vocab": ({**QWEN, "pad_token_id": 100000}, "pad_token_id=100000"),
    "pad_token_id far below": ({**QWEN, "pad_token_id": -1000}, "pad_token_id=-1000"),
    "list as model_type": ({**QWEN, "model_type": ["qwen3"]}, "model_type"),
    "string as architectures": ({**QWEN, "architectures": "Qwen3ForCausalLM"}, "architectures"),
    "unknown model_type": ({**QWEN, "model_type": "qwen99"}, "qwen99"),
    "top-k over experts": ({**MOE, "num_experts_per_tok": 100}, "num_experts_per_tok=100"),
    "negative top-k": ({**MOE, "num_experts_per_tok": -1}, "num_experts_per_tok=-1"),
    "zero experts": ({**MOE, "num_experts": 0}, "num_experts=0"),
    "zero decoder_sparse_step": ({**MOE, "decoder_sparse_step": 0}, "decoder_sparse_step"),
    "string vocab_size": ({**QWEN, "vocab_size": "512"}, "vocab_size"),
    "string head_dim": ({**QWEN, "head_dim": "32"}, "head_dim"),
    "fractional head_dim": ({**QWEN, "head_dim": 32.5}, "head_dim"),
    "bool layers": ({**QWEN, "num_hidden_layers": True}, "num_hidden_layers"),
    "30-digit layers": ({**QWEN, "num_hidden_layers": 10**30}, "num_hidden_layers"),
    "NaN eps": (_qwen_with("rms_norm_eps") + ', "rms_norm_eps": NaN}', "rms_norm_eps=nan"),
    "Infinity theta": (_qwen_with("rope_theta") + ', "rope_theta": Infinity}', "rope_theta=inf"),
    "1e999 theta": (_qwen_with("rope_theta") + ', "rope_theta": 1e999}', "rope_theta=inf"),
    "nested NaN under a newline key": (QWEN_TEXT + ', "x\\n": {"y": NaN}}', "not a finite number"),
    "negative eps": ({**QWEN, "rms_norm_eps": -1.0}, "rms_norm_eps"),
    "negative initializer_range": ({**QWEN, "initializer_range": -1.0}, "initializer_range"),
    "dropout over 1": ({**QWEN, "attention_dropout": 2.0}, "dropout"),
    "layer_types of another length": ({**QWEN, "layer_types": ["full_attention"]}, "layer_types"),
    "bool rope_theta": ({**QWEN, "rope_theta": True}, "rope_theta=True"),
    "bool eps": ({**QWEN, "rms_norm_eps": False}, "rms_norm_eps=False"),
    "bool rope factor": ({**QWEN, "rope_scaling": {"rope_type": "linear", "factor": True}}, "factor"),
    "an encoder's LM head (bert)": ({**QWEN, "model_type": "bert"}, "BertLMHeadModel"),
    "GPT-2's LMHeadModel": ({**QWEN, "model_type": "gpt2", "architectures": []}, "GPT2LMHeadModel"),
    "architectures not the class built": (
        {**QWEN, "architectures": ["NoSuchForCausalLM"]},
        "Qwen3ForCausalLM",
    ),
    # finite but absurd floats: in their plausible range (hf_files.MAX_NUMBERS), else one line
    "rope factor 1e308": (
        {**QWEN, "rope_scaling": {"rope_type": "linear", "factor": 1e308}},
        "factor=1e308",
    ),
    "yarn factor 1e5": ({**QWEN, "rope_scaling": {"rope_type": "yarn", "factor": 1e5}}, "at most 10000"),
    "negative linear factor": (
        {**QWEN, "rope_scaling": {"rope_type": "linear", "factor": -0.5}},
        "factor=-0.5",
    ),
    "rope_theta 1e308": ({**QWEN, "rope_theta": 1e308}, "rope_theta=1e308"),
    "rope_theta 1e-300": ({**QWEN, "rope_theta": 1e-300}, "not above 1"),
    "rms_norm_eps 1e308": ({**QWEN, "rms_norm_eps": 1e308}, "rms_norm_eps=1e308"),
    "gpt-neo layer_norm_epsilon 1e308": ({**NEO, "layer_norm_epsilon": 1e308}, "layer_norm_epsilon"),
    "initializer_range 1e308": ({**QWEN, "initializer_range": 1e308}, "initializer_range=1e308"),
    "llama3 low_freq_factor 1e300": (
        {**LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1e300}},
        "low_freq_factor",
    ),
    "yarn beta_fast 1e308": (
        {**QWEN, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 1e308}},
        "beta_fast",
    ),
    # the trial's second round (issue 40): the field named, never a meta-device error
    "null rope_theta": ({**QWEN, "rope_theta": None}, "rope_theta=None, null"),
    "null rope_parameters.rope_theta": (
        {**QWEN, "rope_parameters": {"rope_type": "default", "rope_theta": None}},
        "rope_parameters.rope_theta=None, null",
    ),
    "unknown rope_scaling.rope_type": (
        {**QWEN, "rope_scaling": {"rope_type": "nope", "factor": 2.0}},
        "rope_scaling.rope_type='nope', a RoPE type transformers does not know",
    ),
    "unknown legacy rope_scaling.type": (
        {**QWEN, "rope_scaling": {"type": "nope", "factor": 2.0}},
        "='nope', a RoPE type transformers does not know",
    ),
    "null linear factor": (
        {**QWEN, "rope_scaling": {"rope_type": "linear", "factor": None}},
        "rope_scaling.factor=None, null",
    ),
    "null llama3 factor": (
        {**LLAMA, "rope_scaling": {**LLAMA3_ROPE, "factor": None}},
        "rope_scaling.factor=None, null",
    ),
    "string rotary_emb_base": ({**QWEN, "rotary_emb_base": "x"}, "rotary_emb_base='x', not a number"),
    "rotary_pct over 1": ({**QWEN, "rotary_pct": 5.0}, "rotary_pct=5"),
    "list rotary_pct": ({**QWEN, "rotary_pct": [0.25]}, "rotary_pct=[0.25], not a number"),
    "string original_max_position_embeddings": (
        {**LLAMA, "rope_scaling": {**LLAMA3_ROPE, "original_max_position_embeddings": "8192"}},
        "rope_scaling.original_max_position_embeddings='8192', not a number",
    ),
    "string yarn beta_fast": (
        {**QWEN, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": "x"}},
        "rope_scaling.beta_fast='x', not a number",
    ),
    "string yarn mscale": (
        {**QWEN, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "mscale": "x"}},
        "rope_scaling.mscale='x', not a number",
    ),
    "longrope short_factor of strings": (
        {**QWEN, "rope_scaling": {"rope_type": "longrope", "short_factor": ["a"], "long_factor": [1.0]}},
        "rope_scaling.short_factor=['a'], a list that is not all numbers",
    ),
    "string text_config": ({**QWEN, "text_config": "x"}, "text_config='x', not an object"),
    "text_config with a string rope_theta": (
        {**QWEN, "text_config": {"rope_theta": "big"}},
        "text_config.rope_theta='big', not a number",
    ),
    "attention_dropout 5": ({**QWEN, "attention_dropout": 5.0}, "attention_dropout=5"),
    "negative resid_pdrop": ({**QWEN, "resid_pdrop": -1}, "resid_pdrop=-1"),
    "string attention_dropout": ({**QWEN, "attention_dropout": "x"}, "attention_dropout='x', not a number"),
    # strings transformers echoes, 100,000 characters: refused in a line of bounded length
    "100k-char model_type": ({**QWEN, "model_type": "m" * 100_000}, "a string of 100000 characters"),
    "100k-char rope_type": (
        {**QWEN, "rope_scaling": {"rope_type": "r" * 100_000, "factor": 2.0}},
        "rope_type",
    ),
    "100k-char hidden_act": ({**QWEN, "hidden_act": "h" * 100_000}, "hidden_act"),
    "100k-char architectures": ({**QWEN, "architectures": ["A" * 100_000]}, "architectures.0"),
}
"""Hostile ``config.json`` files, each beside the line that refuses it (issue 40 names 9 of them)."""


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_config_json_is_one_line_naming_model_config(tmp_path: Path, name: str) -> None:
    """Validation refuses each in one ConfigError line naming model.config and what is wrong (a
    field, a bound, or the exception of the meta-device build), never a traceback."""
    content, words = HOSTILE[name]
    cfg = RunConfig(device="cpu", model=HFConfig(config=_file(tmp_path, "config", content)))
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    message = str(err.value)
    assert message.startswith("Invalid config: model.config=") and "\n" not in message, message
    assert words in message and "Fix:" in message, message
    assert len(message) < 1000, message[:2000]  # no value of the file is shown whole past MAX_SHOWN


def test_the_shipped_configs_and_gpt_neo_in_its_own_field_names_pass(tmp_path: Path) -> None:
    """The checks refuse no shipped config; GPT-Neo's shape is read through its config class
    (``num_layers``, ``num_heads``), not left 0; the hash of the bytes read is filled in."""
    for path in sorted(hf.SHIPPED.glob("*tiny.json")):
        cfg = HFConfig(config=path.stem)
        validate(RunConfig(device="cpu", model=cfg))
        assert cfg.config_sha256 == hf.load(path.stem).sha256
    neo = HFConfig(config=_file(tmp_path, "neo", NEO))
    hf.check(neo)
    assert (neo.n_layer, neo.n_head, neo.n_embd, neo.vocab_size) == (2, 4, 64, 256)


def test_floats_in_their_range_and_a_yarn_truncate_flag_pass(tmp_path: Path) -> None:
    """The bounds of the float fields take released models' values (Llama 3.1's rope scaling, YaRN's
    ``beta_fast``/``truncate``, a 10^7 base, a 10^-12 eps) and their ends."""
    llama31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    yarn = {"rope_type": "yarn", "factor": 1e4, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}
    for i, content in enumerate(
        (
            {**LLAMA, "rope_scaling": {**llama31, "original_max_position_embeddings": 8192}},
            {**QWEN, "rope_scaling": yarn, "rope_theta": 1e7, "rms_norm_eps": 1e-12},
            {**QWEN, "rope_theta": 1e12, "rms_norm_eps": 1.0, "initializer_range": 0.0},
        )
    ):
        validate(RunConfig(device="cpu", model=HFConfig(config=_file(tmp_path, f"c{i}", content))))


def test_a_100k_character_name_is_shown_cut_in_the_plan(hydra_compose, tmp_path: Path) -> None:
    """``_name_or_path`` of 100,000 characters (and controls): the model's name, the plan row and the
    plan table show it cut (``flopsweep.config.cut``), every line under 2,000 characters."""
    from flopsweep.job import JobInfo, plan_table, run_job

    path = _file(tmp_path, "config", {**QWEN, "_name_or_path": "\x1b[31m" + "n" * 100_000})
    overrides = ["model=hf", f"model.config={path}", "device=cpu", "plan=true"]
    record = run_job(hydra_compose(overrides), JobInfo(job_dir=tmp_path / "run", overrides=overrides))
    table = plan_table(record["plan_file"])
    assert "...(100008 characters)" in table and "\x1b" not in table, table[:500]
    assert max(len(line) for line in table.splitlines()) < 2000
    assert len(Path(record["plan_file"]).read_text()) < 4000


def test_a_hash_the_file_does_not_have_is_refused(tmp_path: Path) -> None:
    """``model.config_sha256`` names the bytes validated: a file read again (a rank without its job's
    bytes, a hash set by hand) must have it, else one line naming ``model.config_sha256``."""
    path = _file(tmp_path, "config", QWEN)
    first = HFConfig(config=path)
    hf.check(first)
    copy = _file(tmp_path, "copy", {**QWEN, "vocab_size": 1024})  # another path: nothing kept for it
    with pytest.raises(ConfigError) as err:
        hf.check(HFConfig(config=copy, config_sha256=first.config_sha256))
    message = str(err.value)
    assert message.startswith(f"Invalid config: model.config_sha256='{first.config_sha256[:16]}")
    assert "changed after this job was validated" in message and "\n" not in message
    with pytest.raises(ConfigError, match="not a SHA-256"):
        hf.check(HFConfig(config=path, config_sha256="abc"))


def _ok_record(cfg: RunConfig) -> dict:
    """An ``ok`` record of the validated ``cfg`` from the real builder (the keys read no metrics)."""
    from flopsweep.layout import Layout
    from flopsweep.metrics import build_record

    run = {"id": "r1", "overrides": [], "job_num": 0, "repeat": 0, "repeats": 1, "repeat_group": None}
    system = {"device_name": "cpu", "world_size": 1, "parallel": Layout().as_dict()}
    return build_record(cfg=cfg, status="ok", error=None, run=run, system=system, metrics=None)


def test_resume_runs_a_changed_config_json_again(hydra_compose, tmp_path: Path) -> None:
    """``resume=true`` keeps an ok record of the same file and runs a changed one again; a record
    from before the hash was in the config (identity version 1: the hash in ``model`` only, its
    stored keys computed without it) is the same job while the file is unchanged."""
    from flopsweep import identity
    from flopsweep.job import ok_record

    path = _file(tmp_path, "config", QWEN)
    overrides = ["model=hf", f"model.config={path}", "device=cpu", "resume=true"]
    cfg = validate(hydra_compose(overrides))
    record = _ok_record(cfg)
    assert record["config"]["model"]["config_sha256"] == record["model"]["config_sha256"] != ""
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps(record))
    assert ok_record(metrics, cfg) == record  # unchanged: skipped
    old = json.loads(json.dumps(record))
    del old["config"]["model"]["config_sha256"]
    old["run"].update(identity_version=1, job_key="0" * 16, setup_key="0" * 10)  # stale: computed again
    metrics.write_text(json.dumps(old))
    assert ok_record(metrics, cfg) == old
    assert identity.setup_key(old) == record["run"]["setup_key"]
    Path(path).write_text(json.dumps({**QWEN, "intermediate_size": 256}))  # the same name, changed
    changed = validate(hydra_compose(overrides))
    assert changed.model.config_sha256 != cfg.model.config_sha256
    for kept in (record, old):
        metrics.write_text(json.dumps(kept))
        assert ok_record(metrics, changed) is None  # run again
        assert identity.setup_key(kept) != _ok_record(changed)["run"]["setup_key"]


def test_the_estimate_counts_registered_buffers_as_the_real_build_allocates_them(tmp_path: Path) -> None:
    """GPT-Neo keeps a ``max_position_embeddings^2`` causal mask per layer (a buffer, not a
    parameter): at 4096 positions and 2 layers 32 MiB against 1.5 MiB of weights. The meta-device
    count equals the buffers of a real CPU build byte for byte, and weights plus buffers are within
    1% of every tensor the real build allocates; the estimate holds them at both of its moments."""
    import torch

    from flopsweep.config import AttentionConfig
    from flopsweep.memory import estimate
    from flopsweep.plan import Environment, plan

    cfg = HFConfig(config=_file(tmp_path, "neo", {**NEO, "max_position_embeddings": 4096}))
    p = plan(RunConfig(device="cpu", model=cfg, attention=AttentionConfig(name="standard")), Environment())
    counted = hf.memory(p.cfg.model)["buffer_bytes"]
    assert counted == 2 * 4096**2
    model = hf.build(p.cfg.model, AttentionConfig(name="standard"))
    assert counted == sum(b.numel() * b.element_size() for b in model.buffers())
    storages = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
        for t in model.state_dict(keep_vars=True).values()
    }
    storages.update({b.untyped_storage().data_ptr(): b.untyped_storage().nbytes() for b in model.buffers()})
    allocated = sum(storages.values())
    assert 4 * hf.n_params(p.cfg.model) + counted == pytest.approx(allocated, rel=0.01)
    est = estimate(p.cfg, p.layout)
    assert est.buffers == counted
    assert (
        est.backward_start >= est.model_states + counted and est.end_of_backward >= est.step_states + counted
    )
    assert est.total > counted > 10 * 4 * hf.n_params(p.cfg.model)  # the weights alone miss most of it
    del model, torch


def test_a_cpu_run_whose_buffers_exceed_the_free_host_memory_is_refused(tmp_path: Path) -> None:
    """The launch's host check (psutil's free memory, read now) refuses a GPT-Neo whose
    ``max_position_embeddings`` of 2^20 makes 2 TiB of causal masks (clearly over any host) and lets
    the same model at 512 positions go (a few MiB, clearly under)."""
    from flopsweep.job import check_free_host_memory
    from flopsweep.plan import Environment, plan

    host = Environment(cpu_count=8, host_memory_bytes=1 << 60)  # validation passes: the launch checks
    over = plan(
        RunConfig(
            device="cpu",
            attention=AttentionConfig(name="standard"),  # GPT-Neo has no sdpa in transformers
            model=HFConfig(config=_file(tmp_path, "big", {**NEO, "max_position_embeddings": 2**20})),
        ),
        host,
    )
    assert hf.memory(over.cfg.model)["buffer_bytes"] == 2 * 2**40 > hostmem.available_bytes()
    with pytest.raises(ConfigError) as err:
        check_free_host_memory(over)
    message = str(err.value)
    assert err.value.key == "model" and "GiB of host memory" in message and "\n" not in message
    under = plan(
        RunConfig(
            device="cpu",
            attention=AttentionConfig(name="standard"),  # GPT-Neo has no sdpa in transformers
            model=HFConfig(config=_file(tmp_path, "small", {**NEO, "max_position_embeddings": 512})),
        ),
        host,
    )
    assert check_free_host_memory(under) is None


def test_gpu_offload_over_the_free_host_memory_by_its_estimate_is_refused(hydra_compose) -> None:
    """An FSDP2 ``cpu_offload`` run whose estimate (the offloaded states times the 1.10 its runs held)
    exceeds the free host memory while its lower bound does not is refused at launch (the issue's
    Llama 3.1 8B: 131.6 GiB estimated, 124.9 GiB free, only warned about, then OOM-killed)."""
    from flopsweep.job import check_free_host_memory
    from flopsweep.memory import offload_host_bytes, offload_host_held_bytes
    from flopsweep.plan import Environment, plan

    gpu = Environment(
        cuda_available=True,
        gpu_count=1,
        bf16_supported=True,
        capability=(9, 0),
        cpu_count=8,
        host_memory_bytes=1 << 60,  # validation passes: the launch checks
    )
    overrides = ["model=llama3.1-8b", "backend=fsdp", "backend.cpu_offload=true", "device=cuda"]
    p = plan(hydra_compose([*overrides, "nproc_per_node=1"]), gpu)
    lower, held = offload_host_bytes(p.cfg, p.layout), offload_host_held_bytes(p.cfg, p.layout)
    free = int(124.9 * GIB)
    assert round(held / GIB, 1) == 131.6 and lower < free < held
    with pytest.raises(ConfigError) as err:
        check_free_host_memory(p, free=free)
    message = str(err.value)
    assert err.value.key == "backend.cpu_offload" and "expected to hold about 131.6 GiB" in message
    assert "124.9 GiB is free now" in message and "\n" not in message
    assert check_free_host_memory(p, free=held + GIB) is None
