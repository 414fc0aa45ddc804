"""Session 42: one test owns which words of a command line are overrides (no behaviour change, so no
reliability row). :func:`flopsweep.override_parsing.is_override` and its helpers are what
:mod:`flopsweep.flags`, :mod:`flopsweep.value_sets` and :mod:`flopsweep.key_needs` filter the command
line with; these tests pin the helpers' values and the three modules' answers through them."""

from __future__ import annotations

import inspect

import pytest

from flopsweep import flags, key_needs, value_sets
from flopsweep.override_parsing import (
    is_override,
    overrides_of,
    parsed_overrides,
    typed_overrides,
    typed_pairs,
    typed_values,
)

ARGV = ["-m", "--config-name", "config", "+a=1", "++b=2", "~c", "~d=3", "e='x, y'", "--cfg", "job"]


@pytest.mark.parametrize(
    ("word", "plain", "with_deletions"),
    [
        ("seed=1", True, True),
        ("+sweep=smoke", True, True),
        ("~seed=0", True, True),
        ("~seed", False, True),
        ("-m", False, False),
        ("--cfg=job", False, False),
        ("config", False, False),  # a flag's value
    ],
)
def test_is_override(word: str, plain: bool, with_deletions: bool) -> None:
    assert is_override(word) is plain
    assert is_override(word, deletions=True) is with_deletions


def test_overrides_of_keeps_the_order_and_leaves_the_flags_out() -> None:
    assert overrides_of(ARGV) == ["+a=1", "++b=2", "~d=3", "e='x, y'"]
    assert overrides_of(ARGV, deletions=True) == ["+a=1", "++b=2", "~c", "~d=3", "e='x, y'"]


def test_typed_pairs_values_and_overrides() -> None:
    assert typed_pairs(ARGV) == [("a", "1"), ("b", "2"), ("e", "'x, y'")]
    assert typed_values([*ARGV, "a= ' 5' "]) == {"a": "5", "b": "2", "e": "x, y"}
    assert typed_overrides(["+fault.rank=1", "seed=0", "fault.rank=2"], "fault.rank") == [
        "fault.rank=1",
        "fault.rank=2",
    ]
    assert typed_overrides(["seed=0"], "fault.rank") == []


def test_the_three_modules_filter_through_the_one_place() -> None:
    """No module of the three spells the test again (``"=" in a and not a.startswith("-")``)."""
    for module in (flags, key_needs, value_sets):
        source = inspect.getsource(module)
        assert '"=" in a and not a.startswith("-")' not in source, module.__name__
        assert 'lstrip("+").partition("=")[0] == ' not in source, module.__name__
        assert "or o.is_delete()" not in source, module.__name__


def test_key_needs_given_reads_each_keys_values() -> None:
    given = key_needs._given(["-m", "+fault.rank=1,2", "~seed", "backend=DDP", "x=[1,2]"])
    assert given == {"fault.rank": ["1", "2"], "backend": ["ddp"], "x": ["[1,2]"]}
    assert key_needs._given(["+sweep=smoke", "seed=1"]) is None
    assert key_needs._given(["--config-name", "config", "seed=1"]) is None


def test_given_values_leaves_deletions_and_packages_out() -> None:
    parsed = parsed_overrides(["backend=ddp,fsdp", "~seed", "+model@x=gpt-tiny", "nproc_per_node=2"])
    assert key_needs.given_values(parsed) == {"backend": "ddp", "nproc_per_node": "2"}


def test_put_in_place_puts_the_fix_after_the_last_override_not_after_a_flag() -> None:
    placed = key_needs.put_in_place(["plan=true", "--cfg", "job"], {"x"}, ["x=1"])
    assert placed == ["plan=true", "x=1", "--cfg", "job"]


def test_the_checks_still_answer_through_the_helpers() -> None:
    assert flags.delete_problem(["-m", "~model"]).startswith("Invalid config: ~model: every job needs")
    assert flags.delete_problem(["seed=1"]) is None
    assert flags.group_prefix_problem(["sweep=smoke"]).endswith("Fix: +sweep=smoke")
    assert value_sets.value_set_problem(["fault.kind=oomm"]).endswith("Fix: did you mean fault.kind=oom?")
    assert value_sets.value_set_problem(["~fault.kind"]) is None
    line = key_needs.idle_key_problem(["+fault.rank=1"])
    assert line.startswith("Invalid config: fault.rank=1: does nothing without fault.kind")
