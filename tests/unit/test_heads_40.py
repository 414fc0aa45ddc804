"""Session 40: one rule for heads that do not divide the hidden size (docs/reliability-11.md #743): each
family's check says :func:`flopsweep.models.heads.head_problem`'s line, as the command line's check does,
and its fix is accepted by that family."""

from __future__ import annotations

import dataclasses
import re

import pytest

from flopsweep.config import ConfigError
from flopsweep.models import gpt2, llama
from flopsweep.models.heads import head_problem


@pytest.mark.parametrize(
    ("family", "cfg"),
    [
        (gpt2, gpt2.GPT2Config(n_embd=128, n_head=3)),
        (llama, llama.LlamaConfig(n_embd=130, n_head=4, n_kv_head=2)),
        (llama, llama.LlamaConfig(n_embd=100, n_head=8, n_kv_head=8)),
    ],
)
def test_each_family_refuses_heads_that_do_not_divide_with_a_fix_it_accepts(family, cfg) -> None:
    """Was: llama's ``Fix: choose n_head that divides n_embd`` (no value to type), gpt2's a head count of
    its own rule. Now both say the one line, and ``model.n_embd=N`` of its fix passes the family's check."""
    with pytest.raises(ConfigError) as refused:
        family.check(cfg)
    assert str(refused.value) == str(head_problem(cfg.n_embd, cfg.n_head, "model.n_embd"))
    size = int(re.search(r"Fix: .*model\.n_embd=(\d+)\.$", str(refused.value)).group(1))
    family.check(dataclasses.replace(cfg, n_embd=size))  # the fix is accepted
