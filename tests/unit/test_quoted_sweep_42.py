"""A quoted string of values is said to be one string, with the sweep it meant, and that sweep is accepted
(docs/reliability-13.md row 1005)."""

from __future__ import annotations

from run import refusal

BASE = ["-m", "plan=true", "model=gpt-125m"]


def test_quoted_values_name_the_sweep_and_the_sweep_is_accepted():
    line = refusal([*BASE, 'batch.micro_batch_size="1,2"'])
    assert line == (
        "Invalid config: batch.micro_batch_size='1,2': is not a whole number (the quotes made '1,2' one "
        "string). Fix: set batch.micro_batch_size to a whole number, e.g. batch.micro_batch_size=4 (its "
        "default); several, one job each: -m batch.micro_batch_size=1,2."
    )
    assert refusal([*BASE, "batch.micro_batch_size=1,2"]) is None
    assert refusal([*BASE, "batch.micro_batch_size=4"]) is None


def test_a_quoted_string_that_is_not_values_gets_no_sweep_hint():
    line = refusal([*BASE, 'batch.micro_batch_size="a,2"'])
    assert line is not None and "quotes" not in line and "several" not in line
