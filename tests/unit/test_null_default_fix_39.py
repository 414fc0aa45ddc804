"""A whole-number key unset by default gets ``null`` as its fix's example (docs/reliability-10.md #609,
session 39's re-trial of #521 and #522): ``batch.global_batch_size=0.5`` was told ``Fix: set
batch.global_batch_size to a whole number, e.g. batch.global_batch_size=5``, the kind's example, which the
default micro batch of 4 refuses (``is not a positive multiple of batch.micro_batch_size=4``). Now ``... to a
whole number or null, e.g. batch.global_batch_size=null (its default).``, as a bound's line gives it; a key
whose option or schema gives a value keeps it."""

from __future__ import annotations

import pytest


def _refusal(overrides: list[str]) -> str | None:
    from run import refusal  # run.py's one line before Hydra

    return refusal(overrides)


@pytest.mark.parametrize("typed", ["0.5", "abc", "[1]"])
def test_a_null_default_whole_numbers_fix_is_null_and_passes(typed: str) -> None:
    line = _refusal(["device=cpu", f"batch.global_batch_size={typed}"])
    assert line is not None and "batch.global_batch_size=null (its default)" in line, line
    assert _refusal(["device=cpu", "batch.global_batch_size=null"]) is None


def test_a_key_with_its_own_value_keeps_it() -> None:
    line = _refusal(["device=cpu", "model.n_layer=2.5"])
    assert line is not None and line.endswith("e.g. model.n_layer=2 (model=gpt-tiny's)."), line
