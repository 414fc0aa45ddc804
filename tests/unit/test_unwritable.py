"""Issue 14, classes 2 and 3: an output directory that turns read-only, or a disk that fills,
during a sweep. Each case ends with one line naming the job, the path and why (and the free
space), the summary and exit status 1; torch's kept worker tracebacks go into the record.

The file systems are real: a small tmpfs per test, made read-only by a read-only bind mount or
filled with zeros (root only; skipped where mounting is not allowed). The moment comes from the
``FLOPSWEEP_TEST_WRITE_PAUSE`` hook, which pauses a job inside its record write, not from a clock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flopsweep.files import RecordUnwritable, atomic_write_json, check_writable


def test_a_directory_replaced_by_a_file_is_named(tmp_path: Path) -> None:
    """Class 2 without privileges: the sweep directory's path became a regular file."""
    (tmp_path / "sweep").write_text("")
    with pytest.raises(RecordUnwritable, match=f"^cannot write {tmp_path / 'sweep'}: Not a directory$"):
        check_writable(tmp_path / "sweep")
    with pytest.raises(RecordUnwritable) as info:
        atomic_write_json(tmp_path / "sweep" / "0" / "metrics.json", {"status": "ok"}, overwrite=False)
    assert str(info.value) == f"cannot write {tmp_path / 'sweep' / '0' / 'metrics.json'}: Not a directory"
    check_writable(tmp_path)  # a writable directory with room passes
