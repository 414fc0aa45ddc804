"""Session 40 (docs/reliability-11.md #702): a rank that ends with ``os._exit`` after making a named
semaphore (Inductor's tqdm bar makes tqdm's ``multiprocessing.RLock``) left it registered with the resource
tracker, which warned ``leaked semaphore objects`` when the job process ended
(``model=gpt-tiny compile=true device=cpu``). :func:`flopsweep.rank_exit.end_process` runs
multiprocessing's finalizers first. The subprocess is the point: the warning is printed by the tracker
after the process has ended; each child imports the standard library only (~0.1 s CPU)."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import ROOT

MAKES_A_SEMAPHORE = "import multiprocessing as mp; mp.set_start_method('spawn'); lock = mp.RLock(); "
"""What tqdm's class lock does in the rank (``TqdmDefaultWriteLock.create_mp_lock``): a spawned rank's
context is ``spawn``, whose semaphores are named and registered with the tracker (a ``fork`` context's are
unlinked at once)."""


def _ended(how: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {str(ROOT)!r}); {MAKES_A_SEMAPHORE}{how}",
        ],
        cwd=os.path.dirname(sys.executable),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_rank_ended_by_end_process_leaves_no_semaphore_to_the_tracker() -> None:
    bare = _ended("import os; os._exit(0)")  # the rank's end before: the tracker's warning
    assert bare.returncode == 0 and "leaked semaphore objects" in bare.stderr, bare.stderr
    ended = _ended("from flopsweep.rank_exit import end_process; end_process(0)")
    assert ended.returncode == 0, ended.stderr
    assert ended.stderr == "", ended.stderr
    code = _ended("from flopsweep.rank_exit import end_process; end_process(3)").returncode
    assert code == 3  # the status given, after the finalizers
