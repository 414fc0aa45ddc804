"""``python -m analysis DIR... [--format table|csv|markdown|json] [--output FILE]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from analysis.load import load, table

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
}


def _cell(column: str, value: object) -> str:
    if value is None or pd.isna(value):
        return ""  # a failed run's metrics stay blank, never 0
    if column == "tokens_per_s":
        return f"{value:,.0f}"
    if column in ("mfu", "hfu"):
        return f"{value:.1%}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def for_display(df: pd.DataFrame) -> pd.DataFrame:
    """Text cells with short headers for the terminal and markdown tables."""
    shown = pd.DataFrame({c: [_cell(c, v) for v in df[c].astype(object)] for c in df.columns})
    return shown.rename(columns=SHORT)


def render(df: pd.DataFrame, fmt: str) -> str:
    """The table as text in ``fmt``; blank cells for missing values."""
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "json":
        return df.to_json(orient="records", indent=2)
    if fmt == "markdown":
        return for_display(df).to_markdown(index=False, disable_numparse=True)
    return for_display(df).to_string(index=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analysis", description="Comparison table of flopsweep runs (metrics.json)."
    )
    parser.add_argument("paths", nargs="+", help="sweep/run directories, metrics.json files or globs")
    parser.add_argument("--format", choices=["table", "csv", "markdown", "json"], default="table")
    parser.add_argument("--output", type=Path, help="write here instead of stdout")
    args = parser.parse_args(argv)
    try:
        df = load(args.paths)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    if df.empty:
        print(f"no metrics.json found under {' '.join(args.paths)}", file=sys.stderr)
        return 1
    text = render(table(df), args.format)
    if args.output:
        args.output.write_text(text)
    else:
        print(text)
    bad = df.attrs.get("unreadable", [])
    footer = f"{len(df)} runs" + (f", {len(bad)} unreadable record(s) skipped" if bad else "")
    print(footer, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
