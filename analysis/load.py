"""Load ``metrics.json`` files into one DataFrame row per run."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

log = logging.getLogger("analysis")

GIB = 1024**3

# (column, path into the record, scale). Units are in the column names.
_FIELDS: list[tuple[str, tuple[str, ...], float | None]] = [
    ("model", ("config", "model", "name"), None),
    ("attention", ("config", "attention", "name"), None),
    ("backend", ("config", "backend", "name"), None),
    ("zero_stage", ("config", "backend", "zero_stage"), None),
    ("precision", ("config", "precision", "name"), None),
    ("micro_batch_size", ("config", "batch", "micro_batch_size"), None),
    ("grad_accum", ("config", "batch", "grad_accum"), None),
    ("seq_len", ("config", "model", "seq_len"), None),
    ("activation_checkpointing", ("config", "activation_checkpointing"), None),
    ("compile", ("config", "compile"), None),
    ("world_size", ("system", "world_size"), None),
    ("device_name", ("system", "device_name"), None),
    ("status", ("status",), None),
    ("tflops_per_device", ("metrics", "tflops_per_device"), None),
    ("model_tflops_per_device", ("metrics", "model_tflops_per_device"), None),
    ("mfu", ("metrics", "mfu"), None),
    ("hfu", ("metrics", "hfu"), None),
    ("tokens_per_s", ("metrics", "tokens_per_s"), None),
    ("iteration_time_s_median", ("metrics", "iteration_time_s", "median"), None),
    ("peak_cuda_allocated_gib", ("metrics", "peak_cuda_allocated_bytes"), GIB),
    ("peak_cuda_reserved_gib", ("metrics", "peak_cuda_reserved_bytes"), GIB),
    ("peak_host_rss_gib", ("metrics", "peak_host_rss_bytes"), GIB),
    ("loss_first", ("metrics", "loss_first"), None),
    ("error", ("error", "message"), None),
    ("run_id", ("run", "id"), None),
]
COLUMNS = [name for name, _, _ in _FIELDS] + ["run_dir"]

# The default table: what the README calls the comparison table.
TABLE_COLUMNS = [
    "model",
    "attention",
    "backend",
    "zero_stage",
    "precision",
    "micro_batch_size",
    "grad_accum",
    "world_size",
    "status",
    "tflops_per_device",
    "mfu",
    "tokens_per_s",
    "iteration_time_s_median",
    "peak_cuda_allocated_gib",
    "peak_cuda_reserved_gib",
    "peak_host_rss_gib",
]


def _get(record: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = record
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def row(record: dict[str, Any], run_dir: str) -> dict[str, Any]:
    """One flat row of a schema v1 record; missing values are None (blank), never 0."""
    out: dict[str, Any] = {}
    for name, path, scale in _FIELDS:
        value = _get(record, path)
        out[name] = value / scale if scale and value is not None else value
    if out["backend"] != "deepspeed":
        out["zero_stage"] = None  # only meaningful for DeepSpeed
    out["run_dir"] = run_dir
    return out


def find_records(paths: Iterable[str | Path]) -> list[Path]:
    """``metrics.json`` files: directories are searched recursively, files taken as given."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found.extend(sorted(p.rglob("metrics.json")))
        elif p.is_file():
            found.append(p)
        else:
            matches = sorted(Path().glob(str(p))) if not p.is_absolute() else []
            if not matches:
                raise FileNotFoundError(f"{p}: no such file or directory")
            found.extend(find_records(matches))
    return found


def load(paths: Iterable[str | Path] | str | Path) -> pd.DataFrame:
    """One row per run from every ``metrics.json`` under ``paths`` (dirs, files or globs).

    Unreadable files are logged once by path and skipped; ``df.attrs["unreadable"]``
    lists them.

    Raises:
        FileNotFoundError: when a path does not exist.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    rows, bad = [], []
    for path in find_records(paths):
        try:
            record = json.loads(path.read_text())
            if not isinstance(record, dict) or "status" not in record:
                raise ValueError("not a flopsweep record (no 'status')")
        except (OSError, ValueError) as exc:
            log.warning("skipping unreadable record %s: %s", path, exc)
            bad.append(str(path))
            continue
        rows.append(row(record, str(path.parent)))
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("zero_stage", "micro_batch_size", "grad_accum", "seq_len", "world_size"):
        df[col] = df[col].astype("Int64")  # integers that may be blank
    df.attrs["unreadable"] = bad
    return df


def table(df: pd.DataFrame) -> pd.DataFrame:
    """The comparison table: :data:`TABLE_COLUMNS`, ok runs sorted by TFLOPs first."""
    out = df[TABLE_COLUMNS].copy()
    out["_ok"] = out["status"] != "ok"
    out = out.sort_values(["_ok", "tflops_per_device"], ascending=[True, False], na_position="last")
    return out.drop(columns="_ok").reset_index(drop=True)
