"""CPU offload: FSDP2's ``CPUOffloadPolicy`` (``backend.cpu_offload``) and DeepSpeed ZeRO's
``offload_optimizer`` / ``offload_param``: the config, the refusals, the host-memory check before
launch, and real runs on two gloo ranks with the first-step loss of the same run without offload."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from flopsweep import hostmem
from flopsweep.backends import deepspeed_config
from flopsweep.config import ConfigError, RunConfig
from flopsweep.layout import Layout
from flopsweep.memory import offload_host_bytes
from flopsweep.models.llama import LlamaConfig, n_params
from flopsweep.options import DeepSpeedConfig, FSDPConfig
from flopsweep.plan import Environment, resolve, validate

H200_HOST = Environment(
    cuda_available=True,
    gpu_count=1,
    bf16_supported=True,
    capability=(9, 0),
    cpu_count=16,
    host_memory_bytes=hostmem.total_bytes(),
)
"""One GPU, and the host memory a process here may use, as ``Environment.detect`` reads it."""


def _run(backend, model: LlamaConfig | None = None) -> RunConfig:
    return dataclasses.replace(RunConfig(), model=model or LlamaConfig(), backend=backend, device="cuda")


def _too_big_for_this_host(per_param: int) -> LlamaConfig:
    """A Llama whose ``per_param`` bytes per parameter (16: fp32 weights, gradients, AdamW moments;
    2: 16-bit weights) exceed this machine's memory: the 8B shape with as many layers as it takes."""
    shape = LlamaConfig(n_embd=4096, n_head=32, n_kv_head=8, ffn_dim=14336, vocab_size=128256, seq_len=256)
    per_layer = n_params(dataclasses.replace(shape, n_layer=2)) - n_params(
        dataclasses.replace(shape, n_layer=1)
    )
    layers = hostmem.total_bytes() // (per_param * per_layer) + 1
    return dataclasses.replace(shape, n_layer=int(layers))


def test_the_options_compose(hydra_compose) -> None:
    cfg = hydra_compose(["backend=fsdp", "backend.cpu_offload=true"])
    assert cfg.backend == FSDPConfig(cpu_offload=True) and validate(cfg) is cfg
    cfg = hydra_compose(["backend=zero3", "backend.offload_optimizer=cpu", "backend.offload_param=cpu"])
    assert (cfg.backend.offload_optimizer, cfg.backend.offload_param) == ("cpu", "cpu")
    validate(cfg)


def test_deepspeed_config_has_the_offload_sections() -> None:
    run = RunConfig()
    backend = DeepSpeedConfig(
        zero_stage=3, offload_optimizer="nvme", offload_param="cpu", nvme_path="/local_nvme/x"
    )
    kwargs = {
        "batch": run.batch,
        "precision": "bf16",
        "optim": run.optim,
        "model": run.model,
        "world_size": 1,
    }
    zero = deepspeed_config(backend=backend, device_type="cuda", **kwargs)["zero_optimization"]
    assert zero["offload_optimizer"] == {"device": "nvme", "nvme_path": "/local_nvme/x", "pin_memory": True}
    assert zero["offload_param"] == {"device": "cpu", "pin_memory": True}
    plain = deepspeed_config(backend=DeepSpeedConfig(zero_stage=2), device_type="cpu", **kwargs)
    assert "offload_optimizer" not in plain["zero_optimization"]


