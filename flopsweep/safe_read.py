"""The bounded reader of a regular file (:func:`read_regular`) and of a record (:func:`read_json`).

Torch-free, stdlib and :mod:`flopsweep.text` only. :func:`read_json` is the one reader of record files
(a regular file, not a link, at most :data:`MAX_RECORD_BYTES`, strict JSON, an object at the top); what it
refuses raises :class:`RecordError`, one phrase. :func:`read_regular` is the same read for any bounded file
(a plan's CSV, a ``config.json``, a source of the reference table): ``lstat`` first, then
``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``, at most ``limit + 1`` bytes. Left :mod:`flopsweep.files` (the
writer) in session 42.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from flopsweep.text import LongNumber, json_type, parse_int, reject_constant

MAX_RECORD_BYTES = 16 * 2**20
"""Records larger than this are not read (a real one is a few KiB)."""


class RecordError(ValueError):
    """A ``metrics.json`` that cannot be read as a flopsweep record; the message says why."""


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
