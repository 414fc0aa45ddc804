"""A 2-letter key one letter off gets its did-you-mean (docs/reliability-13.md #973): ``parallel.tI=2`` (a
capital I typed for the p of ``tp``) said ``none of the keys of parallel is near tI``: ``difflib``'s ratio of
two 2-letter names one letter apart is 0.5, under the cutoff (0.6), and the O/l/I folding makes ``tI``
``t1``, not ``tp``. Now a name one character off once folded is near (:func:`flopsweep.near_keys._score`)."""

from __future__ import annotations

import pytest

from flopsweep.near_keys import ranked, suggestion


@pytest.mark.parametrize(("typed", "meant"), [("tI", "tp"), ("pO", "pp"), ("Ir", "lr"), ("lx", "lr")])
def test_a_two_letter_name_one_letter_off_is_near(typed: str, meant: str) -> None:
    assert ranked(typed, ["tp", "pp", "lr", "dp_shard"])[0] == meant


def test_a_name_two_letters_off_is_not() -> None:
    assert ranked("xx", ["tp", "pp", "cp", "ep"]) == []


def test_parallel_ti_names_the_tp_command_and_it_is_accepted() -> None:
    from run import refusal

    fix = suggestion("parallel.tI", value="2")
    assert fix.startswith("did you mean backend=fsdp nproc_per_node=2 parallel.tp=2 "), fix
    typed = fix.removeprefix("did you mean ").split(" (", 1)[0].split()
    assert refusal(["device=cpu", "model=gpt-tiny", *typed]) is None
