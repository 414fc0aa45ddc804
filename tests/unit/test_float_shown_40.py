"""A sweep file's float values are shown as typed, else in a compact exact form (docs/reliability-11.md #720):
``hydra.sweeper.params: {budget.tokens: 1e12,15e12}`` showed ``budget.tokens=1000000000000.0`` in the plan's
table, its job lines, its best command and each job's launch line (Hydra writes a swept float back in Python's
form)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from flopsweep import shown_overrides
from flopsweep.shown_overrides import as_typed, keep_sweep_params, shown, sweep_params, typed_back


@pytest.mark.parametrize(
    ("hydras", "compact"),
    [
        ("budget.tokens=1000000000000.0", "budget.tokens=1e12"),
        ("budget.tokens=15000000000000.0", "budget.tokens=1.5e13"),
        ("optim.lr=1e-08", "optim.lr=1e-8"),
        ("+x@pkg=1.5e+16", "+x@pkg=1.5e16"),
        ("cost.usd_per_gpu_hour=2.50", "cost.usd_per_gpu_hour=2.50"),  # not Python's form: typed so
        ("budget.tokens=3.0", "budget.tokens=3.0"),  # 3 would be read as an int
        ("x=[1.0,2]", "x=[1.0,2]"),
        ("x=nan", "x=nan"),
    ],
)
def test_a_float_hydra_wrote_back_is_shown_compact(hydras: str, compact: str) -> None:
    assert as_typed(hydras) == compact


def _sweep(params: dict[str, object]):  # noqa: ANN202 - a composed config's hydra node
    return OmegaConf.create({"hydra": {"sweeper": {"params": params}}})


def test_a_sweep_files_value_is_shown_as_it_typed_it(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _sweep({"budget.tokens": "1e12,15e12", "cost.usd_per_gpu_hour": 2.5})
    assert sweep_params(config.hydra) == ["budget.tokens=1e12,15e12", "cost.usd_per_gpu_hour=2.5"]
    monkeypatch.setattr(shown_overrides, "SWEEP_TYPED", [])
    monkeypatch.setattr("sys.argv", ["run.py", "-m", "+sweep=mine"])
    keep_sweep_params(config)
    assert shown(["budget.tokens=15000000000000.0", "seed=0"]) == "budget.tokens=15e12 seed=0"
    assert typed_back("budget.tokens=1000000000000.0") == "budget.tokens=1e12"


def test_a_sweeper_without_params_keeps_the_command_line() -> None:
    assert sweep_params(OmegaConf.create({"sweeper": {"space": {}}})) == []
    assert sweep_params(None) == []
