"""Session 40: a signal in the teardown after the work is written (docs/reliability-11.md #801): one line,
the work's exit status, in a real process whose last ``atexit`` callback is ``run.py``'s
(:func:`flopsweep.signals.exit_after_work`); the SIGINT is sent from an ``atexit`` callback, the teardown's
own phase. Under 1 s of CPU (no torch)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flopsweep.signals import DONE_LINE

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import atexit, os, signal, sys
from flopsweep.signals import DONE_LINE, exit_after_work, work_done
atexit.register(exit_after_work)
atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))  # runs first: a Ctrl-C in the teardown
try:
    sys.exit(int(sys.argv[1]))
finally:
    work_done(DONE_LINE, sys.exc_info()[1])
"""


@pytest.mark.parametrize("status", [0, 2])
def test_a_ctrl_c_in_the_teardown_is_one_line_and_the_works_status(tmp_path: Path, status: int) -> None:
    """Was: ignored without a word. Now :data:`DONE_LINE` once on stderr, the exit status the work's."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n{SCRIPT}", str(status)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stderr) == (status, DONE_LINE.format(name="SIGINT"))
