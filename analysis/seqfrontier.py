"""The sequence frontier: the longest sequence each set-up trains, and its throughput.

The twin of the depth frontier (:mod:`analysis.frontier`) for ``search.grow=seq_len``
(:mod:`flopsweep.seqsearch`): a sequence set-up is every identity column of the set-up less the
micro batch and the sequence (:data:`SEQ_SIZE_COLUMNS`); the runs of a set-up that searched the
longest sequence, at any length, searched or not, are its points (each length at its best run, most
tokens/s), and its longest ok length is its frontier. ``--frontier`` shows these rows after the
depth frontier's, ``grew`` naming what grew (``n_layer`` or ``seq_len``), with the length's
tokens/s and MFU; csv and json carry the same columns.
"""

from __future__ import annotations

import pandas as pd

from analysis.frontier import (
    FRONTIER_COLUMNS,
    ONE_SETUP_COLUMNS,
    SEARCHED,
    grew_sequence,
    setup_columns,
)
from analysis.load import rankable
from analysis.query import normalize

SEQ_SIZE_COLUMNS = ("seq_len", "micro_batch_size", "grad_accum", "model_search")
"""Identity columns that are not part of a sequence set-up: what the frontier varies (the
sequence), what is chosen at each length (the micro batch), and whether the length was searched."""

GREW = "grew"
"""The combined table's column naming what grew: ``n_layer`` (the depth frontier) or ``seq_len``."""

SEQUENCE_COLUMNS = [
    "model",
    "n_params",
    "seq_len",
    "micro_batch_size",
    "tokens_per_s",
    "mfu",
    "model_tflops_per_device",
    "peak_cuda_allocated_gib",
    "sizes",
    "larger_failed",
]
"""The figures of a sequence set-up's longest ok length: as :data:`analysis.frontier.FRONTIER_COLUMNS`
with ``seq_len``; ``sizes`` counts the lengths that trained, ``larger_failed`` the search's shortest
longer probe that did not (``seq_len=65536: oom``)."""


def sequence_setup_columns(df: pd.DataFrame) -> list[str]:
    """The sequence set-up's columns present in ``df``: the depth set-up's
    (:func:`analysis.frontier.setup_columns`, which leave out the model's size) plus the model's
    blocks and name, less :data:`SEQ_SIZE_COLUMNS`."""
    depth = setup_columns(df)
    return [c for c in ("model", "n_layer", *depth) if c in df and c not in SEQ_SIZE_COLUMNS]


def sequence_key(df: pd.DataFrame) -> pd.Series:
    """One text key per row naming its sequence set-up (blank cells included)."""
    cols = sequence_setup_columns(df)
    if not cols:
        return pd.Series("", index=df.index)
    return df[cols].astype(object).apply(lambda r: "|".join(normalize(v) for v in r), axis=1)


def sequence_points(df: pd.DataFrame) -> pd.DataFrame:
    """The best ok run (most tokens/s) of each sequence set-up at each length, with ``frontier`` (its
    key), ``largest`` (the set-up's longest ok length) and ``searched``; only the set-ups of a run
    that searched the longest sequence, and never a run that searched the depth. Runs that fail
    their checks are left out. Empty (with those columns) when no run searched the sequence."""
    seq = grew_sequence(df)
    empty = df.iloc[:0].assign(frontier=[], largest=[], searched=[])
    if not seq.any() or "seq_len" not in df:
        return empty
    depth_search = df["model_search"].eq(SEARCHED) & ~seq
    ok = df[rankable(df, "tokens_per_s") & df["seq_len"].notna() & ~depth_search].copy()
    if ok.empty:
        return empty
    ok["frontier"] = sequence_key(ok)
    ok["searched"] = grew_sequence(ok)
    ok = ok[ok["frontier"].isin(set(sequence_key(df[seq])))]
    ok = ok.sort_values("tokens_per_s", ascending=False, kind="stable")
    best = ok.drop_duplicates(["frontier", "seq_len"]).copy()
    best["largest"] = best["seq_len"].eq(best.groupby("frontier")["seq_len"].transform("max"))
    return best.sort_values(["frontier", "seq_len"], kind="stable")


def sequence_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per sequence set-up: its columns that vary among the set-ups, then the longest ok
    length's :data:`SEQUENCE_COLUMNS`; the longest first. Empty when no run searched the sequence
    or none trained."""
    points = sequence_points(df)
    if points.empty:
        return pd.DataFrame(columns=SEQUENCE_COLUMNS)
    longest = points[points["largest"]].copy()
    longest["sizes"] = longest["frontier"].map(points.groupby("frontier").size())
    failed = longest["search_failed"] if "search_failed" in longest else pd.Series(None, index=longest.index)
    longest["larger_failed"] = pd.Series(
        [f if isinstance(f, str) else None for f in failed], index=longest.index
    )
    cols = [c for c in sequence_setup_columns(longest) if c not in SEQUENCE_COLUMNS]
    varied = [c for c in cols if longest[c].nunique(dropna=False) > 1]
    if not varied:
        varied = [c for c in ONE_SETUP_COLUMNS if c in longest]
    shown = [c for c in SEQUENCE_COLUMNS if c in longest]
    out = longest.sort_values(["seq_len", "tokens_per_s"], ascending=False, kind="stable")
    return out[[*varied, *shown]].reset_index(drop=True)


def combined_table(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`analysis.frontier.frontier_table` when some run of ``df`` searched the sequence: one
    table, :data:`GREW` first (``n_layer`` for the depth frontier's rows, ``seq_len`` for the sequence
    rows of :func:`sequence_table`), then the set-up columns of either, then the figures of
    :data:`SEQUENCE_COLUMNS` (a depth row's ``seq_len`` is its sequence)."""
    from analysis.frontier import depth_table

    seq, depth = sequence_table(df), depth_table(df, always=("seq_len",))
    parts = [p.assign(**{GREW: grew}) for p, grew in ((depth, "n_layer"), (seq, "seq_len")) if not p.empty]
    if not parts:
        return pd.DataFrame(columns=[GREW, *SEQUENCE_COLUMNS])
    table = pd.concat(parts, ignore_index=True)
    figures = [c for c in SEQUENCE_COLUMNS if c in table]
    setup = [c for c in table if c not in figures and c != GREW and c not in FRONTIER_COLUMNS]
    return table[[GREW, *setup, *figures]]
