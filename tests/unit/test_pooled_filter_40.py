"""``--filter run_dir=``/``run_id=`` take the forms the table shows a pooled row in, and say which rows they
matched (docs/reliability-11.md #722): a ``repeats=`` sweep's row shows ``rep/1, rep/3`` and ``ab063…``;
``--filter run_id=ab063…`` (copied from the table), ``run_id=ab063`` and ``run_dir=/abs/rep/1`` matched no
record, only the whole id or the folder as loaded did."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from analysis.filter_hints import nothing_matches_line
from analysis.query import select
from analysis.run_match import matched_line

IDS = ("15f8ea00a915498bba564a36187c2314", "ab0636005ec647c08df2d2755577a258")


def _pooled() -> pd.DataFrame:
    """Two rows as :mod:`analysis.spread` pools two rounds each (``run_dir``/``run_id`` joined by ``, ``)."""
    return pd.DataFrame(
        {
            "model": ["llama-tiny", "llama-tiny"],
            "repeats": [2, 2],
            "run_dir": ["rep/1, rep/3", "rep/0, rep/2"],
            "run_id": [f"{IDS[1]}, {IDS[0][::-1]}", f"{IDS[0]}, ffb782401ac947008adc37106921fb34"],
        }
    )


@pytest.mark.parametrize(
    ("key", "value", "row"),
    [
        ("run_id", "ab063…", 0),  # the table's cut cell, copied
        ("run_id", "ab063...", 0),
        ("run_id", "AB0636", 0),  # an id's start, any case
        ("run_id", IDS[0], 1),  # a whole round's id
        ("run_dir", "rep/3", 0),  # one round's folder
        ("run_dir", "rep/0/", 1),
        ("run_dir", os.path.abspath("rep/2"), 1),  # absolute
        ("run_dir", "rep/1, rep/3", 0),  # the whole cell
    ],
)
def test_a_shown_form_matches_its_pooled_row(key: str, value: str, row: int) -> None:
    df = _pooled()
    out = select(df, {key: value})
    assert list(out.index) == [row]
    assert matched_line(out, {key: value}) == (
        f"--filter {key}={value} matches 1 row: {df.loc[row, 'run_dir']} (2 rounds pooled)"
    )


def test_too_short_an_id_says_how_long_a_start_must_be() -> None:
    df = _pooled()
    assert select(df, {"run_id": "ab0"}).empty
    assert nothing_matches_line(df, {"run_id": "ab0"}).startswith(
        "--filter run_id=ab0 matches no record (a run id's start needs 4 characters or more); run_id has: "
    )


def test_no_line_without_a_run_filter() -> None:
    assert matched_line(_pooled(), {"model": "llama-tiny"}) is None
