"""Hydra launcher plugins for ``hydra/launcher=slurm`` and ``slurm_local``.

They are hydra-submitit-launcher's ``SlurmLauncher`` and ``LocalLauncher``, plus a check of the
launcher settings against the run in ``setup``, before the sweep directory exists and before
anything is submitted (a Hydra callback cannot stop a multirun: Hydra turns its exceptions
into warnings). The resolvers that conf/hydra/launcher/slurm.yaml uses are registered here, at
plugin discovery, like hydra-submitit-launcher registers its configs. Hydra discovers plugins
in the ``hydra_plugins`` namespace package; a submitit task finds this one again when it
rebuilds the Hydra state (it starts in the directory the sweep was submitted from).
"""

from __future__ import annotations

from typing import Any

from hydra.errors import CompactHydraException
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
from omegaconf import DictConfig, OmegaConf

from flopsweep import slurm
from flopsweep.config import ConfigError

OmegaConf.register_new_resolver("flopsweep_tasks", slurm.tasks_per_node, replace=True)
OmegaConf.register_new_resolver("flopsweep_gpus", slurm.gpus_per_node, replace=True)
OmegaConf.register_new_resolver("flopsweep_mem_gb", slurm.mem_gb, replace=True)


class LauncherConfigError(CompactHydraException):
    """A launcher setting that contradicts the run; Hydra prints only its message (exit status 1)."""


def swept_keys(config: DictConfig) -> set[str]:
    """Keys that the multirun varies: sweep overrides on the command line and ``hydra.sweeper.params``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = config.hydra.sweeper.get("params") or {}
    lines = list(config.hydra.overrides.task) + [f"{key}={value}" for key, value in params.items()]
    return {o.key_or_group for o in OverridesParser.create().parse_overrides(lines) if o.is_sweep_override()}


def check_config(config: DictConfig, *, local: bool) -> None:
    """Check ``config.hydra.launcher`` against the run (:func:`flopsweep.slurm.check_sweep`,
    :func:`flopsweep.slurm.check_launcher`).

    Raises:
        LauncherConfigError: with the message of the ConfigError (key, value, fix).
    """
    try:
        slurm.check_sweep(nproc_per_node=str(config.nproc_per_node), swept=swept_keys(config))
        slurm.check_launcher(
            OmegaConf.to_container(config.hydra.launcher, resolve=True),
            nproc_per_node=int(config.nproc_per_node),
            nnodes=int(config.nnodes),
            device=str(config.device),
            local=local,
        )
    except ConfigError as exc:
        raise LauncherConfigError(str(exc)) from None


class FlopsweepSlurmLauncher(SlurmLauncher):
    """submitit_slurm that checks its settings against the run before submitting."""

    def setup(self, *, config: DictConfig, **kwargs: Any) -> None:
        check_config(config, local=False)
        super().setup(config=config, **kwargs)


class FlopsweepLocalLauncher(LocalLauncher):
    """submitit_local that checks its settings against the run before starting any task."""

    def setup(self, *, config: DictConfig, **kwargs: Any) -> None:
        check_config(config, local=True)
        super().setup(config=config, **kwargs)
