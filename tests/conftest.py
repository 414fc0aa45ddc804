"""Shared fixtures: Hydra composition of conf/ into the typed RunConfig, once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from flopsweep.checkpointing import normalize_overrides
from flopsweep.config import RunConfig
from flopsweep.store import register_configs

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


@pytest.fixture(scope="module")
def hydra_compose():
    """``compose(overrides) -> RunConfig``: what run.py's Hydra would hand the job (after run.py's
    rewrite of ``activation_checkpointing=true``/``false``)."""
    register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "test", replace=True)
    OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: None, replace=True)
    with initialize_config_dir(config_dir=str(CONF), version_base=None):

        def _compose(overrides: list[str]) -> RunConfig:
            cfg = compose(
                config_name="config",
                overrides=normalize_overrides(list(overrides)),
                return_hydra_config=False,
            )
            return OmegaConf.to_object(cfg)

        yield _compose


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A selected ``slurm`` test never passes by skipping: its skip is reported as a failure, so
    that ``python -m pytest -m slurm`` exits non-zero when no Slurm test really ran (``-m slurm``
    selecting no test at all exits 5)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("slurm") and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"a slurm test must run when selected (-m slurm), but it was skipped: {reason}"
