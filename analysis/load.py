"""Load ``metrics.json`` files into one DataFrame row per run, and check them.

Every record goes through :func:`analysis.schema.read_record` (explicit
``schema_version``, upgrades of old versions). Unreadable files are logged once
by path and listed in ``df.attrs["unreadable"]``; loading goes on. Two checks
flag rows without dropping them: ``duplicate_run_id`` and ``tflops_mismatch``.
"""

from __future__ import annotations

import glob
import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.schema import Record, RecordError, read_record
from flopsweep import flops
from flopsweep.metrics import METRICS_FILE

log = logging.getLogger("analysis")

GIB = 1024**3
MISMATCH_TOLERANCE = 0.01
"""Relative difference between recorded and recomputed TFLOPs that sets ``tflops_mismatch``."""

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
    # Added after the first table; older readers never saw them.
    ("iteration_time_s_mean", ("metrics", "iteration_time_s", "mean"), None),
    ("effective_tflops_per_device", ("metrics", "effective_tflops_per_device"), None),
    ("attention_density", ("config", "attention", "density"), None),
    ("tokens_per_s_per_device", ("metrics", "tokens_per_s_per_device"), None),
    ("loss_last", ("metrics", "loss_last"), None),
    ("error_type", ("error", "type"), None),
    ("error_phase", ("error", "phase"), None),
    # Set-up knobs that tell otherwise identical rows apart (shown when they vary).
    ("attention_layout", ("config", "attention", "layout"), None),
    ("attention_impl", ("config", "attention", "impl"), None),
    ("block_size", ("config", "attention", "block_size"), None),
    ("reshard_after_forward", ("config", "backend", "reshard_after_forward"), None),
    ("reduce_bucket_size", ("config", "backend", "reduce_bucket_size"), None),
    ("stage3_prefetch_bucket_size", ("config", "backend", "stage3_prefetch_bucket_size"), None),
    ("stage3_param_persistence_threshold", ("config", "backend", "stage3_param_persistence_threshold"), None),
    ("seed", ("config", "seed"), None),
    ("tag", ("config", "tag"), None),
]
_CHECK_COLUMNS = ["schema_version", "tflops_per_device_recomputed", "tflops_mismatch", "duplicate_run_id"]
_NAMES = [name for name, _, _ in _FIELDS]
COLUMNS = _NAMES[:25] + ["run_dir"] + _NAMES[25:] + _CHECK_COLUMNS  # the first 26 in their original order

# Metric columns: blank (NaN) for every run whose status is not ok, whatever the record says.
METRIC_COLUMNS = [
    "tflops_per_device",
    "model_tflops_per_device",
    "effective_tflops_per_device",
    "mfu",
    "hfu",
    "tokens_per_s",
    "tokens_per_s_per_device",
    "iteration_time_s_median",
    "iteration_time_s_mean",
    "peak_cuda_allocated_gib",
    "peak_cuda_reserved_gib",
    "peak_host_rss_gib",
    "loss_first",
    "loss_last",
    "tflops_per_device_recomputed",
]
_INT_COLUMNS = ("zero_stage", "micro_batch_size", "grad_accum", "seq_len", "world_size", "schema_version")
_BOOL_COLUMNS = ("activation_checkpointing", "compile")

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


def _get(record: Record, path: tuple[str, ...]) -> Any:
    value: Any = record
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def recompute_tflops(record: Record) -> tuple[float | None, float | None]:
    """TFLOPs per device ``(hardware, model)`` recomputed with :mod:`flopsweep.flops`.

    Uses the record's config (model shape, micro batch, grad accumulation, activation
    checkpointing), ``system.world_size`` and ``metrics.iteration_time_s.mean`` (s):
    global batch ``B = micro_batch_size x grad_accum x world_size`` sequences, ``f = 4``
    under activation checkpointing for the hardware figure, ``f = 3`` for the model one.

    Returns:
        ``(None, None)`` when a needed value is missing or not positive.
    """
    cfg = record.get("config") or {}
    model, batch = cfg.get("model") or {}, cfg.get("batch") or {}
    shape = [model.get(k) for k in ("n_layer", "n_embd", "seq_len", "vocab_size")]
    world = _get(record, ("system", "world_size"))
    ints = [*shape, batch.get("micro_batch_size"), batch.get("grad_accum"), world]
    t = _number(_get(record, ("metrics", "iteration_time_s", "mean")))
    if t is None or t <= 0 or not all(isinstance(v, int) and v > 0 for v in ints):
        return None, None
    global_batch = ints[4] * ints[5] * world
    ac = bool(cfg.get("activation_checkpointing"))
    hw = flops.flops_per_iteration(*shape, global_batch, activation_checkpointing=ac)
    mf = flops.flops_per_iteration(*shape, global_batch, activation_checkpointing=False)
    return flops.tflops_per_device(hw, t, world), flops.tflops_per_device(mf, t, world)


