"""A folder a refusal can name for ``choose another hydra.run.dir``: one beside the folder in the way that
does not exist yet, as an override to type (docs/usage.md, "Validation and messages"). Torch-free.

Refusals said ``Fix: choose another hydra.run.dir`` (or a new ``hydra.sweep.dir``) and named none: the user
had to invent one, and the one invented could be taken as well.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

MAX_TRIED = 100
"""The most names :func:`free_folder` tries (``X-2`` to ``X-101``) before it gives the last one."""

_PLAIN = re.compile(r"[\w./+@%-]+")
"""A path Hydra's grammar and a POSIX shell both read as it is (no space, quote, ``=``, ``,``, ``$``...)."""


def free_path(taken: str | os.PathLike[str]) -> Path:
    """The first of ``taken-2``, ``taken-3``, ... beside ``taken`` (``multirun/x`` -> ``multirun/x-2``) that
    nothing is at (no file, folder or link, :func:`os.path.lexists`); relative as ``taken`` is. A name
    taken by another run between this check and its start is refused again there (each run locks its
    folder: :mod:`flopsweep.locks`)."""
    base = Path(os.path.normpath(taken))
    stem = base.name if base.name not in ("", ".", "..") else "run"
    parent = base.parent if base.name not in ("", ".", "..") else base
    for n in range(2, 2 + MAX_TRIED):
        candidate = parent / f"{stem}-{n}"
        if not os.path.lexists(candidate):
            return candidate
    return parent / f"{stem}-{2 + MAX_TRIED}"


def free_folder(taken: str | os.PathLike[str], key: str = "hydra.run.dir") -> str:
    """``KEY=PATH`` of :func:`free_path`, as one types it on a POSIX command line: plain where the path needs
    no quote, else quoted for Hydra's grammar and the shell (``'hydra.run.dir="/tmp/a b-2"'``)."""
    return typed(key, free_path(taken))


def typed(key: str, path: str | os.PathLike[str]) -> str:
    """``KEY=PATH`` as one types it on a POSIX command line (plain, else quoted for Hydra and the shell)."""
    path = str(path)
    if _PLAIN.fullmatch(path):
        return f"{key}={path}"
    inner = "'" if '"' in path else '"'
    return shlex.quote(f"{key}={inner}{path}{inner}")


COMMAND: list[tuple[str, ...]] = []
"""The words of the flopsweep command this process runs (``run.py``'s ``sys.argv[1:]``, flag prefixes spelt
out), recorded by :func:`command_started` before its first check; empty in any other process (a test, the
analysis, a rank), whose command line is not flopsweep's."""


def command_started(argv: Sequence[str]) -> None:
    """Record ``argv`` as this process's flopsweep command (:data:`COMMAND`): ``run.py``, before Hydra starts,
    so that :func:`folder_key` reads the command's ``-m``, never another program's (``pytest -m slow``)."""
    COMMAND[:] = [tuple(argv)]


def folder_key(argv: Sequence[str] | None = None) -> str:
    """The key that moves a command's folder: ``hydra.sweep.dir`` in a sweep (``-m``, ``--multirun`` or a
    prefix of it, ``--multi``, as Hydra's parser reads it: :func:`flopsweep.flags.is_multirun`'s rule; no
    import of it here, below :mod:`flopsweep.files`), else ``hydra.run.dir``. ``argv``: the command's words
    (a caller outside a Hydra app: a test, the analysis); None: the running job's Hydra config (a sweep's
    pool task included), else the flopsweep command this process runs (:data:`COMMAND`), else
    ``hydra.run.dir``. Was (session 41): this process's ``sys.argv``, so a fix made under ``pytest -m slow``
    named ``hydra.sweep.dir``. A fix that named the other key was refused again when typed back
    (``hydra.sweep.dir=`` on a single run moves nothing)."""
    if argv is None:
        try:
            from hydra.core.hydra_config import HydraConfig
            from hydra.types import RunMode

            if HydraConfig.initialized():
                return "hydra.sweep.dir" if HydraConfig.get().mode == RunMode.MULTIRUN else "hydra.run.dir"
        except Exception:  # noqa: BLE001 - no Hydra config (a unit, a rank): the command decides
            pass
        argv = COMMAND[0] if COMMAND else ()
    multirun = any(a == "-m" or (a.startswith("--m") and "--multirun".startswith(a)) for a in argv)
    return "hydra.sweep.dir" if multirun else "hydra.run.dir"


def another(
    taken: str | os.PathLike[str],
    key: str = "hydra.run.dir",
    *,
    either: bool = False,
    argv: Sequence[str] | None = None,
) -> str:
    """``choose another hydra.run.dir, e.g. hydra.run.dir=multirun/x-2`` (:func:`free_folder`); ``either``:
    the folder may be a sweep's or a single run's (a lock's), and the key is the command's
    (:func:`folder_key` of ``argv``, None: this process's)."""
    if either:
        key = folder_key(argv)
    return f"choose another {key}, e.g. {free_folder(taken, key)}"


def writable_path(taken: str | os.PathLike[str]) -> Path:
    """A free folder (:func:`free_path`) where one can be made, for a ``taken`` that cannot be
    (``/tmp/a-file/run``: a file in the way; a read-only or vanished parent): named as ``taken`` is, beside
    the nearest folder above it where it can be made (tried: made and removed), else in the system's
    temporary folder (:func:`tempfile.gettempdir`). Absolute where ``taken`` is."""
    import tempfile

    base = Path(os.path.normpath(taken))
    stem = base.name if base.name not in ("", ".", "..") else "run"
    place = base.parent
    while not os.path.isdir(place) and place != place.parent:  # a file, or nothing, in the way
        place = place.parent
    found = free_path(place / stem)
    try:  # made and removed at once: os.access says yes to root even in /proc
        os.mkdir(found, 0o700)
        os.rmdir(found)
    except OSError:
        found = free_path(Path(tempfile.gettempdir()) / stem)
    return found


def another_writable(
    taken: str | os.PathLike[str],
    key: str = "hydra.run.dir",
    *,
    either: bool = False,
    argv: Sequence[str] | None = None,
) -> str:
    """:func:`another` for a folder that cannot be made or written (:func:`writable_path`): ``choose a
    folder you can write to, e.g. hydra.run.dir=/tmp/run-2``; ``either``: a sweep's or a single run's, the
    key the command's (:func:`folder_key` of ``argv``, None: this process's)."""
    path = writable_path(taken)
    if either:
        key = folder_key(argv)
    return f"choose a folder you can write to, e.g. {typed(key, path)}"
