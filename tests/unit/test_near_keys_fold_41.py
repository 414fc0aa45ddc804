"""The "did you mean" of a key folds O/l/I as the names' does, and a key part beginning with a digit is one
line, not a RecursionError (docs/reliability-12.md #901, #907)."""

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


def test_a_key_part_that_begins_with_a_digit_is_one_line_naming_the_key():
    """#907: ``optim.1r=0.001`` had quoted its value again and again, to a RecursionError."""
    from flopsweep.override_grammar import syntax_problem

    line = syntax_problem(["plan=true", "optim.1r=0.001"])
    assert line.startswith("Invalid config: optim.1r=0.001: no such key. Fix: did you mean optim.lr?"), line
    assert syntax_problem(["plan=true", "optim.lr=0.001"]) is None
    assert unknown_key_problem("optim.lr", "0.001") is None
