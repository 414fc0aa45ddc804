"""Configs of the launchers (``hydra/launcher=slurm``, ``slurm_local``), on every app's search path
through :class:`hydra_plugins.flopsweep_slurm.FlopsweepSearchPath`."""
