"""The tuner's parameters are echoed as typed in their refusals (docs/reliability-14.md #1064)."""

from __future__ import annotations

import re
import sys

import pytest

from flopsweep.tune import Candidate, capped_problem
from hydra_plugins.flopsweep_tune import command_line_problem

TUNE = ["-m", "hydra/sweeper=tune", "device=cpu"]


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        (
            "hydra.sweeper.budget_gpu_s=1e-400",
            "hydra.sweeper.budget_gpu_s=1e-400: must be a finite number above 0",
        ),
        ("hydra.sweeper.memory_gib=-0.000001", "hydra.sweeper.memory_gib=-0.000001: must be a finite number"),
        ("hydra.sweeper.eta=3.0", "hydra.sweeper.eta=3.0: is a whole number written as a float"),
        ("hydra.sweeper.initial=1e3", "hydra.sweeper.initial=1e3: is a whole number written as a float"),
        ("hydra.sweeper.budget_gpu_s=null", "hydra.sweeper.budget_gpu_s=null: must be a finite number"),
    ],
)
def test_a_sweeper_parameter_is_refused_as_typed_and_its_fix_passes(typed, said) -> None:
    """``budget_gpu_s=1e-400`` was said ``budget_gpu_s=0`` (Hydra reads it as 0.0)."""
    line = command_line_problem([*TUNE, typed])
    assert line is not None and line.startswith(f"Invalid config: {said}"), line
    fix = re.search(r"(hydra\.sweeper\.\w+=\S+?)[ .,]*(?: \(its default\)|$)", line.split("Fix: ")[1]).group(
        1
    )
    assert command_line_problem([*TUNE, fix]) is None, fix


def test_the_cap_s_refusal_echoes_the_cap_as_typed(monkeypatch) -> None:
    """``memory_gib=0.000001`` was said ``memory_gib=1e-6`` by the tuner's check of its set-ups."""
    over = [
        Candidate(i, (f"a={i}",), f"mb{i}", pruned="over memory: ...", peak_gib=p)
        for i, p in enumerate((0.1, 0.2))
    ]
    monkeypatch.setattr(sys, "argv", ["run.py", *TUNE, "hydra.sweeper.memory_gib=0.000001"])
    assert capped_problem(over, 1e-6, 0.0).startswith(
        "Invalid config: hydra.sweeper.memory_gib=0.000001: fits no"
    )
    monkeypatch.setattr(sys, "argv", ["run.py", *TUNE])  # from a config file: its typed form
    assert capped_problem(over, 1e-6, 0.0).startswith(
        "Invalid config: hydra.sweeper.memory_gib=1e-6: fits no"
    )
