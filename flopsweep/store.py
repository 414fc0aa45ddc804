"""Hydra ConfigStore registration of the schema (imported by ``run.py`` and the tests), torch-free.

The root :class:`~flopsweep.config.RunConfig` is ``base_config``. Each option with a
schema of its own (:data:`flopsweep.options.OPTION_SCHEMAS`) is stored as
``schema/<group>/base_<option>``, which the option's YAML file names first in its defaults
list as ``/schema/<group>/base_<option>@_here_`` (Hydra's structured-config "base_" pattern,
"Extending configs" in Hydra's docs). The nodes sit outside the group, so Hydra never offers
them as options: ``model=base_gpt2`` is an unknown option, and the list Hydra prints with that
refusal names only the YAML files.
"""

from __future__ import annotations

from flopsweep.config import RunConfig
from flopsweep.options import schema_nodes

SCHEMA_GROUP = "schema"
"""The ConfigStore group above the schema nodes: ``schema/<group>/base_<option>``."""


def _the_store(store: object, memo: dict[int, object]) -> object:
    """``copy.deepcopy`` of Hydra's ``ConfigStore``: the store itself (see :func:`register_configs`)."""
    return store


def register_configs() -> None:
    """Store ``base_config`` and every ``schema/<group>/base_<option>`` node in Hydra's ConfigStore.

    Also makes ``copy.deepcopy`` of the store return the store: every composition deep-copied Hydra's
    config repository (``CachingConfigRepository.__init__``, hydra-core 1.3), the process-wide
    ``ConfigStore`` included (about 7 ms of CPU a composition: a sweep composes each job once), though
    the sources Hydra makes afresh read ``ConfigStore.instance()`` itself and ``ConfigStore.load``
    deep-copies each node it hands out."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.__deepcopy__ = _the_store  # type: ignore[attr-defined]
    store = ConfigStore.instance()
    store.store(name="base_config", node=RunConfig)
    for (group, name), schema in schema_nodes().items():
        store.store(group=f"{SCHEMA_GROUP}/{group}", name=name, node=schema)
