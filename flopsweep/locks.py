"""The lock of a run or sweep folder: one sweep, resume or single run writes into a folder at a time.

:func:`lock_sweep_dir` takes ``fcntl.flock`` on an empty file, beside the folder's real path
(:func:`lock_path`, ``<parent>/.<name>.flopsweep-lock``), or inside the folder
(:func:`inner_lock_path`, ``<folder>/.flopsweep-lock``) when the folder above takes no new file (a
``hydra.sweep.dir=/scratch/$USER`` whose ``/scratch`` is not the user's). Every process tries the two
places in that order and, once it holds its own, tries the other place too (and those of every folder
above and inside), so two processes that took different places still see each other. The holder
unlinks the file when it is done (:meth:`HeldLock.close`, at exit at the latest); a process that
opened the file before it was unlinked sees, once its ``flock`` succeeds, that the path no longer
names that file (``lstat`` against ``fstat``) and starts again. Torch-free.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import itertools
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from hydra.errors import CompactHydraException

from flopsweep.free_folder import another, another_writable, folder_key
from flopsweep.lock_names import (  # noqa: F401 - where they were
    INNER_LOCK,
    LOCK_SUFFIX,
    inner_lock_path,
    lock_holder,
    lock_path,
)
from flopsweep.lock_names import held_by as _held
from flopsweep.lock_names import lock_holder as _lock_holder

MAX_SCANNED = 200_000
"""At most this many entries of a directory's tree are looked at for the locks of runs inside it."""
MAX_TRIES = 20
"""Times a lock is opened again when its file was unlinked by its last holder meanwhile."""
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENAMETOOLONG)
"""Why the lock beside a folder cannot be made (its parent is read-only or another user's, or the
folder's name is too long for ``.<name>.flopsweep-lock``): the lock then goes inside the folder."""


class SweepBusy(CompactHydraException):
    """Another sweep, resume or single run is writing into the same directory, or its lock file is
    not one that flopsweep can use (a link, not a regular file), or no lock file can be made."""