def _differs(recorded: Any, expected: float | None) -> bool:
    recorded = _number(recorded)
    if recorded is None or expected is None:
        return False
    return abs(recorded - expected) > MISMATCH_TOLERANCE * abs(expected)


def _fmt(value: Any) -> str:
    number = _number(value)
    return "null" if number is None else f"{number:.4g}"


def _check_tflops(record: Record, out: dict[str, Any], path: str) -> None:
    hw, model = recompute_tflops(record) if out["status"] == "ok" else (None, None)
    out["tflops_per_device_recomputed"] = hw
    bad = _differs(out["tflops_per_device"], hw) or _differs(out["model_tflops_per_device"], model)
    out["tflops_mismatch"] = bad
    if bad:
        log.warning(
            "TFLOPs mismatch in %s: the record says %s TFLOPs per device (model %s); its config, "
            "iteration time and world size give %.4g (model %.4g), more than %.0f%% apart",
            path,
            _fmt(out["tflops_per_device"]),
            _fmt(out["model_tflops_per_device"]),
            hw,
            model,
            100 * MISMATCH_TOLERANCE,
        )


def row(record: Record, run_dir: str, schema_version: int | None = None) -> dict[str, Any]:
    """One flat row of a current-version record.

    Missing values are None (blank), never 0; a run whose status is not ``ok`` has every
    metric column blank. Bytes become GiB (``_gib`` columns).
    """
    out: dict[str, Any] = {}
    for name, path, scale in _FIELDS:
        value = _get(record, path)
        out[name] = value / scale if scale and _number(value) is not None else value
    if out["status"] != "ok":
        out.update(dict.fromkeys(METRIC_COLUMNS))
    _blank_unused(out)
    out["run_dir"] = run_dir
    out["schema_version"] = record.get("schema_version") if schema_version is None else schema_version
    _check_tflops(record, out, run_dir)
    return out


_ONLY_FOR = {  # column -> (set-up column, value): blank elsewhere, where the knob does nothing
    "zero_stage": ("backend", "deepspeed"),
    "reduce_bucket_size": ("backend", "deepspeed"),
    "stage3_prefetch_bucket_size": ("backend", "deepspeed"),
    "stage3_param_persistence_threshold": ("backend", "deepspeed"),
    "reshard_after_forward": ("backend", "fsdp"),
    "attention_layout": ("attention", "blocksparse"),
    "attention_impl": ("attention", "blocksparse"),
    "block_size": ("attention", "blocksparse"),
}


def _blank_unused(out: dict[str, Any]) -> None:
    """Blank the knobs of a backend or attention the run did not use."""
    for column, (setup, value) in _ONLY_FOR.items():
        if out.get(setup) != value:
            out[column] = None
    if out.get("tag") == "":
        out["tag"] = None


def _expand(p: Path) -> list[Path]:
    if p.is_dir():
        return sorted(p.rglob(METRICS_FILE))
    if p.is_file():
        return [p]
    matches = sorted(glob.glob(str(p), recursive=True))
    if not matches:
        raise FileNotFoundError(f"{p}: no such file, directory or glob match")
    return [f for m in matches for f in _expand(Path(m))]


