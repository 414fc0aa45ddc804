"""Hydra composition of conf/ into flopsweep.config.RunConfig, and flopsweep.plan (validate, resolve)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from flopsweep.attention import KERNELS, BlockSparseConfig
from flopsweep.backends import BACKENDS, DeepSpeedConfig
from flopsweep.config import (
    AttentionConfig,
    BackendConfig,
    BatchConfig,
    ConfigError,
    ModelConfig,
    PrecisionConfig,
    RunConfig,
)
from flopsweep.models import MODELS
from flopsweep.plan import Environment, option_schemas, plan, resolve
from flopsweep.precision import PRECISIONS

CONF = Path(__file__).resolve().parents[2] / "conf"
GROUPS = ("model", "attention", "backend", "precision", "batch")
CPU = Environment(cpu_count=2)
"""A machine with no GPU: resolution does not depend on the one the tests run on."""


def validate(cfg: RunConfig, env: Environment = CPU) -> RunConfig:
    """The config a job would run: validated and resolved on ``env``."""
    return plan(cfg, env).cfg


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


def test_every_group_has_options():
    for g in GROUPS:
        assert _options(g), g
    assert set(MODEL_TABLE) <= set(_options("model"))
    # every registered option has its YAML file, and every YAML file names a registered option
    assert set(_options("attention")) == set(KERNELS)
    assert set(BACKENDS) <= set(_options("backend"))
    assert set(_options("precision")) == set(PRECISIONS)


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
    assert cfg.activation_checkpointing.name == "none" and cfg.compile is False and cfg.seed == 0


@pytest.mark.parametrize(("group", "name"), ALL_OPTIONS, ids=[f"{g}={n}" for g, n in ALL_OPTIONS])
def test_every_option_composes_to_runconfig(hydra_compose, group, name):
    cfg = hydra_compose([f"{group}={name}"])
    assert isinstance(cfg, RunConfig)
    sub = getattr(cfg, group)
    key = sub.arch if group == "model" else sub.name
    assert type(sub) is option_schemas()[group][key]  # the option's own schema node
    if group in ("model", "attention", "precision", "batch"):
        # model=hf takes its name from its config.json at validation (flopsweep.models.hf.check)
        assert sub.name == ("" if (group, name) == ("model", "hf") else name)
    if group == "model" and name in MODEL_TABLE:
        m = sub
        assert (m.n_layer, m.n_embd, m.n_head, m.seq_len, m.vocab_size) == MODEL_TABLE[name]
    if group == "backend":
        if name.startswith("zero"):
            assert sub.name == "deepspeed"
            assert sub.zero_stage == int(name[-1])
        else:
            assert sub.name == name
    # every shipped option passes validation on a CPU machine, unless its registry says it needs CUDA
    needs_cuda = (group == "precision" and "cpu" not in PRECISIONS[name].devices) or (
        group == "attention" and "cpu" not in KERNELS[name].devices
    )
    if group == "model" and MODELS[sub.arch].n_params(sub) > 2e9:
        return  # a 70B model validates too, but there is no point building the check's warning
    if not needs_cuda:
        validate(dataclasses.replace(cfg, device="cpu"))
    else:
        with pytest.raises(ConfigError):
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
    assert cfg.activation_checkpointing.name == "full"  # the old bool, read as the policy
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
    cfg = _cpu(backend=DeepSpeedConfig(zero_stage=4))
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
    _raises(_cpu(precision=PrecisionConfig(name="fp4")), "precision.name")


@pytest.mark.parametrize("visible", [0, 1, 2])
def test_more_ranks_than_visible_gpus(visible):
    cfg = dataclasses.replace(
        RunConfig(),
        device="cuda",
        nproc_per_node=str(visible + 1),
        backend=BackendConfig(name="ddp"),
        precision=PrecisionConfig(name="fp32"),
    )
    env = Environment(cuda_available=visible > 0, gpu_count=visible, bf16_supported=True, capability=(9, 0))
    with pytest.raises(ConfigError) as info:
        validate(cfg, env)
    msg = str(info.value)
    if visible == 0:
        assert info.value.key == "device"
        assert "no CUDA GPU" in msg
    else:
        assert info.value.key == "nproc_per_node"
        assert "visible" in msg


def test_validate_depends_on_the_config_alone(monkeypatch):
    """validate() reads no environment; resolve() takes the machine as an argument."""
    from flopsweep.plan import validate as pure

    cfg = _cpu(nnodes=2, backend=BackendConfig(name="ddp"))
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    assert pure(cfg) is cfg  # nothing environment-dependent is checked here
    with pytest.raises(ConfigError, match="nnodes"):
        resolve(cfg, CPU)
    assert resolve(cfg, Environment(cpu_count=2, under_slurm=True, in_submitit=True)).world_size == 2


@pytest.mark.parametrize(
    ("cfg_kw", "key", "owner"),
    [
        ({"attention": AttentionConfig(name="sdpa")}, "window_blocks", "attention=blocksparse"),
        ({"backend": BackendConfig(name="single")}, "zero_stage", "backend=deepspeed"),
        ({"batch": BatchConfig()}, "max_micro_batch_size", "batch=auto"),
    ],
)
def test_key_of_another_option_names_its_option(cfg_kw, key, owner):
    """``+attention.window_blocks=0`` on a dense kernel: refused, naming the option it belongs to."""
    cfg = _cpu(**cfg_kw)
    group = next(iter(cfg_kw))
    setattr(getattr(cfg, group), key, 0)  # what OmegaConf.to_object does with a '+' override
    err = _raises(cfg, f"{group}.{key}")
    assert owner in str(err)


@pytest.mark.parametrize(
    ("override", "owner"),
    [
        ("attention.window_blocks=0", "attention=blocksparse"),
        ("backend.zero_stage=2", "backend=deepspeed"),
        ("batch.max_micro_batch_size=300", "batch=auto"),
    ],
)
def test_key_of_another_option_fails_composition(hydra_compose, override, owner):
    """Without '+', Hydra's schema refuses the key before any run (run.py's pre-check names the option)."""
    with pytest.raises(ConfigCompositionException):
        hydra_compose([override])
    from run import foreign_option_keys

    assert owner in foreign_option_keys([override])


def test_dense_record_carries_only_its_own_keys(hydra_compose):
    cfg = validate(dataclasses.replace(hydra_compose(["attention=sdpa"]), device="cpu"))
    assert set(dataclasses.asdict(cfg.attention)) == {"name", "density"}
    assert set(dataclasses.asdict(cfg.backend)) == {"name"}
    bs = validate(dataclasses.replace(hydra_compose(["attention=blocksparse"]), device="cpu"))
    assert isinstance(bs.attention, BlockSparseConfig) and bs.attention.impl == "gather"


def test_option_name_set_by_hand_is_refused():
    """attention.name=blocksparse on a dense node would lack the layout keys."""
    err = _raises(_cpu(attention=AttentionConfig(name="blocksparse")), "attention.name")
    assert "attention=blocksparse" in str(err)


@pytest.mark.parametrize("overrides", [["compile=true"], ["attention=blocksparse", "attention.impl=flex"]])
def test_compiling_run_needs_warmup(overrides, hydra_compose):
    cfg = dataclasses.replace(hydra_compose([*overrides, "steps.warmup=0"]), device="cuda")
    err = _raises(cfg, "steps.warmup")
    assert "compiles" in str(err)


def test_flex_without_warmup_refused():
    err = _raises(
        dataclasses.replace(
            _cpu(attention=AttentionConfig(name="flex")),
            steps=dataclasses.replace(RunConfig().steps, warmup=0),
        ),
        "steps.warmup",
    )
    assert "steps.warmup=2" in str(err)


@pytest.mark.parametrize("name", ["fp8", "fp8-rowwise"])
def test_fp8_refused_on_cpu_and_old_gpus(name, hydra_compose):
    cfg = hydra_compose([f"precision={name}"])
    err = _raises(dataclasses.replace(cfg, device="cpu"), "precision")
    assert "8.9" in str(err)
    ampere = Environment(cuda_available=True, gpu_count=1, bf16_supported=True, capability=(8, 0))
    with pytest.raises(ConfigError, match="this GPU is 8.0"):
        validate(dataclasses.replace(cfg, device="cuda"), ampere)


def test_cpu_ranks_capped_at_a_multiple_of_the_cores():
    cfg = _cpu(backend=BackendConfig(name="ddp"), nproc_per_node="100000")
    err = _raises(cfg, "nproc_per_node")
    assert "per core" in str(err)


@pytest.mark.parametrize("backend", ["single", "ddp", "fsdp", "deepspeed"])
def test_auto_resolves_to_cpu_and_one_rank(backend):
    cfg = dataclasses.replace(
        RunConfig(), device="auto", nproc_per_node="auto", backend=BACKENDS[backend].schema()
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


def test_error_message_names_key_value_and_fix():
    cfg = _cpu(batch=dataclasses.replace(BatchConfig(), micro_batch_size=0))
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    msg = str(info.value)
    assert "batch.micro_batch_size=0" in msg
    assert "Fix:" in msg
    assert isinstance(info.value, ValueError)


def test_schema_nodes_are_no_options(hydra_compose) -> None:
    """Every schema node sits outside its group (``schema/<group>/base_*``): Hydra lists only the
    YAML files as the group's options and refuses ``<group>=base_*`` as an unknown option; the
    torch-free :data:`flopsweep.options.OPTION_SCHEMAS` is exactly what the registries name."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException

    from flopsweep.options import GROUP_BASES, OPTION_SCHEMAS, schema_nodes
    from flopsweep.plan import option_names

    registries = {
        group: {name: schema for name, schema in options.items() if schema is not GROUP_BASES[group]}
        for group, options in option_schemas().items()
    }
    assert registries == OPTION_SCHEMAS
    assert schema_nodes(), "no schema nodes: the test would check nothing"
    loader = GlobalHydra.instance().config_loader()
    for group, node in schema_nodes():
        options = option_names(group)
        assert loader.get_group_options(group) == options and not any(o.startswith("base_") for o in options)
        with pytest.raises(MissingConfigException, match=f"Could not find '{group}/{node}'"):
            hydra_compose([f"{group}={node}", "device=cpu"])
    plan(hydra_compose(["model=gpt-tiny", "device=cpu"]), CPU, choices={"model": "gpt-tiny"})


