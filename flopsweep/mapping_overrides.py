"""A section given as a mapping on the command line (``'parallel={tp:2,pp:2}'``) read as its keys
(``parallel.tp=2 parallel.pp=2``), for the checks before Hydra that read one key at a time
(``run.py``'s :func:`refusal`: :func:`flopsweep.overrides.type_problem`,
:func:`flopsweep.value_sets.value_set_problem`). Without it such a mapping skipped them: ``{TP:2}``,
``{tp:abc}``, ``steps={warmupp:2}`` drew Hydra's several lines, and ``{tp:0}``, ``steps={warmup:-1}``
the job's refusal after Hydra made the run's folder. Torch-free.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import typing

from flopsweep.override_parsing import parsed_or_none
from flopsweep.override_schema import CONF
from flopsweep.sweep_file_read import override_value


@functools.cache
def mapped_sections() -> frozenset[str]:
    """The top-level keys of :class:`flopsweep.config.RunConfig` that are sections (dataclasses) and no
    config group of ``conf/`` (``parallel``, ``steps``, ``predict``; not ``model`` or ``batch``, whose
    ``key=`` picks an option)."""
    from flopsweep.config import RunConfig

    hints = typing.get_type_hints(RunConfig)
    return frozenset(
        f.name
        for f in dataclasses.fields(RunConfig)
        if dataclasses.is_dataclass(hints[f.name]) and not os.path.isdir(os.path.join(CONF, f.name))
    )


def read_as_keys(overrides: list[str]) -> list[str]:
    """``overrides`` with each ``SECTION={a:1,b:2}`` of :func:`mapped_sections` (one value, no ``+`` or
    ``~``, a mapping of at least one key) written as ``SECTION.a=1 SECTION.b=2`` in its place (each value
    as the grammar writes it, :func:`flopsweep.sweep_file_read.override_value`: ``{tp:abc}`` is
    ``parallel.tp='abc'``); the others, and a mapping the grammar refuses or sweeps, as they are."""
    out = []
    for override in overrides:
        key, eq, _ = override.partition("=")
        parsed = parsed_or_none(override) if eq and key in mapped_sections() else None
        value = parsed.value() if parsed is not None and not parsed.is_sweep_override() else None
        if isinstance(value, dict) and value:
            out.extend(f"{key}.{k}={override_value(v)}" for k, v in value.items())
        else:
            out.append(override)
    return out
