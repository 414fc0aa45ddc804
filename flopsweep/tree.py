"""Walk a folder tree for records: iterative, bounded in depth, never following a link.

Torch-free. The one walk of the analysis (:mod:`analysis.discover`), ``predict.calibration``
(:mod:`flopsweep.forecast`), the sweep's summary (:mod:`flopsweep.callbacks`) and the Slurm
launcher's count of earlier records. Python 3.11's ``os.walk`` and ``Path.rglob`` recurse once per
level, so a 3,000-level folder chain planted in a sweep folder ended them in ``RecursionError``
and no record beside it was reported; this walk keeps its own stack, enters no folder more than
:data:`MAX_DEPTH` levels below the one it starts from, and names each folder it did not enter or
could not list, with the reason.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

log = logging.getLogger("flopsweep")

MAX_DEPTH = 32
"""Levels of folders below the searched one that a walk enters: a sweep's records lie one to three
levels down (``S/0/metrics.json``, ``S/0/batch_search/mbs4/metrics.json``), a folder of dated sweeps
adds two (``multirun/DATE/TIME/``); 32 leaves room for any real tree and stops a planted chain."""

DEEPER = (
    "folders below it not searched: nested more than {depth} levels below {root} (flopsweep's limit of "
    "a walk)"
)
"""The reason a walk names a folder whose sub-folders it did not enter (:data:`MAX_DEPTH`)."""
UNLISTED = "cannot list the directory: "
"""The start of the reason a walk names a folder it could not list."""
STOPPED = (
    "folders after it not searched: the walk of {root} stopped after {folders:,} folders (the limit of a "
    "walk). Fix: name the sweep's folder (its hydra.sweep.dir, e.g. multirun/smoke), not a folder above it"
)
"""The reason a walk bounded in folders (``max_folders``) names the folder it stopped at."""


def folder_skipped(why: str) -> bool:
    """True when ``why`` is a walk's reason for a folder (:data:`DEEPER`, :data:`UNLISTED`), not a
    file's: such a path is a folder not searched, never an unreadable record."""
    return why.startswith((DEEPER.split("{", 1)[0], UNLISTED, STOPPED.split("{", 1)[0]))


def _shown(path: str | Path) -> str:
    """``path`` as printable text (bytes that are not UTF-8 escaped)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def walk(
    root: str | Path,
    skipped: dict[str, str],
    *,
    max_depth: int = MAX_DEPTH,
    on_link: Callable[[Path], None] | None = None,
    max_folders: int | None = None,
) -> Iterator[tuple[Path, list[os.DirEntry]]]:
    """``(folder, entries)`` for ``root`` and every folder below it, parents first, in name order;
    ``entries`` sorted by name. ``root`` itself may be a link (the user named it); a directory link
    met below is not entered (``on_link`` is called with its path). A folder that cannot be listed
    (no permission, a name too long for the system) and a folder at ``max_depth`` whose
    sub-folders are not entered go into ``skipped``, printable path -> reason; the walk goes on.
    With ``max_folders``, it lists at most that many and names the next it would have listed in
    ``skipped`` (:data:`STOPPED`). Iterative: any depth of tree is safe."""
    stack: list[tuple[Path, int]] = [(Path(root), 0)]
    listed = 0
    while stack:
        folder, depth = stack.pop()
        if max_folders is not None and listed >= max_folders:
            skipped[_shown(folder)] = STOPPED.format(root=_shown(root), folders=listed)
            return
        listed += 1
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            skipped[_shown(folder)] = f"{UNLISTED}{exc.strerror or exc}"
            continue
        yield folder, entries
        below = []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_link = not is_dir and entry.is_symlink() and entry.is_dir()
            except OSError:
                continue
            if is_link and on_link is not None:
                on_link(Path(entry.path))
            if is_dir:
                below.append(Path(entry.path))
        if below and depth >= max_depth:
            skipped[_shown(folder)] = DEEPER.format(depth=max_depth, root=_shown(root))
            continue
        stack.extend((sub, depth + 1) for sub in reversed(below))


def find(
    root: str | Path,
    name: str,
    skipped: dict[str, str] | None = None,
    *,
    max_depth: int = MAX_DEPTH,
    limit: int | None = None,
    on_link: Callable[[Path], None] | None = None,
) -> list[Path]:
    """The paths named ``name`` under ``root`` (:func:`walk`), whatever they are (a regular file, a
    link, a FIFO, a directory: the caller decides), in walk order; at most ``limit`` of them. What
    the walk could not enter goes into ``skipped`` (logged as a warning when ``skipped`` is None).
    None found when ``root`` is not a folder (a sweep not started yet)."""
    if not os.path.isdir(root):
        return []
    own = skipped if skipped is not None else {}
    found: list[Path] = []
    for folder, entries in walk(root, own, max_depth=max_depth, on_link=on_link):
        found += [folder / e.name for e in entries if e.name == name]
        if limit is not None and len(found) >= limit:
            found = found[:limit]
            break
    if skipped is None:
        for path, why in own.items():
            log.warning("not searched for %s: %s: %s", name, path, why)
    return found


def unique_files(paths: list[Path]) -> tuple[list[Path], int]:
    """``(paths, duplicates)``: ``paths`` less each that names a file met already under another
    name (a hard link, or the same path twice: the same device and inode, by ``lstat``; a path that
    cannot be examined by its real path), in order; ``duplicates`` is how many were left out. So a
    file is read once, whatever number of names it has (the analysis' :func:`analysis.discover.discover`
    and ``predict.calibration``, :func:`flopsweep.calibration_files.calibration_records`)."""
    seen: set[object] = set()
    unique = []
    for path in paths:
        try:
            st = os.lstat(path)
            key: object = (st.st_dev, st.st_ino)
        except OSError:
            key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique, len(paths) - len(unique)
