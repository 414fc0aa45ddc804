"""Where the analysis writes: never over a record it reads, never half a file.

:func:`check_not_a_record` refuses an output path (``--output``, ``--notebook``) that is, or
resolves to (through links, or as a hard link), one of the records being read: writing the
report there would destroy a measurement. :func:`write_atomic` writes a whole file or leaves the
previous one as it was: the bytes go to a temporary file created in the same folder with an
exclusive, non-following open and an unpredictable name (:func:`tempfile.mkstemp`), are synced,
and replace the target with :func:`os.replace`; a link planted at the target is replaced, its
target never written through. A full disk (ENOSPC) or any other refusal leaves the previous file
whole and no temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from analysis.discover import display_path

__all__ = ["OutputError", "check_not_a_record", "write_atomic"]


class OutputError(ValueError):
    """An output path that may not be written; the message names it and what to do."""


def _same_file(a: str | Path, b: str | Path) -> bool:
    """``a`` and ``b`` name one file: the same real path, or the same inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def check_not_a_record(output: str | Path, records: Iterable[str | Path], option: str) -> None:
    """Refuse ``output`` when it is, or resolves to, one of ``records``.

    Raises:
        OutputError: ``--output runs/a/metrics.json is the record runs/a/metrics.json being read;
            name another file``.
    """
    for record in records:
        if _same_file(output, record):
            raise OutputError(
                f"{option} {display_path(output)} is the record {display_path(record)} being read; "
                "writing there would destroy it: name another file"
            )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (module doc); the file gets the mode a new
    file would (0666 less the umask).

    Raises:
        OSError: when the folder or the file system refuses (its ``filename`` is ``path``); the
            previous file at ``path`` is kept as it was and the temporary file is removed.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, 0o666 & ~_umask())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
