"""Session 39's check of ``${now:...}`` under the submitit launchers (``hydra/launcher=submitit_local``,
``slurm_local``; by the code, ``submitit_slurm`` and ``slurm``), not a defect (reported, no reliability
row): the sweep process resolves ``hydra.sweep.dir`` before it submits, submitit pickles the launcher with
that config, whose resolver cache travels with it, and each task's ``load_sweep_config`` copies the cache
into the job's config (``OmegaConf.copy_cache``), so a task started seconds later names the sweep's folder,
not its own second (as the pool's job processes did: docs/reliability-7.md #422)."""

from __future__ import annotations

import pickle

from hydra.core.utils import setup_globals
from omegaconf import OmegaConf


def test_a_tasks_job_config_keeps_the_sweeps_now() -> None:
    setup_globals()  # Hydra's resolvers, ``now`` among them (cached per config)
    sweep = OmegaConf.create({"hydra": {"sweep": {"dir": "multirun/${now:%Y-%m-%d}/${now:%H-%M-%S.%f}"}}})
    folder = str(sweep.hydra.sweep.dir)  # BaseSubmititLauncher.launch: the folder made before submitting
    master = pickle.loads(pickle.dumps(sweep))  # the launcher's config, as the task unpickles it
    job = OmegaConf.create({"hydra": {"sweep": {"dir": "multirun/${now:%Y-%m-%d}/${now:%H-%M-%S.%f}"}}})
    OmegaConf.copy_cache(from_config=master, to_config=job)  # load_sweep_config's step
    assert str(job.hydra.sweep.dir) == folder
    OmegaConf.clear_cache(job)  # without the cache the task reads the clock again: another folder
    assert str(job.hydra.sweep.dir) != folder
