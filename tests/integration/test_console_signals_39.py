"""The console scripts under a Ctrl-C as they start (docs/reliability-9.md #500): the script pip writes,
``from flopsweep.console import run`` (``analysis``), run in a subprocess and sent SIGINT at several delays
after its first handler is in place; every outcome is the project's one line and exit status 130, never a
traceback. A subprocess is the point: the import of the entry point is what is interrupted. The delays count
from the moment the child's ``/proc/PID/status`` shows SIGTERM caught (``helpers.wait_for_signal_mask``:
Python catches SIGINT itself from its start, SIGTERM only once the project's handler is set, and both are set
together), not from the child's start: a loaded machine slows the child, never the outcome. Left to Python: a
signal before the entry point's module runs its first line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import ROOT, wait_for_signal_mask

from flopsweep.signals import STOP_LINE

MARK = "importing the entry point"
SCRIPT = """import importlib.util
import re
import sys
importlib.util.find_spec("flopsweep.{module}")  # Python's own search, before any code of the module runs
sys.stderr.write({mark!r} + "\\n")
sys.stderr.flush()
from flopsweep.{module} import {name}
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit({name}())
"""
"""pip's console script (``bin/flopsweep``), with one line on stderr once Python has found its entry point's
module (and imported the ``flopsweep`` package): from the mark on, what runs is that module's import."""
DELAYS_S = (0.0, 0.001, 0.003, 0.01, 0.02, 0.1)
MODULE = "console"


def _signalled(argv: list[str], cwd: Path, delay_s: float) -> tuple[int, str]:
    """Run ``argv`` in ``cwd``; SIGINT ``delay_s`` seconds after its handler is in place (SIGTERM caught);
    returns the exit status and what it wrote to stderr after :data:`MARK`."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_for_signal_mask(proc, "SigCgt", signal.SIGTERM)
        time.sleep(delay_s)
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read()
        return proc.wait(timeout=120), err.split(MARK + "\n", 1)[-1]
    finally:
        proc.kill()
        proc.wait()


def _interrupted(tmp_path: Path, command: str, name: str, args: list[str], delay_s: float) -> tuple[int, str]:
    """Run the console script ``command`` (calling ``flopsweep.console.<name>``) with ``args`` in its own
    folder under ``tmp_path``, interrupted as :func:`_signalled` does."""
    script = tmp_path / "bin" / command
    script.parent.mkdir(exist_ok=True)
    script.write_text(SCRIPT.format(mark=MARK, module=MODULE, name=name))
    work = tmp_path / f"cwd-{delay_s}"
    work.mkdir()
    return _signalled([sys.executable, str(script), *args], work, delay_s)


def test_ctrl_c_as_flopsweep_starts_is_its_one_line_and_130(tmp_path: Path) -> None:
    """Was: ``flopsweep.cli`` imported ``runpy``, ``textwrap`` and ``flopsweep.streams`` before its handler:
    a SIGINT there was ``KeyboardInterrupt`` at line 5 of the script, the process killed by the signal."""
    for delay_s in DELAYS_S:
        code, err = _interrupted(tmp_path, "flopsweep", "run", ["plan=true"], delay_s)
        assert (code, err) == (130, STOP_LINE.format(name="SIGINT")), delay_s


def test_ctrl_c_as_flopsweep_analysis_starts_is_its_one_line_and_130(tmp_path: Path) -> None:
    """Was: ``flopsweep-analysis`` imported pandas and matplotlib (0.6 s) before its ``except
    KeyboardInterrupt``: a Ctrl-C then was a traceback and the process killed by SIGINT."""
    for delay_s in (*DELAYS_S, 0.2):
        code, err = _interrupted(tmp_path, "flopsweep-analysis", "analysis", [str(tmp_path)], delay_s)
        assert code == 130 and "Traceback" not in err, (delay_s, err)
        assert err.startswith("flopsweep-analysis: interrupted (") and err.count("\n") == 1, (delay_s, err)


MODULE_SCRIPT = """import runpy
import sys
sys.argv[0] = "-m"  # as python -m sets it while it locates the module (and imports its package)
sys.stderr.write({mark!r} + "\\n")
sys.stderr.flush()
runpy._run_module_as_main("analysis")  # what python -m analysis runs
"""
"""``python -m analysis``, with the mark before Python locates the module: ``runpy``'s function that ``-m``
calls, its ``sys.argv[0]`` as ``-m`` has it."""


def test_ctrl_c_as_python_m_analysis_starts_is_its_one_line_and_130(tmp_path: Path) -> None:
    """Was: ``python -m analysis`` imported pandas and matplotlib (its package's ``__init__``, which ``-m``
    imports first) before its ``except KeyboardInterrupt``: a traceback and the process killed by SIGINT;
    now the package's first statement under ``-m`` sets the handler
    (:func:`flopsweep.signals.stop_as_it_starts`)."""
    script = tmp_path / "m.py"
    script.write_text(MODULE_SCRIPT.format(mark=MARK))
    for delay_s in (0.0, 0.001, 0.005, 0.02, 0.05, 0.2):
        code, err = _signalled([sys.executable, str(script), str(tmp_path)], tmp_path, delay_s)
        assert code == 130 and "Traceback" not in err, (delay_s, err)
        assert err.startswith("flopsweep-analysis: interrupted (") and err.count("\n") == 1, (delay_s, err)


ORDER_SCRIPT = """import importlib.abc
import signal
import sys

HEAVY = ("flopsweep.", "analysis", "torch", "pandas", "numpy", "matplotlib", "hydra", "omegaconf")
early = []


class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        handled = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
        if not handled and name.startswith(HEAVY) and name != "flopsweep.{module}":
            early.append(name)
        return None


import flopsweep  # the package, as pip's script's import finds it first
sys.meta_path.insert(0, Watch())
from flopsweep.{module} import {name}  # noqa: E402
sys.meta_path.pop(0)
print(",".join(early) or "none")
"""
"""Import each entry point as pip's script does, recording every project or third-party module imported
while SIGTERM still has its default action (the project's handler not yet set)."""


def test_the_entry_points_import_nothing_of_the_project_before_their_handler(tmp_path: Path) -> None:
    """The race of the tests above, without timing: while an entry point's module is imported, no module of
    the project (nor torch, pandas, Hydra, ...) is imported before its SIGINT/SIGTERM handler is set. Was:
    ``flopsweep.cli`` imported ``flopsweep.streams`` first, ``analysis.__main__`` pandas and matplotlib."""
    for name in ("run", "analysis"):
        script = tmp_path / f"order_{name}.py"
        script.write_text(ORDER_SCRIPT.format(module=MODULE, name=name))
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert (done.returncode, done.stdout.strip()) == (0, "none"), (name, done.stdout, done.stderr[-2000:])
