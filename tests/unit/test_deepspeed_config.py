"""flopsweep.backends.deepspeed_config, checked against DeepSpeed's own config classes."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep.backends import DeepSpeedConfig as ZeroOptions
from flopsweep.backends import deepspeed_config
from flopsweep.config import BatchConfig, ModelConfig, OptimConfig

deepspeed = pytest.importorskip("deepspeed")
from deepspeed.runtime.config import DeepSpeedConfig  # noqa: E402
from deepspeed.runtime.zero.config import DeepSpeedZeroConfig  # noqa: E402

H = 2048
MODEL = ModelConfig(name="gpt-1.3b", n_layer=24, n_embd=H, n_head=16, seq_len=2048, vocab_size=50304)


def _ds(
    *,
    stage=3,
    precision="bf16",
    micro=2,
    accum=3,
    world=4,
    model=MODEL,
    device_type="cpu",
    optim=None,
    **backend_kw,
):
    backend = ZeroOptions(zero_stage=stage, **backend_kw)
    return deepspeed_config(
        backend=backend,
        batch=BatchConfig(micro_batch_size=micro, grad_accum=accum),
        precision=precision,
        optim=optim or OptimConfig(),
        model=model,
        world_size=world,
        device_type=device_type,
    )


def test_stage3_bucket_defaults_from_hidden_size():
    z = _ds(stage=3)["zero_optimization"]
    assert z["stage"] == 3
    assert z["reduce_bucket_size"] == 2048**2 == 4_194_304
    assert z["stage3_prefetch_bucket_size"] == 3774873  # int(0.9 * 2048^2), not 3774873.6
    assert type(z["stage3_prefetch_bucket_size"]) is int
    assert z["stage3_param_persistence_threshold"] == 20480
    assert type(z["stage3_param_persistence_threshold"]) is int
    assert type(z["reduce_bucket_size"]) is int
    assert z["overlap_comm"] is True and z["contiguous_gradients"] is True


@pytest.mark.parametrize("h", [96, 768, 2304, 8192])
def test_bucket_defaults_scale_with_h(h):
    model = dataclasses.replace(MODEL, n_embd=h, n_head=h // 96 if h % 96 == 0 else 16)
    z = _ds(model=model)["zero_optimization"]
    assert z["reduce_bucket_size"] == h * h
    assert z["stage3_prefetch_bucket_size"] == int(0.9 * h * h)
    assert z["stage3_param_persistence_threshold"] == 10 * h
    DeepSpeedZeroConfig(**z)


def test_explicit_bucket_sizes_win():
    z = _ds(
        reduce_bucket_size=123,
        stage3_prefetch_bucket_size=456,
        stage3_param_persistence_threshold=0,
        overlap_comm=False,
    )["zero_optimization"]
    assert z["reduce_bucket_size"] == 123
    assert z["stage3_prefetch_bucket_size"] == 456
    assert z["stage3_param_persistence_threshold"] == 0  # 0 is a value, not "use the default"
    assert z["overlap_comm"] is False


@pytest.mark.parametrize("stage", [1, 2])
def test_stage_1_2_have_no_stage3_keys(stage):
    z = _ds(stage=stage)["zero_optimization"]
    assert z["stage"] == stage
    assert z["reduce_bucket_size"] == H * H
    assert not any(k.startswith("stage3_") for k in z)
    DeepSpeedZeroConfig(**z)


@pytest.mark.parametrize(("micro", "accum", "world"), [(1, 1, 1), (2, 3, 4), (36, 1, 8), (4, 8, 2)])
def test_train_batch_size(micro, accum, world):
    d = _ds(micro=micro, accum=accum, world=world)
    assert d["train_micro_batch_size_per_gpu"] == micro
    assert d["gradient_accumulation_steps"] == accum
    assert d["train_batch_size"] == micro * accum * world


def test_gradient_clipping_and_optimizer_from_optim():
    d = _ds()
    assert d["gradient_clipping"] == 1.0
    d2 = _ds(optim=OptimConfig(grad_clip=0.5, lr=3e-4, beta2=0.99, weight_decay=0.0))
    assert d2["gradient_clipping"] == 0.5
    params = d2["optimizer"]["params"]
    assert d2["optimizer"]["type"] == "AdamW"
    assert params["lr"] == 3e-4 and params["betas"] == [0.9, 0.99] and params["weight_decay"] == 0.0


def test_torch_adam_only_off_cuda():
    assert _ds(device_type="cpu")["optimizer"]["params"]["torch_adam"] is True
    assert _ds(device_type="cuda")["optimizer"]["params"]["torch_adam"] is False


def test_precision_sections():
    bf16 = _ds(precision="bf16")
    assert bf16["bf16"] == {"enabled": True}
    assert "fp16" not in bf16
    fp16 = _ds(precision="fp16")
    assert fp16["fp16"]["enabled"] is True
    assert fp16["fp16"]["loss_scale"] == 0  # 0 = dynamic loss scaling
    assert "bf16" not in fp16
    fp32 = _ds(precision="fp32")
    assert "bf16" not in fp32 and "fp16" not in fp32


@pytest.mark.parametrize("stage", [1, 2, 3])
@pytest.mark.parametrize("precision", ["bf16", "fp16", "fp32"])
def test_deepspeed_accepts_config(stage, precision):
    # DeepSpeedConfig without a process group counts world size 1.
    d = _ds(stage=stage, precision=precision, micro=2, accum=3, world=1)
    c = DeepSpeedConfig(d, mpu=None)
    assert c.world_size == 1
    assert c.train_batch_size == 6
    assert c.train_micro_batch_size_per_gpu == 2
    assert c.gradient_accumulation_steps == 3
    assert c.gradient_clipping == 1.0
    assert c.zero_optimization_stage == stage
    assert c.zero_config.reduce_bucket_size == H * H
    if stage == 3:
        assert c.zero_config.prefetch_bucket_size == 3774873
        assert c.zero_config.param_persistence_threshold == 20480
    assert c.float16_config.enabled is (precision == "fp16")
    assert c.bfloat16_config.enabled is (precision == "bf16")
    if precision == "fp16":
        assert c.float16_config.loss_scale == 0


def test_deepspeed_rejects_inconsistent_batch():
    # the world size counts: a dict made for 4 ranks fails DeepSpeed's check on 1 rank
    d = _ds(micro=2, accum=3, world=4)
    with pytest.raises(AssertionError):
        DeepSpeedConfig(d, mpu=None)


@pytest.mark.parametrize("precision", ["bf16", "fp16", "fp32"])
def test_zero_section_validates(precision):
    d = _ds(stage=3, precision=precision, world=8)
    z = DeepSpeedZeroConfig(**d["zero_optimization"])
    assert z.stage == 3
    assert z.prefetch_bucket_size == 3774873
    assert z.param_persistence_threshold == 20480
    assert z.reduce_bucket_size == 4_194_304


def test_float_prefetch_bucket_is_rejected_by_deepspeed():
    # Why the int() matters: 0.9 * 2048^2 as a float fails DeepSpeed's validation.
    z = dict(_ds(stage=3)["zero_optimization"])
    z["stage3_prefetch_bucket_size"] = 0.9 * H * H
    assert z["stage3_prefetch_bucket_size"] == pytest.approx(3774873.6)
    with pytest.raises(ValueError):  # pydantic.ValidationError is a ValueError
        DeepSpeedZeroConfig(**z)


def test_zero3_levers_pass_through_and_deepspeed_accepts_them():
    cfg = _ds(
        world=1,
        accum=1,
        device_type="cuda",
        stage3_max_live_parameters=3e9,
        stage3_max_reuse_distance=2e9,
        sub_group_size=1e8,
        optimizer_impl="torch",
        deepcompile=True,
    )
    zero = cfg["zero_optimization"]
    assert (zero["stage3_max_live_parameters"], zero["stage3_max_reuse_distance"]) == (3_000_000_000, 2e9)
    assert zero["sub_group_size"] == 100_000_000 and isinstance(zero["sub_group_size"], int)
    assert cfg["optimizer"]["params"]["torch_adam"] is True  # optimizer_impl=torch even on CUDA
    assert cfg["compile"] == {"deepcompile": True}
    parsed = DeepSpeedConfig(cfg)
    assert parsed.zero_config.max_live_parameters == 3_000_000_000
    assert parsed.compile_config.deepcompile is True
    assert "stage3_max_live_parameters" not in _ds()["zero_optimization"]  # DeepSpeed's default


@pytest.mark.parametrize(
    ("backend_kw", "device", "compile_blocks", "key"),
    [
        ({"zero_stage": 2, "deepcompile": True}, "cuda", False, "backend.deepcompile"),
        ({"deepcompile": True}, "cpu", False, "backend.deepcompile"),
        ({"deepcompile": True}, "cuda", True, "compile"),
        ({"optimizer_impl": "lion"}, "cuda", False, "backend.optimizer_impl"),
        ({"sub_group_size": 1.5}, "cuda", False, "backend.sub_group_size"),
    ],
)
def test_lever_refusals_name_the_key(backend_kw, device, compile_blocks, key):
    from flopsweep.backends import check_support
    from flopsweep.config import ConfigError

    with pytest.raises(ConfigError) as err:
        check_support(
            ZeroOptions(**backend_kw),
            world_size=2,
            device=device,
            precision="bf16",
            compile_blocks=compile_blocks,
        )
    assert str(err.value).startswith(f"Invalid config: {key}="), str(err.value)


def test_cuda_bucket_defaults_are_the_tuned_ones():
    from flopsweep.backends import CUDA_BUCKET

    z = _ds(device_type="cuda")["zero_optimization"]
    assert z["reduce_bucket_size"] == z["stage3_prefetch_bucket_size"] == CUDA_BUCKET == 500_000_000
    assert _ds(device_type="cuda", stage=2)["zero_optimization"]["reduce_bucket_size"] == H * H  # not tuned
    explicit = _ds(device_type="cuda", reduce_bucket_size=1e6)["zero_optimization"]
    assert explicit["reduce_bucket_size"] == 1_000_000


def test_deepspeed_builds_go_to_a_cache_of_flopsweeps_own(tmp_path, monkeypatch) -> None:
    """Issue 30 class 15: DeepSpeed's JIT ops are not built in torch's machine-wide default cache, where
    environments with other versions rebuild them on every run; the user's TORCH_EXTENSIONS_DIR wins."""
    import os
    import sys

    import torch

    from flopsweep.backends import extensions_dir

    mine = extensions_dir({"XDG_CACHE_HOME": str(tmp_path)})
    assert mine.startswith(str(tmp_path / "flopsweep" / "torch_extensions"))
    assert f"torch{torch.__version__}" in mine and (os.stat(mine).st_mode & 0o777) == 0o700
    assert extensions_dir({"XDG_CACHE_HOME": str(tmp_path)}) == mine  # the same environment: the same cache
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "another-venv"))
    assert extensions_dir({"XDG_CACHE_HOME": str(tmp_path)}) != mine  # another environment: its own
    assert extensions_dir({"TORCH_EXTENSIONS_DIR": "/x/y"}) == "/x/y"


