"""``benchmarks/make_results.py`` reads each committed record once for its 38 tables
(:mod:`analysis.read_once`; a refactor, no reliability row: RESULTS.md is the same to the byte): the tables
inside a ``read_once`` block equal those outside it, each load still charges its budget and refuses a hard
link, and a file that changes is read again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd

from analysis.load import load
from analysis.read_once import read_once
from flopsweep.budget import ReadBudget

RECORD = Path(__file__).resolve().parents[1] / "fixtures" / "records" / "v2-ok" / "metrics.json"


def _runs(tmp_path: Path, n: int) -> Path:
    for i in range(n):
        (tmp_path / "runs" / str(i)).mkdir(parents=True)
        shutil.copy(RECORD, tmp_path / "runs" / str(i) / "metrics.json")
    return tmp_path / "runs"


def test_loads_inside_the_block_equal_loads_outside_and_each_charges_its_budget(tmp_path: Path) -> None:
    runs = _runs(tmp_path, 3)
    plain, plain_budget = load(runs, budget=(b0 := ReadBudget())), b0.total - b0.left
    with read_once():
        first = load(runs, budget=(b1 := ReadBudget()))
        again = load([runs / "0", runs], budget=(b2 := ReadBudget()))  # one record named twice: read once
    pd.testing.assert_frame_equal(first, plain)
    pd.testing.assert_frame_equal(load([runs / "0", runs]), again)
    assert b1.total - b1.left == plain_budget
    assert 0 < b2.total - b2.left


def test_a_record_is_read_once_in_the_block_and_again_when_it_changes(tmp_path: Path) -> None:
    runs = _runs(tmp_path, 1)
    path = runs / "0" / "metrics.json"
    text = path.read_text()
    st = os.stat(path)
    with read_once():
        assert load(runs)["seed"].tolist() == [0]
        path.write_text(text.replace('"seed": 0', '"seed": 7'))  # same size, same times: taken as the same
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert load(runs)["seed"].tolist() == [0]
        path.write_text(text.replace('"seed": 0', '"seed": 17'))  # another size: read again
        assert load(runs)["seed"].tolist() == [17]
    assert load(runs)["seed"].tolist() == [17]


def test_a_hard_link_is_still_read_once_in_the_block(tmp_path: Path) -> None:
    runs = _runs(tmp_path, 1)
    (runs / "1").mkdir()
    os.link(runs / "0" / "metrics.json", runs / "1" / "metrics.json")
    outside = load(runs)
    with read_once():
        load(runs)
        inside = load(runs)
    assert len(inside) == len(outside) == 1
    assert inside.attrs["unreadable"] == outside.attrs["unreadable"]
