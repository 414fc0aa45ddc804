"""Where the analysis writes: never over a record, never half a file.

No output replaces a record, whether it is read or not (:func:`check_output`, for ``--output``,
``--notebook`` and each PNG of ``--plot``, once the records are found, before anything is written
or a kernel started; :func:`write_atomic` and the notebook's writer check again just before the
rename): refused is a path that is, or resolves to
(through links, or as a hard link), one of the records being read; a path named as a record is
(``metrics.json``, or a record set aside by ``resume=true``, ``metrics.<status>-<id>.json``; in any
case), itself or where its links lead; and a path whose present file, or the file its links lead
to, is a flopsweep record under any name (a JSON object with a ``status`` and a ``run``,
``config`` or ``metrics``: a record renamed or hard-linked) or cannot be read to tell. Nor does an
output replace another file a sweep or run wrote in its folders (:func:`run_file_problem`):
Hydra's ``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml`` (anything in a ``.hydra``,
``.flopsweep`` or ``.submitit`` folder), a lock file (``*.flopsweep-lock``), a sweep's
``multirun.yaml``, a run folder's job log (``*.log``) and ``plan.csv``, and its profile traces
(``profile/``), by name (in any case) or where links lead. Writing
beside a record (``RUN/report.md``) is allowed. :func:`write_atomic` writes a whole file or leaves the
previous one as it was: the bytes go to a temporary file created in the same folder with an
exclusive, non-following open and an unpredictable name (:func:`tempfile.mkstemp`), are synced,
and replace the target with :func:`os.replace`; a link planted at the target is replaced, its
target never written through. A full disk (ENOSPC) or any other refusal leaves the previous file
whole and no temporary file behind.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from analysis.discover import RECORD_NAME, display_path
from flopsweep.files import NAME_MAX, fit_prefix
from flopsweep.safe_folders import foreign_link_refusal
from flopsweep.safe_read import RecordError, read_json

__all__ = [
    "OutputError",
    "RECORD_NAME",
    "check_not_a_record",
    "check_output",
    "exists_problem",
    "record_problem",
    "run_file_problem",
    "write_atomic",
]


FIX = (
    "no output of the analysis replaces a record or a run's own file: name a file outside every run's "
    ".hydra, .submitit and .flopsweep folders, not a record, log or multirun.yaml (e.g. report.md)"
)
"""The fix of a refused output file (``--output``; :func:`fix_for` names the others' examples)."""
FOLDER_FIX = (
    "no output of the analysis replaces a record or a run's own file: name another folder (e.g. plots), "
    "outside every run's .hydra, .submitit and .flopsweep folders"
)
"""The fix of a refused ``--plot DIR`` (a folder the PNGs go into)."""
EXAMPLES = {"--notebook": "report.ipynb", "--output": "report.md"}
"""A file name that fits each file option, for its fix."""


def fix_for(option: str, *, folder: bool = False, example: str | None = None) -> str:
    """The fix a refusal of ``option`` names: :data:`FOLDER_FIX` for a folder option, else
    :data:`FIX` with ``example``, or the example that fits the option (``report.ipynb`` for
    ``--notebook``; ``--output``'s of its ``--format``: ``analysis.cli_paths.report_name``)."""
    if folder:
        return FOLDER_FIX
    return FIX.replace("(e.g. report.md)", f"(e.g. {example or EXAMPLES.get(option, 'report.md')})")


RUN_FOLDERS = (".hydra", ".flopsweep", ".submitit")
"""Folders of a run or sweep whose every file it wrote: Hydra's files (``config.yaml``,
``hydra.yaml``, ``overrides.yaml``: :mod:`flopsweep.hydrafiles`), the ranks' scratch files and
submitit's pickles and logs (``.submitit/<job id>/``: the folder above counts too)."""
TRACE_DIR = "profile"
"""A run's folder of profile traces (``flopsweep.metrics.TRACE_DIR``; not imported: the analysis
imports only torch-free modules of flopsweep)."""
LOCK_SUFFIX = ".flopsweep-lock"
"""The name ending of a sweep's or run's lock file, beside its folder (:mod:`flopsweep.callbacks`)."""
SWEEP_FILE = "multirun.yaml"
"""The sweep's composed config, in its folder (:func:`flopsweep.hydrafiles.write_multirun`)."""
RUN_FOLDER_MARKS = (*RUN_FOLDERS, "metrics.json", SWEEP_FILE)
"""What marks a folder as a run's or a sweep's: its record, its Hydra folder, its scratch folder or
its ``multirun.yaml``."""
RUN_FOLDER_FILES = (".log", "plan.csv")
"""Name endings of the files a run or sweep writes in such a folder: the job log
(``<job name>.log``) and ``plan=true``'s ``plan.csv``."""


class OutputError(ValueError):
    """An output path that may not be written; the message names it and what to do."""


def _same_file(a: str | Path, b: str | Path) -> bool:
    """``a`` and ``b`` name one file: the same real path, or the same inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def check_not_a_record(
    output: str | Path,
    records: Iterable[str | Path],
    option: str,
    *,
    folder: bool = False,
    example: str | None = None,
) -> None:
    """Refuse ``output`` when it is, or resolves to, one of ``records`` (``folder``: as
    :func:`check_output`).

    Raises:
        OutputError: ``--output runs/a/metrics.json is the record runs/a/metrics.json being read;
            name another file``.
    """
    for record in records:
        if _same_file(output, record):
            raise OutputError(
                f"{option} {display_path(output)} is the record {display_path(record)} being read; "
                f"writing there would destroy it: {fix_for(option, folder=folder, example=example)}"
            )


def _holds_record(path: Path) -> str | None:
    """What ``path`` holds when it is a record (``a flopsweep record (status ok)``), or that it
    cannot be read to tell; None for a missing file, another kind of file, or another content."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if not os.access(path, os.R_OK):
        return "is a file that cannot be read to tell whether it is a record"
    try:
        record = read_json(path)
    except RecordError:
        return None  # not JSON, over the records' size cap: no reader takes it for a record
    if "status" in record and any(isinstance(record.get(k), dict) for k in ("run", "config", "metrics")):
        return f"holds a flopsweep record (status {str(record['status'])[:20]})"
    return None


def _run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a run's or a sweep's (:data:`RUN_FOLDER_MARKS`)."""
    return any(os.path.lexists(folder / mark) for mark in RUN_FOLDER_MARKS)


def run_file_problem(place: Path) -> str | None:
    """What file of a run or sweep ``place`` is (module doc; names compared in any case), as a
    phrase (``is a file of the run's .hydra folder``), or None."""
    name, folder = place.name.casefold(), place.parent
    for above in place.parents:  # at any depth: .hydra/sub/x, .submitit/<job id>/sub/x
        if above.name.casefold() in RUN_FOLDERS:
            inside = "" if above == folder else f", inside {display_path(above)}"
            return f"is a file of a run's {above.name} folder ({place.name}{inside})"
    if name.endswith(LOCK_SUFFIX):
        return "is the lock file of a sweep or run"
    if name == SWEEP_FILE:
        return f"is a sweep's {SWEEP_FILE}"
    if name.endswith(RUN_FOLDER_FILES) and _run_folder(folder):
        return f"is a file a run wrote in its folder ({place.name})"
    if folder.name == TRACE_DIR and _run_folder(folder.parent):
        return f"is a profile trace of a run ({place.name})"
    return None


STREAM = re.compile(r"/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd/\d+|/dev/fd/\d+")
"""An open stream of a process, which a link may name (``/dev/stdout`` -> ``/proc/self/fd/1``)."""


def stream_link(path: str | Path) -> str | None:
    """The ``/proc/.../fd/N`` (or ``/dev/fd/N``) that ``path`` is, or that its chain of links passes
    through (``/dev/stdout`` -> ``/proc/self/fd/1``), else None: a stream of this process, whatever it
    leads to (a pipe, a terminal, or the file ``> out.txt`` opened), which no output may replace. At
    most 40 links are read (the system's own limit), none followed into a folder."""
    text = os.path.abspath(os.fspath(path))
    for _ in range(40):
        if STREAM.fullmatch(text):
            return text
        try:
            target = os.readlink(text)
        except OSError:
            return None
        text = os.path.normpath(os.path.join(os.path.dirname(text), target))
    return None


def record_problem(path: str | Path) -> str | None:
    """Why writing ``path`` would replace a record or another file of a run (module doc), or anything
    but a regular file or a link to one (``--output /dev/null`` once renamed a file over the device,
    ``/dev/stdout`` over its link to a pipe), or a link to a stream (:func:`stream_link`: ``/dev/stdout``
    with ``> out.txt``, a file there, was replaced by the output under ``--force``, as root, and
    ``out.txt`` left empty), as a phrase, or None. A link to a file, or a dangling one, is replaced,
    never written through."""
    path = Path(path)
    if stream := stream_link(path):
        leads = "is" if stream == os.path.abspath(path) else "leads to"
        return f"{leads} {display_path(stream)}, an open stream of this command, not a file to replace"
    for follow in (False, True):  # the path itself, then what a link there leads to (if anything)
        with contextlib.suppress(OSError):
            mode = os.stat(path, follow_symlinks=follow).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                kind = "a directory" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
                where = " (through a link)" if follow else ""
                return f"is {kind}{where}, not a regular file (an output replaces only a file or a link)"
    places = list(dict.fromkeys([path, Path(os.path.realpath(path))]))
    for place in places:
        through = "" if place == path else f" (through links, {display_path(place)})"
        if RECORD_NAME.fullmatch(place.name):
            return f"is named as a run's record is ({place.name}){through}"
        if why := run_file_problem(place):
            return f"{why}{through}"
    for place in places:
        if why := _holds_record(place):
            return (
                why
                if place == path
                else f"resolves to {display_path(place)}, which {why.removeprefix('is ')}"
            )
    return None


def check_output(
    output: str | Path,
    records: Iterable[str | Path],
    option: str,
    *,
    folder: bool = False,
    example: str | None = None,
) -> None:
    """Refuse ``output`` when writing it would replace a record: one of ``records`` (being read,
    :func:`check_not_a_record`) or any other (:func:`record_problem`), or when its path goes through
    another user's symbolic link (:func:`flopsweep.links.foreign_link`). ``folder``: ``output`` is a
    file the option writes into the folder it names (``--plot DIR``), so the fix names a folder;
    ``example``: the file the fix names (:func:`fix_for`).

    Raises:
        OutputError: ``--output B/metrics.json is named as a run's record is (metrics.json): no
            output of the analysis replaces a record: name another file (e.g. report.md)``.
    """
    check_not_a_record(output, records, option, folder=folder, example=example)
    if foreign := foreign_link_refusal(output, f"{option} {display_path(output)}"):
        raise OutputError(f"{foreign.line}. Fix: {foreign.fix}")
    if why := record_problem(output):
        if not folder and (fix := _not_a_file_fix(output, option, example)):
            raise OutputError(f"{option} {display_path(output)} {why}. {fix}")
        raise OutputError(
            f"{option} {display_path(output)} {why}: {fix_for(option, folder=folder, example=example)}"
        )


def _not_a_file_fix(output: str | Path, option: str, example: str | None) -> str | None:
    """The fix of an ``--output`` that is a folder or a device, FIFO or socket (a link to one too), or None
    for any other path: a file in that folder (``--output out``: ``Fix: --output out/report.md``, as
    ``out/`` gets), or standard output (``--output /dev/stdout``: the generic fix named a file outside
    every run's folders, which the user never meant)."""
    if option != "--output":
        return None
    try:
        mode = os.stat(output).st_mode
    except OSError:
        return None
    name = example or EXAMPLES[option]
    if stat.S_ISDIR(mode):
        return f"Fix: {option} {display_path(os.path.join(output, name))}"
    if not stat.S_ISREG(mode) or stream_link(output):
        return f"Fix: {option} - (standard output; > /dev/null drops it), or name a regular file, e.g. {name}"
    return None


def check_folder(output: Path, option: str, example: str = "results.ipynb", *, folder: bool = False) -> None:
    """Refuse ``output`` when its folder cannot take a file, before any work (``--notebook`` executes
    every cell first: a folder under ``/proc``, or a file where a folder should be, failed only then,
    naming the temporary file or ``File exists``; ``--output afile/x.csv`` said ``cannot write afile:
    File exists``). The folder is made if missing, as the write would make it; a file is created
    there and removed (exclusively: :func:`flopsweep.files.create_new`). ``example`` is the fix's
    file name. ``folder``: ``output`` is the folder itself (``--plot DIR``, which takes the PNGs). A file
    name over :data:`flopsweep.files.NAME_MAX` bytes is refused here too (it failed at the write, exit 1,
    after the work: a notebook's every cell).

    Raises:
        OutputError: one line naming the option, the path, why and the fix (exit 2: the command
            line is refused before any work, as every output option's is).
    """
    from analysis.cli_paths import plot_folder_problem
    from flopsweep.files import create_new

    where = output if folder else output.parent
    fix = (
        "Fix: give a folder you can write for the PNGs (made if missing)"
        if folder
        else f"Fix: name a file in a folder you can write, e.g. {example}"
    )
    its = "" if folder else f"its folder {display_path(where)} "
    if not folder and (size := len(os.fsencode(output.name))) > NAME_MAX:  # failed only at the write, exit 1
        raise OutputError(
            f"{option} {display_path(output)}: its name is {size:,} bytes, over the {NAME_MAX} bytes a file "
            f"name may have (NAME_MAX). Fix: name a shorter file, e.g. {example}"
        )
    if why := plot_folder_problem(where):  # a file where the folder, or one above it, should be
        shown = f"{its or 'it '}is {why}" if why.startswith("a ") else why
        raise OutputError(f"{option} {display_path(output)}: {shown}. {fix}")
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, probe = create_new(where, f".{output.name}.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(
            f"{option} {display_path(output)}: {its or 'it '}cannot take a file ({exc.strerror or exc}). "
            f"{fix}"
        ) from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def exists_problem(output: Path, option: str = "--output") -> str | None:
    """The one-line refusal of ``output`` when something is at its name already (a file, a link, even a
    dangling one; ``lstat``, never followed) and ``--force`` was not given: the analysis never replaces a
    file unasked (it had, in silence). Else None."""
    if not os.path.lexists(output):
        return None
    shown = display_path(output)
    return (
        f"{option} {shown}: a file is already there; the analysis replaces a file only when asked. Fix: add "
        f"--force to replace it, or name a new file (e.g. {output.with_name('new-' + output.name).name})"
    )


def write_atomic(path: str | Path, data: bytes, *, overwrite: bool = True) -> None:
    """Write ``data`` to ``path`` whole or not at all (module doc); the file gets the mode a new
    file would (0666 less the umask). Without ``overwrite`` (``--output`` without ``--force``), the
    whole temporary file is hard-linked into place (:func:`os.link`: fails when anything is at
    ``path``, a link never followed), so nothing there, made since the check or before, is replaced.

    Raises:
        OutputError: when ``path`` is, or has become, a record (:func:`record_problem`), or without
            ``overwrite`` when anything is at ``path`` (:func:`exists_problem`); nothing is written.
        OSError: when the folder or the file system refuses (its ``filename`` is ``path``); the
            previous file at ``path`` is kept as it was and the temporary file is removed.
    """
    path = Path(path)
    if why := record_problem(path):
        raise OutputError(f"{display_path(path)} {why}: {FIX}")
    try:
        fd, tmp = tempfile.mkstemp(
            dir=path.parent, prefix=fit_prefix(f".{path.name}.", ".tmp"), suffix=".tmp"
        )
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
        if why := record_problem(path):  # a record put there meanwhile is not replaced either
            raise OutputError(f"{display_path(path)} {why}: {FIX}")
        if overwrite:
            os.replace(tmp, path)
        else:
            _link_new(Path(tmp), path)
    except OutputError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def _link_new(tmp: Path, path: Path) -> None:
    """``tmp`` hard-linked at ``path`` (exclusive: ``link`` refuses any name already there, never following
    it), then its temporary name removed; on a file system without hard links, a check, then a rename."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise OutputError(exists_problem(path)) from None
    except OSError:
        if os.path.lexists(path):
            raise OutputError(exists_problem(path)) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


class StdoutError(OSError):
    """The table could not be written to stdout (``> /dev/full``: ENOSPC; a closed pipe: EPIPE)."""


def write_error_line(exc: OSError, args: argparse.Namespace) -> str:
    """:func:`analysis.__main__.main`'s one line (exit 1) for a write the system refused after the checks:
    the path (or stdout), the system's reason, the fix. ``> /dev/full`` had said "cannot write None"."""
    if isinstance(exc, StdoutError):
        return (
            f"cannot write the table to stdout: {exc.strerror or exc}. Fix: redirect stdout where there is "
            "space, or write a file with --output FILE"
        )
    where = exc.filename or args.output or args.plot
    shown = display_path(where) if isinstance(where, (str, bytes, Path)) else where
    kept = " (the previous file is kept whole)" if args.output and os.path.lexists(args.output) else ""
    return (
        f"cannot write {shown}: {exc.strerror or exc}{kept}. Fix: name a file "
        "in a folder you can write, with space left (--output), or another folder (--plot)"
    )


def write_stdout(text: str) -> None:
    """``text`` to ``sys.stdout``, escaping what its encoding cannot hold, then flushed (a full disk's
    ENOSPC here, not at exit: a traceback, exit 120); a reader that went away (``| head``) drops the rest
    quietly (:class:`flopsweep.streams.ClosedPipeGuard`).

    Raises:
        StdoutError: when stdout refuses the write (``> /dev/full``).
    """
    import sys

    from flopsweep.streams import guarded

    stdout = guarded(sys.stdout)
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))
        stdout.flush()
    except OSError as exc:
        raise StdoutError(exc.errno, exc.strerror) from exc


def write_escaped(stream, text: str) -> None:
    """``text`` to ``stream``, escaping what its encoding cannot hold (never a UnicodeEncodeError)."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