def test_zero_plus_plus_knobs_reach_deepspeeds_config():
    """ZeRO++ (hpZ, qwZ, qgZ) pass into ``zero_optimization`` under DeepSpeed's own names, and
    DeepSpeed's config class reads them back."""
    z = _ds(stage=3, zero_hpz_partition_size=2, zero_quantized_weights=True, zero_quantized_gradients=True)
    z = z["zero_optimization"]
    assert (z["zero_hpz_partition_size"], z["zero_quantized_weights"], z["zero_quantized_gradients"]) == (
        2,
        True,
        True,
    )
    parsed = DeepSpeedZeroConfig(**z)
    assert parsed.zero_hpz_partition_size == 2
    assert parsed.zero_quantized_weights is True and parsed.zero_quantized_gradients is True
    off = DeepSpeedZeroConfig(**_ds(stage=3)["zero_optimization"])
    assert (off.zero_hpz_partition_size, off.zero_quantized_weights, off.zero_quantized_gradients) == (
        1,
        False,
        False,
    )


@pytest.mark.parametrize(
    ("stage", "knobs", "world", "key", "words"),
    [
        (2, {"zero_quantized_weights": True}, 4, "backend.zero_quantized_weights", "backend.zero_stage=2"),
        (1, {"zero_hpz_partition_size": 2}, 4, "backend.zero_hpz_partition_size", "ZeRO-3"),
        (3, {"zero_hpz_partition_size": 3}, 4, "backend.zero_hpz_partition_size", "does not divide"),
        (3, {"zero_hpz_partition_size": 0}, 4, "backend.zero_hpz_partition_size", "positive"),
    ],
)
def test_zero_plus_plus_knobs_that_cannot_run_are_refused(stage, knobs, world, key, words):
    from flopsweep.backends import check_support
    from flopsweep.config import ConfigError

    with pytest.raises(ConfigError) as err:
        check_support(
            ZeroOptions(zero_stage=stage, **knobs), world_size=world, device="cpu", precision="fp32"
        )
    assert err.value.key == key and words in str(err.value) and "\n" not in str(err.value)


