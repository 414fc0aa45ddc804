"""Safe files where a run's output goes: the atomic writer, the bounded reader, the probes.

Torch-free. Every file flopsweep writes beside records is created by :func:`create_new`
(exclusive, never through a link) and moved into place; :func:`atomic_write_json` writes a
``metrics.json`` whole or not at all (signals wait, :mod:`flopsweep.signals`);
:func:`read_json` is the one reader of record files (a regular file, not a link, at most
:data:`MAX_RECORD_BYTES`, strict JSON). A write the file system refuses raises
:class:`RecordUnwritable`, one line with the path, the OS error and, for a full disk, the free
space; :func:`check_writable` is the sweep's check between two jobs.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Any

from flopsweep.free_folder import free_path
from flopsweep.links import foreign_link
from flopsweep.record import METRICS_FILE, exists_message
from flopsweep.signals import signals_deferred
from flopsweep.text import LongNumber, format_bytes, json_type, parse_int, reject_constant

MAX_RECORD_BYTES = 16 * 2**20
"""Records larger than this are not read (a real one is a few KiB)."""


class RecordExistsError(FileExistsError):
    """Raised instead of writing over an existing ``metrics.json``."""


class JobFolderUnwritable(RecordExistsError):
    """A job refused before anything ran because its folder or ``.hydra/`` could not be made or written
    (:func:`job_folder`, :func:`flopsweep.hydrafiles.write_hydra_files`: a link, FIFO or file planted
    there, or the OS refused; a :class:`RecordUnwritable` turned into one line with its fix). A single
    run exits 1 for it (``run.py``) and 2 for every other :class:`RecordExistsError` (a record refused)."""


class RecordError(ValueError):
    """A ``metrics.json`` that cannot be read as a flopsweep record; the message says why."""


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


def foreign_link_refusal(path: str | os.PathLike[str], shown: str = "") -> RecordUnwritable | None:
    """The refusal of ``path`` for :func:`foreign_link`'s link, or None: ``line`` ``SHOWN: /tmp/x/link is a
    symbolic link of another user (uid 65534, nobody); never followed ...`` (``shown``: the path unless
    given), ``fix`` choose another folder or have the link removed."""
    if (found := foreign_link(path)) is None:
        return None
    link, uid = found
    owner = f"uid {uid}"
    with contextlib.suppress(ImportError, KeyError):
        import pwd

        owner += f", {pwd.getpwuid(uid).pw_name}"
    return RecordUnwritable.in_the_way(
        Path(path),
        f"{shown or path}: {link} is a symbolic link of another user ({owner}); never followed: what is "
        "written there would go where that user points it",
        f"choose another folder (one no other user's link leads through), or have {link} removed",
    )


def own_folder(path: Path, *, fresh: bool = False) -> Path:
    """``path`` as a real folder of this run: made when missing (mode 0700 when ``fresh``), kept when
    it is a folder already, its contents removed first when ``fresh``. A symbolic link (to a folder
    or not), a FIFO or any other file at ``path`` is never followed: with ``fresh`` (a scratch
    folder, whose name is the run's own) it is removed and the folder made in its place; else it
    is refused.

    Raises:
        RecordUnwritable: one line naming ``path`` and what it is, or the OS error.
    """
    path = Path(path)
    if problem := foreign_link_refusal(path.parent):  # the last part: refused (``fresh``: removed) below
        raise problem
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise RecordUnwritable(path, exc) from None
    try:
        if st is not None and not stat.S_ISDIR(st.st_mode):
            if not fresh:
                raise RecordUnwritable.in_the_way(
                    path,
                    f"{path} is a {file_kind(st.st_mode)}, not a folder flopsweep made; it is never "
                    "followed or written through",
                    f"remove {path}, or choose another folder, e.g. {free_path(path)}",
                )
            os.unlink(path)  # the link or file itself, never what it points to
        elif st is not None and fresh:
            shutil.rmtree(path)  # a real folder: rmtree never follows the links inside
        if st is None or fresh:
            path.mkdir(mode=0o700 if fresh else 0o777)
    except RecordUnwritable:
        raise
    except OSError as exc:
        raise RecordUnwritable(path, exc) from None
    return path


def job_folder(path: Path) -> Path:
    """A job's folder (``hydra.run.dir``, ``hydra.sweep.dir/N``) as a real folder: its parents made
    when missing, then :func:`own_folder` (made when missing, kept when a folder). A symbolic link
    planted at its name (to another user's folder, or dangling), a FIFO or a file is refused, never
    followed: the job's record, log and Hydra files would go where the link leads.

    Raises:
        RecordUnwritable: one line naming ``path`` and what it is, or the OS error.
    """
    path = Path(path)
    if problem := foreign_link_refusal(path):  # before a parent is made through it
        raise problem
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecordUnwritable(path.parent, exc) from None
    return own_folder(path)


def private_folder(path: Path) -> Path:
    """``path`` as a folder no other user can write to, for files written by others' code with plain
    opens (submitit's pickles and logs: a pickle planted there would run as this user's job). Made
    when missing (its parents as ``mkdir -p`` does) with mode 0700, exclusively (``mkdir`` never
    follows a link); kept when it is a real folder of this user that holds only this user's regular
    files and folders (two levels: :func:`_planted`), its group and other write bits cleared
    (``chmod``).

    Raises:
        RecordUnwritable: one line when ``path`` is a symbolic link, a FIFO or a file (never followed),
            a folder of another user, holds a link, a FIFO or another user's file, or cannot be made.
    """
    path = Path(path)
    if problem := foreign_link_refusal(path):
        raise problem
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            if planted := _planted(path):
                raise RecordUnwritable.in_the_way(
                    planted,
                    f"{planted} is {_what(os.lstat(planted))} in {path}, which must hold only this "
                    "user's files and folders; it is never followed or written through",
                    f"remove {planted} (or {path}), or choose another folder, e.g. {free_path(path)}",
                )
            if st.st_mode & 0o022:
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022, follow_symlinks=False)
            return path
    except RecordUnwritable:
        raise
    except OSError as exc:
        raise RecordUnwritable(path, exc) from None
    raise RecordUnwritable.in_the_way(
        path,
        f"{path} is {_what(st)}, not a private folder of this user; it is never followed or written through",
        f"remove {path}, or choose another folder, e.g. {free_path(path)}",
    )


MAX_PRIVATE_ENTRIES = 100_000
"""The most entries :func:`private_folder` looks at in a folder it keeps (submitit writes about five
per job)."""


def _what(st: os.stat_result) -> str:
    """``a symbolic link``, ``a FIFO``, ``a folder of another user``, ``a file of another user``."""
    kind = file_kind(st.st_mode)
    if kind in ("directory", "regular file") and st.st_uid != os.geteuid():
        return f"a {'folder' if kind == 'directory' else 'file'} of another user"
    return f"a {kind}"


def _planted(folder: Path) -> Path | None:
    """The first entry of ``folder`` or of its folders (two levels, at most
    :data:`MAX_PRIVATE_ENTRIES`, links never followed) that is not a regular file or folder of this
    user (a link, a FIFO, another user's file), else None."""
    me, seen, pending = os.geteuid(), 0, [(folder, 1)]
    while pending:
        where, depth = pending.pop()
        with os.scandir(where) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_PRIVATE_ENTRIES:
                    return None
                st = entry.stat(follow_symlinks=False)
                if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) or st.st_uid != me:
                    return Path(entry.path)
                if stat.S_ISDIR(st.st_mode) and depth < 2:
                    pending.append((Path(entry.path), depth + 1))
    return None


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


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words: ``regular file``, ``symbolic link``, ``FIFO``, ..."""
    kinds = (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    )
    return next((name for test, name in kinds if test(mode)), "special file")


def not_a_record(path: Path) -> str | None:
    """Why ``path`` cannot be a record without opening it (``lstat``: links are not followed), or
    None for a regular file: ``a symbolic link (not followed: a record is a regular file)``,
    ``a FIFO, not a regular file``, ... Raises OSError when it cannot be examined."""
    kind = file_kind(os.lstat(path).st_mode)
    if kind == "regular file":
        return None
    if kind == "symbolic link":
        return "a symbolic link (not followed: a record is a regular file)"
    return f"a {kind}, not a regular file"


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit``, read without following a link
    or blocking: ``lstat`` first (a FIFO or device is never opened), then ``open`` with
    ``O_NOFOLLOW | O_NONBLOCK``, then ``fstat`` of what was opened (a swap between the two
    calls is caught), then at most ``limit + 1`` bytes.

    Raises:
        RecordError: for a link, a FIFO, a device, a directory, a file over ``limit`` bytes or
            an OS error, one phrase naming it.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        if why := not_a_record(path):
            raise RecordError(why)
        fd = os.open(path, flags)
    except OSError as exc:
        raise RecordError(f"cannot read the file: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RecordError(f"a {file_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise RecordError(f"{st.st_size} bytes is over the {limit} byte limit of a record")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(limit + 1 - size, 1 << 20))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise RecordError(f"cannot read the file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise RecordError(f"over the {limit} byte limit of a record (it grew while read)")
    return b"".join(chunks)


def json_problem(text: str, exc: json.JSONDecodeError) -> str:
    """Why ``text`` is not a record's JSON, as a phrase: a byte-order mark first (an editor's: ``Unexpected
    UTF-8 BOM (decode using utf-8-sig)`` was called truncated), more after the object (``Extra data``: two
    records in one file), an error at the end or a text that does not end in ``}`` (``invalid JSON
    (truncated?)``: a write cut short), else where it is (``invalid JSON: ...``, a hand edit's ``,,``); the
    parser's own words follow, at most 200 characters."""
    said = str(exc)[:200]
    if text.startswith("\ufeff"):
        return f"starts with a byte-order mark (U+FEFF, as some editors save): save it without one ({said})"
    if exc.msg == "Extra data":
        return f"more text after its JSON object (two records in one file, or text appended?): {said}"
    if exc.pos >= len(text.rstrip()) or not text.rstrip().endswith("}"):  # a record ends with its "}"
        return f"invalid JSON (truncated?): {said}"
    return f"invalid JSON: {said}"


def read_json(path: Path) -> dict[str, Any]:
    """Parse one ``metrics.json`` safely: a regular file, not a link, size-capped, strict, an
    object at the top.

    This is the one reader of record files (the job's resume check, the callbacks and
    the analysis use it). Links are never followed and nothing but a regular file is opened
    (:func:`read_regular`): a record is a regular file at its own path. It does not upgrade
    old schema versions; the analysis does (:func:`analysis.schema.read_record`).

    Raises:
        RecordError: for a file that is a link, a FIFO, a device or a directory, unreadable,
            over :data:`MAX_RECORD_BYTES`, empty, not UTF-8, not JSON, nested too deep, or
            not an object.
    """
    data = read_regular(Path(path), MAX_RECORD_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        utf16 = (
            " (UTF-16, as some editors save: save it as UTF-8)"
            if data[:2] in (b"\xff\xfe", b"\xfe\xff")
            else ""
        )
        raise RecordError(f"cannot read the file: {exc}{utf16}") from None
    if not text.strip():
        raise RecordError("empty file")
    try:
        record = json.loads(text, parse_constant=reject_constant, parse_int=parse_int)
    except LongNumber as exc:
        raise RecordError(str(exc)) from None
    except RecursionError:
        raise RecordError("JSON nested too deep") from None
    except json.JSONDecodeError as exc:
        raise RecordError(json_problem(text, exc)) from None
    except ValueError as exc:  # NaN/Infinity (not strict JSON), int() of a 5,000-digit number
        raise RecordError(f"not strict JSON: {str(exc)[:200]}") from None
    if not isinstance(record, dict):
        raise RecordError(f"top level is a JSON {json_type(record)}, not an object")
    return record
