"""Session 40 (docs/reliability-11.md #700): a sweep meant for GPUs on a machine without one
(``-m +sweep=backends``: gpt-1.3b, micro batch 8, ``device=cuda``) was refused with ``Fix: ... set
device=cpu``, whose CPU run the host-memory check refused with ``... or set device=cuda for a GPU sweep``: a
loop of fixes.
Each fix here is typed back into the same checks (:func:`flopsweep.plan.plan`, the launch's
:func:`flopsweep.job.hostcheck.check_free_host_memory`) and accepted; none leads back to the first refusal.
The plan raises :class:`flopsweep.plan.NoGpuError` (fix: a GPU machine, which needs no proof); the job
(``lifecycle.planned``) says :func:`flopsweep.job.device_fix.no_gpu_error`'s line. Real composition
(``hydra_compose``), no rank, no subprocess."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep.config import ConfigError
from flopsweep.job.device_fix import no_gpu_error
from flopsweep.job.hostcheck import check_free_host_memory
from flopsweep.job.placement import plan_environment
from flopsweep.plan import Environment, NoGpuError, plan

GIB = 2**30
SWEEP = ["+sweep=backends", "backend=single"]
"""One job of the GPU sweep: gpt-1.3b, bf16, micro batch 8, device=cuda (sweep/backends.yaml)."""
NO_GPU = Environment(cpu_count=2, host_memory_bytes=1024 * GIB)
"""A machine without a GPU whose memory the model's states fit (1 TiB): the free memory decides."""
SMALL_HOST = dataclasses.replace(NO_GPU, host_memory_bytes=8 * GIB)
"""A machine without a GPU whose memory gpt-1.3b's fp32 states alone (about 21 GB) exceed."""


def _launched(cfg, env: Environment, free: int) -> None:
    """The job's checks before any worker starts: the plan's, then the launch's free host memory."""
    check_free_host_memory(plan(cfg, env), free, overrides=[], env=env)


def test_a_gpu_sweep_without_a_gpu_is_said_to_be_one_and_its_fix_plan_true_is_accepted(hydra_compose):
    cfg = hydra_compose(SWEEP)
    with pytest.raises(NoGpuError) as plain:  # the plan's own: a fix that needs no proof
        plan(cfg, SMALL_HOST)
    assert (
        str(plain.value)
        == "Invalid config: device='cuda': no CUDA GPU is visible. Fix: run on a GPU machine."
    )
    said = no_gpu_error(plain.value.given, SMALL_HOST)  # the job's line (lifecycle.planned)
    line = str(said)
    assert said.key == "device" and "\n" not in line
    assert "no CUDA GPU is visible, and device=cpu is refused too (on the CPU the fp32 weights" in line
    assert line.endswith(
        ": this run is meant for GPUs. Fix: run it on a GPU machine, or add plan=true to predict its step "
        "time and memory here (no worker starts)."
    )
    assert "device=cpu" not in said.fix
    typed_back = hydra_compose([*SWEEP, "plan=true"])  # as the plan job places it: GPUs that are not here
    placed_cfg, placed_env, notes = plan_environment(typed_back, SMALL_HOST)
    assert plan(placed_cfg, placed_env).device == "cuda" and notes[0].startswith("no GPU here")
    # the launch's free memory decides alike: 16 GiB free, the CPU run needs about 53 GiB
    refused = no_gpu_error(plan(hydra_compose([*SWEEP, "device=cpu"]), NO_GPU).cfg, NO_GPU, free=16 * GIB)
    assert "device=cpu is refused too (on the CPU 1 rank needs about" in str(refused)
    assert "add plan=true" in refused.fix and "device=cpu" not in refused.fix


def test_device_cpu_is_offered_where_the_cpu_takes_the_run_and_is_then_accepted(hydra_compose):
    cfg = hydra_compose(["model=gpt-tiny", "device=cuda"])
    with pytest.raises(NoGpuError) as err:
        plan(cfg, NO_GPU)
    assert str(no_gpu_error(err.value.given, NO_GPU)) == (
        "Invalid config: device='cuda': no CUDA GPU is visible. Fix: run on a GPU machine, or set device=cpu."
    )
    _launched(hydra_compose(["model=gpt-tiny", "device=cpu"]), NO_GPU, free=16 * GIB)  # accepted
    assert "set device=cpu" in no_gpu_error(cfg, NO_GPU, free=16 * GIB).fix


def test_the_cpu_refusals_offer_device_cuda_only_where_a_gpu_is_visible(hydra_compose):
    cpu_run = hydra_compose([*SWEEP, "device=cpu"])
    with pytest.raises(ConfigError) as err:  # no GPU: the fix is a smaller model or micro batch alone
        _launched(cpu_run, NO_GPU, free=16 * GIB)
    assert err.value.key == "model" and "device=cuda" not in str(err.value)
    assert err.value.fix == "pick a smaller model (e.g. model=gpt-tiny)"  # micro batch 1 needs 34 GiB (#821)
    _launched(hydra_compose([*SWEEP, "device=cpu", "model=gpt-tiny"]), NO_GPU, free=16 * GIB)  # typed back
    gpu_here = dataclasses.replace(NO_GPU, cuda_available=True, gpu_count=1)
    with pytest.raises(ConfigError) as err:  # a GPU visible: device=cuda is a fix that runs here
        check_free_host_memory(plan(cpu_run, gpu_here), 16 * GIB, overrides=[], env=gpu_here)
    assert err.value.fix.endswith(" or set device=cuda for a GPU sweep")
    with pytest.raises(ConfigError) as err:  # the states over the machine's memory: plan.states_error
        plan(cpu_run, SMALL_HOST)
    assert err.value.key == "model" and "device=cuda" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        plan(cpu_run, dataclasses.replace(SMALL_HOST, cuda_available=True, gpu_count=1))
    assert err.value.fix.endswith(", or run on GPUs with device=cuda")
