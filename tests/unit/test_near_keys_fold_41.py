"""The "did you mean" of a key folds O/l/I as the names' does (docs/reliability-12.md #901)."""

from __future__ import annotations

import re

import pytest

from flopsweep.near_keys import ranked
from flopsweep.overrides import unknown_key_problem


def test_a_key_with_a_digit_for_a_letter_ranks_its_key_first():
    assert ranked("mode1", ["mode", "model"]) == ["model", "mode"]
    assert ranked("1r", ["lr", "wd"]) == ["lr"]
    assert ranked("rneasure", ["measure", "warmup"]) == ["measure"]


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("mode1.seq_len", "model.seq_len"),
        ("modeI.seq_len", "model.seq_len"),
        ("steps.rneasure", "steps.measure"),
        ("stpes.measure", "steps.measure"),
    ],
)
def test_a_keys_typo_names_the_key_which_passes(typed, meant):
    line = unknown_key_problem(typed, "3")
    assert line.startswith(f"Invalid config: {typed}=3: no such key. Fix: did you mean {meant}?")
    named = re.search(r"did you mean (\S+)\?", line).group(1)
    assert unknown_key_problem(named, "3") is None
