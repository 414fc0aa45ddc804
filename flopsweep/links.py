"""Symbolic links another user could have planted on an output folder's path (:func:`foreign_link`).

Torch-free, standard library only: one ``os.lstat`` per path component, no folder listed. The refusal
built from it is :func:`flopsweep.files.foreign_link_refusal`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def foreign_link(path: str | os.PathLike[str]) -> tuple[Path, int] | None:
    """The first symbolic link on ``path`` another user could have planted (a shared ``/tmp``) and its
    owner's uid: one owned (``os.lstat``'s ``st_uid``, the link's own) by neither this user (effective
    uid) nor root; else None. Each existing component (``~`` expanded, a relative path read from
    ``os.getcwd()``, ``..`` not folded away) gets one ``os.lstat``, from the root down as the kernel
    resolves it (a missing one is a folder to be made, whose ``..`` leads back): at most one call per
    component, no folder listed, the walk stopped at a component not searchable. Below this user's or
    root's link (``outputs -> /scratch/me/outputs``, macOS's ``/tmp``) it goes on; that link's target is
    its owner's choice.

    The rule (docs/reliability-3.md): another user's link anywhere on an output folder's path is
    refused (:func:`flopsweep.files.foreign_link_refusal`); this user's or root's in the middle is
    followed (the usual HPC scratch layout); a link as the last part is refused whoever owns it
    (:func:`flopsweep.files.own_folder`).
    """
    text = os.path.expanduser(os.fspath(path))
    try:
        full = Path(text if os.path.isabs(text) else os.path.join(os.getcwd(), text))
    except OSError:  # the current folder was removed: nothing relative to it can be made
        return None
    here, trusted, unmade = full.anchor, (os.geteuid(), 0), 0
    for part in full.parts[1:]:
        here = os.path.dirname(here) if part == ".." and unmade else os.path.join(here, part)
        unmade += (-1 if part == ".." else 1) if unmade else 0  # folders still to make: ``..`` undoes one
        if unmade:
            continue
        try:
            st = os.lstat(here)
        except FileNotFoundError:  # made as a real folder, whose ``..`` leads back here
            unmade = 1
        except (OSError, ValueError):  # under a file, not searchable, a NUL: nothing below is reached
            return None
        else:
            if stat.S_ISLNK(st.st_mode) and st.st_uid not in trusted:
                return Path(here), st.st_uid
    return None
