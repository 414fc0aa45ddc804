"""Gather ``metrics.json`` records into a pandas DataFrame and print comparison tables.

The JSON records are the only input: nothing here parses directory names or logs,
and the TFLOPs figures are read from the records, not recomputed.
"""

from analysis.load import COLUMNS, load, table

__all__ = ["COLUMNS", "load", "table"]
