"""``resume=true`` over an unreadable record says why it was unreadable (docs/reliability-10.md #608,
session 39's re-trial of #551): a job's ``metrics.json`` saved by an editor with a byte-order mark, then
``-m ... resume=true``, ran the job again and said ``moved the previous record aside:
.../metrics.unreadable-<hex>.json`` alone, while the analysis names the mark
(``flopsweep.safe_read.json_problem``, the one reader's words). Now the line adds them: ``(unreadable: starts
with a byte-order mark ...)``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from helpers import fixture_record


@pytest.mark.parametrize(
    ("write", "said"),
    [
        (
            lambda p, t: p.write_text(t, encoding="utf-8-sig"),
            "(unreadable: starts with a byte-order mark (U+FEFF",
        ),
        (
            lambda p, t: p.write_text(t + t),
            "(unreadable: more text after its JSON object (two records in one file",
        ),
        (lambda p, t: p.write_text('{"a": 1,,}'), "(unreadable: invalid JSON: Expecting property name"),
        (lambda p, t: p.write_text('{"a": 1}'), "(unreadable: no 'status' field)"),
    ],
    ids=["bom", "two", "comma", "no_status"],
)
def test_a_record_set_aside_as_unreadable_says_why(tmp_path: Path, caplog, write, said: str) -> None:
    from flopsweep.job.resume import set_aside

    path = tmp_path / "metrics.json"
    write(path, json.dumps(fixture_record()))
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        aside = set_aside(path)
    assert aside is not None and aside.name.startswith("metrics.unreadable-") and not path.exists()
    line = next(r.getMessage() for r in caplog.records if "moved the previous record aside" in r.getMessage())
    assert line.startswith(f"moved the previous record aside: {aside} {said}"), line


def test_a_readable_record_set_aside_says_no_reason(tmp_path: Path, caplog) -> None:
    from flopsweep.job.resume import set_aside

    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(fixture_record()))
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        aside = set_aside(path)
    assert [r.getMessage() for r in caplog.records] == [f"moved the previous record aside: {aside}"]