def test_zero_shorthands_refuse_a_stage_that_contradicts_them(hydra_compose) -> None:
    """``backend=zero<N>`` is ZeRO stage N; another ``backend.zero_stage`` is refused, naming the
    option that runs it. ``backend=deepspeed`` leaves the stage free."""
    from flopsweep.backends import ZERO_SHORTHANDS

    assert {p.stem for p in (CONF / "backend").glob("zero*.yaml")} == set(ZERO_SHORTHANDS)
    for option, stage in ZERO_SHORTHANDS.items():
        cfg = hydra_compose([f"backend={option}", "device=cpu"])
        assert validate_with(cfg, backend=option).backend.zero_stage == stage
        for other in {1, 2, 3} - {stage}:
            cfg = hydra_compose([f"backend={option}", f"backend.zero_stage={other}", "device=cpu"])
            with pytest.raises(ConfigError) as exc:
                validate_with(cfg, backend=option)
            assert str(exc.value) == (
                f"Invalid config: backend.zero_stage={other}: contradicts backend={option}, which is ZeRO "
                f"stage {stage}. Fix: drop the backend.zero_stage override (backend={option} sets it), or "
                f"pick backend=zero{other}, or backend=deepspeed backend.zero_stage={other}."
            )
            free = hydra_compose(["backend=deepspeed", f"backend.zero_stage={other}", "device=cpu"])
            assert validate_with(free, backend="deepspeed").backend.zero_stage == other


