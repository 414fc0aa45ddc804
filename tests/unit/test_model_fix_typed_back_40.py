"""Session 40: a model's refusal leads with the key the command line set and its fix, typed back, is
accepted (docs/reliability-11.md #780 the plan's layout check, #781 Llama's head dim, ``rope_theta`` and
``norm_eps``). Each fix is read from the line and typed back through every check before Hydra
(``run.refusal``) and the family's own check."""

from __future__ import annotations

import dataclasses
import re

import pytest

from flopsweep.config import ConfigError
from flopsweep.models import gpt2, llama
from flopsweep.models.heads import head_problem
from run import refusal

PLAN = ["plan=true", "plan_clusters=[H100:8]", "space.layouts=[tp3]"]


def _fixed(overrides: list[str], line: str) -> list[str]:
    """``overrides`` with the fix's one ``key=value`` put in place of the key's override (added if none)."""
    fix = re.search(r"Fix: .*?\b(model\.\w+=[^\s,()]+?)\.?(?: \(|$|,)", line)
    assert fix is not None, line
    key = fix.group(1).partition("=")[0]
    return [o for o in overrides if not o.startswith(f"{key}=")] + [fix.group(1)]


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (
            [*PLAN, "model=llama-tiny", "model.n_head=3"],
            "Invalid config: model.n_head=3: does not divide model.n_embd=128 (each head takes n_embd / "
            "n_head channels). Fix: choose heads that divide n_embd, e.g. model.n_head=2.",
        ),
        (
            [*PLAN, "model.n_head=3"],
            "Invalid config: model.n_head=3: does not divide model.n_embd=128 (each head takes n_embd / "
            "n_head channels). Fix: choose heads that divide n_embd, e.g. model.n_head=2.",
        ),
        (
            [*PLAN, "model=llama-tiny", "model.n_embd=100"],
            "Invalid config: model.n_embd=100: gives an odd head dim n_embd/n_head=25 (model.n_head=4), and "
            "RoPE rotates pairs of channels. Fix: choose a multiple of 2 n_head, e.g. model.n_embd=96.",
        ),
        (
            ["model=llama-tiny", "model.n_head=8", "model.n_embd=120"],
            "Invalid config: model.n_head=8: gives an odd head dim n_embd/n_head=15 (model.n_embd=120), and "
            "RoPE rotates pairs of channels. Fix: choose heads that leave an even head dim, e.g. "
            "model.n_head=4.",
        ),
        (
            ["model=llama-tiny", "model.rope_theta=0"],
            "Invalid config: model.rope_theta=0: must be positive. Fix: set a positive value, e.g. "
            "model.rope_theta=500000.0 (the default).",
        ),
        (
            ["model=llama3.1-8b", "model.norm_eps=-1"],
            "Invalid config: model.norm_eps=-1: must be positive. Fix: set a positive value, e.g. "
            "model.norm_eps=1e-05 (the default).",
        ),
    ],
)
def test_the_model_line_leads_with_the_key_set_and_its_fix_is_accepted_typed_back(
    overrides: list[str], said: str
) -> None:
    """Was (#780): the plan's layout check said the family's line, ``model.n_embd=128: is not divisible by
    model.n_head=3 ... e.g. model.n_embd=126`` for ``model.n_head=3``; (#781) ``Fix: choose n_head so that
    n_embd/n_head is even`` and ``Fix: set model.rope_theta > 0 or leave it out``, nothing to type."""
    line = refusal(overrides)
    assert line == said
    fixed = _fixed(overrides, line)
    if "space.layouts=[tp3]" in overrides:  # the model's fix typed back: the layouts' own line comes next
        assert refusal(fixed) == (
            "Invalid config: space.layouts=[tp3]: no cluster of plan_clusters places any of its layouts (on "
            "H100:1x8:ib400, tp3 needs its degree 3 to divide the 8 ranks). Fix: set space.layouts=[dp,tp2]."
        )
        fixed = [o.replace("[tp3]", "[dp,tp2]") for o in fixed]
    assert refusal(fixed) is None


@pytest.mark.parametrize(
    ("n_embd", "n_head", "kv", "fix"),
    [
        (128, 3, 2, "model.n_head=2"),  # llama-tiny's 2 KV heads: 2 is a multiple
        (96, 32, 1, "model.n_head=16"),  # 96/32 = 3, odd: 16 leaves 6
        (4096, 30, 8, "model.n_head=32"),  # llama3.1-8b's 8 KV heads
        (128, 3, 3, "model.n_embd=126"),  # no power of two is a multiple of 3 KV heads: n_embd's fix
        (101, 4, 2, "model.n_embd=96"),  # an odd n_embd leaves no even head dim: n_embd's fix
    ],
)
def test_each_llama_heads_fix_passes_the_familys_check(n_embd: int, n_head: int, kv: int, fix: str) -> None:
    """The n_head fix stays a multiple of n_kv_head and leaves an even head dim, else n_embd's is given."""
    cfg = llama.LlamaConfig(n_embd=n_embd, n_head=n_head, n_kv_head=kv)
    problem = head_problem(n_embd, n_head, "model.n_head", pairs=True, kv_heads=kv)
    assert problem is not None and str(problem).endswith(f"e.g. {fix}."), problem
    key, _, value = fix.partition("=")
    llama.check(dataclasses.replace(cfg, **{key.removeprefix("model."): int(value)}))
    with pytest.raises(ConfigError):
        llama.check(cfg)


def test_the_familys_check_keeps_gpt2_lines_and_refuses_an_odd_llama_head_dim_with_n_embds_fix() -> None:
    """Job-side (the key the user set unknown): ``model.n_embd``'s fix, accepted by the family."""
    with pytest.raises(ConfigError) as refused:
        llama.check(llama.LlamaConfig(n_embd=100, n_head=4, n_kv_head=2))
    assert str(refused.value).endswith("Fix: choose a multiple of 2 n_head, e.g. model.n_embd=96.")
    llama.check(llama.LlamaConfig(n_embd=96, n_head=4, n_kv_head=2))
    gpt2.check(gpt2.GPT2Config(n_embd=100, n_head=4))  # no rotary positions: an odd head dim is fine
