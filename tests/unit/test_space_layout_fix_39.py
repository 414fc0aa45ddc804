"""A ``space.layouts`` value that is no layout gets a fix keeping the layouts typed (docs/reliability-10.md
#603, session 39's re-trial of #531): ``'space.layouts=[TP2]'`` and ``[tp4,tp9x]`` had been given ``Fix: e.g.
space.layouts=[dp,hsdp,tp2]`` whatever was typed, where the other ``space.*`` lists keep theirs
(``space_values.layouts_fix``)."""

from __future__ import annotations

import dataclasses

import pytest


@pytest.mark.parametrize(
    ("typed", "fix"),
    [
        (("TP2",), "[tp2]"),
        (("tp4", "tp9x"), "[tp4]"),
        (("DP", "foo"), "[dp]"),
        (("Hsdp", "PP2", "pp2"), "[hsdp,pp2]"),
        (("foo",), "[dp,hsdp,tp2]"),
        (("tp0",), "[dp,hsdp,tp2]"),
    ],
)
def test_a_layout_that_is_none_gets_a_fix_keeping_the_layouts_typed(typed: tuple[str, ...], fix: str) -> None:
    from flopsweep.config import ConfigError
    from flopsweep.space import Space

    with pytest.raises(ConfigError) as err:
        dataclasses.replace(Space(), layouts=typed).check()
    assert str(err.value).endswith(f"Fix: e.g. space.layouts={fix}.")
    dataclasses.replace(Space(), layouts=tuple(fix.strip("[]").split(","))).check()  # the fix passes