@pytest.mark.parametrize(
    "backend, key, words",
    [
        (DeepSpeedConfig(zero_stage=3, offload_optimizer="nvme"), "backend.nvme_path", "needs a folder"),
        (
            DeepSpeedConfig(zero_stage=3, offload_optimizer="nvme", nvme_path="/nonexistent/flopsweep-nvme"),
            "backend.nvme_path",
            "not an existing folder",
        ),
        (DeepSpeedConfig(zero_stage=2, offload_param="cpu"), "backend.offload_param", "ZeRO-3 only"),
        (
            DeepSpeedConfig(zero_stage=2, offload_optimizer="nvme", nvme_path="/x"),
            "backend.offload_optimizer",
            "ZeRO-3 only",
        ),
        (DeepSpeedConfig(zero_stage=3, nvme_path="/tmp"), "backend.nvme_path", "nothing reads it"),
        (
            DeepSpeedConfig(zero_stage=3, offload_optimizer="cpu", offload_param="cpu", nvme_path="/tmp"),
            "backend.nvme_path",
            "or drop backend.nvme_path",
        ),
        (
            DeepSpeedConfig(zero_stage=3, offload_optimizer="gpu"),
            "backend.offload_optimizer",
            "none, cpu, nvme",
        ),
    ],
)
def test_impossible_offload_is_refused_in_one_line(backend, key, words) -> None:
    with pytest.raises(ConfigError) as err:
        resolve(_run(backend), H200_HOST)
    assert err.value.key == key and words in str(err.value) and "\n" not in str(err.value)


def test_nvme_offload_on_the_cpu_is_refused_before_launch(tmp_path: Path) -> None:
    """DeepSpeed's async_io op (NVMe offload) is built for CUDA: on the CPU it would fail after launch."""
    cpu_host = dataclasses.replace(H200_HOST, cuda_available=False, gpu_count=0, capability=None)
    backend = DeepSpeedConfig(zero_stage=3, offload_param="nvme", nvme_path=str(tmp_path))
    with pytest.raises(ConfigError) as err:
        resolve(dataclasses.replace(_run(backend), device="cpu"), cpu_host)
    assert err.value.key == "backend.offload_param" and "device=cpu" in str(err.value)
    assert "set backend.offload_param=cpu" in str(err.value) and "\n" not in str(err.value)


def test_offloaded_states_are_counted_per_rank() -> None:
    cfg, P = LlamaConfig(), n_params(LlamaConfig())
    assert offload_host_bytes(_run(FSDPConfig(cpu_offload=True), cfg), Layout.data_parallel(2)) == 16 * P // 2
    assert offload_host_bytes(_run(FSDPConfig(), cfg), Layout.data_parallel(2)) == 0
    both = DeepSpeedConfig(zero_stage=3, offload_optimizer="cpu", offload_param="cpu")
    assert offload_host_bytes(_run(both, cfg), Layout.data_parallel(4)) == 18 * P // 4
    nvme = DeepSpeedConfig(zero_stage=3, offload_optimizer="nvme", nvme_path="/x")
    assert offload_host_bytes(_run(nvme, cfg), Layout.data_parallel(1)) == 0


@pytest.mark.parametrize(
    "backend, key, per_param",
    [
        (FSDPConfig(cpu_offload=True), "backend.cpu_offload", 16),
        (DeepSpeedConfig(zero_stage=3, offload_optimizer="cpu"), "backend.offload_optimizer", 16),
        (DeepSpeedConfig(zero_stage=3, offload_param="cpu"), "backend.offload_param", 2),
    ],
)
def test_offload_that_exceeds_this_hosts_memory_is_refused_before_launch(backend, key, per_param) -> None:
    """A GPU run is otherwise never refused for memory; with offload, the states it puts on the host
    are checked against the host memory a process may use, and a model whose states exceed it is
    refused in one line."""
    big = _too_big_for_this_host(per_param)
    with pytest.raises(ConfigError) as err:
        resolve(_run(backend, big), H200_HOST)
    message = str(err.value)
    assert err.value.key == key and "host memory" in message and "\n" not in message
    assert f"{H200_HOST.host_memory_bytes / 2**30:.1f} GiB" in message
    no_offload = dataclasses.replace(backend, cpu_offload=False) if key == "backend.cpu_offload" else None
    no_offload = no_offload or DeepSpeedConfig(zero_stage=3)
    assert resolve(_run(no_offload, big), H200_HOST).device == "cuda"  # the GPU's own OOM decides
