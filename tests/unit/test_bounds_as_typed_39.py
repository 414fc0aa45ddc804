"""Session 39 (docs/reliability-10.md #621): a refusal's bound was written with ``%g``
(``plan_gpu_memory_gib``'s ``at most 1.04858e+06``, rounded below the bound; a cluster's network
``outside (0, 1e+06] GB/s``; ``budget.tokens``' ``1e+18``): each is now written as one types it
(:func:`flopsweep.config.typed_form`), and the bound typed back is accepted."""

from __future__ import annotations

import re

import pytest

from flopsweep.checks import check_number
from flopsweep.clusters import parse_cluster
from flopsweep.config import ConfigError
from flopsweep.figure_types import whole
from flopsweep.gpu_memory import planned_gpu_bytes


def _refusal(call, *args) -> str:
    with pytest.raises(ConfigError) as err:
        call(*args)
    return str(err.value)


def test_plan_gpu_memory_gibs_bound_is_its_integer_and_accepted() -> None:
    line = _refusal(planned_gpu_bytes, None, 1e9)
    assert "at most 1048576. Fix:" in line and "e+" not in line, line
    assert planned_gpu_bytes(None, 1048576.0) == (1048576 * 2**30, "1048576 GiB")


def test_a_networks_bound_and_value_are_as_typed_and_the_bound_parses() -> None:
    line = _refusal(parse_cluster, "H100:2x8:99999999GBps")
    assert "99999999GBps is 99999999 GB/s per GPU, outside (0, 1e6] GB/s" in line, line
    bound = re.search(r"outside \(0, (\S+)\] GB/s", line).group(1)
    assert parse_cluster(f"H100:2x8:{bound}GBps").nnodes == 2


@pytest.mark.parametrize(
    ("key", "value", "bound"), [("budget.tokens", 1e19, "1e18"), ("nnodes", 5000, "1024")]
)
def test_a_keys_bound_is_written_without_a_plus_and_is_accepted(key: str, value: float, bound: str) -> None:
    line = _refusal(check_number, key, value)
    assert f"is beyond the bound of {bound}. Fix: set {key} to at most {bound}" in line, line
    check_number(key, float(bound) if "e" in bound else int(bound))  # accepted: no raise


def test_a_record_figures_bound_is_whole() -> None:
    assert whole(0, 2**26)(2**27) == "a whole number >= 0 and <= 67108864"
