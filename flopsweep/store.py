"""Hydra ConfigStore registration of the schema (imported by ``run.py`` and the tests).

The root :class:`~flopsweep.config.RunConfig` is ``base_config``. Each option with a
schema of its own (a subclass of its group's base class, from the registries) is
stored as ``<group>/base_<option>``, which the option's YAML file names first in
its defaults list (Hydra's structured-config "base_" pattern).
"""

from __future__ import annotations

from flopsweep.config import RunConfig
from flopsweep.plan import option_schemas


def schema_nodes() -> dict[tuple[str, str], type]:
    """``{(group, "base_<option>"): schema}`` for every option schema that is not its group's base."""
    bases = {field: type(getattr(RunConfig(), field)) for field in option_schemas()}
    nodes: dict[tuple[str, str], type] = {}
    for group, options in option_schemas().items():
        seen: set[type] = set()
        for name, schema in options.items():
            if schema is not bases[group] and schema not in seen:
                seen.add(schema)
                nodes[(group, f"base_{name}")] = schema
    return nodes


def register_configs() -> None:
    """Store ``base_config`` and every ``<group>/base_<option>`` node in Hydra's ConfigStore."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(name="base_config", node=RunConfig)
    for (group, name), schema in schema_nodes().items():
        store.store(group=group, name=name, node=schema)
