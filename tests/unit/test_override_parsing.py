"""flopsweep.override_parsing: Hydra's grammar parsed once, None where it refuses an override."""

from __future__ import annotations

import pytest
from hydra.core.override_parser.types import ChoiceSweep
from hydra.errors import HydraException

from flopsweep.override_parsing import override_parser, parsed_all_or_none, parsed_or_none


def test_a_good_override_parses_and_a_bad_one_is_none() -> None:
    parsed = parsed_or_none("+model.n_layer=[2,3]")
    assert parsed is not None
    assert (parsed.key_or_group, parsed.value(), parsed.is_add()) == ("model.n_layer", [2, 3], True)
    assert parsed_or_none("model.n_layer=[2") is None  # a bracket left open
    assert override_parser() is override_parser()  # made once


def test_a_list_is_parsed_in_order_and_one_bad_element_makes_it_none() -> None:
    parsed = parsed_all_or_none(["seed=1,2", "tag=a"])
    assert parsed is not None
    assert [o.key_or_group for o in parsed] == ["seed", "tag"]
    assert isinstance(parsed[0].value(), ChoiceSweep) and parsed[1].value() == "a"
    assert parsed_all_or_none([]) == []  # no override: a parse, not None
    assert parsed_all_or_none(["seed=1", 'tag="abc', "steps.measure=3"]) is None


def test_catch_narrows_what_is_swallowed() -> None:
    assert parsed_or_none("x=[2", catch=(HydraException,)) is None  # OverrideParseException is one
    with pytest.raises(HydraException, match="no viable alternative"):
        parsed_all_or_none(["x=[2"], catch=(TypeError,))
