"""Session 39 (docs/reliability-10.md #551): a record that is not JSON was always ``invalid JSON
(truncated?)``: a hand edit saved with a byte-order mark (``Unexpected UTF-8 BOM (decode using
utf-8-sig)``: Python's advice, not the user's), two records in one file (``Extra data``) and a doubled
comma were called truncated, and a UTF-16 save was ``'utf-8' codec can't decode byte 0xff``. Now each
says what it is (``flopsweep.safe_read.json_problem``), a cut write still ``(truncated?)``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fixture_record

from flopsweep.safe_read import RecordError, read_json


def _why(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    with pytest.raises(RecordError) as refused:
        read_json(path)
    return str(refused.value)


def test_each_kind_of_bad_json_is_named_for_what_it_is(tmp_path: Path) -> None:
    text = json.dumps(fixture_record(), indent=1)
    record = tmp_path / "metrics.json"
    assert _why(record, b"\xef\xbb\xbf" + text.encode()).startswith(
        "starts with a byte-order mark (U+FEFF, as some editors save): save it without one ("
    )
    assert _why(record, (text + "\n" + text).encode()).startswith(
        "more text after its JSON object (two records in one file, or text appended?): Extra data"
    )
    assert _why(record, text[:300].encode()).startswith("invalid JSON (truncated?): ")
    assert _why(record, text[:-1].encode()).startswith("invalid JSON (truncated?): ")
    doubled = text.replace('"status": "ok",', '"status": "ok",,', 1)
    assert doubled != text and _why(record, doubled.encode()).startswith(
        "invalid JSON: Expecting property name"
    )
    assert _why(record, text.encode("utf-16")).endswith("(UTF-16, as some editors save: save it as UTF-8)")
    record.write_text(text)
    assert read_json(record)["status"] == "ok"
