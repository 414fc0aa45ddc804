"""Session 41's splits by responsibility (no behaviour change, so no reliability row): every module
stays under 600 lines; each new part is below its old module, never importing it back; and the names
outside code reads at the old place (the analysis' ``flopsweep.columns.COLUMN_SPECS``, the job package's
``plan_table``) are the parts' own objects."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from integration.test_imports import _closure, _graph

ROOT = Path(__file__).resolve().parents[2]
GRAPH = functools.cache(lambda: _graph("flopsweep"))
"""The module graph, read once for this file's tests."""
MODULE_LINES = 600
"""A module's bound (the house rule): a file at it is split by responsibility before its next edit."""


def test_every_module_is_under_600_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for folder in ("flopsweep", "analysis", "hydra_plugins")
        for path in (ROOT / folder).rglob("*.py")
    }
    assert len(sizes) > 200
    assert {path: n for path, n in sizes.items() if n >= MODULE_LINES} == {}


@pytest.mark.parametrize(
    ("part", "above"),
    [
        ("flopsweep.space", {"flopsweep.plan_space", "flopsweep.job.plandecide"}),
        ("flopsweep.forecast_link", {"flopsweep.forecast"}),
        (
            "flopsweep.job.planprint",
            {"flopsweep.job.plansweep", "flopsweep.job.dryrun", "flopsweep.job.lifecycle"},
        ),
        (
            "flopsweep.job.planoutcome",
            {"flopsweep.job.plansweep", "flopsweep.job.lifecycle", "flopsweep.callbacks"},
        ),
        ("flopsweep.job.plantable", {"flopsweep.job.planprint", "flopsweep.job.plansweep"}),
        ("flopsweep.override_sweeps", {"flopsweep.overrides"}),
        ("flopsweep.search_rules", {"flopsweep.rules", "flopsweep.seqsearch", "flopsweep.plan"}),
        ("flopsweep.sweep_file_hydra", {"flopsweep.sweep_file_keys"}),
        ("flopsweep.sweep_file_read", {"flopsweep.sweep_file_keys", "flopsweep.sweep_file_hydra"}),
    ],
)
def test_a_part_never_imports_the_module_it_left(part: str, above: set[str]) -> None:
    """By the module graph, lazy imports included: the part is below the modules that use it."""
    graph = GRAPH()
    assert part in graph
    assert not _closure(graph, part) & above, _closure(graph, part) & above


def test_column_spec_imports_nothing_of_flopsweep() -> None:
    assert GRAPH()["flopsweep.column_spec"] == set()


def test_the_names_read_at_the_old_place_are_the_parts_own() -> None:
    from flopsweep import column_spec, columns, forecast, forecast_link, job, plan_space, space
    from flopsweep.job import planprint

    assert columns.COLUMN_SPECS is column_spec.COLUMN_SPECS  # analysis.catalogue imports it there
    assert [c.name for c in columns.COLUMN_SPECS][:2] == ["status", "model_tflops_per_device"]
    assert plan_space.Space is space.Space and plan_space.placed is space.placed  # the face's example
    assert forecast.link is forecast_link.link
    assert job.plan_table is planprint.plan_table and job.plan_invalid_line is planprint.plan_invalid_line
    assert job.PARTS["plan_table"] == "planprint" and job.PARTS["start_plan_file"] == "plantable"


def test_the_analysis_paths_part_imports_no_module_of_the_analysis() -> None:
    """``analysis.cli_paths`` (left ``analysis.cli``) is below the parser, ``__main__`` and ``output``."""
    assert _graph("analysis")["analysis.cli_paths"] == set()
