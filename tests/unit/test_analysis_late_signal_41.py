"""``python -m analysis`` (and ``flopsweep-analysis``) and a Ctrl-C: before its work is done, its one line and
130; after it, the line every entry point says (:data:`flopsweep.signals.ANALYSIS_DONE_LINE`, as ``run.py``'s
``DONE_LINE``) and the work's exit status. Reliability row #842 (docs/reliability-12.md). The signals are real
(``os.kill`` of this process); :func:`analysis.cli.run_entry` is the entry both commands run."""

from __future__ import annotations

import os
import signal

import pytest

from analysis.cli import run_entry
from flopsweep import signals


@pytest.fixture
def handlers():
    """The SIGINT and SIGTERM handlers put back after the test (``run_entry`` sets them)."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    signals._DONE.clear()
    for s, handler in previous.items():
        signal.signal(s, handler)


def test_a_ctrl_c_after_the_analysis_wrote_says_so_and_keeps_its_status(handlers, capfd) -> None:
    """Was: ignored without a word (``work_done()``: ``SIG_IGN``). Now the DONE line, once (a SIGTERM after
    it is ignored), and the exit status stays the work's (0 here; 1 for a work that ended 1)."""
    for status in (0, 1):
        with pytest.raises(SystemExit) as ended:
            run_entry(lambda status=status: status)
        assert ended.value.code == status and signals._DONE == [signals.ANALYSIS_DONE_LINE]
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert capfd.readouterr().err == (
            "flopsweep-analysis: SIGINT came after the work was written; its output stands as written, the "
            "exit status is the work's\n"
        )


def test_a_ctrl_c_while_the_analysis_works_is_its_line_and_130(handlers, capfd) -> None:
    """A Ctrl-C while it prints its table: ``interrupted``, exit 130, not the DONE line."""

    def main() -> int:
        print("table", flush=True)
        os.kill(os.getpid(), signal.SIGINT)
        return 0

    with pytest.raises(SystemExit) as ended:
        run_entry(main)
    assert ended.value.code == 130
    assert capfd.readouterr().err == "flopsweep-analysis: interrupted (Ctrl-C); nothing more is written\n"
    assert signals._DONE == [signals.ANALYSIS_DONE_LINE]


def test_the_last_atexit_callback_ignores_the_signals_for_the_finalization(handlers) -> None:
    """CPython puts the default action back for a Python handler as it finalizes (a Ctrl-C there: exit -2);
    ``signals._quiet_teardown``, registered as ``flopsweep.signals`` is imported, ignores both first. It
    leaves a handler that is not the DONE line's alone."""
    signals.work_done(signals.ANALYSIS_DONE_LINE)
    signals._quiet_teardown()
    assert signal.getsignal(signal.SIGINT) == signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signals._quiet_teardown()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
