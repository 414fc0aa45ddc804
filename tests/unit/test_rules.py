"""Cross-axis rules (flopsweep.rules): each refuses its combination before launch, in one line
that names the key, the value and the fix."""

from __future__ import annotations

import pytest

from flopsweep import rules
from flopsweep.config import ConfigError
from flopsweep.plan import validate


@pytest.mark.parametrize(
    "overrides, says",
    [
        (["precision=fp8-rowwise", "backend=fsdp"], "pick precision=fp8 (tensorwise)"),
        (["precision=fp8", "backend=ddp"], "set backend=fsdp"),
        (["precision=fp8", "backend=single"], "set backend=fsdp"),
        (["precision=fp8", "backend=zero3"], "set backend=fsdp"),
    ],
)
def test_fp8_all_gather_needs_fsdp_and_tensorwise(hydra_compose, overrides: list[str], says: str) -> None:
    cfg = hydra_compose([*overrides, "precision.fp8_all_gather=true"])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    message = str(err.value)
    assert err.value.key == "precision.fp8_all_gather" and err.value.value is True
    assert message.startswith("Invalid config: precision.fp8_all_gather=true: ") and says in message
    assert "\n" not in message


def test_fp8_all_gather_on_fsdp_with_tensorwise_passes(hydra_compose) -> None:
    cfg = hydra_compose(["precision=fp8", "backend=fsdp", "precision.fp8_all_gather=true"])
    assert validate(cfg) is cfg


def test_compiling_without_warmup_is_refused(hydra_compose) -> None:
    cfg = hydra_compose(["compile=true", "steps.warmup=0"])
    with pytest.raises(ConfigError) as err:
        rules.check(cfg)
    assert err.value.key == "steps.warmup"


def test_every_n_beyond_the_layers_is_refused_and_within_them_passes(hydra_compose) -> None:
    """gpt-tiny has 2 blocks: every=3 would checkpoint none of them (a `none` run named every_n)."""
    cfg = hydra_compose(["activation_checkpointing=every_n", "activation_checkpointing.every=3"])
    with pytest.raises(ConfigError) as err:
        rules.check(cfg)
    assert err.value.key == "activation_checkpointing.every" and err.value.value == 3
    assert "model.n_layer=2" in str(err.value) and "\n" not in str(err.value)
    rules.check(hydra_compose(["activation_checkpointing=every_n", "activation_checkpointing.every=2"]))


def test_every_n_beyond_the_layers_is_refused_for_model_hf_and_beyond_a_searchs_smallest_size(
    hydra_compose,
) -> None:
    """model=hf's n_layer comes from its config.json (qwen3-tiny: 2 blocks), read by validation before
    the rule; a search may settle on any size from search.min_n_layer up, so every above that would
    record a `none` run as every_n (a fresh-user trial found a search settle on 5 blocks, every=8)."""
    every = ["device=cpu", "activation_checkpointing=every_n"]
    with pytest.raises(ConfigError) as hf:
        validate(hydra_compose(["model=hf", *every, "activation_checkpointing.every=3"]))
    assert (hf.value.key, hf.value.value) == ("activation_checkpointing.every", 3)
    assert "model.n_layer=2" in str(hf.value) and "every between 1 and 2" in str(hf.value)
    assert (
        validate(hydra_compose(["model=hf", *every, "activation_checkpointing.every=2"])).model.n_layer == 2
    )
    search = [
        "model=llama-tiny",
        "search.model=largest",
        "search.min_n_layer=4",
        "search.max_n_layer=64",
        *every,
    ]
    with pytest.raises(ConfigError) as big:
        rules.check(hydra_compose([*search, "activation_checkpointing.every=5"]))
    message = str(big.value)
    assert "search.min_n_layer=4" in message and "\n" not in message
    assert "set search.min_n_layer=5 or more, or activation_checkpointing.every between 1 and 4" in message
    rules.check(
        hydra_compose([*search, "activation_checkpointing.every=4"])
    )  # above llama-tiny's 2: searched


