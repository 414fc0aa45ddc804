"""Hydra composition of conf/ into flopsweep.config.RunConfig, and flopsweep.config.validate."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from flopsweep import config as fconfig
from flopsweep.config import (
    AttentionConfig,
    BackendConfig,
    BatchConfig,
    ConfigError,
    ModelConfig,
    PrecisionConfig,
    RunConfig,
    validate,
)

CONF = Path(__file__).resolve().parents[1] / "conf"
GROUPS = ("model", "attention", "backend", "precision", "batch")

# DESIGN.md, "Model sizes": n_layer, n_embd, n_head, seq_len, vocab_size
MODEL_TABLE = {
    "gpt-tiny": (2, 128, 4, 128, 512),
    "gpt-125m": (12, 768, 12, 2048, 50304),
    "gpt-350m": (24, 1024, 16, 2048, 50304),
    "gpt-760m": (24, 1536, 16, 2048, 50304),
    "gpt-1.3b": (24, 2048, 16, 2048, 50304),
    "gpt-2.7b": (32, 2560, 32, 2048, 50304),
    "gpt-6.7b": (32, 4096, 32, 2048, 50304),
    "gpt-13b": (40, 5120, 40, 2048, 50304),
    "gpt-1.5b-seed": (24, 2304, 24, 2048, 65),
    "gpt-11b-seed": (14, 8192, 32, 2048, 65),
}


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


ALL_OPTIONS = [(g, name) for g in GROUPS for name in _options(g)]


@pytest.fixture(scope="module")
def hydra_compose():
    fconfig.register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "test", replace=True)
    with initialize_config_dir(config_dir=str(CONF), version_base=None):

        def _compose(overrides: list[str]) -> RunConfig:
            cfg = compose(config_name="config", overrides=overrides, return_hydra_config=False)
            return OmegaConf.to_object(cfg)

        yield _compose


def test_every_group_has_options():
    for g in GROUPS:
        assert _options(g), g
    assert set(MODEL_TABLE) <= set(_options("model"))
    assert {"standard", "sdpa", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math"} <= set(
        _options("attention")
    )
    assert {"single", "ddp", "fsdp", "deepspeed"} <= set(_options("backend"))
    assert set(_options("precision")) == {"bf16", "fp16", "fp32"}


def test_default_composition(hydra_compose):
    cfg = hydra_compose([])
    assert isinstance(cfg, RunConfig)
    assert isinstance(cfg.model, ModelConfig)
    assert cfg.model.name == "gpt-tiny"
    assert cfg.attention.name == "sdpa"
    assert cfg.backend.name == "single"
    assert cfg.precision.name == "bf16"
    assert cfg.batch.name == "fixed"
    assert (cfg.steps.warmup, cfg.steps.measure) == (2, 5)
    assert cfg.nproc_per_node == "auto" and cfg.device == "auto" and cfg.nnodes == 1
    assert cfg.activation_checkpointing is False and cfg.compile is False and cfg.seed == 0


@pytest.mark.parametrize(("group", "name"), ALL_OPTIONS, ids=[f"{g}={n}" for g, n in ALL_OPTIONS])
def test_every_option_composes_to_runconfig(hydra_compose, group, name):
    cfg = hydra_compose([f"{group}={name}"])
    assert isinstance(cfg, RunConfig)
    sub = getattr(cfg, group)
    expected_type = {
        "model": ModelConfig,
        "attention": AttentionConfig,
        "backend": BackendConfig,
        "precision": PrecisionConfig,
        "batch": BatchConfig,
    }[group]
    assert isinstance(sub, expected_type)
    if group in ("model", "attention", "precision", "batch"):
        assert sub.name == name
    if group == "model" and name in MODEL_TABLE:
        m = sub
        assert (m.n_layer, m.n_embd, m.n_head, m.seq_len, m.vocab_size) == MODEL_TABLE[name]
    if group == "backend":
        if name.startswith("zero"):
            assert sub.name == "deepspeed"
            assert sub.zero_stage == int(name[-1])
        else:
            assert sub.name == name
    # every shipped option passes validation on this machine, unless it needs CUDA
    needs_cuda = (group == "precision" and name == "fp16") or (
        group == "attention" and name in ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient")
    )
    if not torch.cuda.is_available() and not needs_cuda:
        validate(dataclasses.replace(cfg, device="cpu"))


def test_deepspeed_option_defaults(hydra_compose):
    b = hydra_compose(["backend=deepspeed"]).backend
    assert b.zero_stage == 3
    assert b.reduce_bucket_size is None
    assert b.stage3_prefetch_bucket_size is None
    assert b.stage3_param_persistence_threshold is None
    b2 = hydra_compose(["backend=deepspeed", "backend.zero_stage=2"]).backend
    assert b2.zero_stage == 2


def test_overrides_are_typed(hydra_compose):
    cfg = hydra_compose(
        [
            "model=gpt-1.3b",
            "batch.micro_batch_size=8",
            "batch.grad_accum=2",
            "activation_checkpointing=true",
            "nproc_per_node=2",
            "seed=3",
        ]
    )
    assert cfg.batch.micro_batch_size == 8 and cfg.batch.grad_accum == 2
    assert cfg.activation_checkpointing is True
    assert cfg.nproc_per_node == "2"
    assert cfg.seed == 3


@pytest.mark.parametrize("override", ["model.n_layers=3", "batch.micro_batch=2", "devices=cpu"])
def test_typo_key_fails_at_composition(hydra_compose, override):
    with pytest.raises(ConfigCompositionException):
        hydra_compose([override])


def test_wrong_type_fails_at_composition(hydra_compose):
    with pytest.raises(ConfigCompositionException):
        hydra_compose(["model.n_layer=three"])


def test_unknown_option_fails_at_composition(hydra_compose):
    with pytest.raises(ConfigCompositionException):
        hydra_compose(["model=gpt-42b"])


# ---------------------------------------------------------------- validate


def _cpu(**kw) -> RunConfig:
    return dataclasses.replace(RunConfig(device="cpu"), **kw)


def _raises(cfg: RunConfig, key: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert key in str(info.value)
    assert info.value.key == key
    return info.value


def test_valid_default_cpu_config_passes():
    out = validate(_cpu())
    assert out.device == "cpu" and out.nproc_per_node == "1"


def test_n_embd_not_divisible_by_n_head():
    cfg = _cpu(model=dataclasses.replace(ModelConfig(), n_embd=100, n_head=3))
    err = _raises(cfg, "model.n_embd")
    assert "n_head" in str(err)


def test_zero_stage_4():
    cfg = _cpu(backend=dataclasses.replace(BackendConfig(), name="deepspeed", zero_stage=4))
    err = _raises(cfg, "backend.zero_stage")
    assert "4" in str(err)


def test_micro_batch_size_zero():
    _raises(_cpu(batch=dataclasses.replace(BatchConfig(), micro_batch_size=0)), "batch.micro_batch_size")


def test_grad_accum_zero():
    _raises(_cpu(batch=dataclasses.replace(BatchConfig(), grad_accum=0)), "batch.grad_accum")


def test_single_backend_with_two_ranks():
    cfg = _cpu(backend=dataclasses.replace(BackendConfig(), name="single"), nproc_per_node="2")
    err = _raises(cfg, "backend")
    assert "nproc_per_node" in str(err)


def test_nproc_not_an_integer():
    cfg = _cpu(backend=dataclasses.replace(BackendConfig(), name="ddp"), nproc_per_node="abc")
    err = _raises(cfg, "nproc_per_node")
    assert "abc" in str(err)


def test_nproc_zero():
    cfg = _cpu(backend=dataclasses.replace(BackendConfig(), name="ddp"), nproc_per_node="0")
    _raises(cfg, "nproc_per_node")


def test_device_gpu_is_not_a_device():
    err = _raises(_cpu(device="gpu"), "device")
    assert "gpu" in str(err)


def test_fp16_on_cpu():
    _raises(_cpu(precision=PrecisionConfig(name="fp16")), "precision")


@pytest.mark.parametrize("attn", ["sdpa-flash", "sdpa-cudnn", "sdpa-efficient"])
def test_cuda_only_attention_on_cpu(attn):
    err = _raises(_cpu(attention=AttentionConfig(name=attn)), "attention")
    assert attn in str(err)


def test_unknown_names():
    _raises(_cpu(attention=AttentionConfig(name="flash")), "attention.name")
    _raises(_cpu(backend=BackendConfig(name="megatron")), "backend.name")
    _raises(_cpu(precision=PrecisionConfig(name="fp8")), "precision.name")


def test_more_ranks_than_visible_gpus():
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cfg = dataclasses.replace(
        RunConfig(),
        device="cuda",
        nproc_per_node=str(visible + 1),
        backend=BackendConfig(name="ddp"),
        precision=PrecisionConfig(name="fp32"),
    )
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    msg = str(info.value)
    if visible == 0:
        assert info.value.key == "device"
        assert "no CUDA GPU" in msg
    else:
        assert info.value.key == "nproc_per_node"
        assert "visible" in msg


def test_error_message_names_key_value_and_fix():
    cfg = _cpu(batch=dataclasses.replace(BatchConfig(), micro_batch_size=0))
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    msg = str(info.value)
    assert "batch.micro_batch_size=0" in msg
    assert "Fix:" in msg
    assert isinstance(info.value, ValueError)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only resolution")
@pytest.mark.parametrize("backend", ["single", "ddp", "fsdp", "deepspeed"])
def test_auto_resolves_to_cpu_and_one_rank(backend):
    cfg = dataclasses.replace(
        RunConfig(), device="auto", nproc_per_node="auto", backend=BackendConfig(name=backend)
    )
    assert cfg.device == "auto" and cfg.nproc_per_node == "auto"
    out = validate(cfg)
    assert out.device == "cpu"
    assert out.nproc_per_node == "1"
    assert isinstance(out, RunConfig)
    # validate returns a copy and leaves its input alone
    assert cfg.device == "auto" and cfg.nproc_per_node == "auto"


def test_explicit_nproc_kept_as_string():
    out = validate(_cpu(backend=BackendConfig(name="ddp"), nproc_per_node="3"))
    assert out.nproc_per_node == "3"
