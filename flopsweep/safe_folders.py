"""A run's folders made safely: a job's folder (:func:`job_folder`), a folder of this run's own
(:func:`own_folder`) and a private one for others' code (:func:`private_folder`), none ever through a
link; :func:`foreign_link_refusal` is the refusal of a path through another user's link.

Torch-free. Each refusal is a :class:`flopsweep.files.RecordUnwritable`: one line naming the path and what
sits there, and its fix (another folder, :func:`flopsweep.free_folder.free_path`). Left
:mod:`flopsweep.files` (the writer) in session 42.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

from flopsweep.files import RecordUnwritable
from flopsweep.free_folder import free_path
from flopsweep.links import foreign_link
from flopsweep.safe_read import file_kind


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
