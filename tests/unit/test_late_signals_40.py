"""Session 40: a signal after the work is written says so in one line (docs/reliability-11.md #801;
the signal after the ranks ended: tests/integration/test_late_signals_40.py, #800). The signals are real
(``os.kill`` of this process)."""

from __future__ import annotations

import os
import signal

from flopsweep import signals


def test_a_ctrl_c_after_the_work_is_written_says_so(capfd) -> None:
    """Was: ignored without a word (exit 0). Now one line on stderr, once (a SIGTERM after it is
    ignored), and the exit status stays the work's."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        signals.work_done(signals.DONE_LINE)
        assert signals._DONE == [signals.DONE_LINE]
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signals._DONE.clear()
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert capfd.readouterr().err == (
        "flopsweep: SIGINT came after the work was written; the records stand as written, the exit status "
        "is the work's\n"
    )
