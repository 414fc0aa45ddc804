"""Read one ``metrics.json`` record: check its ``schema_version``, upgrade old versions.

The version is read explicitly. Each older version has a named function that
turns it into the next one, so a record written by an old flopsweep still loads
as the current schema (DESIGN.md, "metrics.json (schema_version 1)"):

- ``schema_version 0`` (the layout before the v1 contract): run and system
  fields at the top level (``run_id``, ``started_at``, ``finished_at``,
  ``overrides``, ``hostname``, ``device_name``, ``world_size``, ``torch``), the
  error as a plain message string, and flat metric keys
  (``iteration_time_s_mean``, ``iteration_time_s_median``, ``tokens_per_s``,
  ``tflops_per_device``, ``mfu``, ``peak_cuda_allocated_bytes``, ...) with no
  ``model`` section. :func:`upgrade_v0_to_v1` converts it.

A record that cannot be read raises :class:`RecordError` with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flopsweep import flops
from flopsweep.metrics import METRIC_KEYS, SCHEMA_VERSION, STATUSES

Record = dict[str, Any]

# Sections every record of the current version has (after upgrading); ``run.id`` too.
REQUIRED_KEYS = ("status", "run", "config", "system", "metrics")


class RecordError(ValueError):
    """A ``metrics.json`` that cannot be read as a flopsweep record; the message says why."""


def _v0_run(old: Record) -> Record:
    keys = ("started_at", "finished_at", "overrides", "job_num")
    return {"id": old.get("run_id"), **{k: old.get(k) for k in keys}}


def _v0_system(old: Record) -> Record:
    keys = (
        "hostname",
        "device_name",
        "device_count",
        "world_size",
        "torch",
        "cuda",
        "deepspeed",
        "xformers",
        "python",
        "git_sha",
    )
    return {k: old.get(k) for k in keys}


def _v0_metrics(flat: Record) -> Record:
    out: Record = dict.fromkeys(METRIC_KEYS)
    out.update({k: v for k, v in flat.items() if k in METRIC_KEYS and k != "iteration_time_s"})
    stats = ("mean", "median", "min", "max", "std")
    times = {s: flat.get(f"iteration_time_s_{s}") for s in stats}
    out["iteration_time_s"] = {**times, "values": flat.get("iteration_time_s_values")}
    return out


def _v0_model(config: Record) -> Record | None:
    m = config.get("model")
    if not isinstance(m, dict):
        return None
    keys = ("n_layer", "n_embd", "seq_len", "vocab_size")
    n = flops.n_params(*(m[k] for k in keys)) if all(isinstance(m.get(k), int) for k in keys) else None
    return {**m, "n_params": n}


def upgrade_v0_to_v1(old: Record) -> Record:
    """Convert a ``schema_version 0`` record (flat layout, see the module doc) to version 1.

    Fields v0 did not record (``model_tflops_per_device``, ``hfu``, ``per_rank``, the
    error's type and phase, ...) become null. Missing sections are left missing, so the
    required-key check still reports them.
    """
    new: Record = {"schema_version": 1, "status": old.get("status")}
    err = old.get("error")
    new["error"] = None if err is None else {"type": None, "message": str(err), "phase": None, "rank": None}
    if "run_id" in old:
        new["run"] = _v0_run(old)
    if isinstance(old.get("config"), dict):
        new["config"] = old["config"]
        new["model"] = _v0_model(old["config"])
    new["system"] = _v0_system(old)
    if isinstance(old.get("metrics"), dict):
        new["metrics"] = _v0_metrics(old["metrics"])
    return new


# UPGRADES[v] turns a version-v record into version v + 1.
UPGRADES: dict[int, Callable[[Record], Record]] = {0: upgrade_v0_to_v1}


def upgrade(record: Record) -> Record:
    """Bring a record of any known version up to :data:`SCHEMA_VERSION`.

    Raises:
        RecordError: when ``schema_version`` is missing, not an integer, or newer
            than this analysis knows.
    """
    if "schema_version" not in record:
        raise RecordError("missing required key 'schema_version'")
    version = record["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise RecordError(f"schema_version {version!r} is not a non-negative integer")
    if version > SCHEMA_VERSION:
        raise RecordError(
            f"schema_version {version} is newer than this analysis reads "
            f"(up to {SCHEMA_VERSION}); update flopsweep to read it"
        )
    while version < SCHEMA_VERSION:
        record = UPGRADES[version](record)
        version += 1
    return record


def check(record: Record) -> None:
    """Raise :class:`RecordError` unless ``record`` has the required v1 keys and a known status."""
    for key in REQUIRED_KEYS:
        if key not in record:
            raise RecordError(f"missing required key {key!r}")
    for key in ("run", "config", "system", "metrics"):
        if not isinstance(record[key], dict):
            raise RecordError(f"{key!r} is {type(record[key]).__name__}, not an object")
    if "id" not in record["run"]:
        raise RecordError("missing required key 'run.id'")
    if record["status"] not in STATUSES:
        raise RecordError(f"status {record['status']!r} is not one of {', '.join(STATUSES)}")


def read_record(path: Path) -> tuple[Record, int]:
    """Parse, upgrade and check one ``metrics.json``.

    Returns:
        ``(record, version)``: the record in the current schema, and the
        ``schema_version`` the file was written with.

    Raises:
        RecordError: for an unreadable, empty, truncated or non-object file, an unknown
            ``schema_version`` or a missing required key.
    """
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"cannot read the file: {exc}") from None
    if not text.strip():
        raise RecordError("empty file")
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"invalid JSON (truncated?): {exc}") from None
    if not isinstance(record, dict):
        raise RecordError(f"top level is a JSON {type(record).__name__}, not an object")
    version = record.get("schema_version")
    record = upgrade(record)
    check(record)
    return record, version
