"""Where a run or sweep folder's lock is, and which process holds it: Hydra-free and torch-free, so
that the analysis can say a sweep is still writing the folder it reads without importing Hydra
(:mod:`flopsweep.locks` takes and releases the lock, and re-exports these names)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

LOCK_SUFFIX = ".flopsweep-lock"
INNER_LOCK = LOCK_SUFFIX
"""The name of a folder's lock inside it (``.flopsweep-lock``: ``.<name>.flopsweep-lock`` with an empty
name, so :func:`flopsweep.locks._locked_dir` reads both forms)."""


def lock_path(run_dir: Path) -> Path:
    """``<parent>/.<name>.flopsweep-lock`` beside the *real* directory (links and ``..`` resolved, as
    far as the path exists), so that every spelling of one directory shares one lock."""
    real = Path(os.path.realpath(run_dir))
    return real.parent / f".{real.name}{LOCK_SUFFIX}"


def inner_lock_path(run_dir: Path) -> Path:
    """``<folder>/.flopsweep-lock``: the lock inside the real directory, where the one beside it
    (:func:`lock_path`) cannot be made."""
    return Path(os.path.realpath(run_dir)) / INNER_LOCK


def held_by(path: Path, own: os.stat_result | None = None) -> str | None:
    """The holder (``pid 1234``, :func:`lock_holder`) of the flopsweep lock file ``path`` when a
    process holds it, else None (no such file, not a regular file, free, or ``own``: this process's
    lock). The file is opened without following a link or blocking, locked shared without waiting,
    and closed at once."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if own is not None and (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return lock_holder(st)
        return None
    finally:
        os.close(fd)


def lock_holder(st: os.stat_result) -> str:
    """``pid 1234``: the process holding a ``flock`` on the file of ``st``, from Linux's
    ``/proc/locks`` (``1: FLOCK ADVISORY WRITE 1234 08:01:5678 0 EOF``); else ``another process``."""
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            for line in fh.read(1 << 20).splitlines():
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == want:
                    return f"pid {fields[4]}"
    except OSError:
        pass
    return "another process"
