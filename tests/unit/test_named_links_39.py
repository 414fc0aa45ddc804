"""Session 39 (docs/reliability-10.md #540-#541): a symbolic link named as the path to read. A link
that leads nowhere (``latest`` to a sweep since deleted) is a path that is not there, exit 2 (was
exit 1 and "re-run those jobs with resume=true"); a link to a record named alone names the file it
leads to, a fix that reads when typed back (was "is not a record (a job writes its record as
metrics.json)")."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.__main__ import main


def _run(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's refusals
        code = exc.code
    err = capsys.readouterr().err
    return code, err


def _error(err: str) -> str:
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("to", ["gone-sweep", "gone-sweep/0/metrics.json", "loop"])
def test_a_named_link_that_leads_nowhere_is_a_path_not_there_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, to: str
) -> None:
    """#540: ``latest`` -> a deleted sweep (or a loop of links) was an unreadable record, exit 1, fix
    ``re-run those jobs (resume=true)``; the table and ``--notebook`` alike now refuse the path, exit 2."""
    monkeypatch.chdir(tmp_path)
    Path("latest").symlink_to("loop" if to == "loop" else to)
    if to == "loop":
        Path("loop").symlink_to("latest")
    for extra in ([], ["--notebook", "out.ipynb"]):
        code, err = _run(capsys, "latest", *extra)
        line = _error(err)
        assert code == 2, err
        assert f"latest: a symbolic link to {'loop' if to == 'loop' else to}, which is not there" in line
        assert "resume=true" not in line and "Fix: name a sweep folder" in line
    assert not Path("out.ipynb").exists()


def test_a_named_link_to_a_record_names_the_file_it_leads_to_and_that_fix_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """#541: a link to a record named alone said ``mlink.json is not a record (a job writes its record as
    metrics.json)``; now the line names the record it leads to, and that path typed back reads it."""
    monkeypatch.chdir(tmp_path)
    put(tmp_path / "runs" / "0", fixture_record())
    Path("mine.json").symlink_to("runs/0/metrics.json")
    code, err = _run(capsys, "mine.json")
    line = _error(err)
    assert code == 2, err
    assert "mine.json: a symbolic link to runs/0/metrics.json (not followed" in line
    fix = line.split("Fix: name the file it leads to, ")[1].split(";")[0]
    assert fix == "runs/0/metrics.json"
    code, err = _run(capsys, fix, "--format", "csv")
    assert code == 0 and "1 run (1 ok)" in err, err


def test_a_named_link_to_a_record_beside_other_paths_is_skipped_with_its_target(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """#541: beside a folder that holds records, the link is a warning naming its target, the folder read."""
    monkeypatch.chdir(tmp_path)
    put(tmp_path / "runs" / "0", fixture_record())
    put(tmp_path / "other" / "0", fixture_record())
    Path("mine.json").symlink_to("other/0/metrics.json")
    code, err = _run(capsys, "runs", "mine.json", "--format", "csv")
    assert code == 0, err
    assert "skipping unreadable record mine.json: a symbolic link to other/0/metrics.json" in caplog.text
    assert "Fix: name the file it leads to, other/0/metrics.json" in caplog.text
    assert "1 run (1 ok); 1 unreadable record skipped" in err
