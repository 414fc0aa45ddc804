"""``python -m analysis PATH`` where PATH holds no record (the session-23 new-user trial): a folder that
exists but holds none says so (``/nonexistent`` existed on the trial's machine), and a file named that
is not a record (``notes.txt``) gets the fix that applies (a folder of records or a metrics.json), not
``resume=true``, which re-runs jobs. ``analysis.__main__.main`` runs in-process: no process starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import analysis_cli as _run

REPO = Path(__file__).resolve().parents[2]


def _error(err: str) -> str:
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


def test_a_missing_path_says_it_is_not_there(capsys, tmp_path):
    code, out, err = _run(capsys, tmp_path / "nonexistent")
    assert code == 2 and not out
    assert (
        f"{tmp_path / 'nonexistent'}: no such file, directory or glob match. Fix: name a sweep folder"
        in _error(err)
    )


def test_a_folder_without_records_says_it_exists(capsys, tmp_path):
    (tmp_path / "there" / "sub").mkdir(parents=True)
    (tmp_path / "there" / "sub" / "notes.md").write_text("no record")
    code, out, err = _run(capsys, tmp_path / "there")
    line = _error(err)
    assert code == 2 and not out
    assert (
        f"no metrics.json under {tmp_path / 'there'} (0 runs; the folder exists, with none in it or below)"
        in line
    )
    assert "Fix: name a sweep folder" in line and "resume=true" not in line


@pytest.mark.parametrize(("name", "body"), [("some.txt", "hello"), ("notes.json", "{"), ("run.log", "")])
def test_a_file_that_is_not_a_record_gets_the_fix_that_applies(capsys, tmp_path, name, body):
    (tmp_path / name).write_text(body)
    code, out, err = _run(capsys, tmp_path / name)
    line = _error(err)
    assert code == 2 and not out
    assert f"{tmp_path / name} is not a record (a job writes its record as metrics.json)" in line
    assert "Fix: name a sweep folder" in line and "metrics.json files" in line
    assert "resume=true" not in line and "re-run" not in line


def test_a_bad_record_beside_a_named_text_file_keeps_the_re_run_fix(capsys, tmp_path):
    """A truncated metrics.json a job wrote is fixed by re-running it; the text file named beside it is
    not a record: the line says both."""
    (tmp_path / "sweep" / "0").mkdir(parents=True)
    (tmp_path / "sweep" / "0" / "metrics.json").write_text('{"schema_version": ')
    (tmp_path / "some.txt").write_text("hello")
    code, _, err = _run(capsys, tmp_path / "sweep", tmp_path / "some.txt")
    line = _error(err)
    assert code == 2 and "2 unreadable records skipped" in line
    assert f"{tmp_path / 'some.txt'} is not a record" in line and "resume=true re-runs every job" in line


def test_a_bad_metrics_json_named_keeps_the_re_run_fix(capsys, tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps([1, 2])[:3])
    code, _, err = _run(capsys, tmp_path / "metrics.json")
    line = _error(err)
    assert code == 1 and "Fix: re-run those jobs" in line and "is not a record" not in line
