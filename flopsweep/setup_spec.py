"""The spec of one set-up column: torch-free, imported by :mod:`flopsweep.columns` and by the model
families' shape modules, which declare the columns of their own knobs (``COLUMNS``) beside their
schema, so that a family is registered in one place (:data:`flopsweep.models.MODELS`).

Imports nothing of flopsweep.
"""

from __future__ import annotations

from dataclasses import dataclass

SHOW = ("table", "varied", "distinct")
"""Where a set-up column is shown (:attr:`SetupSpec.show`)."""
KINDS = ("int", "float", "bool", "text")
"""Column types: ``Int64``, ``float64``, ``boolean``, text (``object``); blank is missing, never 0."""


@dataclass(frozen=True, kw_only=True)
class SetupSpec:
    """One set-up column of the analysis.

    Attributes:
        name: the column (``zero_stage``).
        path: dotted path into the record (``config.backend.zero_stage``, ``system.device_name``).
        header: short header in the terminal, markdown and HTML tables (``zero``).
        description: the legend's text for the header; empty: no legend entry.
        kind: one of :data:`KINDS`; None (a ``config.*`` path): from the schema field's type.
        show: where the default table shows it (``analysis.display.compact``): ``table``
            always (unless blank in every row); ``varied`` when it takes two values among the
            rows shown; ``distinct`` only when it tells apart rows that every other shown
            set-up column leaves identical (``nnodes``: the world size shows the rank count).
            Any column that tells such rows apart is shown, whatever its ``show``.
        identity: part of what tells one set-up from another: ``compare`` matches runs on it
            and ``--pivot`` names it when a cell's runs differ in it. False for repeats'
            labels (``seed``, ``tag``) and for the rank count's parts (``world_size`` has it).
    """

    name: str
    path: str
    header: str
    description: str = ""
    kind: str | None = None
    show: str = "varied"
    identity: bool = True

    @property
    def keys(self) -> tuple[str, ...]:
        """:attr:`path` split at its dots."""
        return tuple(self.path.split("."))
