"""Symbolic links another user could have planted on an output folder's path (:func:`foreign_link`).

Torch-free, standard library only: one ``os.lstat`` per path component walked (a trusted link's target
walked too), no folder listed. The refusal built from it is
:func:`flopsweep.safe_folders.foreign_link_refusal`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_LINK_HOPS = 40
"""At most this many links are followed on one path (Linux's ``MAXSYMLINKS``: beyond it the kernel
answers ``ELOOP``, so nothing below is reached or made)."""


def foreign_link(path: str | os.PathLike[str]) -> tuple[Path, int] | None:
    """The first symbolic link on ``path`` another user could have planted (a shared ``/tmp``) and its
    owner's uid: one owned (``os.lstat``'s ``st_uid``, the link's own) by neither this user (effective
    uid) nor root; else None. The path is walked as the kernel resolves it (``~`` expanded, a relative
    path read from ``os.getcwd()``, ``..`` taken where it stands, never folded away first): each existing
    component gets one ``os.lstat``, from the root down; a missing one is a folder to be made, whose
    ``..`` leads back. A link of this user's or root's (``outputs -> /scratch/me/outputs``, macOS's
    ``/tmp``) is followed, its target (``os.readlink``, a relative one read from the link's folder)
    walked the same way before the rest of the path, so another user's link it leads through is found
    (``own -> /tmp/x/theirs/sub``). The link returned is named by its real place (the folders above it
    resolved, as the kernel reaches it), not by the path as written.

    Bounded: at most one ``os.lstat`` per component walked, no folder listed, at most
    :data:`MAX_LINK_HOPS` links followed. A path that needs more (a loop: ``a -> b -> a``) is
    unreachable, as the kernel answers ``ELOOP`` and makes nothing below it: None, as for a component
    that cannot be searched (under a file, no permission, a NUL); making it then fails with the OS's
    error. None too when the current folder was removed and ``path`` is relative.

    The rule (docs/architecture.md): another user's link anywhere on an output folder's path, or on the
    target of a link it passes through, is refused (:func:`flopsweep.safe_folders.foreign_link_refusal`); this
    user's or root's in the middle is followed (the usual HPC scratch layout); a link as the last part
    is refused whoever owns it (:func:`flopsweep.safe_folders.own_folder`).
    """
    text = os.path.expanduser(os.fspath(path))
    try:
        full = Path(text if os.path.isabs(text) else os.path.join(os.getcwd(), text))
    except OSError:  # the current folder was removed: nothing relative to it can be made
        return None
    trusted, hops, unmade = (os.geteuid(), 0), 0, 0
    here = Path(full.anchor)  # where the walk stands: no link in it, so ``..`` is its parent
    todo = list(reversed(full.parts[1:]))  # the components still to walk, the next one last
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            here = here.parent  # a real folder's (or one to be made's) parent: the kernel's ``..``
            unmade = max(unmade - 1, 0)
            continue
        here = here / part
        if unmade:  # below a folder still to make: made as a real folder, nothing to look at
            unmade += 1
            continue
        try:
            st = os.lstat(here)
        except FileNotFoundError:  # made as a real folder, whose ``..`` leads back here
            unmade = 1
            continue
        except (OSError, ValueError):  # under a file, not searchable, a NUL: nothing below is reached
            return None
        if not stat.S_ISLNK(st.st_mode):
            continue
        if st.st_uid not in trusted:
            return here, st.st_uid
        hops += 1
        try:
            target = os.readlink(here)
        except OSError:  # gone or replaced since the lstat: nothing to follow
            return None
        if hops > MAX_LINK_HOPS:  # a loop, or a chain the kernel refuses (ELOOP): nothing is reached
            return None
        here = here.parent  # a relative target is read from the link's folder
        target_path = Path(target)
        if target_path.is_absolute():
            here = Path(target_path.anchor)
        todo.extend(reversed(target_path.parts[1:] if target_path.is_absolute() else target_path.parts))
    return None
