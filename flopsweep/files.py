"""Safe files where a run's output goes: the atomic writer and the probes.

Torch-free. Every file flopsweep writes beside records is created by :func:`create_new`
(exclusive, never through a link) and moved into place; :func:`atomic_write_json` writes a
``metrics.json`` whole or not at all (signals wait, :mod:`flopsweep.signals`). A write the file
system refuses raises :class:`RecordUnwritable`, one line with the path, the OS error and, for a
full disk, the free space; :func:`check_writable` is the sweep's check between two jobs. The
bounded reader (``read_json``, ``read_regular``, ``RecordError``) is :mod:`flopsweep.safe_read`; a
run's folders (``job_folder``, ``own_folder``, ``private_folder``) are :mod:`flopsweep.safe_folders`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from flopsweep.free_folder import free_path
from flopsweep.record import METRICS_FILE, exists_message
from flopsweep.signals import signals_deferred
from flopsweep.text import format_bytes


class RecordExistsError(FileExistsError):
    """Raised instead of writing over an existing ``metrics.json``."""


class JobFolderUnwritable(RecordExistsError):
    """A job refused before anything ran because its folder or ``.hydra/`` could not be made or written
    (:func:`job_folder`, :func:`flopsweep.hydrafiles.write_hydra_files`: a link, FIFO or file planted
    there, or the OS refused; a :class:`RecordUnwritable` turned into one line with its fix). A single
    run exits 1 for it (``run.py``) and 2 for every other :class:`RecordExistsError` (a record refused)."""


class RecordUnwritable(OSError):
    """A file could not be written where a run's output goes: the directory became read-only,
    was removed or replaced, or the disk is full.

    ``str()`` is one line naming the path and the OS error, and for a full disk the free space
    (``shutil.disk_usage``); :attr:`fix` says what to do (for a directory where the file goes,
    ``EISDIR``: remove it).
    """

    def __init__(self, path: Path, cause: OSError, kept: Path | None = None) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.path = Path(path)
        full = cause.errno in (errno.ENOSPC, errno.EDQUOT)
        where = _existing(self.path)
        self.line = f"cannot write {path}: {cause.strerror or cause}"
        if full:
            self.line += f", {_free_space(where)} free on {where}"
        folder = cause.errno == errno.EISDIR  # a folder sits where the file goes
        if folder:
            self.line = f"cannot write {path}: it is a directory, where flopsweep writes a file"
        if kept is not None:  # written and synced, then refused its name: nothing is lost
            self.line += f"; the whole record is kept in {kept}"
        self.fix = f"free space on {where}" if full else f"make {where} writable"
        if folder:
            self.fix = (
                f"remove the directory {path} if nothing in it is needed, or choose another folder, e.g. "
                f"{free_path(path.parent)}"
            )

    def __str__(self) -> str:
        return self.line

    @classmethod
    def in_the_way(cls, path: Path, line: str, fix: str) -> RecordUnwritable:
        """Something that is not ours sits at ``path`` (a link, a file, another user's folder; errno
        ``EEXIST``): ``line`` says what, ``fix`` what to remove; never followed or written through."""
        problem = cls(path, OSError(errno.EEXIST, "exists"))
        problem.line, problem.fix = line, fix
        return problem


class NotRecorded(Exception):
    """A job ended but its ``metrics.json`` could not be written (see :class:`RecordUnwritable`).
    The message is the one line to print: the job, the path, why, and the fix."""


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (``shutil.disk_usage`` needs one)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _free_space(path: Path) -> str:
    """The space free for this user on ``path``'s file system, as ``12.0 KiB``."""
    try:
        return format_bytes(shutil.disk_usage(path).free)
    except OSError:
        return "unknown space"


MIN_FREE_BYTES = 2**20
"""Free space a sweep wants before its next job: that job's Hydra files, log, tracebacks and
record take some tens of KiB."""