def find_records(paths: Iterable[str | Path]) -> list[Path]:
    """``metrics.json`` files under ``paths``: directories recursively, files as given, globs expanded.

    A file reached twice (a directory and a file inside it) is listed once.

    Raises:
        FileNotFoundError: when a path neither exists nor matches a glob.
    """
    seen: set[Path] = set()
    found: list[Path] = []
    for path in (f for p in paths for f in _expand(Path(p))):
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            found.append(path)
    return found


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col in METRIC_COLUMNS + ["attention_density"]:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    for col in _INT_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")  # integers that may be blank
    for col in _BOOL_COLUMNS:
        df[col] = df[col].astype("boolean")
    df["tflops_mismatch"] = df["tflops_mismatch"].astype(bool)
    return fill_dense_effective(df)


def fill_dense_effective(df: pd.DataFrame) -> pd.DataFrame:
    """Fill what older or never-launched records leave blank.

    Records written before ``effective_tflops_per_device`` and ``attention.density``
    existed: a dense attention computes every pair, so an ok run's density is 1 and its
    effective TFLOPs equal its TFLOPs. ``world_size`` 0 (a run stopped before launch) becomes blank."""
    dense = (
        df["effective_tflops_per_device"].isna()
        & df["status"].eq("ok")
        & df["tflops_per_device"].notna()
        & df["attention"].ne("blocksparse")
    )
    df.loc[dense, "effective_tflops_per_device"] = df.loc[dense, "tflops_per_device"]
    # The same records lack attention.density: every dense kernel computes every pair.
    no_density = df["attention_density"].isna() & df["status"].eq("ok") & df["attention"].ne("blocksparse")
    df.loc[no_density, "attention_density"] = 1.0
    # A run that never launched (invalid at validation) records world_size 0: unknown, not 0.
    df["world_size"] = df["world_size"].mask(df["world_size"] <= 0)
    return df


def flag_duplicates(df: pd.DataFrame) -> pd.DataFrame:
    """Set ``duplicate_run_id`` on every row whose ``run_id`` another row shares; warn once per id."""
    dup = df["run_id"].notna() & df["run_id"].duplicated(keep=False)
    df["duplicate_run_id"] = dup
    for run_id, dirs in df.loc[dup].groupby("run_id")["run_dir"]:
        log.warning("duplicate run id %s in %d records: %s", run_id, len(dirs), ", ".join(dirs))
    return df


def load(paths: Iterable[str | Path] | str | Path) -> pd.DataFrame:
    """One row per run from every ``metrics.json`` under ``paths`` (dirs, files or globs).

    Columns are :data:`COLUMNS`: the set-up, ``status``, metrics with units in their
    names (``tflops_per_device`` in 1e12 FLOP/s, ``peak_cuda_allocated_gib`` in GiB,
    ``tokens_per_s`` global), ``run_dir``, the ``schema_version`` the file was written
    with, and the flags ``tflops_mismatch`` and ``duplicate_run_id``. Metrics of runs
    that are not ``ok`` are NaN, never 0.

    Unreadable files (empty, truncated JSON, unknown version, missing required key) are
    logged once each by path and skipped; ``df.attrs["unreadable"]`` maps each path to
    the reason.

    Raises:
        FileNotFoundError: when a path does not exist.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    rows, bad = [], {}
    for path in find_records(paths):
        try:
            record, version = read_record(path)
        except RecordError as exc:
            log.warning("skipping unreadable record %s: %s", path, exc)
            bad[str(path)] = str(exc)
            continue
        rows.append(row(record, str(path.parent), version))
    df = flag_duplicates(_frame(rows))
    df.attrs["unreadable"] = bad
    return df


def table(df: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """The comparison table: ``columns`` (default :data:`TABLE_COLUMNS`), ok runs first,
    highest ``effective_tflops_per_device`` first (so that a block-sparse run is never
    ranked on work it skipped); failed runs last, with blank metrics."""
    cols = columns or TABLE_COLUMNS
    failed = df["status"] != "ok"
    key = df["effective_tflops_per_device"]
    order = (
        pd.DataFrame({"failed": failed, "key": key})
        .sort_values(["failed", "key"], ascending=[True, False], na_position="last", kind="stable")
        .index
    )
    return df.loc[order, cols].reset_index(drop=True)
