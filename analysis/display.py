"""Text forms of a runs DataFrame: short headers, compact columns, the footer, csv/json/markdown.

Blank cells stand for missing values: a failed run's metrics are blank, never 0.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from analysis.load import TABLE_COLUMNS
from flopsweep.metrics import STATUSES

# Short headers keep the terminal table narrow; csv/json keep the full column names.
SHORT = {
    "micro_batch_size": "mbs",
    "grad_accum": "accum",
    "world_size": "world",
    "zero_stage": "zero",
    "precision": "prec",
    "tflops_per_device": "TFLOPs/dev",
    "tokens_per_s": "tokens/s",
    "iteration_time_s_median": "iter_s",
    "peak_cuda_allocated_gib": "alloc_GiB",
    "peak_cuda_reserved_gib": "resv_GiB",
    "peak_host_rss_gib": "rss_GiB",
    "attention": "attn",
    "effective_tflops_per_device": "eff_TFLOPs",
    "model_tflops_per_device": "model_TFLOPs",
    "iteration_time_s_mean": "iter_s_mean",
    "attention_density": "density",
    "seq_len": "seq",
    "activation_checkpointing": "ckpt",
    "tokens_per_s_per_device": "tokens/s/dev",
    "tflops_per_device_recomputed": "TFLOPs_recomp",
    "attention_layout": "layout",
    "attention_impl": "impl",
    "block_size": "block",
    "reshard_after_forward": "reshard",
    "reduce_bucket_size": "reduce_bkt",
    "stage3_prefetch_bucket_size": "prefetch_bkt",
    "stage3_param_persistence_threshold": "persist_thr",
}
MAX_CELL = 40
"""Longest text cell (characters) in the terminal and markdown tables; longer ones end in '…'."""

# Columns shown only when some row has a value; dropped first (in this order) to fit the width.
_OPTIONAL = [
    "zero_stage",
    "mfu",
    "peak_cuda_allocated_gib",
    "peak_cuda_reserved_gib",
    "effective_tflops_per_device",
    "attention_density",
]
_IF_VARIED = [
    "seq_len",
    "activation_checkpointing",
    "compile",
    "attention_layout",
    "attention_impl",
    "block_size",
    "reshard_after_forward",
    "reduce_bucket_size",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "seed",
    "tag",
]
_DROP_ORDER = [
    "error",
    "peak_host_rss_gib",
    "peak_cuda_reserved_gib",
    "grad_accum",
    "iteration_time_s_median",
    "world_size",
    "precision",
    "seed",
    "reduce_bucket_size",
    "stage3_prefetch_bucket_size",
    "block_size",
    "mfu",
    "stage3_param_persistence_threshold",
    "reshard_after_forward",
    "compile",
    "attention_impl",
    "attention_layout",
    "zero_stage",
    "attention",
    "peak_cuda_allocated_gib",
]


def _cell(column: str, value: object) -> str:
    if value is None or (not isinstance(value, (list, dict)) and pd.isna(value)):
        return ""  # a failed run's metrics stay blank, never 0
    if column in ("tokens_per_s", "tokens_per_s_per_device"):
        return f"{value:,.0f}"
    if column in ("mfu", "hfu"):
        return f"{value:.1%}"
    if column == "speedup":
        return f"{value:.2f}x"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def for_display(df: pd.DataFrame) -> pd.DataFrame:
    """Text cells with short headers (:data:`SHORT`) for the terminal, markdown and HTML tables."""
    shown = pd.DataFrame({c: [_cell(c, v) for v in df[c].astype(object)] for c in df.columns}, dtype=object)
    return shown.rename(columns=SHORT)


def flags(df: pd.DataFrame) -> pd.Series:
    """Per-row text naming the checks a row failed: ``dup-id``, ``tflops?`` (blank when none)."""
    parts = []
    if "duplicate_run_id" in df:
        parts.append(df["duplicate_run_id"].fillna(False).map({True: "dup-id", False: ""}))
    if "tflops_mismatch" in df:
        parts.append(df["tflops_mismatch"].fillna(False).map({True: "tflops?", False: ""}))
    if not parts:
        return pd.Series("", index=df.index)
    out = parts[0]
    for p in parts[1:]:
        out = (out + "," + p).str.strip(",")
    return out


def _varies(df: pd.DataFrame, column: str) -> bool:
    if df.empty:
        return False
    return bool((df.groupby("model", dropna=False)[column].nunique(dropna=True) > 1).any())


def compact(df: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """The columns worth a reader's screen: ``columns`` (default :data:`TABLE_COLUMNS`) less the
    optional ones that are blank in every row, plus ``effective_tflops_per_device``,
    ``speedup`` and a ``flags`` column when some row has them, and ``seq_len``,
    ``activation_checkpointing``, ``compile`` when they vary within a model."""
    cols = list(columns or TABLE_COLUMNS)
    if columns is None:
        at = cols.index("attention") + 1
        cols[at:at] = [c for c in _IF_VARIED if c in df and _varies(df, c)]
        if "effective_tflops_per_device" in df:
            cols.insert(cols.index("tflops_per_device") + 1, "effective_tflops_per_device")
        cols += [c for c in ("speedup",) if c in df]
        if "error" in df and df["status"].ne("ok").any():
            cols.append("error")  # why a run failed, cut to the cell width
        cols = [c for c in cols if c not in _OPTIONAL or df[c].notna().any()]
    out = df[cols].copy()
    if columns is None and (f := flags(df)).ne("").any():
        out["flags"] = f
    return out


def fit_width(shown: pd.DataFrame, width: int) -> tuple[str, list[str]]:
    """Render ``shown`` (text cells, short headers) no wider than ``width`` characters by dropping
    columns in :data:`_DROP_ORDER`; returns the text and the dropped headers."""
    dropped: list[str] = []
    text = shown.to_string(index=False)
    for col in (SHORT.get(c, c) for c in _DROP_ORDER):
        if width <= 0 or max(map(len, text.splitlines()), default=0) <= width:
            break
        if col in shown.columns:
            shown = shown.drop(columns=col)
            dropped.append(col)
            text = shown.to_string(index=False)
    return text, dropped


def render(df: pd.DataFrame, fmt: str, width: int = 120) -> str:
    """The table as text in ``fmt`` (``table``, ``markdown``, ``csv``, ``json``).

    ``table`` is at most ``width`` characters wide (0: no limit); columns that did not
    fit are named in a last line. csv and json keep full column names and raw values.
    """
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "json":
        return df.to_json(orient="records", indent=2)
    shown = for_display(df)
    if fmt == "markdown":
        return shown.to_markdown(index=False, disable_numparse=True)
    text, dropped = fit_width(shown, width)
    if dropped:
        text += f"\n(hidden to fit {width} columns: {', '.join(dropped)}; see --columns, --width)"
    return text


def flat_pivot(table: pd.DataFrame) -> pd.DataFrame:
    """A pivot table as plain columns: the index becomes the first column(s), headed
    ``INDEX \\ COLUMNS`` (``model \\ backend``); several column keys join with ``/``."""
    names = [str(n) for n in table.columns.names]
    out = table.reset_index()
    heads = [" / ".join(str(x) for x in c if str(x)) if isinstance(c, tuple) else str(c) for c in out.columns]
    heads[table.index.nlevels - 1] += " \\ " + " / ".join(names)
    return out.set_axis(heads, axis=1)


def summary(df: pd.DataFrame) -> str:
    """The footer: run and status counts, unreadable records, duplicate ids, TFLOPs mismatches."""
    counts = Counter(df["status"]) if "status" in df else Counter()
    parts = [f"{len(df)} runs"]
    if counts:
        parts[0] += " (" + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]) + ")"
    bad = df.attrs.get("unreadable", {})
    if bad:
        parts.append(f"{len(bad)} unreadable record(s) skipped")
    if "duplicate_run_id" in df and (n := int(df["duplicate_run_id"].sum())):
        parts.append(f"{n} rows share a run id (dup-id)")
    if "tflops_mismatch" in df and (n := int(df["tflops_mismatch"].sum())):
        parts.append(f"{n} TFLOPs mismatch(es) >1% vs flopsweep.flops (tflops?)")
    return "; ".join(parts)
