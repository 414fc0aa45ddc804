"""``compile_scope`` and ``compile_mode`` (flopsweep.compile_levers): the rules' one-line refusals,
what the builder compiles (the whole model or each block, in which mode), the keys in the set-up
identity, the calibration key and the analysis columns. No compile runs here (torch.compile
compiles at the first call; the integration test trains compiled models)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

from flopsweep.config import ConfigError

BASE = ["model=llama-tiny", "device=cpu", "precision=fp32", "compile=true"]
GPU = ["model=llama-tiny", "device=cuda", "precision=bf16", "compile=true"]
"""A run on a GPU: the rules of ``flopsweep.rules`` need no machine; :func:`_gpu_env` places it."""


def _gpu_env():
    from flopsweep.plan import Environment

    return Environment(cuda_available=True, gpu_count=1, bf16_supported=True, capability=(9, 0), cpu_count=4)


REFUSED = {
    "unknown scope": (["compile_scope=layer"], "compile_scope", "must be one of block, model"),
    "unknown mode": (["compile_mode=fast"], "compile_mode", "must be one of default, reduce-overhead"),
    "scope without compile": (["compile=false", "compile_scope=model"], "compile_scope", "set compile=true"),
    "mode without compile": (
        ["compile=false", "compile_mode=max-autotune"],
        "compile_mode",
        "set compile=true",
    ),
    "model scope on fsdp with tp": (
        ["backend=fsdp", "nproc_per_node=2", "parallel.tp=2", "compile_scope=model"],
        "compile_scope",
        "set parallel.tp=1, or compile_scope=block",
    ),
    "model scope on fsdp with pp": (
        ["backend=fsdp", "nproc_per_node=2", "parallel.pp=2", "compile_scope=model"],
        "compile_scope",
        "untested with parallel.pp=2",
    ),
    "model scope on deepspeed": (
        ["backend=zero2", "nproc_per_node=2", "compile_scope=model"],
        "compile_scope",
        "backend.deepcompile=true",
    ),
    "cuda graphs on the cpu": (["compile_mode=reduce-overhead"], "compile_mode", "set device=cuda"),
    "max-autotune's graphs on the cpu": (
        ["compile_mode=max-autotune"],
        "compile_mode",
        "compile_mode=max-autotune-no-cudagraphs",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED.values()), ids=list(REFUSED))
def test_each_refusal_is_one_line_naming_the_key_the_value_and_the_fix(hydra_compose, case) -> None:
    from flopsweep.plan import validate

    overrides, key, words = case
    args = [o for o in BASE if not any(o.startswith(x.split("=")[0] + "=") for x in overrides)]
    with pytest.raises(ConfigError) as err:
        validate(hydra_compose([*args, *overrides]))
    text = str(err.value)
    assert err.value.key == key and words in text and "Fix:" in text and "\n" not in text
    assert f"{key}={err.value.value!r}" in text


GPU_REFUSED = {
    "graphs on fsdp": (["backend=fsdp", "nproc_per_node=1"], "pick backend=single or backend=ddp"),
    "graphs on zero3": (["backend=zero3", "nproc_per_node=1"], "fixed addresses"),
    "graphs with in-backward": (["optim.in_backward=true", "optim.grad_clip=0"], "optim.in_backward=false"),
    "graphs with accumulation": (["batch.grad_accum=2"], "pytorch#169545"),
}


@pytest.mark.parametrize("case", list(GPU_REFUSED.values()), ids=list(GPU_REFUSED))
def test_cuda_graphs_are_refused_where_the_step_cannot_keep_them(hydra_compose, case) -> None:
    """On a (described) GPU: the backends that free or re-gather weights, the optimizer in backward,
    and accumulation; each fix offers the mode without graphs."""
    from helpers import make_plan

    overrides, words = case
    with pytest.raises(ConfigError) as err:
        make_plan(hydra_compose([*GPU, *overrides, "compile_mode=reduce-overhead"]), _gpu_env())
    assert err.value.key == "compile_mode" and words in str(err.value)
    assert "compile_mode=default (no CUDA graphs)" in str(err.value) and "\n" not in str(err.value)


def test_accumulation_set_by_the_global_batch_is_refused_when_the_plan_resolves(hydra_compose) -> None:
    """``batch.global_batch_size`` sets ``grad_accum`` only once the world size is known."""
    from helpers import make_plan

    args = [*GPU, "compile_mode=max-autotune", "batch.micro_batch_size=2"]
    with pytest.raises(ConfigError, match="batch.grad_accum=4") as err:
        make_plan(hydra_compose([*args, "batch.global_batch_size=8"]), _gpu_env())
    assert err.value.key == "compile_mode"
    plan = make_plan(hydra_compose([*args, "batch.global_batch_size=2"]), _gpu_env())
    assert plan.cfg.batch.grad_accum == 1 and plan.cfg.compile_mode == "max-autotune"


@pytest.mark.parametrize(
    "overrides",
    [
        ["compile_scope=model", "compile_mode=reduce-overhead"],
        ["compile_scope=model", "backend=ddp", "compile_mode=max-autotune"],
        ["compile_scope=model", "backend=fsdp", "compile_mode=max-autotune-no-cudagraphs"],
        ["backend=fsdp", "compile_mode=max-autotune-no-cudagraphs"],
        ["compile_scope=block", "compile_mode=reduce-overhead", "activation_checkpointing=full"],
    ],
)
def test_what_runs_is_accepted_and_kept_in_the_config(hydra_compose, overrides) -> None:
    from helpers import make_plan

    cfg = make_plan(hydra_compose([*GPU, "nproc_per_node=1", *overrides]), _gpu_env()).cfg
    for item in overrides:
        key, value = item.split("=")
        if key.startswith("compile_"):
            assert getattr(cfg, key) == value


def _options(compiled) -> dict:
    """The Inductor options a ``torch.compile``'d callable was made with (its dynamo context's
    ``compiler_config``: ``mode``'s options over Inductor's defaults)."""
    return inspect.getclosurevars(compiled).nonlocals["self"].compiler_config


def _built(hydra_compose, *overrides: str):
    from flopsweep.parallelize import build_model
    from flopsweep.plan import validate

    cfg = validate(hydra_compose([*BASE, *overrides]))
    return build_model(cfg, torch.device("cpu")), cfg


def test_model_scope_compiles_the_whole_module_and_no_block(hydra_compose) -> None:
    """``compile_scope=model``: the module's own call is compiled (its forward, loss included); the
    blocks and the loss head are the eager modules inside it; the checkpoint wrappers stay."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    from flopsweep.models import family

    model, cfg = _built(hydra_compose, "compile_scope=model", "activation_checkpointing=full")
    assert model._compiled_call_impl is not None
    assert _options(model._compiled_call_impl)["triton.cudagraphs"] is False
    blocks = list(family(cfg.model).blocks(model))
    assert blocks and all(isinstance(b, CheckpointWrapper) and b._compiled_call_impl is None for b in blocks)
    assert "head_loss" not in vars(model)  # the class's method, not a compiled copy


