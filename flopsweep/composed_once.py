"""Each sweep job's config composed once, not twice.

Hydra's sweepers check a batch before its first job starts (``Sweeper.validate_batch_is_legal``: it
composes every job's config, hydra-core 1.3), then the launcher composes each job's config again from
the same overrides (``BasicLauncher.launch``, ``flopsweep_pool``'s ``_compose``:
``config_loader.load_sweep_config``). A composition is most of a plan job's cost (about 0.15 s of CPU
each: Hydra reads and merges every option file again), so a 432-job plan sweep composed 864 configs.

:func:`check_batch` composes each job's config for the check, as Hydra does, and keeps it for the
launcher when the launcher composes in this process (:data:`IN_PROCESS_LAUNCHERS`);
:class:`ComposedOnce`, put in the sweep's ``HydraContext`` in place of its config loader, hands each
kept config to the ``load_sweep_config`` call of the same master config and overrides, once (the caller
owns it: the launcher sets ``hydra.job.num`` on it), and composes any other. A job thus runs the very
config its check composed (the files as they were when the batch was checked). Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

IN_PROCESS_LAUNCHERS = ("BasicLauncher", "PoolLauncher")
"""The launchers (class names) that compose each job's config in the sweep's process, in ``launch``:
Hydra's basic launcher and ``hydra/launcher=pool``. Others (``slurm``) compose in the job's process;
their batch is composed for the check only, as Hydra does."""

MAX_KEPT = 1000
"""The most configs kept for one batch (a composed config of ``conf/`` is about 0.2 MB: 1,000 about
0.2 GB); the launcher composes the jobs after these again, as Hydra does."""


def _key(master_config: Any, sweep_overrides: Sequence[str]) -> tuple[Any, ...]:
    """What ``load_sweep_config`` composes from: the config name, the master config's Hydra overrides
    (the sweep may add to them after it starts) and the job's overrides."""
    from omegaconf import OmegaConf

    hydra_overrides = OmegaConf.to_container(master_config.hydra.overrides.hydra)
    return (
        str(master_config.hydra.job.config_name),
        tuple(str(o) for o in hydra_overrides or ()),
        tuple(sweep_overrides),
    )


def _unwrapped(loader: Any) -> Any:
    return loader


class ComposedOnce:
    """A config loader (Hydra's ``ConfigLoader``) whose ``load_sweep_config`` returns a config kept by
    :meth:`keep` for the same master config and overrides, once, else composes; everything else is the
    wrapped loader's. Pickled (``hydra/launcher=pool`` sends the ``HydraContext`` to each job) as the
    wrapped loader, without the kept configs."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.kept: dict[tuple[Any, ...], list[Any]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def __reduce__(self) -> tuple[Any, ...]:
        return _unwrapped, (self.loader,)

    def keep(self, master_config: Any, batch: Sequence[Sequence[str]]) -> None:
        """Compose each job of ``batch`` (raises Hydra's error of the first that cannot be composed, as
        ``validate_batch_is_legal`` does) and keep the first :data:`MAX_KEPT`; the configs kept for an
        earlier batch are dropped first."""
        self.kept.clear()
        for n, overrides in enumerate(batch):
            config = self.loader.load_sweep_config(master_config, list(overrides))
            if n < MAX_KEPT:
                self.kept.setdefault(_key(master_config, overrides), []).append(config)

    def load_sweep_config(self, master_config: Any, sweep_overrides: list[str]) -> Any:
        """The kept config of these overrides (handed out once), else Hydra's composition."""
        key = _key(master_config, sweep_overrides)
        if configs := self.kept.get(key):
            config = configs.pop(0)
            if not configs:
                del self.kept[key]
            return config
        return self.loader.load_sweep_config(master_config, sweep_overrides)


def check_batch(sweeper: Any, batch: Sequence[Sequence[str]]) -> None:
    """``sweeper.validate_batch_is_legal(batch)`` that composes each job once: where its launcher composes
    in this process (:data:`IN_PROCESS_LAUNCHERS`), the sweep's config loader becomes a
    :class:`ComposedOnce` that keeps the batch's configs for the launcher. Raises what Hydra's check
    raises (a job whose config cannot be composed), before any job of the batch starts."""
    context = getattr(sweeper, "hydra_context", None)
    launcher = type(getattr(sweeper, "launcher", None)).__name__
    if context is None or launcher not in IN_PROCESS_LAUNCHERS:
        from hydra.plugins.sweeper import Sweeper

        Sweeper.validate_batch_is_legal(sweeper, batch)  # composed for the check only, as Hydra does
        return
    if not isinstance(context.config_loader, ComposedOnce):
        context.config_loader = ComposedOnce(context.config_loader)
    context.config_loader.keep(sweeper.config, batch)
