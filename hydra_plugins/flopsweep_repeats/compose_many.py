"""Every job of a long sweep composed cheaply for the check before any job (:mod:`.once`): Hydra composes
once per distinct set of the overrides that change the defaults list (config groups, ``+``/``~`` keys, a
key Hydra's node does not hold as a plain value) and each job's plain ``key=value`` overrides are merged
onto a copy of that composition, as Hydra merges them; the two keys of Hydra's part that name the job's
overrides (``hydra.overrides.task``, ``hydra.job.override_dirname``) are then set as Hydra sets them, so the
config is Hydra's own ``load_sweep_config``'s, its part included (every shipped sweep file checked:
``tests/unit/test_compose_many_42.py``). Was (session 41): each job composed in full (about 0.13 s each on
the 2-core machine), so only sweeps of up to 64 jobs were checked; and until session 42 those two keys
named the cached composition's overrides, so a resumed sweep whose ``hydra.sweep.subdir`` names
``override_dirname`` composed each job in full.

Hydra's API has no cheaper path: ``load_sweep_config`` composes the defaults list again for every job.
Measured on the 2-core machine, shared (session 41): the check of 500 jobs (``model=gpt-1.3b device=cpu``,
``seed=0..99`` x ``batch.micro_batch_size=1,2,4,8,16``: one full composition, 500 merges, each job planned
and checked) took 5.0 s, where composing each in full took about 0.13 s a job (64 s). Hydra imports this
module when it scans its plugins: the rest is imported when a sweep asks.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

MOST_COMPOSITIONS = 64
"""The most full compositions (about 0.13 s each) one check makes: a sweep of more distinct defaults
lists is left to its jobs, so that the check stays under about 10 s."""


class Composer:
    """Compose the jobs of one sweep as its launcher would (``load_sweep_config``), reusing one full
    composition per distinct set of defaults-changing overrides (:func:`split`).

    Args:
        sweeper: the sweeper (its ``config``, its ``hydra_context.config_loader``).
    """

    def __init__(self, sweeper: Any) -> None:
        self._loader = sweeper.hydra_context.config_loader
        self._config = sweeper.config
        self._groups = set(self._loader.list_groups(""))
        self._cache: dict[tuple[str, ...], Any] = {}

    @property
    def compositions(self) -> int:
        """How many full compositions were made so far."""
        return len(self._cache)

    def compose(self, job: Sequence[str]) -> Any:
        """The job's config (Hydra's part included, a ``DictConfig``) as ``load_sweep_config`` makes it.

        Raises:
            OverflowError: past :data:`MOST_COMPOSITIONS` full compositions (the check gives up).
            Exception: what Hydra's composition or merge raises (the job's own line).
        """
        from omegaconf import OmegaConf

        base, values = self.split(job)
        cfg = copy.deepcopy(self._composed(base))  # the cached one stays as composed
        for dotted, value in values:
            OmegaConf.update(cfg, dotted, value, merge=True)
        if values:  # Hydra's part names every override of the job, not the cached composition's
            _name_overrides(cfg, _parsed(job))
        return cfg

    def split(self, job: Sequence[str]) -> tuple[list[str], list[tuple[str, Any]]]:
        """``job``'s overrides as (those that need a full composition, in order; the plain ``key=value`` ones
        as ``(key, value)``, parsed by Hydra's own override parser). A plain one: no ``+``, ``~`` or ``++``,
        no sweep, a key no config group is named (``model``, ``hydra/launcher``) and no other override of the
        job names (``seed=1 ++seed=2``: Hydra applies them in order), whose node in the composition without
        it is a plain value (not a mapping or list), set to a plain value."""
        from hydra.core.override_parser.types import OverrideType

        base, values, keys = [], [], set()
        for text, override in zip(job, _parsed(job), strict=True):
            key = override.key_or_group
            value = override.value() if not override.is_sweep_override() else None
            plain = (
                override.type == OverrideType.CHANGE
                and override.package is None
                and not override.is_sweep_override()
                and "/" not in key
                and key not in self._groups
                and not key.startswith("hydra")
                and isinstance(value, str | int | float | bool)
            )
            (values.append((key, value)) if plain else base.append(text))
            keys |= set() if plain else {key}
        if values and (keys & {k for k, _ in values} or not self._leaves(base, [k for k, _ in values])):
            return list(job), []  # a key that is not a plain value there, or set twice: composed in full
        return base, values

    def _composed(self, base: list[str]) -> Any:
        """The full composition of ``base`` (cached; raises OverflowError past :data:`MOST_COMPOSITIONS`)."""
        key = tuple(base)
        if key not in self._cache:
            if len(self._cache) >= MOST_COMPOSITIONS:
                raise OverflowError(f"more than {MOST_COMPOSITIONS} compositions")
            self._cache[key] = self._loader.load_sweep_config(self._config, list(base))
        return self._cache[key]

    def _leaves(self, base: list[str], keys: list[str]) -> bool:
        """Whether each of ``keys`` is a plain value (not a container, present) in the composition of
        ``base``."""
        from omegaconf import DictConfig, ListConfig, OmegaConf

        cfg = self._composed(base)
        for dotted in keys:
            parent, _, leaf = dotted.rpartition(".")
            node = OmegaConf.select(cfg, parent) if parent else cfg
            if not isinstance(node, DictConfig) or leaf not in node:
                return False
            if isinstance(node._get_node(leaf), DictConfig | ListConfig):
                return False
        return True


def _parsed(job: Sequence[str]) -> list[Any]:
    """``job``'s overrides parsed by Hydra's own parser (raises as Hydra's composition would)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(list(job))


def _name_overrides(cfg: Any, parsed: list[Any]) -> None:
    """Set ``hydra.overrides.task`` (each override of the job that is not Hydra's, as typed, in order) and
    ``hydra.job.override_dirname`` (Hydra's ``get_overrides_dirname`` of them, with the config's
    ``hydra.job.config.override_dirname`` separators and excluded keys) as Hydra's ``load_configuration``
    sets them; ``hydra.overrides.hydra`` is the cached composition's already (every ``hydra.`` override is
    composed in full)."""
    from hydra._internal.config_loader_impl import get_overrides_dirname

    task = [o for o in parsed if not o.is_hydra_override()]
    cfg.hydra.overrides.task = [o.input_line for o in task]
    dirname = cfg.hydra.job.config.override_dirname
    cfg.hydra.job.override_dirname = get_overrides_dirname(
        overrides=task,
        kv_sep=dirname.kv_sep,
        item_sep=dirname.item_sep,
        exclude_keys=list(dirname.exclude_keys),
    )
