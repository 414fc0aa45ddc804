"""Read one ``metrics.json`` record: check its ``schema_version``, upgrade old versions.

The file is parsed by :func:`flopsweep.safe_read.read_json`, the one reader of record
files (size-capped, strict JSON, depth-safe). The upgrade chain is
:mod:`flopsweep.identity.versions` (the job's ``resume=true`` compares records through it too),
re-exported here: each older version has a named function that turns it into the next one, so a
record written by an old flopsweep still loads as the current schema
(:data:`flopsweep.record.SCHEMA_VERSION`). The versions and what each upgrade changes are described
there (``schema_version`` 0 and 1: :func:`upgrade_v0_to_v1`, :func:`upgrade_v1_to_v2`).

Only :mod:`flopsweep.record`, :mod:`flopsweep.files` and :mod:`flopsweep.identity.versions` are
imported from flopsweep: no torch, no model code. A record that cannot be read raises
:class:`RecordError` with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flopsweep.budget import ReadBudget
from flopsweep.identity.versions import (  # the chain, re-exported: callers import it from here
    CHECKPOINTING_BOOLS,
    UPGRADES,
    V1_FLOPS_CONVENTION,
    V1_METRIC_KEYS,
    Record,
    checkpointing_name,
    finite,
    gpt2_n_params,
    per_device_tflops,
    recompute_mode,
    upgrade,
    upgrade_v0_to_v1,
    upgrade_v1_to_v2,
    v1_flops,
)
from flopsweep.plausible import section_problems
from flopsweep.record import STATUSES
from flopsweep.safe_read import RecordError, read_json
from flopsweep.text import json_type

__all__ = [
    "CHECKPOINTING_BOOLS",
    "UPGRADES",
    "V1_FLOPS_CONVENTION",
    "RecordError",
    "Record",
    "V1_METRIC_KEYS",
    "checkpointing_name",
    "finite",
    "gpt2_n_params",
    "per_device_tflops",
    "read_record",
    "recompute_mode",
    "upgrade",
    "upgrade_v0_to_v1",
    "upgrade_v1_to_v2",
    "v1_flops",
]

# Sections every record of the current version has (after upgrading); ``run.id`` too.
REQUIRED_KEYS = ("status", "run", "config", "system", "metrics")

# Set-up values that must be text (or null): a table groups and labels rows by them.
TEXT_KEYS = (
    ("config", "model", "name"),
    ("config", "model", "arch"),
    ("config", "attention", "name"),
    ("config", "backend", "name"),
    ("config", "precision", "name"),
    ("config", "batch", "name"),
    ("config", "tag"),
    ("system", "device_name"),
)

MAX_CHECK_DEPTH = 6
"""How deep :func:`check_numbers` looks (a real record nests 4 levels)."""


def check_numbers(record: Record) -> None:
    """Raise :class:`RecordError` naming the first integer too large for a float (its FLOPs or
    TFLOPs would overflow) within :data:`MAX_CHECK_DEPTH` levels; iterative, so any depth is safe."""
    stack: list[tuple[Any, int]] = [(record, 0)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        for v in children:
            if type(v) is int:
                if v.bit_length() > 1000:  # a float ends at 2^1024; products need room
                    raise RecordError(
                        f"{_path_to(record, v)}: a {len(str(v))}-digit integer is too large for a float"
                    )
            elif depth < MAX_CHECK_DEPTH and isinstance(v, (dict, list)):
                stack.append((v, depth + 1))


def _path_to(value: Any, target: int, path: str = "", depth: int = 0) -> str:
    """Where ``target`` sits in ``value`` (for the message only; depth-bounded)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, v in items:
        here = f"{path}.{key}" if isinstance(value, dict) and path else f"{path}[{key}]" if path else str(key)
        if v is target:
            return here
        if depth < MAX_CHECK_DEPTH and isinstance(v, (dict, list)):
            found = _path_to(v, target, here, depth + 1)
            if found:
                return found
    return ""


def check(record: Record) -> None:
    """Raise :class:`RecordError` unless ``record`` has the required keys, a known status, sections
    of their types (:func:`flopsweep.plausible.section_problems`: ``config.backend`` an object,
    ``warnings`` a list of text, ...) and text (or null) where a set-up name belongs."""
    for key in REQUIRED_KEYS:
        if key not in record:
            raise RecordError(f"missing required key {key!r}")
    for key in ("run", "config", "system", "metrics"):
        if not isinstance(record[key], dict):
            raise RecordError(f"{key!r} is a JSON {json_type(record[key])}, not an object")
    if "id" not in record["run"]:
        raise RecordError("missing required key 'run.id'")
    if not isinstance(record["status"], str) or record["status"] not in STATUSES:
        raise RecordError(f"status {str(record['status'])[:80]!r} is not one of {', '.join(STATUSES)}")
    if not isinstance(record["run"]["id"], (str, int, type(None))) or isinstance(record["run"]["id"], bool):
        raise RecordError(f"run.id is a JSON {json_type(record['run']['id'])}, not a string")
    if sections := section_problems(record):  # config.backend ["ddp"], warnings "oops", ...
        raise RecordError(sections[0])
    for path in TEXT_KEYS:
        value: Any = record
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None and not isinstance(value, str):
            raise RecordError(f"{'.'.join(path)} is a JSON {json_type(value)}, not a string")


def read_record(path: Path, budget: ReadBudget | None = None) -> tuple[Record, int]:
    """Parse (with :func:`flopsweep.safe_read.read_json`, through ``budget`` when given:
    :meth:`flopsweep.budget.ReadBudget.read_json`), upgrade and check one ``metrics.json``.

    Returns:
        ``(record, version)``: the record in the current schema, and the
        ``schema_version`` the file was written with.

    Raises:
        RecordError: for an unreadable, empty, oversized, truncated, too deeply nested or
            non-object file, an unknown ``schema_version``, a missing required key, a
            set-up name that is not text, or an integer too large for a float; a file read
            already under another name (a hard link), or past ``budget``.
    """
    record = budget.read_json(Path(path)) if budget is not None else read_json(Path(path))
    version = record.get("schema_version")
    check_numbers(record)
    record = upgrade(record)
    check(record)
    return record, version
