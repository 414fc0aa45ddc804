"""Shared fixtures: Hydra composition of conf/ into the typed RunConfig, once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from flopsweep.config import RunConfig
from flopsweep.store import register_configs

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


@pytest.fixture(scope="module")
def hydra_compose():
    """``compose(overrides) -> RunConfig``: what run.py's Hydra would hand the job."""
    register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "test", replace=True)
    OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: None, replace=True)
    with initialize_config_dir(config_dir=str(CONF), version_base=None):

        def _compose(overrides: list[str]) -> RunConfig:
            cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=False)
            return OmegaConf.to_object(cfg)

        yield _compose
