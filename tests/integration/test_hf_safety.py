"""model=hf against hostile and changing ``config.json`` files (issue 40, classes 6-8), on the CPU.

- Class 6: every hostile file is one ``ConfigError`` line naming ``model.config`` (validation builds
  the model once on the meta device), and an ``invalid`` record.
- Class 7: the ranks build from the bytes validation read; ``resume=true`` runs a changed file again.
- Class 8: the memory estimate counts the module's registered buffers, and the launch refuses a run
  whose host-memory estimate exceeds the free host memory.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import records, run_sweep

from flopsweep.models import hf

pytest.importorskip("transformers")


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


HOSTILE = {
    # name: (the file: a dict, or raw text; words the one line holds)
    "5000-deep array": ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "nests"),
    "20-deep object": ({**QWEN, "extra": json.loads('{"a":' * 20 + "1" + "}" * 20)}, "deep"),
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
    "unknown hidden_act": ({**QWEN, "hidden_act": "swishy"}, "swishy"),
    "null hidden_act": ({**QWEN, "hidden_act": None}, "hidden_act"),
    "unknown rope_type": ({**QWEN, "rope_scaling": {"rope_type": "spiral", "factor": 2.0}}, "spiral"),
    "list as rope_type": ({**QWEN, "rope_parameters": {"rope_type": ["yarn"]}}, "TypeError"),
    "string rope factor": ({**QWEN, "rope_scaling": {"rope_type": "linear", "factor": "x"}}, "TypeError"),
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
    "NaN eps": (QWEN_TEXT + ', "rms_norm_eps": NaN}', "rms_norm_eps=nan"),
    "Infinity theta": (QWEN_TEXT + ', "rope_theta": Infinity}', "rope_theta=inf"),
    "1e999 theta": (QWEN_TEXT + ', "rope_theta": 1e999}', "rope_theta=inf"),
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
        "factor=1e+308",
    ),
    "yarn factor 1e5": ({**QWEN, "rope_scaling": {"rope_type": "yarn", "factor": 1e5}}, "at most 10000"),
    "negative linear factor": (
        {**QWEN, "rope_scaling": {"rope_type": "linear", "factor": -0.5}},
        "factor=-0.5",
    ),
    "rope_theta 1e308": ({**QWEN, "rope_theta": 1e308}, "rope_theta=1e+308"),
    "rope_theta 1e-300": ({**QWEN, "rope_theta": 1e-300}, "not above 1"),
    "rms_norm_eps 1e308": ({**QWEN, "rms_norm_eps": 1e308}, "rms_norm_eps=1e+308"),
    "gpt-neo layer_norm_epsilon 1e308": ({**NEO, "layer_norm_epsilon": 1e308}, "layer_norm_epsilon"),
    "initializer_range 1e308": ({**QWEN, "initializer_range": 1e308}, "initializer_range=1e+308"),
    "llama3 low_freq_factor 1e300": (
        {**LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1e300}},
        "low_freq_factor",
    ),
    "yarn beta_fast 1e308": (
        {**QWEN, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 1e308}},
        "beta_fast",
    ),
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


def test_a_hostile_config_is_an_invalid_record_of_the_job(hydra_compose, tmp_path: Path) -> None:
    """run_job in-process: the job's record is ``invalid`` (phase config) with the one line; no rank
    starts (the record's metrics are null)."""
    from flopsweep.job import JobInfo, run_job

    for i, name in enumerate(("5000-deep array", "head_dim 0", "top-k over experts")):
        overrides = ["model=hf", f"model.config={_file(tmp_path, f'c{i}', HOSTILE[name][0])}", "device=cpu"]
        record = run_job(hydra_compose(overrides), JobInfo(job_dir=tmp_path / str(i), overrides=overrides))
        assert record["status"] == "invalid", (name, record["error"])
        assert (record["error"]["type"], record["error"]["phase"]) == ("ConfigError", "config")
        assert record["error"]["message"].startswith("Invalid config: model.config=")
        assert record["metrics"]["tokens_per_s"] is None


@pytest.mark.slow
def test_a_config_swapped_after_validation_is_not_what_the_ranks_build(hydra_compose, tmp_path: Path) -> None:
    """The job's steps in-process: validate (planned), then the file is replaced by a 60,000-token
    model, then the rank runs. It builds from the bytes validated: the record's parameter count
    and hash are the validated file's, and the first loss is that of a 512-token model at random
    initialisation (ln 512 = 6.2; ln 60000 = 11.0 was the symptom)."""
    from flopsweep.job.lifecycle import launched, new_run, planned, sized
    from flopsweep.job.records import measured, recorded
    from flopsweep.job.result import JobInfo, JobResult
    from flopsweep.record import METRICS_FILE

    path = _file(tmp_path, "config", QWEN)
    overrides = ["model=hf", f"model.config={path}", "device=cpu", "precision=fp32"]
    overrides += ["steps.warmup=1", "steps.measure=1", "batch.micro_batch_size=1"]
    cfg, info = hydra_compose(overrides), JobInfo(job_dir=tmp_path / "job", overrides=overrides)
    info.job_dir.mkdir()
    job = JobResult(path=info.job_dir / METRICS_FILE, cfg=cfg, run=new_run(cfg, info))
    assert planned(job, info) is None and job.status is None
    validated = hf.n_params(job.cfg.model)
    Path(path).write_text(json.dumps({**QWEN, "vocab_size": 60000, "hidden_size": 256}))
    record = recorded(measured(launched(sized(job))))
    assert record["status"] == "ok", record["error"]
    assert record["model"]["n_params"] == validated == 459_520
    assert record["model"]["config_sha256"] == record["config"]["model"]["config_sha256"]
    assert record["model"]["config_sha256"] == hf.load(_file(tmp_path, "again", QWEN)).sha256
    assert abs(record["metrics"]["loss_first"] - math.log(512)) < 0.5, record["metrics"]["loss_first"]


@pytest.mark.slow
def test_a_sweep_over_hostile_configs_records_each_and_prints_its_summary(tmp_path: Path) -> None:
    """``run.py -m`` over three hostile files and a good one: every job has its record (three
    ``invalid`` naming model.config, one ``ok``), the sweep prints its summary, and no traceback."""
    files = [
        _file(tmp_path, "deep", HOSTILE["5000-deep array"][0]),
        _file(tmp_path, "kv", HOSTILE["kv heads not dividing heads"][0]),
        _file(tmp_path, "act", HOSTILE["unknown hidden_act"][0]),
        "qwen3-tiny",
    ]
    proc = run_sweep(
        tmp_path / "sweep",
        "model=hf",
        f"model.config={','.join(files)}",
        "device=cpu",
        "precision=fp32",
        "steps.warmup=1",
        "steps.measure=1",
    )
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output[-3000:]
    assert "flopsweep summary:" in proc.stdout, output[-3000:]
    recs = records(tmp_path / "sweep")
    by_config = {r["config"]["model"]["config"]: r for r in recs}
    assert len(recs) == 4 and set(by_config) == set(files)
    for name in files[:3]:
        assert by_config[name]["status"] == "invalid", by_config[name]["error"]
        assert by_config[name]["error"]["message"].startswith("Invalid config: model.config=")
    assert by_config["qwen3-tiny"]["status"] == "ok", by_config["qwen3-tiny"]["error"]
