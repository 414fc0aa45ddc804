"""A signal once the work is done and written (docs/reliability-9.md #502, reliability-11.md #801): a Ctrl-C
while the process tears down (the interpreter's finalization, ~1 s after torch or pandas was imported) leaves
the exit status the work's, 0 (``run.py``: with one line saying the signal came after the work), where
CPython had put the default action back and the signal ended the process (exit -2). A subprocess is the
point: the teardown is the process's own. The analysis's signal is sent once the child's
``/proc/PID/status`` shows SIGINT ignored (``helpers.wait_for_signal_mask``), not after a delay: on a loaded
machine a delay could land before the work ended (a true 130); ``run.py``'s from inside, as the work is
written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import ROOT, RUN_PY, wait_for_signal_mask

from flopsweep.signals import DONE_LINE


def _signalled_after(args: list[str], cwd: Path, last: str, delay_s: float) -> tuple[int, str, str]:
    """Run ``args`` in ``cwd``; after a stdout line that starts with ``last``, SIGINT ``delay_s`` seconds
    after the process ignores it; returns the exit status, the stdout from that line on and the stderr."""
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        for line in proc.stdout:
            if line.startswith(last):
                break
        wait_for_signal_mask(proc, "SigIgn", signal.SIGINT)
        time.sleep(delay_s)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        return proc.returncode, line + out, err
    finally:
        proc.kill()
        proc.wait()


AFTER_WORK = """
import os, runpy, signal, sys
import flopsweep.signals as signals
work_done = signals.work_done
def done_then_sigint(*args):  # a Ctrl-C the instant the work is written (run.py's finally)
    work_done(*args)
    os.kill(os.getpid(), signal.SIGINT)
signals.work_done = done_then_sigint
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_ctrl_c_after_a_plan_sweeps_table_leaves_its_exit_status(tmp_path: Path) -> None:
    """``flopsweep -m plan=true model=gpt-tiny,gpt-125m``, SIGINT once the work is written (sent from
    inside, as ``signals.work_done`` returns; the teardown after it: CPython's): was exit
    -2 and no line (the process killed by the signal in the interpreter's teardown), then 0 and no line;
    now 0 and one line that says the signal came after the work was written (#801)."""
    args = [sys.executable, "-c", AFTER_WORK, RUN_PY, "-m", "plan=true", "model=gpt-tiny,gpt-125m"]
    done = subprocess.run(
        args,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.endswith(DONE_LINE.format(name="SIGINT")) and "interrupted" not in done.stderr
    assert "Traceback" not in done.stderr and "(plan: no worker started" in done.stdout
    assert len(list(tmp_path.glob("multirun/*/*/plan.csv"))) == 1


def test_ctrl_c_after_the_analysiss_table_leaves_its_exit_status(tmp_path: Path) -> None:
    """``python -m analysis RECORD``, SIGINT after its table's first line (100 ms after it is
    ignored): was exit -2 (pandas' and matplotlib's teardown); now 0."""
    record = ROOT / "tests" / "fixtures" / "records" / "v2-ok"
    code, _, err = _signalled_after([sys.executable, "-m", "analysis", str(record)], ROOT, "", 0.1)
    assert code == 0, err[-2000:]
    assert err.rstrip("\n").endswith("1 run (1 ok)") and "interrupted" not in err and "Traceback" not in err
