"""Session 41 (docs/reliability-12.md #825): the ``optuna`` extra asks for hydra-optuna-sweeper 1.3 at least.
1.2.0 raised the failed cast of a trial that was not ok (``Return value must be float-castable. Got 'nan (the
run is not ok)'``) and ended the study with a traceback at its first such trial; 1.3 logs it and goes on,
which ``hydra_plugins.flopsweep_optuna`` relies on. Reads ``pyproject.toml``; no install."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_optuna_extra_excludes_the_plugin_release_that_ends_the_study_at_a_failed_trial() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    (plugin,) = [Requirement(r) for r in extras["optuna"] if r.startswith("hydra-optuna-sweeper")]
    assert not plugin.specifier.contains("1.2.0") and plugin.specifier.contains("1.3.0")
