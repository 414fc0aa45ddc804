"""``optim.implementation``: the AdamW kernel as a lever (issue #45 item 2), its rule, its memory term,
and that every kernel takes the same step."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from flopsweep.backends import DeepSpeedConfig, FSDPConfig
from flopsweep.config import BackendConfig, ConfigError
from flopsweep.identity import setup_key
from flopsweep.layout import Layout
from flopsweep.memory import estimate, optimizer_workspace_bytes
from flopsweep.rules import optimizer_implementation
from flopsweep.trainers import build_adamw, optimizer_facts
from unit.test_memory import GPT_13B, H, OffloadFSDP, P, V, _cfg

LARGEST = V * H
"""gpt-1.3b's largest parameter: the tied ``V x h`` embedding."""


def _with(impl: str, backend=None, **kw):
    cfg = _cfg(backend, **kw)
    cfg.optim.implementation = impl
    return cfg


@pytest.mark.parametrize("impl", ["auto", "fused"])
def test_fused_and_auto_add_no_workspace(impl: str) -> None:
    est = estimate(_with(impl), Layout())
    assert est.optimizer_workspace == 0
    assert est == estimate(_cfg(), Layout())  # the default's estimate is unchanged


def test_foreach_adds_one_fp32_copy_of_what_the_rank_steps_at_the_optimizer_step() -> None:
    one = estimate(_with("foreach"), Layout())
    assert one.optimizer_workspace == 4 * P and "foreach" in one.method
    assert one.end_of_backward == one.step_states + 4 * P + one.buffers  # above the lowest block
    sharded = estimate(_with("foreach", FSDPConfig()), Layout(dp_shard=8))
    assert sharded.optimizer_workspace == 4 * -(-P // 8)
    in_backward = _with("foreach")
    in_backward.optim.grad_clip, in_backward.optim.in_backward = 0.0, True
    assert optimizer_workspace_bytes(in_backward, Layout())[0] == 4 * LARGEST  # one tensor at a time


def test_for_loop_adds_two_temporaries_of_the_largest_parameter() -> None:
    assert estimate(_with("for_loop"), Layout()).optimizer_workspace == 8 * LARGEST
    sharded = estimate(_with("for_loop", FSDPConfig()), Layout(dp_shard=4))
    assert sharded.optimizer_workspace == 8 * -(-LARGEST // 4)


def test_no_workspace_where_torch_adamw_does_not_step_on_the_device() -> None:
    offloaded = _with("foreach", OffloadFSDP(cpu_offload=True))
    assert optimizer_workspace_bytes(offloaded, Layout(dp_shard=2)) == (0, "")
    zero = _with("auto", DeepSpeedConfig(zero_stage=2))
    assert optimizer_workspace_bytes(zero, Layout())[0] == 0


@pytest.mark.parametrize(
    ("impl", "backend", "words"),
    [
        ("fast", BackendConfig(name="single"), "must be one of auto, fused, foreach, for_loop"),
        ("fused", DeepSpeedConfig(zero_stage=1), "backend.optimizer_impl"),
        ("foreach", DeepSpeedConfig(zero_stage=3), "steps DeepSpeed's optimizer"),
    ],
)
def test_refused_values_name_the_key_and_the_fix(impl: str, backend, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        optimizer_implementation(_with(impl, backend))
    assert "optim.implementation" in str(err.value) and words in str(err.value)


@pytest.mark.parametrize("backend", [BackendConfig(name="single"), BackendConfig(name="ddp"), FSDPConfig()])
def test_torch_backends_take_every_implementation(backend) -> None:
    for impl in ("auto", "fused", "foreach", "for_loop"):
        optimizer_implementation(_with(impl, backend))


def test_every_implementation_takes_the_same_step_and_the_record_says_which_ran() -> None:
    torch.manual_seed(0)
    start = [torch.randn(64, 32), torch.randn(32)]
    grads = [torch.randn_like(t) for t in start]
    after, facts = {}, {}
    for impl in ("auto", "fused", "foreach", "for_loop"):
        params = [torch.nn.Parameter(t.clone()) for t in start]
        optim = dataclasses.replace(_cfg().optim, implementation=impl)
        opt = build_adamw(params, optim, torch.device("cpu"))
        for _ in range(3):
            for p, g in zip(params, grads, strict=True):
                p.grad = g.clone()
            opt.step()
        after[impl] = [p.detach() for p in params]
        facts[impl] = optimizer_facts(type("T", (), {"optimizer": opt})())
    for impl, values in after.items():
        for got, want in zip(values, after["for_loop"], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7, msg=impl)
    assert (facts["fused"]["fused"], facts["foreach"]["foreach"], facts["for_loop"]["foreach"]) == (
        True,
        True,
        False,
    )
    assert facts["auto"]["fused"] is False  # on the CPU auto keeps torch's default, not the fused kernel


def test_a_record_from_before_the_key_keeps_its_setup_id() -> None:
    config = {"model": {"name": GPT_13B.name}, "optim": {"lr": 1e-4, "in_backward": False}}
    now = {**config, "optim": {**config["optim"], "implementation": "auto"}}
    assert setup_key({"config": config}) == setup_key({"config": now})
    chosen = {**config, "optim": {**config["optim"], "implementation": "foreach"}}
    assert setup_key({"config": chosen}) != setup_key({"config": config})
