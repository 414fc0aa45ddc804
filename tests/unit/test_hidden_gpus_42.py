"""``device=cuda`` where a CUDA_VISIBLE_DEVICES hides the GPUs names the variable, and its fix, unsetting it,
leaves the plain line (docs/reliability-13.md row 1006)."""

from __future__ import annotations

import pytest

from flopsweep.job.device_fix import no_gpu_error, no_gpu_words, sweep_no_gpu_error
from flopsweep.plan import Environment, NoGpuError, plan

GIB = 2**30
NO_GPU = Environment(cpu_count=2, host_memory_bytes=1024 * GIB)


def _refused(hydra_compose) -> NoGpuError:
    with pytest.raises(NoGpuError) as plain:
        plan(hydra_compose(["model=llama-tiny", "device=cuda"]), NO_GPU)
    return plain.value


def test_an_empty_cuda_visible_devices_is_named_with_the_fix_to_unset_it(hydra_compose, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    said = no_gpu_error(_refused(hydra_compose).given, NO_GPU, free=16 * GIB)
    assert str(said) == (
        "Invalid config: device='cuda': no CUDA GPU is visible (CUDA_VISIBLE_DEVICES='' hides every GPU "
        "from this process). Fix: unset CUDA_VISIBLE_DEVICES, or run on a GPU machine, or set device=cpu."
    )
    sweep = sweep_no_gpu_error([_refused(hydra_compose).given] * 2, NO_GPU, 2, free=16 * GIB)
    assert sweep.problem.startswith("no CUDA GPU is visible (CUDA_VISIBLE_DEVICES='' hides every GPU")
    assert sweep.fix.startswith("unset CUDA_VISIBLE_DEVICES, or run the sweep on a GPU machine")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # the fix, typed back: the variable is no longer said
    assert no_gpu_words() == ("no CUDA GPU is visible", "run on a GPU machine")


def test_ids_that_show_no_gpu_are_named_too(monkeypatch):
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    problem, fix = no_gpu_words()  # how it hides them depends on this machine's GPUs: test_visible_devices_43
    assert problem.startswith("no CUDA GPU is visible (CUDA_VISIBLE_DEVICES='3' ")
    assert fix.endswith("run on a GPU machine")  # and unset it, or name GPU 0, where the machine has GPUs
