"""The console scripts' entry points (``[project.scripts]`` in ``pyproject.toml``): ``flopsweep``
(:func:`run`, :func:`flopsweep.cli.run`) and ``flopsweep-analysis`` (:func:`analysis`).

Importing this module puts the SIGINT and SIGTERM handler of a process that is starting in place
(:func:`_stop_starting`) before anything else is imported: a console script imports its entry point's
module first, and a Ctrl-C while that import ran showed a Python traceback. Was: ``flopsweep``'s entry,
``flopsweep.cli``, imported ``runpy``, ``textwrap`` and ``flopsweep.streams`` before its handler
(``KeyboardInterrupt`` at line 5 of the script, the process killed by SIGINT), and ``flopsweep-analysis``
imported pandas and matplotlib (0.6 s) before its ``except KeyboardInterrupt``. Only the console
scripts import this module: its import is what sets the handler.

Torch-free, standard library only.
"""

from __future__ import annotations

import os
import signal
import sys

RUN_LINE = "flopsweep: stopped by {name} before any job started; nothing was recorded\n"
"""``flopsweep``'s line for a signal as it starts: :data:`flopsweep.signals.STOP_LINE` (a test holds them
equal), written here so that this module imports nothing of the project's before its handler."""
ANALYSIS = "flopsweep-analysis"
"""The command whose process ends with :data:`ANALYSIS_LINE` (``sys.argv[0]``'s base name)."""
ANALYSIS_LINE = "flopsweep-analysis: interrupted ({name}); nothing more is written\n"
"""The analysis's line for a signal as it starts: :data:`flopsweep.signals.ANALYSIS_LINE` (not imported
here, as :data:`RUN_LINE`)."""
NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
"""The signals the handler takes, by number, and their names."""


def _stop_starting(signum: int, frame: object) -> None:
    """SIGINT or SIGTERM while a console script starts: one line on file descriptor 2
    (:data:`RUN_LINE` for ``flopsweep``, :data:`ANALYSIS_LINE` for ``flopsweep-analysis``), then
    ``os._exit(128 + signum)`` (130, 143): nothing is written yet."""
    name = NAMES.get(signum, str(signum))
    line = ANALYSIS_LINE if os.path.basename(sys.argv[0]) == ANALYSIS else RUN_LINE
    try:
        os.write(2, line.format(name=name).encode())
    except OSError:
        pass
    os._exit(128 + signum)


try:
    for _signum in NAMES:
        signal.signal(_signum, _stop_starting)
except ValueError:  # not the main thread: nothing to set
    pass


def run() -> None:
    """``flopsweep [overrides]``: :func:`flopsweep.cli.run` (``run.py`` of the checkout), imported under
    this module's handler, which :func:`flopsweep.signals.stop_before_jobs` then takes over."""
    from flopsweep.cli import run as run_checkout

    run_checkout()


def analysis() -> None:
    """``flopsweep-analysis DIR... [options]``: :func:`analysis.cli.run_entry` of
    :func:`analysis.__main__.main`, imported under this module's handler, which ``run_entry`` hands back to
    Python (the entry's one line and 130 for a Ctrl-C) and, once the entry returns, sets to ignore the
    signals in the teardown (:func:`flopsweep.signals.work_done`)."""
    from analysis.__main__ import main
    from analysis.cli import run_entry

    run_entry(main)
