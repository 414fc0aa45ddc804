"""A pipeline degree that does not split ``model.n_layer`` is offered only fixes that also fit the world
size, and each is accepted typed back (docs/reliability-13.md row 1002)."""

from __future__ import annotations

import pytest

from flopsweep.checks import validate
from flopsweep.config import ConfigError

BASE = ["model=llama-tiny", "device=cpu", "backend=fsdp"]


def _refused(hydra_compose, overrides: list[str]) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        validate(hydra_compose([*BASE, *overrides]))
    return refused.value


def test_pp_3_on_4_ranks_offers_no_n_layer_that_the_world_refuses(hydra_compose):
    error = _refused(hydra_compose, ["nproc_per_node=4", "parallel.pp=3"])
    assert str(error) == (
        "Invalid config: parallel.pp=3: does not divide model.n_layer=2 into equal stages. "
        "Fix: set parallel.pp=2."
    )
    validate(hydra_compose([*BASE, "nproc_per_node=4", "parallel.pp=2"]))  # typed back: accepted


def test_pp_3_on_3_ranks_still_offers_n_layer_and_it_is_accepted(hydra_compose):
    error = _refused(hydra_compose, ["nproc_per_node=3", "parallel.pp=3"])
    assert error.fix.endswith("set model.n_layer to a multiple of 3")
    validate(hydra_compose([*BASE, "nproc_per_node=3", "parallel.pp=3", "model.n_layer=3"]))