class HeldLock:
    """A held lock (:func:`lock_sweep_dir`). :meth:`close` unlinks its file (when the path still
    names it, and it is empty: a file someone else wrote is left alone) and releases it, then removes
    the folders ``made`` for it (deepest first) that are still empty: a sweep or run that made nothing
    (a tuner that pruned every set-up) leaves no ``multirun/<date>/``. Called at exit at the latest,
    and only by the process that took it."""

    def __init__(self, fd: int, path: Path, made: list[Path] | None = None) -> None:
        self._fd: int | None = fd
        self.path = path
        self.made = made or []
        self._pid = os.getpid()
        atexit.register(self.close)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError("the lock is released")
        return self._fd

    def close(self) -> None:
        """Unlink the lock file while holding it, then release it (a waiter that opened it sees it gone)."""
        fd, self._fd = self._fd, None
        if fd is None or os.getpid() != self._pid:
            return
        try:
            own = os.fstat(fd)
            if _names(self.path, own) and own.st_size == 0:
                os.unlink(self.path)
        except OSError:  # not ours to remove (a folder that turned read-only): left for the next one
            pass
        finally:
            os.close(fd)
            atexit.unregister(self.close)
        for folder in self.made:  # deepest first; one that holds anything stays, and those above it
            try:
                os.rmdir(folder)
            except OSError:
                break

    def __enter__(self) -> HeldLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _names(path: Path, st: os.stat_result) -> bool:
    """True when ``path`` (not followed) is the file of ``st``."""
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def lock_sweep_dir(sweep_dir: Path) -> HeldLock:
    """Hold an exclusive lock on ``sweep_dir`` for this process: a sweep's directory, or a single
    run's (``SweepSummary`` locks both). Released, and its file unlinked, by :meth:`HeldLock.close`
    (at exit at the latest).

    Two sweeps, resumes or runs into one directory would share, and wipe, each other's scratch
    files, and time each other's jobs under load. The second one is refused at once. The lock is
    ``fcntl.flock`` on :func:`lock_path`, beside the directory's real path (a launcher that refuses
    its settings must leave no sweep directory behind), or, when that folder takes no new file
    (read-only, another user's), on :func:`inner_lock_path` inside the directory, when it exists.
    The file is created exclusively, never through a link, and never written to or truncated: the
    holder's pid comes from ``/proc/locks``. A refused call leaves no lock file it made.

    Raises:
        SweepBusy: naming the directory and the process that holds it, or another user's symbolic link
            on its path (:func:`flopsweep.links.foreign_link`), or why the lock file there cannot be used
            (a symbolic link or not a regular file: remove it), or that no lock
            file can be made (neither beside the directory nor inside it), with the fix.
    """
    import fcntl

    from flopsweep.safe_folders import foreign_link_refusal

    if foreign := foreign_link_refusal(sweep_dir):  # the lock beside it would be made through that link
        raise SweepBusy(f"{foreign.line}. Fix: {foreign.fix}")
    _refuse_nested(sweep_dir, None)  # before anything is made
    made, folder = [], lock_path(sweep_dir).parent  # the folders the lock beside it makes
    while not os.path.lexists(folder) and folder.parent != folder:
        made, folder = [*made, folder], folder.parent
    for _ in range(MAX_TRIES):
        fd, path = _open_lock(sweep_dir)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            st = os.fstat(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                why = f"cannot lock {path} ({exc.strerror})"
                raise SweepBusy(f"{why}; {another(sweep_dir, either=True)}") from None
            raise SweepBusy(
                f"another sweep or run ({_lock_holder(st)}) is writing into {sweep_dir}; wait for it to "
                f"finish, or {another(sweep_dir, either=True)}"
            ) from None
        if _names(path, os.fstat(fd)):
            break
        os.close(fd)  # its last holder unlinked it after we opened it: open the path again
    else:
        raise SweepBusy(f"the lock file {path} kept being replaced; {another(sweep_dir, either=True)}")
    held = HeldLock(fd, path, made)
    try:  # again, holding ours: of two that start at once, the later one sees the other's lock
        _refuse_nested(sweep_dir, os.fstat(fd))
    except SweepBusy:
        held.close()
        raise
    return held


def _refuse_nested(run_dir: Path, own: os.stat_result | None) -> None:
    """Raise :class:`SweepBusy` when a flopsweep lock other than ``own`` is held on ``run_dir``
    (beside it or inside it), on a directory above it (a sweep whose job directory it is) or on one
    inside it (a run in one of its job directories): the two would share, and wipe, files. Nothing
    is made or written; a lock is only tried, shared and at once released (:func:`_held`)."""
    real = Path(os.path.realpath(run_dir))
    same = ((real, "same", lock) for lock in (lock_path(real), real / INNER_LOCK))
    above = (
        (d, "above", lock) for d in real.parents if d.parent != d for lock in (lock_path(d), d / INNER_LOCK)
    )
    inside = ((_locked_dir(lock), "inside", lock) for lock in _locks_inside(real))
    for folder, where, lock in itertools.chain(same, above, inside):
        if (holder := _held(lock, own)) is None:
            continue
        if where == "same" or folder == real:
            raise SweepBusy(
                f"another sweep or run ({holder}) is writing into {run_dir}; wait for it to finish, "
                f"or {another(run_dir, either=True)}"
            )
        raise SweepBusy(
            f"another sweep or run ({holder}) is writing into {folder}, {where} {run_dir}; wait for it to "
            f"finish, or choose a {folder_key()} outside it"
        )


def _locks_inside(root: Path) -> Iterator[Path]:
    """The flopsweep lock files (``.<name>.flopsweep-lock``, ``.flopsweep-lock``) in ``root``'s tree,
    links not followed, at most :data:`MAX_SCANNED` entries looked at (a loop, not recursion: any depth)."""
    stack, seen = [root], 0
    while stack and seen < MAX_SCANNED:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if entry.name.startswith(".") and entry.name.endswith(LOCK_SUFFIX):
                        yield Path(entry.path)
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except OSError:  # gone, or not ours to read
            continue


def _locked_dir(lock: Path) -> Path:
    """The directory whose lock file is ``lock`` (:func:`lock_path`; :func:`inner_lock_path`: its folder)."""
    return lock.parent / lock.name[1 : -len(LOCK_SUFFIX)]


def _open_lock(run_dir: Path) -> tuple[int, Path]:
    """A descriptor of the lock file of ``run_dir`` and its path: beside the directory
    (:func:`lock_path`, its parent folders made), else, when that folder takes no new file, inside it
    (:func:`inner_lock_path`); each created exclusively, or the existing regular file opened without
    following a link and without blocking (a FIFO planted there must not hang).

    Raises:
        SweepBusy: the lock file there is not a regular file, or neither place takes one.
    """
    beside = lock_path(run_dir)
    try:
        for _ in range(MAX_TRIES - 1):  # a folder another lock made, removed again meanwhile (HeldLock.made)
            beside.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                return _open_one(beside, run_dir), beside
        beside.parent.mkdir(parents=True, exist_ok=True)
        return _open_one(beside, run_dir), beside
    except OSError as exc:
        if exc.errno not in UNWRITABLE:
            raise SweepBusy(_unmade(run_dir, [(beside, exc)])) from None
        first = exc
    inner = inner_lock_path(run_dir)
    try:
        if not os.path.isdir(inner.parent) or os.path.islink(run_dir):
            raise FileNotFoundError(errno.ENOENT, "the directory does not exist yet", str(inner.parent))
        return _open_one(inner, run_dir), inner
    except OSError as exc:
        raise SweepBusy(_unmade(run_dir, [(beside, first), (inner, exc)])) from None


def _unmade(run_dir: Path, tried: list[tuple[Path, OSError]]) -> str:
    """The line for a lock that no place takes: each path tried and why, and the fix."""
    why = "; ".join(f"{path}: {exc.strerror or exc}" for path, exc in tried)
    return (
        f"cannot make the lock file of {run_dir} ({why}); a sweep or run never goes on without its lock. "
        f"Fix: make {run_dir} a folder you can write to (mkdir -p {run_dir}), or "
        f"{another_writable(run_dir, either=True)}"
    )


def _open_one(path: Path, run_dir: Path) -> int:
    """The lock file at ``path``: created exclusively, or the existing regular file opened.

    Raises:
        OSError: it cannot be created (the caller tries the next place).
        SweepBusy: something there that is not a regular file flopsweep can use.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        pass
    fix = f"remove it (someone else may have put it there), or {another(run_dir, either=True)}"
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:  # unlinked by its holder meanwhile: made afresh
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as exc:
        what = "is a symbolic link" if os.path.islink(path) else f"cannot be opened ({exc.strerror})"
        raise SweepBusy(f"the lock file {path} {what}, not a lock flopsweep made; {fix}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SweepBusy(f"the lock file {path} is not a regular file; {fix}")
    return fd
