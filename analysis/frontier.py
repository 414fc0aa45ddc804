"""The memory frontier: the largest model each set-up trains, and its throughput.

A frontier set-up is every identity column of the set-up (:data:`flopsweep.columns.IDENTITY_COLUMNS`:
backend, ZeRO stage, checkpointing policy, offload, precision, attention, family, sequence, device,
world size, memory budget, ...) less the model's size and the micro batch (:data:`SIZE_COLUMNS`):
the runs of one set-up at several sizes, searched (``search.model=largest``) or not, are its points,
parameters against tokens/s, each at its best micro batch. Its largest ok size is the set-up's
frontier. The table and the plot are made when some run searched the largest model.

The sequence frontier, the longest sequence each set-up trains and its throughput, is its twin for
``search.grow=seq_len``
(:mod:`flopsweep.seqsearch`): a sequence set-up is every identity column of the set-up less the
micro batch and the sequence (:data:`SEQ_SIZE_COLUMNS`); the runs of a set-up that searched the
longest sequence, at any length, searched or not, are its points (each length at its best run, most
tokens/s), and its longest ok length is its frontier. ``--frontier`` shows these rows after the
depth frontier's, ``grew`` naming what grew (``n_layer`` or ``seq_len``), with the length's
tokens/s and MFU; csv and json carry the same columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from analysis.load import rankable, sized_name
from analysis.query import SETUP_COLUMNS, normalize
from flopsweep.columns import IDENTITY_COLUMNS
from flopsweep.text import format_count

SIZE_COLUMNS = (
    "model",
    "n_layer",
    "n_params",
    "n_active_params",
    "micro_batch_size",
    "grad_accum",
    "model_search",
)
"""Identity columns that are not part of a frontier set-up: what the frontier varies (the model's
size) and what is chosen at each size (the micro batch), and whether the size was searched."""

FRONTIER_COLUMNS = [
    "model",
    "n_params",
    "micro_batch_size",
    "tokens_per_s",
    "mfu",
    "model_tflops_per_device",
    "peak_cuda_allocated_gib",
    "sizes",
    "larger_failed",
]
"""The figures of a set-up's largest ok size in :func:`frontier_table`, after the set-up's columns:
``sizes`` counts the sizes that trained, ``larger_failed`` names the smallest larger size that did not
(``llama3.1-70b: oom``; for a searched run, its own search's probe: ``n_layer=37 (9.12B): oom``)."""

SEARCHED = "largest"
"""``model_search`` of a run that searched the largest model (``search.model=largest``)."""


def setup_columns(df: pd.DataFrame) -> list[str]:
    """The frontier set-up's columns present in ``df``: identity columns less :data:`SIZE_COLUMNS`."""
    return [c for c in IDENTITY_COLUMNS if c in df and c not in SIZE_COLUMNS]


def frontier_key(df: pd.DataFrame) -> pd.Series:
    """One text key per row naming its frontier set-up (blank cells included, so that a missing
    column never merges two set-ups)."""
    cols = setup_columns(df)
    if not cols:
        return pd.Series("", index=df.index)
    return df[cols].astype(object).apply(lambda r: "|".join(normalize(v) for v in r), axis=1)


NO_SEARCH = "no run searched the largest model (search.model=largest: sweep/frontier-*.yaml)"
"""What ``--frontier`` prints when no run searched (a list of runs is no frontier), as the notebook."""
NO_OK_RUN = "no ok run trained a model, so no set-up has a frontier"
"""What ``--frontier`` prints when a search ran but no run trained (only failed or invalid records)."""


def no_frontier(df: pd.DataFrame) -> str | None:
    """The one line ``--frontier`` prints instead of the table (:data:`NO_SEARCH`,
    :data:`NO_OK_RUN`), or None when ``df`` has a frontier to show."""
    if not searched(df):
        return NO_SEARCH
    return NO_OK_RUN if frontier_points(df).empty and sequence_points(df).empty else None


def searched(df: pd.DataFrame) -> bool:
    """Whether some run of ``df`` searched the largest model or the longest sequence (the frontier
    is then shown)."""
    return "model_search" in df and df["model_search"].eq(SEARCHED).any()


SEQ_GROWN = "seq_len"
"""``search_grow`` of a run that searched the longest sequence (``search.grow=seq_len``,
the sequence frontier below); its set-ups are left out of the depth frontier."""


def grew_sequence(df: pd.DataFrame) -> pd.Series:
    """Per row: whether it is a search of the longest sequence (``search_grow`` ``seq_len``)."""
    if "search_grow" not in df or "model_search" not in df:
        return pd.Series(False, index=df.index)
    return df["model_search"].eq(SEARCHED) & df["search_grow"].eq(SEQ_GROWN)


def depth_runs(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the runs that searched the longest sequence: the depth frontier's inputs."""
    return df[~grew_sequence(df)]


def frontier_points(df: pd.DataFrame) -> pd.DataFrame:
    """The best ok run (most tokens/s) of each set-up at each size (``n_params``), with
    ``frontier`` (its key), ``largest`` (the set-up's largest ok size) and ``searched`` (the
    size came from ``search.model=largest``). Runs that fail their checks are left out; when some run
    searched, so are the set-ups without a searched run (a size ladder is a frontier only alone). A
    search counts whatever its own status: a search whose measured run was cut short still found the
    set-up's size, which a plain run of that size then measures."""
    if searched(df) and not searched(depth_runs(df)):  # only sequence searches: no depth frontier
        df = df.iloc[:0]
    df = depth_runs(df)
    ok = df[rankable(df, "tokens_per_s") & df["n_params"].notna()].copy()
    if ok.empty:
        return ok.assign(frontier=[], largest=[], searched=[])
    ok["frontier"] = frontier_key(ok)
    if "n_layer" in ok:
        ok["model"] = [sized_name(m, n) for m, n in zip(ok["model"], ok["n_layer"], strict=True)]
    ok["searched"] = ok["model_search"].eq(SEARCHED) if "model_search" in ok else False
    if searched(df):  # a search's set-ups only: the other runs of the inputs are no frontier
        ok = ok[ok["frontier"].isin(set(frontier_key(df[df["model_search"].eq(SEARCHED)])))]
    ok = ok.sort_values("tokens_per_s", ascending=False, kind="stable")
    best = ok.drop_duplicates(["frontier", "n_params"]).copy()
    top = best.groupby("frontier")["n_params"].transform("max")
    best["largest"] = best["n_params"].eq(top)
    return best.sort_values(["frontier", "n_params"], kind="stable")


def frontier_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The runs whose figures :func:`frontier_table` shows, one per set-up (the best run of its largest
    ok size), for the lines under the table to speak of them only; empty when no run searched."""
    points = frontier_points(df) if searched(df) else df.iloc[:0]
    depth = points[points["largest"]] if not points.empty else points
    seq = sequence_points(df)
    return pd.concat([depth, seq[seq["largest"]]]) if not seq.empty else depth


def _larger_failed(df: pd.DataFrame, key: str, n_params: float) -> str | None:
    """What failed above the set-up ``key``'s largest size ``n_params``: a search's own probe
    (``search_failed`` of a searched run of the set-up, whatever that run's status: ``n_layer=30
    (7.59B): killed``), else ``model: status`` of the smallest unsearched run above ``n_params``
    that was not ok (an ``oom`` at the next size of a ladder), else None. A searched run's own
    status says nothing of size (its ``n_params`` is the configured model's, and a run cut short is
    an ``error``), so it is never read as a size that failed."""
    mine = df[df["frontier"].eq(key)]
    searches = mine[mine["model_search"].eq(SEARCHED)] if "model_search" in mine else mine.iloc[:0]
    probes = [t for t in searches.get("search_failed", pd.Series(dtype=object)) if isinstance(t, str)]
    if probes:
        return probes[0]
    failed = mine.drop(searches.index)
    failed = failed[failed["status"].ne("ok") & failed["n_params"].gt(n_params)]
    if failed.empty:
        return None
    first = failed.sort_values("n_params", kind="stable").iloc[0]
    return f"{first['model']}: {first['status']}"


def unmeasured_lines(df: pd.DataFrame) -> list[str]:
    """One line per search whose largest size that trained no ok run measured (its own measured
    run cut short or failed, and no plain run of that size), or whose probes all failed: the
    frontier table leaves the set-up out or shows a smaller size, and this line says how far the
    search trained, from its largest ok probe (``search_probes``: one measured step, indicative; a
    search interrupted before its end keeps the probes that finished), how its own run ended and
    what bounded it::

        not measured: backend=deepspeed activation_checkpointing=none: its search trained up to 8.25B
        (its probe: 1,661 tokens/s over one step); its own run ended error (Terminated), and no ok
        run measured that size; above it n_layer=34 (8.47B): oom

    Empty when no run searched. The set-up is named by the columns that tell the searched
    set-ups apart (:func:`telling_columns`), those it leaves blank aside."""
    df = depth_runs(df)  # the sequence searches' probes are lengths, not sizes
    if not searched(df) or "search_probes" not in df:
        return []
    searches = df[df["model_search"].eq(SEARCHED)].copy()
    searches["frontier"] = frontier_key(searches)
    points = frontier_points(df)
    cols = [c for c in setup_columns(searches) if c in SETUP_COLUMNS]
    label = telling_columns(searches.drop_duplicates("frontier"), cols) or ["backend"]
    lines = []
    for _, run in searches.iterrows():
        probes = run["search_probes"] if isinstance(run["search_probes"], list) else []
        if not probes and not isinstance(run.get("search_failed"), str):
            continue  # no probe recorded: refused before its search, or from before probes were kept
        n = max(probes)[0] if probes else 0
        mine = points[points["frontier"].eq(run["frontier"])] if not points.empty else points
        if not mine.empty and mine["n_params"].max() >= n:
            continue
        name = " ".join(f"{c}={normalize(run[c])}" for c in label if c in run and normalize(run[c]))
        why = run.get("error_type") if isinstance(run.get("error_type"), str) else ""
        ended = f"its own run ended {run['status']}" + (f" ({why})" if why else "")
        bound = run.get("search_failed")
        above = (
            ""
            if not isinstance(bound, str)
            else f"; {bound}"
            if bound.startswith("none")
            else f"; above it {bound}"
        )
        if probes:
            rate = max(probes)[1]
            found = (
                f"its search trained up to {format_count(n)} (its probe: {rate:,.0f} tokens/s over one step)"
            )
            lines.append(f"not measured: {name}: {found}; {ended}, and no ok run measured that size{above}")
        else:
            lines.append(f"not measured: {name}: its search trained no size it recorded; {ended}{above}")
    return lines


def frontier_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per frontier set-up: its columns that vary among the set-ups, then the largest ok
    size's :data:`FRONTIER_COLUMNS`; the largest models first. Empty when no run trained. When some
    run searched the longest sequence (``search.grow=seq_len``), the sequence frontier's rows follow
    (:func:`combined_table`), each row's ``grew`` naming what grew."""
    return combined_table(df) if grew_sequence(df).any() else depth_table(df)


def depth_table(df: pd.DataFrame, always: Sequence[str] = ()) -> pd.DataFrame:
    """:func:`frontier_table`'s depth frontier alone (``search.grow=n_layer`` and the unsearched
    sizes); the set-up columns of ``always`` are shown even when they tell no set-up apart."""
    points = frontier_points(df)
    if points.empty:
        return pd.DataFrame(columns=[*setup_columns(df), *FRONTIER_COLUMNS])
    everything = df[df["n_params"].notna()].assign(frontier=frontier_key(df[df["n_params"].notna()]))
    largest = points[points["largest"]].copy()
    largest["sizes"] = largest["frontier"].map(points.groupby("frontier").size())
    probes = largest["search_failed"] if "search_failed" in largest else pd.Series(None, index=largest.index)
    failed = [
        probe if isinstance(probe, str) else _larger_failed(everything, key, n)
        for key, n, probe in zip(largest["frontier"], largest["n_params"], probes, strict=True)
    ]
    largest["larger_failed"] = pd.Series(failed, index=largest.index, dtype=object)
    varied = [c for c in setup_columns(largest) if largest[c].nunique(dropna=False) > 1 or c in always]
    if not varied:  # one set-up: name it by its backend (never dropped: frontier_drop_order)
        varied = [c for c in ONE_SETUP_COLUMNS if c in largest]
    shown = [c for c in FRONTIER_COLUMNS if c in largest]
    out = largest.sort_values(["n_params", "tokens_per_s"], ascending=False, kind="stable")
    return out[[*varied, *shown]].reset_index(drop=True)


def telling_columns(rows: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns of ``columns`` that tell the ``rows`` (set-ups) apart, in their order: each that
    takes two set values among the rows (blanks aside: a ZeRO++ key at one value, blank for the
    FSDP set-ups, says nothing that the backend does not), then any other that tells apart rows the
    chosen ones leave identical (a blank then counts as a value). Values are compared as
    :func:`analysis.query.normalize` writes them (None, NaN and ``""`` are all blank)."""
    text = {c: rows[c].map(normalize) for c in columns if c in rows}
    chosen = [c for c, cells in text.items() if cells[cells.ne("")].nunique() > 1]
    for c, cells in text.items():
        if c in chosen or rows.empty:
            continue
        key = pd.Series("", index=rows.index)
        for other in chosen:
            key = key + "|" + text[other]
        if (cells.groupby(key).nunique() > 1).any():
            chosen.append(c)
    return [c for c in text if c in chosen]


ONE_SETUP_COLUMNS = ("backend", "activation_checkpointing")
"""The set-up columns :func:`frontier_table` shows when there is one set-up (nothing varies)."""

FRONTIER_DROP_ORDER = [
    "micro_batch_size",
    "model_tflops_per_device",
    "peak_cuda_allocated_gib",
    "sizes",
    "mfu",
    "larger_failed",
    "model",
]
"""The frontier table's figures in the order a narrow terminal drops them, after the set-up columns
that tell no set-up apart (:func:`frontier_drop_order`); ``n_params`` and ``tokens_per_s`` (the
frontier's point) are never dropped."""


def frontier_drop_order(table: pd.DataFrame) -> list[str]:
    """The columns of a :func:`frontier_table` that ``--frontier`` may drop to fit the terminal, first
    to last (for :func:`analysis.display.render`): the set-up columns that tell no set-up apart
    (:func:`telling_columns`; blank for most set-ups, such as the ZeRO++ keys), last declared first,
    then :data:`FRONTIER_DROP_ORDER`. Never dropped: the set-up columns that tell the rows apart
    (:data:`ONE_SETUP_COLUMNS` for one set-up), ``n_params`` and ``tokens_per_s``."""
    setup = setup_columns(table)
    kept = telling_columns(table, setup) or [c for c in ONE_SETUP_COLUMNS if c in table]
    return [c for c in reversed(setup) if c not in kept] + FRONTIER_DROP_ORDER


def frontier_label_columns(points: pd.DataFrame) -> list[str]:
    """The set-up columns that tell the frontier set-ups of ``points`` apart (for legends:
    :func:`telling_columns` over one row per set-up); ``["backend"]`` when there is one set-up."""
    cols = [c for c in setup_columns(points) if c in SETUP_COLUMNS]
    setups = points.drop_duplicates("frontier") if "frontier" in points else points
    return telling_columns(setups, cols) or ["backend"]


# --- the sequence frontier (search.grow=seq_len) ---------------------------------------------------

SEQ_SIZE_COLUMNS = ("seq_len", "micro_batch_size", "grad_accum", "model_search")
"""Identity columns that are not part of a sequence set-up: what the frontier varies (the
sequence), what is chosen at each length (the micro batch), and whether the length was searched."""

GREW = "grew"
"""The combined table's column naming what grew: ``n_layer`` (the depth frontier) or ``seq_len``."""

SEQUENCE_COLUMNS = [*FRONTIER_COLUMNS[:2], "seq_len", *FRONTIER_COLUMNS[2:]]
"""The figures of a sequence set-up's longest ok length: as :data:`FRONTIER_COLUMNS`
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


def sequence_table(df: pd.DataFrame, always: Sequence[str] = ()) -> pd.DataFrame:
    """One row per sequence set-up: its columns that vary among the set-ups (and those of ``always``
    it has), then the longest ok length's :data:`SEQUENCE_COLUMNS`; the longest first. Empty when no
    run searched the sequence or none trained."""
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
    varied = [c for c in cols if longest[c].nunique(dropna=False) > 1 or c in always]
    if not varied:
        varied = [c for c in ONE_SETUP_COLUMNS if c in longest]
    shown = [c for c in SEQUENCE_COLUMNS if c in longest]
    out = longest.sort_values(["seq_len", "tokens_per_s"], ascending=False, kind="stable")
    return out[[*varied, *shown]].reset_index(drop=True)


def combined_table(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`frontier_table` when some run of ``df`` searched the sequence: one
    table, :data:`GREW` first (``n_layer`` for the depth frontier's rows, ``seq_len`` for the sequence
    rows of :func:`sequence_table`), then the set-up columns of either, then the figures of
    :data:`SEQUENCE_COLUMNS` (a depth row's ``seq_len`` is its sequence)."""
    seq, depth = sequence_table(df), depth_table(df, always=("seq_len",))
    # Each part's rows show the set-up columns that either part shows, and at least
    # ONE_SETUP_COLUMNS: a depth row left backend and ckpt blank where its one set-up's only varied
    # column was seq_len, while the sequence row said "single none" (both ran the defaults).
    shown = {c for p in (seq, depth) for c in p if c not in SEQUENCE_COLUMNS} | set(ONE_SETUP_COLUMNS)
    seq = sequence_table(df, always=tuple(shown))
    depth = depth_table(df, always=("seq_len", *shown))
    parts = [p.assign(**{GREW: grew}) for p, grew in ((depth, "n_layer"), (seq, "seq_len")) if not p.empty]
    if not parts:
        return pd.DataFrame(columns=[GREW, *SEQUENCE_COLUMNS])
    table = pd.concat(parts, ignore_index=True)
    figures = [c for c in SEQUENCE_COLUMNS if c in table]
    setup = [c for c in table if c not in figures and c != GREW and c not in FRONTIER_COLUMNS]
    return table[[GREW, *setup, *figures]]
