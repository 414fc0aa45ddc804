"""How a locally spawned rank's process ends (:func:`end_process`), once its work is done and its process
group destroyed. Torch-free, standard library only.

The rank ends with ``os._exit``, without interpreter finalization, where objects still referenced (a
DeepSpeed engine's process-group handles, its comm ops) are torn down in no set order while native threads
may still be joinable (issue 30, class 14). ``os._exit`` skips ``atexit`` too, and with it multiprocessing's
own exit hook, whose finalizers unlink the named semaphores the process made and unregister them from the
resource tracker it shares with the job process. Was: ``model=gpt-tiny compile=true device=cpu`` ended with
``resource_tracker: There appear to be 1 leaked semaphore objects to clean up at shutdown``: Inductor's
``async_compile.wait`` shows a tqdm bar, tqdm's class lock is a ``multiprocessing.RLock`` (a POSIX named
semaphore), and the rank's ``os._exit`` left it registered; the tracker unlinked it and warned when the job
process ended. Not torch's leak: the rank's exit skipped the cleanup (the warning is reported upstream as
pytorch/pytorch#166061, torch.compile in multiprocessing code, and tqdm/tqdm#1677, tqdm's class lock; both
open). Now :func:`end_process` runs those finalizers first (:func:`release_multiprocessing`).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


def release_multiprocessing() -> None:
    """Run this process's multiprocessing finalizers that have an exit priority, highest first, as
    multiprocessing's ``atexit`` hook does first at a normal exit (``multiprocessing.util._exit_function``,
    which calls ``_run_finalizers(0)``): each named semaphore (``Lock``, ``RLock``, ``Semaphore``; priority
    0) is unlinked and unregistered from the resource tracker, and Inductor's compile-worker pools
    (priority ``sys.maxsize``) are shut down, each within its own deadline (``SubprocPool.shutdown`` waits
    300 s at most). Finalizers without a priority (collected objects') are left, as at a normal exit's first
    step. A finalizer that raises prints its traceback and the next runs (multiprocessing's own rule)."""
    from multiprocessing import util

    util._run_finalizers(0)  # noqa: SLF001 - the exit hook's own step, which os._exit skips


def end_process(code: int = 0) -> NoReturn:
    """End this rank's process with status ``code``: multiprocessing's finalizers
    (:func:`release_multiprocessing`), the log handlers closed, both standard streams flushed, then
    ``os._exit(code)`` (no interpreter finalization: see the module's docstring)."""
    release_multiprocessing()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
