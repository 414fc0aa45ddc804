"""One job of a pool sweep, in a process of its own (``python -c BOOT SYS_PATH JOB_FILE``:
:data:`hydra_plugins.flopsweep_pool.BOOT` takes the sweep process's ``sys.path``, then calls :func:`main`).

Started by :class:`hydra_plugins.flopsweep_pool.PoolLauncher` with ``CUDA_VISIBLE_DEVICES`` set to the
job's devices. It reads the pickled Hydra state, context, task function and composed config from
``JOB_FILE`` (cloudpickle, as submitit hands a job to its task; the file lies in the sweep process's
private folder), runs the job through Hydra's ``run_job`` as the basic launcher would, and writes the
pickled ``JobReturn`` to the file named in it (a new file in the same folder, created exclusively).
The sweep's summary callback is left to the sweep process, which calls it with the result. SIGTERM
unwinds the job as it does a ``run.py`` job (the running job records itself as interrupted); the
process also gets SIGTERM when the sweep process dies (Linux ``PR_SET_PDEATHSIG``).

Exit status: 0 with a result written; 143 on SIGTERM, 130 on SIGINT, 1 when the job file cannot be
read (no result).
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
from pathlib import Path

MAX_PAYLOAD_BYTES = 256 * 2**20


PARENT_ENV = "FLOPSWEEP_PARENT_PID"
"""The sweep process's pid, set in the job process's environment by the pool (and removed here at once):
the parent :func:`flopsweep.signals.end_with_parent` checks, never the one ``getppid`` gives this late."""


def die_with_parent() -> None:
    """SIGTERM to this process when the sweep process dies; exit at once if it already has
    (:func:`flopsweep.signals.end_with_parent`). A no-op where Linux's ``prctl`` is missing."""
    from flopsweep.signals import end_with_parent

    parent = os.environ.pop(PARENT_ENV, "")
    end_with_parent(int(parent) if parent.isdigit() else os.getppid())


def main() -> int:
    from flopsweep.launch import Terminated, raise_terminated

    logging.raiseExceptions = False  # as run.py: a log line that cannot be written is no traceback
    signal.signal(signal.SIGTERM, raise_terminated)
    die_with_parent()
    from flopsweep.safe_read import RecordError, read_regular

    try:  # in the sweep process's private (0700) folder; read without following a link, bounded
        payload = read_regular(Path(sys.argv[2]), MAX_PAYLOAD_BYTES)
    except (RecordError, IndexError) as exc:
        print(f"flopsweep: pool task: the job's file cannot be read: {exc}", file=sys.stderr)
        return 1
    job = pickle.loads(payload)  # noqa: S301 - written by the sweep process that started this one

    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals

    from flopsweep.callbacks import SweepSummary

    Singleton.set_state(job["singleton_state"])
    setup_globals()
    context = job["hydra_context"]
    callbacks = getattr(context.callbacks, "callbacks", None)
    if isinstance(callbacks, list):  # the sweep process runs the summary's on_job_end with the result
        callbacks[:] = [c for c in callbacks if not isinstance(c, SweepSummary)]
    try:
        result = run_job(
            hydra_context=context,
            task_function=job["task_function"],
            config=job["config"],
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    except KeyboardInterrupt:
        return 130
    except Terminated:
        return 143
    data = _dumps(result)
    fd = os.open(job["result"], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return 0


def _dumps(result: object) -> bytes:
    """The pickled result; a return value that cannot be pickled (an exception holding a lock, say)
    becomes a RuntimeError with its text, so that the sweep still gets the job's status."""
    import cloudpickle

    try:
        return cloudpickle.dumps(result)
    except Exception as exc:  # noqa: BLE001 - keep the status, say what was lost
        value = getattr(result, "_return_value", None)
        result._return_value = RuntimeError(f"{type(value).__name__}: {value} (not picklable: {exc})")  # type: ignore[attr-defined]
        return cloudpickle.dumps(result)


if __name__ == "__main__":
    sys.exit(main())
