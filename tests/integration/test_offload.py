"""CPU offload: FSDP2's ``CPUOffloadPolicy`` (``backend.cpu_offload``) and DeepSpeed ZeRO's
``offload_optimizer`` / ``offload_param``: the config, the refusals, the host-memory check before
launch, and real runs on two gloo ranks with the first-step loss of the same run without offload (those
runs are in ``test_llama_backends.py``, whose sweep is their reference: CI time)."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_deepspeed_cpu_adam_builds_and_steps_as_torch_adamw() -> None:
    """ZeRO-Offload's optimizer on CUDA (``offload_optimizer=cpu``, ``optimizer_impl=fused``) is
    ``DeepSpeedCPUAdam``, a JIT-built op (``cpu_adam``, into ``backends.extensions_dir``; the first
    build took 12 minutes on a loaded 2-core CPU box, then it is cached). It builds here and takes
    the same AdamW step as ``torch.optim.AdamW`` (fp32, 1e-6)."""
    import os
    from types import SimpleNamespace

    import torch

    from flopsweep.backends import DeepSpeedTrainer, extensions_dir, optimizer_facts

    os.environ["TORCH_EXTENSIONS_DIR"] = extensions_dir()
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    torch.manual_seed(0)
    start, grads = torch.randn(1000), [torch.randn(1000) for _ in range(3)]
    params = [torch.nn.Parameter(start.clone()) for _ in range(2)]
    kwargs = {"lr": 1e-2, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    optimizers = [
        DeepSpeedCPUAdam([params[0]], adamw_mode=True, **kwargs),
        torch.optim.AdamW([params[1]], **kwargs),
    ]
    for grad in grads:
        for param, opt in zip(params, optimizers, strict=True):
            param.grad = grad.clone()
            opt.step()
    torch.testing.assert_close(params[0].detach(), params[1].detach(), atol=1e-6, rtol=1e-5)
    assert not torch.equal(params[0].detach(), start)
    # system.optimizer names DeepSpeed's class (the engine's basic optimizer); it has no torch flags
    facts = optimizer_facts(DeepSpeedTrainer(SimpleNamespace(basic_optimizer=optimizers[0])))
    assert facts == {
        "class": "deepspeed.ops.adam.cpu_adam.DeepSpeedCPUAdam",
        "fused": None,
        "foreach": None,
        "in_backward": False,
        "overlap_forward": False,
    }
