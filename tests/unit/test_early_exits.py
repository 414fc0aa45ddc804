"""Session 24's trial, in process: signals before the first job (:mod:`flopsweep.signals`), a closed
stdout or stderr (:func:`flopsweep.streams.standard_streams`), and an output folder this user cannot write
(:func:`flopsweep.hydrafiles.unwritable_folder_problem`). The command lines themselves run in
``tests/integration/test_early_exits.py``."""

from __future__ import annotations

import os
import signal

import pytest

from flopsweep import signals
from flopsweep.hydrafiles import unwritable_folder_problem
from flopsweep.launch import raise_terminated
from flopsweep.streams import reopen_closed_fds, usable_stream


@pytest.fixture
def handlers():
    """The test process's SIGINT and SIGTERM handlers, put back after the test."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield saved
    for s, handler in saved.items():
        signal.signal(s, handler)
    signals._JOB_HANDLERS.clear()


def test_until_a_job_starts_a_signal_stops_the_process_then_the_jobs_handlers_take_over(handlers):
    job = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: raise_terminated}
    signals.stop_before_jobs(job)
    assert (
        signal.getsignal(signal.SIGINT) is signals._stop and signal.getsignal(signal.SIGTERM) is signals._stop
    )
    with signals.signals_deferred():  # a write in progress holds them, and gives them back after
        assert signal.getsignal(signal.SIGTERM) is not signals._stop
    assert signal.getsignal(signal.SIGTERM) is signals._stop
    signals.jobs_starting()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is raise_terminated
    signal.signal(signal.SIGTERM, handlers[signal.SIGTERM])
    signals.jobs_starting()  # once only: a later job leaves the handlers as they are
    assert signal.getsignal(signal.SIGTERM) is handlers[signal.SIGTERM]


def test_jobs_starting_without_stop_before_jobs_changes_nothing(handlers):
    signals.jobs_starting()  # a launcher's task process, a test
    assert {s: signal.getsignal(s) for s in handlers} == handlers


def test_the_stop_line_names_the_signal_and_that_nothing_was_recorded():
    assert signals.STOP_LINE.format(name="SIGTERM") == (
        "flopsweep: stopped by SIGTERM before any job started; nothing was recorded\n"
    )


def test_a_closed_descriptor_becomes_devnull_inheritable_and_a_missing_stream_writes_there():
    read, write = os.pipe()
    os.close(read)
    os.close(write)  # closed, as `>&-` leaves descriptor 1
    try:
        assert reopen_closed_fds(((write, os.O_WRONLY),)) == [write]
        assert os.fstat(write).st_rdev == os.stat(os.devnull).st_rdev
        assert os.get_inheritable(write)  # a worker rank starts with it too, not with a pipe in its place
        stream = usable_stream(None, write)
        print("dropped", file=stream, flush=True)
        assert stream.fileno() == write
        stream.close()
        os.fstat(write)  # the stream never closes the descriptor
        assert reopen_closed_fds(((write, os.O_WRONLY),)) == []  # open: left as it is
    finally:
        os.close(write)


def test_an_open_stream_is_kept_and_a_closed_one_replaced(tmp_path):
    with open(tmp_path / "out", "w") as kept:
        assert usable_stream(kept, 1) is kept
    replaced = usable_stream(kept, 2)  # closed now
    assert replaced is not kept and replaced.fileno() == 2


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root writes a read-only folder (integration test: a read-only mount)"
)
def test_an_output_folder_made_in_a_read_only_folder_is_refused_with_another_folder_as_the_fix(tmp_path):
    read_only = tmp_path / "ro"
    read_only.mkdir(mode=0o555)
    line = unwritable_folder_problem("hydra.run.dir", str(read_only / "outputs" / "2026-12-05" / "06-51-01"))
    assert line.startswith(
        f"Invalid config: hydra.run.dir={read_only}/outputs/2026-12-05/06-51-01: would be made in"
    )
    assert "not writable for you" in line and "Fix: choose a folder you can write to (hydra.run.dir=" in line
    assert "mkdir" not in line


def test_a_writable_or_unmade_output_folder_passes(tmp_path):
    assert unwritable_folder_problem("hydra.sweep.dir", str(tmp_path / "multirun" / "x")) is None
    assert unwritable_folder_problem("hydra.run.dir", str(tmp_path)) is None
    (tmp_path / "file").write_text("")
    assert (
        unwritable_folder_problem("hydra.run.dir", str(tmp_path / "file" / "x")) is None
    )  # not a folder: another check


def test_the_analysis_entry_turns_ctrl_c_into_one_line_and_130(capsys) -> None:
    """Trial 24b: ``timeout -s INT 2 flopsweep-analysis DIR --format html --output r.html`` printed an
    86-line ``KeyboardInterrupt`` traceback. The entry of both commands answers it in one line, 130; a
    status ``main`` returns passes through unchanged."""
    from analysis.cli import entry

    def interrupted() -> int:
        raise KeyboardInterrupt

    assert entry(interrupted) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["flopsweep-analysis: interrupted (Ctrl-C); nothing more is written"]
    assert entry(lambda: 2) == 2
    assert "Traceback" not in capsys.readouterr().err


FIXTURE_SWEEP = os.path.join(os.path.dirname(__file__), "..", "fixtures", "sweep")


def test_the_analysis_refuses_a_table_for_a_stdout_closed_at_start(monkeypatch, capsys, tmp_path) -> None:
    """Session 25: ``flopsweep-analysis DIR --format csv >&-`` wrote its table to ``os.devnull`` and exited 0.
    A table with nowhere to go is refused, one line, exit 2, before any record is read; an output file (or
    plots, or a notebook) is still written, and ``> /dev/null`` (stdout open) stays the way to drop it."""
    from analysis.__main__ import main
    from flopsweep import streams

    assert streams.standard_streams() == [] and not streams.stdout_closed_at_start()  # pytest's are open
    monkeypatch.setattr(streams, "CLOSED_AT_START", {1})
    assert streams.stdout_closed_at_start()
    assert main([FIXTURE_SWEEP, "--format", "csv"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "python -m analysis: error: stdout is closed (>&-), so the table would be lost. Fix: --output FILE, "
        "or redirect it (> FILE; > /dev/null to drop it on purpose)"
    ]
    out = tmp_path / "runs.csv"
    assert main([FIXTURE_SWEEP, "--format", "csv", "--output", str(out)]) == 0
    assert out.read_text().startswith('"model",')


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_stdout_is_one_line_and_exit_1_and_a_gone_reader_drops_the_rest(monkeypatch, capsys) -> None:
    """``flopsweep-analysis DIR > /dev/full`` said ``cannot write None: No space left on device``; it names
    stdout now. A pipe whose reader went away (``| head``) drops the rest quietly, as ``flopsweep | head``."""
    from analysis.__main__ import main

    with open("/dev/full", "w") as full:
        monkeypatch.setattr("sys.stdout", full)
        assert main([FIXTURE_SWEEP, "--format", "csv"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "python -m analysis: error: cannot write the table to stdout: No space left on device. Fix: redirect "
        "stdout where there is space, or write a file with --output FILE"
    ]
    read, write = os.pipe()
    os.close(read)  # the reader is gone
    with os.fdopen(write, "w") as pipe:
        monkeypatch.setattr("sys.stdout", pipe)
        assert main([FIXTURE_SWEEP, "--format", "csv"]) == 0
        assert os.fstat(write).st_rdev == os.stat(os.devnull).st_rdev  # the rest goes to os.devnull
    err = capsys.readouterr().err
    assert "error" not in err and err.splitlines()[-1].startswith("38 runs (34 ok")
