"""How one column outside the set-up columns is shown (:class:`ColumnSpec`), split out of
:mod:`flopsweep.columns` by topic; ``flopsweep.columns.ColumnSpec`` is the same class. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass

FORMATS = ("", "percent", "thousands", "times")
"""How a number cell reads: ``12.3%``, ``12,345``, ``1.23x``; "": ``.4g`` (``12,345`` for big integers)."""
TABLE = ("", "always", "some")
"""Where the default table shows a column (:attr:`ColumnSpec.table`)."""
HIDE_SETUP = 100
"""The :attr:`ColumnSpec.hide` rank of the set-up columns (hidden last declared first, the ``table``
ones after the rest, ``model`` never): lower ranks are hidden before them, higher ones after."""


@dataclass(frozen=True, kw_only=True)
class ColumnSpec:
    """How one column outside :data:`SETUP_SPECS` is shown: a metric's presentation (its header,
    unit, description and direction are its ``MetricSpec``'s) or a column the analysis makes.
    ``analysis.catalogue`` merges them into one spec per column, which every output reads.

    Attributes:
        name: the column.
        header: short header in the terminal, markdown and HTML tables ("": the metric's, else the name).
        description: the legend's line ("": the metric's, else no legend entry).
        kind: :data:`flopsweep.setup_spec.KINDS` of a column the analysis makes (None: a metric, typed by
            its unit or values).
        better: ``higher`` or ``lower`` for a figure of merit the analysis makes (metrics: their own).
        format: one of :data:`FORMATS` ("": percent for a metric of unit ``1``, thousands for ``1/s``).
        table: :data:`TABLE`: in the default table ``always``, where ``some`` row has a value, or not ("").
        hide: ``--width`` hides lowest first (:data:`HIDE_SETUP`); None: only when blank in every row.
        interval: carries a 95% interval (``<name>_ci_low``, ``<name>_ci_high``: ``analysis.spread``).
    """

    name: str
    header: str = ""
    description: str = ""
    kind: str | None = None
    better: str | None = None
    format: str = ""
    table: str = ""
    hide: int | None = None
    interval: bool = False
