"""Session 39's Ctrl-C while ranks start, and the lines an interrupt leaves (docs/reliability-10.md
#660-#662): a rank starts with SIGINT blocked, then ignores it, and its launcher loses no SIGINT (#660), an
interrupted sweep's line names the command that finishes it (#661), and a single run's interrupt warning
says why (#662). The signal states are read from ``/proc/self/status``, the signals are real (``os.kill`` of
this process)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path

import pytest

from flopsweep import signals
from flopsweep.job import records
from flopsweep.job.resume import resume_hint


def _mask(field: str) -> int:
    """``/proc/self/status``'s ``field`` (``SigIgn``, ``SigBlk``, ``SigPnd``, ``ShdPnd``) as a number."""
    with open("/proc/self/status", encoding="ascii") as f:
        line = next(x for x in f.read(8192).splitlines() if x.startswith(f"{field}:"))
    return int(line.split()[1], 16)


BIT = 1 << (signal.SIGINT - 1)


def test_children_start_with_sigint_blocked_and_the_launcher_loses_none() -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with signals.children_ignore_interrupt():
            assert _mask("SigBlk") & BIT  # what a child started now inherits across exec
            os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C while the ranks start: held, not lost
            for _ in range(1000):  # bytecodes run here, where the signal must not land (mid-start)
                pass
        pytest.fail("the SIGINT that came while the ranks started was lost")  # pragma: no cover
    assert signal.getsignal(signal.SIGINT) is before
    assert not _mask("SigIgn") & BIT
    assert not _mask("SigBlk") & BIT


def test_a_rank_drops_a_sigint_that_came_as_it_started_and_ignores_the_next() -> None:
    before = signal.getsignal(signal.SIGINT)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # as the rank starts (inherited)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # to this thread: one to the process may go to a thread that does not block it (pytest-xdist's)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        assert (_mask("SigPnd") | _mask("ShdPnd")) & BIT
        signals.rank_ignores_interrupt()
        assert not (_mask("SigPnd") | _mask("ShdPnd")) & BIT
        assert not _mask("SigBlk") & BIT
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # ignored: no KeyboardInterrupt
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_an_interrupted_sweep_names_the_command_that_finishes_it(tmp_path: Path) -> None:
    folder = str(tmp_path / "sweep")
    os.mkdir(folder)
    named = ["-m", "seed=1,2", f"hydra.sweep.dir={folder}"]
    kept = "finishes the sweep (its ok records are kept)"
    assert resume_hint(named, folder) == f"; the same command with resume=true {kept}"
    assert resume_hint(["-m", "seed=1,2"], folder) == (
        f"; the same command with resume=true and hydra.sweep.dir={folder} {kept}"
    )
    interpolated = ["--multirun", "seed=1,2", "hydra.sweep.dir=out/${now:%H}"]
    assert resume_hint(interpolated, folder) == (
        f"; the same command with resume=true and hydra.sweep.dir={folder} in place of "
        f"hydra.sweep.dir=out/${{now:%H}} {kept}"
    )
    assert resume_hint([*named, "resume=false"], folder) == (
        f"; the same command with resume=true in place of resume=false {kept}"
    )
    assert resume_hint([*named, "resume=true"], folder) == (
        "; the same command again finishes the sweep (resume=true keeps its ok records)"
    )
    spaced = str(tmp_path / "my sweep")
    os.mkdir(spaced)
    assert f"hydra.sweep.dir='{spaced}' finishes" in resume_hint(["-m", "seed=1,2"], spaced)


def test_the_hints_command_is_accepted_where_the_typed_one_was(tmp_path: Path) -> None:
    """The command the hint names passes the command line's checks (a key given twice is refused there)."""
    from flopsweep.override_sweeps import repeated_sweep_problem

    folder = str(tmp_path / "sweep")
    os.mkdir(folder)
    for argv in (
        ["-m", "seed=1,2", "hydra.sweep.dir=out/${now:%H}", "resume=false"],
        ["-m", "seed=1,2"],
        ["-m", "seed=1,2", f"hydra.sweep.dir={folder}"],
    ):
        hint = resume_hint(argv, folder)
        fixed = list(argv)
        for part in hint.removeprefix("; the same command with ").split(" finishes")[0].split(" and "):
            new, _, old = part.partition(" in place of ")
            fixed = [new if a == old else a for a in fixed] if old else [*fixed, new]
        assert repeated_sweep_problem(fixed) is None, (argv, fixed)
        assert f"hydra.sweep.dir={folder}" in fixed and "resume=true" in fixed
    typed = ["-m", "seed=1,2", "hydra.sweep.dir=out/${now:%H}", "resume=false"]
    assert repeated_sweep_problem([*typed, "resume=true", f"hydra.sweep.dir={folder}"])  # why "in place of"


def test_no_hint_where_resume_true_finishes_nothing(tmp_path: Path) -> None:
    assert resume_hint(["seed=1"], str(tmp_path)) == ""  # a single run
    assert resume_hint(["-m", "seed=1,2"], None) == ""  # the sweep had no folder yet
    assert resume_hint(["-m", "seed=1,2"], str(tmp_path / "gone")) == ""


def _record(job_num: int | None, error_type: str, message: str) -> dict:
    error = {"type": error_type, "message": message, "phase": "launch", "rank": None}
    return {"status": "error", "metrics": {}, "error": error, "warnings": [], "run": {"job_num": job_num}}


@pytest.mark.parametrize("error_type", records.INTERRUPTS)
def test_an_interrupted_single_run_says_why_as_a_sweep_job_does(caplog, error_type: str) -> None:
    message = "interrupted by Ctrl-C (SIGINT); every worker was stopped"
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        records._log_result(_record(None, error_type, message), Path("/r/metrics.json"))
        records._log_result(_record(3, error_type, message), Path("/s/3/metrics.json"))
    assert [r.getMessage() for r in caplog.records] == [
        f"error in launch: {error_type}: {message} -> /r/metrics.json",
        f"error in launch: {error_type}: {message} -> /s/3/metrics.json",
    ]


def test_a_single_runs_other_error_keeps_its_short_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        records._log_result(_record(None, "RuntimeError", "broke"), Path("/r/metrics.json"))
    assert [r.getMessage() for r in caplog.records] == ["error in launch -> /r/metrics.json"]
