"""Session 39 (docs/reliability-10.md #546): ``python -m analysis DIR`` while the sweep was still running
showed the jobs finished so far (``1 run (1 ok)`` of 3) and said nothing. Now a warning names the folder
and the process holding its lock (``analysis.discover.still_written``, ``flopsweep.lock_names.held_by``:
tried shared without waiting, released at once); a finished sweep's folder gets none. The lock here is
the sweep's own (``flopsweep.locks.lock_sweep_dir``), held in this process on its own descriptor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.discover import still_written
from analysis.load import load
from flopsweep.locks import lock_path, lock_sweep_dir


def test_a_sweep_still_writing_the_folder_read_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """#546: the held lock gives one warning naming the folder as the user did, and the pid."""
    monkeypatch.chdir(tmp_path)
    put(tmp_path / "live" / "0", fixture_record())
    with lock_sweep_dir(tmp_path / "live"):
        assert still_written(["live", "live/0"]) == {"live": f"pid {os.getpid()}"}
        df = load("live")
    assert len(df) == 1
    line = f"live: a sweep or run (pid {os.getpid()}) is still writing here: the records read are those"
    assert line in caplog.text and "read it again when it ends" in caplog.text


def test_a_finished_sweep_or_a_stale_lock_file_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Released (the file unlinked), or a lock file left with no holder: no warning, nothing made."""
    put(tmp_path / "done" / "0", fixture_record())
    with lock_sweep_dir(tmp_path / "done"):
        pass
    assert not lock_path(tmp_path / "done").exists()
    lock_path(tmp_path / "done").write_bytes(b"")  # a killed sweep's file: no process holds it
    assert still_written([tmp_path / "done"]) == {}
    load(tmp_path / "done")
    assert "still writing" not in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == [".done.flopsweep-lock", "done"]
