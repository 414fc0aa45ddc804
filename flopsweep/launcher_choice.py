"""Which launcher runs this job, read from the job's Hydra config (``hydra.launcher``), never from
the environment: :func:`job_launcher` (``local``, ``slurm`` or ``slurm_local``; under the last two
each Slurm task is one node's agent, :mod:`flopsweep.node_agent`). Validation (:mod:`flopsweep.plan`)
reads it without importing the launch code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

SLURM_TARGETS = {
    "hydra_plugins.flopsweep_slurm.FlopsweepSlurmLauncher": "slurm",
    "hydra_plugins.flopsweep_slurm.FlopsweepLocalLauncher": "slurm_local",
}
"""``hydra.launcher._target_`` of flopsweep's submitit launchers, and the launcher's name."""


ELSEWHERE_TARGETS = (
    "hydra_plugins.flopsweep_slurm.FlopsweepSlurmLauncher",
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
)
"""``hydra.launcher._target_`` of the launchers whose jobs run on other machines (Slurm's nodes): flopsweep's
``slurm`` and hydra-submitit-launcher's ``submitit_slurm``."""


def runs_here(target: str) -> bool:
    """Whether the jobs of the launcher of ``hydra.launcher._target_`` ``target`` run on this machine, so that
    what this machine lacks (a GPU, free host memory) refuses them all: every launcher but Slurm's
    (:data:`ELSEWHERE_TARGETS`): Hydra's basic one, ``pool``, ``submitit_local``, ``slurm_local``. The sweep's
    once-before-any-job check asks it (``hydra_plugins.flopsweep_repeats.once``)."""
    return target not in ELSEWHERE_TARGETS


def job_launcher() -> str:
    """``slurm`` or ``slurm_local`` when this job's Hydra config names one of flopsweep's submitit
    launchers (``hydra.launcher._target_``), else ``local`` (also outside a Hydra job)."""
    launcher = _launcher_conf()
    return SLURM_TARGETS.get(str(launcher.get("_target_", "")), "local") if launcher else "local"


def _launcher_conf() -> dict[str, Any]:
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return {}
    launcher = HydraConfig.get().get("launcher")
    return dict(launcher) if launcher is not None else {}


@contextlib.contextmanager
def launcher_set(launcher: dict[str, Any]) -> Iterator[None]:
    """Within: :func:`job_launcher` reads ``launcher`` as this job's
    ``hydra.launcher`` (Hydra's config singleton is set and then restored); for checks and tests that
    decide as a job of that launcher would, outside one."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    instance = HydraConfig.instance()
    saved = instance.cfg
    instance.cfg = OmegaConf.create({"hydra": {"launcher": launcher}})
    try:
        yield
    finally:
        instance.cfg = saved