def test_the_ops_a_deepspeed_run_builds_are_those_its_cache_lacks(tmp_path) -> None:
    """Issue 46, item 6: which JIT ops a run compiles before its first step: the CPU shared-memory comm
    op on CPU ranks, CPU Adam when the optimizer is offloaded, fused Adam on CUDA; none once its
    ``.so`` is in the cache, none that DeepSpeed installed prebuilt or cannot build here."""
    from flopsweep.jit_ops import CPU_ADAM, FUSED_ADAM, SHM_COMM, ops_needed, ops_to_build

    cpu = ops_needed(device_type="cpu", offload_optimizer="none", optimizer_impl="fused")
    assert cpu == [SHM_COMM]
    assert ops_needed(device_type="cuda", offload_optimizer="none", optimizer_impl="fused") == [FUSED_ADAM]
    assert ops_needed(device_type="cuda", offload_optimizer="none", optimizer_impl="torch") == []
    assert ops_needed(device_type="cuda", offload_optimizer="cpu", optimizer_impl="fused") == [CPU_ADAM]
    assert ops_to_build(cpu, tmp_path, {}) == [SHM_COMM]  # an empty cache: built
    assert ops_to_build(cpu, tmp_path, {SHM_COMM.name: True}) == []  # installed prebuilt
    assert ops_to_build(cpu, tmp_path, {SHM_COMM.name: False}) == []  # not buildable here: skipped
    (tmp_path / SHM_COMM.name).mkdir()
    assert ops_to_build(cpu, tmp_path, {}) == [SHM_COMM]  # a folder of a build that stopped half-way
    (tmp_path / SHM_COMM.name / f"{SHM_COMM.name}.so").write_bytes(b"\x7fELF")
    assert ops_to_build(cpu, tmp_path, {}) == []  # cached


def test_deepspeeds_cpu_device_count_is_the_nodes_ranks_read_without_a_subprocess(monkeypatch) -> None:
    """DeepSpeed's CPU accelerator counts its devices from ``LOCAL_SIZE`` (its own launcher sets it),
    else by running ``numactl --hardware`` on every call (ZeRO-3: once per gradient bucket);
    ``build_deepspeed`` sets it on the CPU from ``LOCAL_WORLD_SIZE`` (``local_size``). Read with it
    set, no process starts (the unit tier's guard fails a test that starts one)."""
    from deepspeed.accelerator.cpu_accelerator import CPU_Accelerator

    from flopsweep.deepspeed_backend import local_size

    assert local_size({"LOCAL_WORLD_SIZE": "2"}) == "2" and local_size({}) == "1"
    monkeypatch.setenv("LOCAL_SIZE", local_size({"LOCAL_WORLD_SIZE": "4"}))
    assert CPU_Accelerator().device_count() == 4