def validate_with(cfg: RunConfig, **choices: str) -> RunConfig:
    return plan(cfg, CPU, choices=choices).cfg


@pytest.mark.parametrize(
    ("overrides", "env", "fix"),
    [
        (["backend=deepspeed", "backend.optimizer_impl=adam"], CPU, "backend.optimizer_impl=fused"),
        (["precision=fp16"], CPU, "precision=bf16 or precision=fp32 on the CPU"),
        (
            ["precision=fp8", "device=cuda"],
            Environment(cuda_available=True, gpu_count=1, bf16_supported=True, capability=(8, 0)),
            "precision=bf16 or precision=fp16 or precision=fp32 on this GPU",
        ),
        (
            ["attention=sdpa-flash", "precision=fp32", "device=cuda"],
            Environment(cuda_available=True, gpu_count=1, bf16_supported=True, capability=(9, 0)),
            "or pick attention=standard or sdpa",
        ),
    ],
    ids=["optimizer_impl", "fp16-on-cpu", "fp8-on-ampere", "flash-in-fp32"],
)
def test_a_refusal_fix_names_the_key_to_set(hydra_compose, overrides, env, fix) -> None:
    """The fix of a refusal says which key to set to what (``backend.optimizer_impl=fused``), never
    only a value (``set fused or torch``) or "pick another ..."."""
    with pytest.raises(ConfigError) as exc:
        plan(hydra_compose(overrides), env)
    message = str(exc.value)
    assert fix in message.split("Fix: ")[1] and "another" not in message.split("Fix: ")[1], message