def test_every_n_under_a_search_from_one_block_suggests_only_raising_the_start(hydra_compose) -> None:
    """With search.min_n_layer=1 no every above 1 passes, so the fix does not offer one (a trial
    followed "every=1 or less" to 0, which is refused too)."""
    args = ["model=llama-tiny", "device=cpu", "search.model=largest", "activation_checkpointing=every_n"]
    with pytest.raises(ConfigError) as err:
        rules.check(hydra_compose(args))  # every=2 by default
    assert str(err.value).endswith("Fix: set search.min_n_layer=2 or more."), str(err.value)


@pytest.mark.parametrize("key, value", [("plan_gpu", "H100-80GB"), ("plan_gpu_memory_gib", 80.0)])
def test_a_planned_gpu_in_a_run_is_warned_about_unless_it_is_here(hydra_compose, key: str, value) -> None:
    """``plan_gpu`` and ``plan_gpu_memory_gib`` name the GPU that plan=true plans for: a run given one
    without plan=true trained on this machine's device in silence (a fresh-user trial). It warns in
    one line naming the key, the value, what it measures instead and the fix; not under plan=true,
    and not on the GPU named (a sweep file names the GPUs it is written for)."""
    from flopsweep.job import warn_plan_gpu

    cfg = validate(hydra_compose(["model=gpt-tiny", f"{key}={value}"]))
    line = warn_plan_gpu(cfg, None)
    assert line is not None and line.startswith(f"{key}={value} is read by plan=true only; ")
    assert "this run measures this machine's CPU" in line and "add plan=true" in line and "\n" not in line
    assert "this run measures NVIDIA A100-SXM4-40GB" in warn_plan_gpu(cfg, "NVIDIA A100-SXM4-40GB")
    here = warn_plan_gpu(cfg, "NVIDIA H100 80GB HBM3")
    assert (here is None) == (key == "plan_gpu")  # a memory size names no GPU: always warned
    if key == "plan_gpu":  # a whole word of the name only: H200 is not GH200's, A10 not A100's
        assert warn_plan_gpu(
            validate(hydra_compose(["model=gpt-tiny", "plan_gpu=H200"])), "NVIDIA GH200 480GB"
        )
        assert warn_plan_gpu(
            validate(hydra_compose(["model=gpt-tiny", "plan_gpu=A10"])), "NVIDIA A100-SXM4-80GB"
        )
        assert (
            warn_plan_gpu(
                validate(hydra_compose(["model=gpt-tiny", "plan_gpu=A100-80GB"])), "NVIDIA A100-SXM4-80GB"
            )
            is None
        )
    planned = validate(hydra_compose(["model=gpt-tiny", f"{key}={value}", "plan=true"]))
    assert warn_plan_gpu(planned, None) is None
    assert warn_plan_gpu(validate(hydra_compose(["model=gpt-tiny"])), None) is None


@pytest.mark.parametrize("key, value", [("plan_gpu", "H100"), ("plan_gpu_memory_gib", 80.0)])
def test_a_planned_gpu_with_device_cpu_is_refused(hydra_compose, key: str, value) -> None:
    """``plan_gpu`` with ``device=cpu`` gave a plan half for the GPU (its memory and datasheet) and
    half for the CPU (its estimate and refusals); refused in one line, and ``device=auto`` plans it."""
    with pytest.raises(ConfigError) as err:
        validate(hydra_compose(["model=gpt-tiny", "plan=true", "device=cpu", f"{key}={value}"]))
    assert (err.value.key, err.value.value) == (key, value) and "\n" not in str(err.value)
    assert "Fix: drop device=cpu (device=auto, the default, plans as on the GPUs named)" in str(err.value)
    assert validate(hydra_compose(["model=gpt-tiny", "plan=true", f"{key}={value}"])).device == "auto"
    assert validate(hydra_compose(["model=gpt-tiny", "device=cpu", f"{key}={value}"])).plan is False  # a run
