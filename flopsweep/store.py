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


def register_configs() -> None:
    """Store ``base_config`` and every ``schema/<group>/base_<option>`` node in Hydra's ConfigStore."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(name="base_config", node=RunConfig)
    for (group, name), schema in schema_nodes().items():
        store.store(group=f"{SCHEMA_GROUP}/{group}", name=name, node=schema)