def test_block_scope_compiles_each_block_and_the_head_in_the_mode(hydra_compose) -> None:
    from flopsweep.models import family

    model, cfg = _built(hydra_compose, "compile_mode=max-autotune-no-cudagraphs")
    assert model._compiled_call_impl is None
    blocks = list(family(cfg.model).blocks(model))
    for compiled in [b._compiled_call_impl for b in blocks] + [vars(model)["head_loss"]]:
        options = _options(compiled)
        assert options["max_autotune"] is True and options["triton.cudagraphs"] is False


def test_the_cuda_graph_modes_are_torchs(hydra_compose) -> None:
    """:data:`CUDAGRAPH_MODES` and :data:`NO_CUDAGRAPHS` agree with torch's own mode table."""
    from torch._inductor import list_mode_options

    from flopsweep.compile_levers import COMPILE_MODES, CUDAGRAPH_MODES, NO_CUDAGRAPHS

    table = list_mode_options()
    assert set(COMPILE_MODES) <= set(table)
    assert {m for m in COMPILE_MODES if table[m].get("triton.cudagraphs")} == set(CUDAGRAPH_MODES)
    for mode, other in NO_CUDAGRAPHS.items():
        assert not table[other].get("triton.cudagraphs")
        assert table[other].get("max_autotune") == table[mode].get("max_autotune")


def test_the_trainer_marks_each_micro_batch_only_under_cuda_graphs(hydra_compose) -> None:
    from flopsweep.compile_levers import uses_cudagraphs
    from flopsweep.plan import validate

    cfg = validate(hydra_compose([*BASE]))
    assert not uses_cudagraphs(cfg)
    graphs = dataclasses.replace(cfg, compile_mode="reduce-overhead")
    assert uses_cudagraphs(graphs) and not uses_cudagraphs(dataclasses.replace(graphs, compile=False))


def test_the_keys_are_part_of_the_set_up_and_the_calibration(hydra_compose) -> None:
    """A record made before the keys is the same set-up as ``block``/``default`` today; another scope
    or mode is another set-up and another calibration; the analysis has a column for each."""
    from flopsweep.columns import SETUP_SPECS
    from flopsweep.identity import calibration_key, setup_key
    from flopsweep.plan import validate

    cfg = dataclasses.asdict(validate(hydra_compose(BASE)))
    old = {k: v for k, v in cfg.items() if k not in ("compile_scope", "compile_mode")}
    model = {**cfg, "compile_scope": "model"}
    graphs = {**cfg, "compile_mode": "reduce-overhead"}
    keys = [setup_key({"config": c}) for c in (cfg, old, model, graphs)]
    assert keys[0] == keys[1] and len(set(keys)) == 3
    calib = [calibration_key({"config": c}) for c in (cfg, old, model, graphs)]
    assert calib[0] == calib[1] and len(set(calib)) == 3
    paths = {c.path for c in SETUP_SPECS}
    assert {"config.compile_scope", "config.compile_mode"} <= paths


def test_the_compute_probe_times_blocks_without_graphs(hydra_compose) -> None:
    """The probe's key names the mode it compiles in (without CUDA graphs), and none by default, so
    that the probes of runs before the keys are found again."""
    from flopsweep.compute_probe import probe_key
    from flopsweep.plan import validate

    cfg = validate(hydra_compose(BASE))
    plain = probe_key(cfg, "cpu")["setup"]
    assert "compile_mode" not in plain
    graphs = probe_key(dataclasses.replace(cfg, compile_mode="max-autotune"), "cpu")["setup"]
    assert graphs["compile_mode"] == "max-autotune-no-cudagraphs"
    assert probe_key(dataclasses.replace(cfg, compile_scope="model"), "cpu")["setup"] == plain