def check_writable(directory: Path) -> None:
    """Write, sync and remove one byte in ``directory``, and find at least :data:`MIN_FREE_BYTES`
    free there: the sweep's check, between two jobs, that the next job can be recorded (a
    read-only, replaced or nearly full directory fails here, rather than in Hydra with a traceback).

    Raises:
        RecordUnwritable: naming the directory, the OS error and, for a full disk, the free space.
    """
    probe = Path(directory) / f".flopsweep-probe.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        usage = shutil.disk_usage(directory)
    except OSError as exc:
        raise RecordUnwritable(directory, exc) from None
    finally:
        _discard(probe)
    if usage.total and usage.free < MIN_FREE_BYTES:  # some FUSE file systems report no sizes at all
        low = RecordUnwritable(directory, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        need = format_bytes(MIN_FREE_BYTES)
        low.line = f"{directory} has {format_bytes(usage.free)} free, under the {need} a job needs"
        raise low


def atomic_write_json(path: Path, payload: dict[str, Any], *, overwrite: bool = True) -> None:
    """Write strict JSON to a temporary file in the same directory, fsync it, then move it in place.

    A reader sees the whole file or none, also when the writer is killed mid-way
    (at worst a hidden ``.NAME.PID.RANDOM.tmp`` file is left behind). The temporary file is
    created by :func:`create_new` (exclusive, never through a link, an unpredictable name), so a
    link planted in the directory is never written through. With
    ``overwrite=False`` the file is hard-linked into place, which fails atomically
    when ``path`` exists, so two writers can never replace each other's record.

    Raises:
        RecordExistsError: when ``overwrite`` is false and ``path`` exists.
        RecordUnwritable: when the file system refuses the write (read-only, the directory gone
            or replaced, a full disk); nothing is left at ``path``.
        ValueError: when ``payload`` holds a non-finite float (use :func:`strict` first).
    """
    path = Path(path)
    if not overwrite and path.exists():
        raise RecordExistsError(exists_message(path))
    text = json.dumps(payload, indent=2, allow_nan=False)
    tmp = path  # nothing created yet: _discard(path) below must not remove a file of someone else
    synced = False
    with signals_deferred():
        try:
            fd, tmp = create_new(path.parent, f".{path.name}.{os.getpid()}.")
            with open(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            synced = True
            _test_pause(tmp, path)
            if overwrite:
                os.replace(tmp, path)
            else:
                _link_no_clobber(tmp, path)
        except RecordExistsError:
            raise
        except OSError as exc:
            if tmp != path:
                _discard(tmp)
            raise RecordUnwritable(path, exc, kept=tmp if synced and tmp.exists() else None) from exc
        finally:
            if tmp != path:
                _discard(tmp)
        _fsync_dir(path.parent)


NAME_MAX = 255
"""Bytes in one file name on Linux's file systems (ext4, xfs, btrfs, tmpfs: ``pathconf``'s
``PC_NAME_MAX``). A temporary name is ``.NAME.`` + 8 random characters + ``.tmp``: for a legal name of
240 bytes or more it was over this, and the write failed (``File name too long``) for a file the user
may name."""


def fit_prefix(prefix: str, suffix: str, random_chars: int = 8) -> str:
    """``prefix``, its end cut (at a character, never inside one) so that ``prefix`` + ``random_chars``
    + ``suffix`` is at most :data:`NAME_MAX` bytes in the file system's encoding: the temporary file of
    a long legal name can be made. Unchanged when it fits (every usual name)."""
    room = NAME_MAX - random_chars - len(os.fsencode(suffix))
    if len(os.fsencode(prefix)) <= room:
        return prefix
    while prefix and len(os.fsencode(prefix)) > room:
        prefix = prefix[:-1]
    return prefix


def create_new(directory: Path, prefix: str, suffix: str = ".tmp") -> tuple[int, Path]:
    """Create a new, empty file in ``directory`` safely, for a folder that others may write to.

    The name is ``prefix`` + 8 random characters + ``suffix`` (unpredictable; the prefix shortened to
    fit :data:`NAME_MAX` bytes, :func:`fit_prefix`), and the file is
    created exclusively without following a link (``tempfile.mkstemp``: ``O_CREAT | O_EXCL |
    O_NOFOLLOW``), so a file or a symbolic link planted under any name is never written through.
    Its mode is what ``open(path, "w")`` would give (``0o666`` less the umask), not mkstemp's 0600.

    Returns:
        ``(fd, path)``: a descriptor open for reading and writing, which the caller closes.

    Raises:
        OSError: when the directory refuses the file (read-only, gone, full).
    """
    import tempfile

    fd, name = tempfile.mkstemp(prefix=fit_prefix(prefix, suffix), suffix=suffix, dir=directory)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    except OSError:
        pass  # a file system without modes (some FUSE mounts) keeps mkstemp's
    return fd, Path(name)


def replace_text(path: Path, text: str) -> None:
    """Put ``text`` at ``path`` as a new regular file: written to a file of an unpredictable name in
    the same folder (:func:`create_new`), then renamed over ``path``. Whatever was at ``path`` (a
    symbolic link, a FIFO, a file hard-linked elsewhere) is replaced, never opened or written
    through, and a reader sees the old file or the new one whole. Not synced (scratch files, Hydra's
    ``.hydra/*.yaml``: :func:`atomic_write_json` syncs a record).

    Raises:
        RecordUnwritable: when the folder refuses the file, or ``path`` is a folder; nothing is left
            behind.
    """
    path = Path(path)
    tmp = None
    try:
        fd, tmp = create_new(path.parent, f".{path.name}.")
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise RecordUnwritable(path, exc) from None
    finally:
        if tmp is not None:
            _discard(tmp)


def _umask() -> int:
    """This process's umask, read without changing it where Linux tells it (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _discard(tmp: Path) -> None:
    """Remove a temporary file if the file system lets us (a read-only one keeps it)."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


WRITE_PAUSE_ENV = "FLOPSWEEP_TEST_WRITE_PAUSE"
"""Test hook: seconds to pause between writing a ``metrics.json``'s temporary file and moving it
into place, after creating ``<tmp>.paused``, so that a test can signal a writer inside that
window (signals are deferred there: the pause ends, the record is written, then they arrive)."""


def _test_pause(tmp: Path, path: Path) -> None:
    seconds = os.environ.get(WRITE_PAUSE_ENV)
    if seconds and path.name == METRICS_FILE:
        import time

        Path(f"{tmp}.paused").touch()
        time.sleep(float(seconds))
        with contextlib.suppress(OSError):  # a test may have made the directory read-only meanwhile
            Path(f"{tmp}.paused").unlink(missing_ok=True)


def _link_no_clobber(tmp: Path, path: Path) -> None:
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise RecordExistsError(exists_message(path)) from None
    except OSError:  # a file system without hard links: check, then rename (a small race)
        if path.exists():
            raise RecordExistsError(exists_message(path)) from None
        os.replace(tmp, path)


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
