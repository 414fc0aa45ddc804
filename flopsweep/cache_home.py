"""The folders a run keeps caches in under the user's home, and the one check that they can be made
(session 42). Torch-free.

- DeepSpeed's JIT-built ops: ``TORCH_EXTENSIONS_DIR``, else ``$XDG_CACHE_HOME/flopsweep/torch_extensions``
  (``~/.cache``: :func:`flopsweep.deepspeed_backend.extensions_dir`), made by every rank of a
  ``backend=zero*`` run before its first step;
- the compute probes of a GPU run: ``FLOPSWEEP_PROBE_CACHE``, else ``$XDG_CACHE_HOME/flopsweep/probes``
  (:func:`flopsweep.compute_probe.cache_folder`): one that cannot be written is skipped (the probe is
  measured again), so it refuses nothing;
- Triton's kernels of ``compile=true`` on CUDA: ``TRITON_CACHE_DIR``, else ``$TRITON_HOME/.triton/cache``
  (``~/.triton/cache``). Inductor's own cache is under the temporary folder
  (``/tmp/torchinductor_<user>``) and Hydra keeps none: neither is under the home.

Was: ``HOME=/proc/nohome flopsweep model=llama-tiny device=cpu nproc_per_node=2 backend=zero1`` launched
its workers, then ``error in init`` / ``flopsweep: error: [Errno 2] No such file or directory:
'/proc/nohome'``, exit 1. Now :func:`cache_problem` refuses it before any worker starts, with a fix
naming a folder that passes the same check.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from flopsweep.config import ConfigError


def cache_root(environ: Mapping[str, str] | None = None) -> tuple[str, Path]:
    """The base of the user's caches and the variable that decided it: (``XDG_CACHE_HOME``, its value)
    when set, else (``HOME``, ``$HOME/.cache``)."""
    env = os.environ if environ is None else environ
    if env.get("XDG_CACHE_HOME"):
        return "XDG_CACHE_HOME", Path(env["XDG_CACHE_HOME"])
    return "HOME", Path(env.get("HOME") or os.path.expanduser("~")) / ".cache"


def unmakeable(path: Path) -> str | None:
    """Why ``path`` cannot be made and written (``its nearest folder that exists, /proc, takes no new
    folder``), else None. Leaves nothing behind: the nearest folder of its that exists must be a folder
    this user may write, and, when ``path`` is not there yet, one where an empty folder can be made
    (made exclusively and removed again: root passes every permission check, and ``/proc`` or a
    read-only mount refuse the folder only when it is made)."""
    target = Path(os.path.abspath(path))
    here = target
    while not os.path.lexists(here) and here != here.parent:
        here = here.parent
    if not here.is_dir():
        return f"{here} is not a folder" if here == target else f"{here}, on its path, is not a folder"
    where = f"{here}" if here == target else f"its nearest folder that exists, {here},"
    if not os.access(here, os.W_OK | os.X_OK):
        return f"{where} is not writable"
    if here != target:
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".flopsweep-check-", dir=here))
        except OSError as e:
            return f"{where} takes no new folder ({e.strerror})"
    return None


def not_ours(root: Path, folder: Path | None = None, *, own_link: bool = True) -> str | None:
    """Why ``root`` or a folder between it and ``folder`` (below ``root``; ``folder`` itself included) that
    already exists is not this user's cache folder, else None: a symbolic link (``os.lstat``, never
    followed: ``/tmp/flopsweep-cache-0 is a symbolic link``), not a folder, or another user's folder
    (``... is a folder of uid 65534``). A missing one ends the walk: the run makes the rest itself
    (:func:`make_cache_folder`). A link the user made above ``root`` is left alone (``~/.cache`` ->
    ``/scratch/me/.cache``: its target is checked, not the link) unless ``own_link`` is False (a folder
    flopsweep suggests must be absent or a real folder)."""
    root = Path(os.path.abspath(root))
    below = Path(os.path.abspath(folder)).relative_to(root).parts if folder is not None else ()
    here = root
    for part in ("", *below):
        here = here / part if part else here
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return None
        except OSError as e:
            return f"{here} cannot be looked at ({e.strerror})"
        if stat.S_ISLNK(st.st_mode) and own_link and here == root and st.st_uid in (os.geteuid(), 0):
            try:  # the user's own link as the base (an HPC scratch layout): what it leads to must be ours
                st = os.stat(here)
            except OSError as e:
                return f"{here} is a symbolic link that leads nowhere ({e.strerror})"
        elif stat.S_ISLNK(st.st_mode):
            return f"{here} is a symbolic link (uid {st.st_uid}); a cache folder is never made through one"
        if not stat.S_ISDIR(st.st_mode):
            return f"{here} is not a folder"
        if st.st_uid != os.geteuid():
            return f"{here} is a folder of another user (uid {st.st_uid})"
    return None


def make_cache_folder(folder: Path, root: Path | None = None) -> Path:
    """``folder`` made as this user's cache folder, its parts from ``root`` (``folder`` itself when None)
    down each made exclusively (``os.mkdir``, mode 0700, which never follows a link) or, when there
    already, checked by :func:`not_ours` (``os.lstat``: no link, a folder of this user); the folders
    above ``root`` as ``mkdir -p`` makes them. Returns ``folder``.

    Raises:
        RecordUnwritable: another user's link on the path, a part that is not this user's folder (the
            line names it), or the OS's error.
    """
    from flopsweep.files import RecordUnwritable
    from flopsweep.safe_folders import foreign_link_refusal

    folder = Path(os.path.abspath(folder))
    root = folder if root is None else Path(os.path.abspath(root))
    if foreign := foreign_link_refusal(folder):
        raise foreign
    here = root
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        for part in ("", *folder.relative_to(root).parts):
            here = here / part if part else here
            with contextlib.suppress(FileExistsError):
                os.mkdir(here, 0o700)
            if why := not_ours(root, here):  # before anything is made below it
                raise RecordUnwritable.in_the_way(
                    here,
                    f"cache folder {folder}: {why}",
                    f"have it removed, or set XDG_CACHE_HOME={writable_suggestion()} (a folder of yours)",
                )
    except RecordUnwritable:
        raise
    except OSError as e:
        raise RecordUnwritable(here, e) from None
    return folder


MAX_SUGGESTIONS = 20
"""The most temporary folders :func:`writable_suggestion` tries (``flopsweep-cache-<uid>``, ``-2``, ...)."""

_SUGGESTED_PARTS = (Path("flopsweep") / "torch_extensions", Path("torch_extensions"), Path("triton"))
"""The folders the fixes of :func:`cache_problem` make under the folder they suggest."""


def writable_suggestion(environ: Mapping[str, str] | None = None) -> Path:
    """A cache base this user can make: ``./.cache`` of the current folder (where the run writes its
    outputs), else ``flopsweep-cache-<uid>`` in the temporary folder, else ``flopsweep-cache-<uid>-2``, ...;
    each passes :func:`unmakeable` and is absent or this user's folder, no link, and so are the folders the
    fixes name under it (:func:`not_ours`: a link or folder another user planted at that name in a shared
    ``/tmp`` would receive the caches, and the ops built there run as this user's code)."""
    spare = Path(tempfile.gettempdir()) / f"flopsweep-cache-{os.getuid()}"
    spares = [spare, *(spare.with_name(f"{spare.name}-{n}") for n in range(2, MAX_SUGGESTIONS))]
    for candidate in (Path(os.getcwd()) / ".cache", *spares):
        if unmakeable(candidate) is None and not any(
            not_ours(candidate, candidate / p, own_link=False) for p in _SUGGESTED_PARTS
        ):
            return candidate
    return spares[-1]


def cache_folders(
    *, backend: str, device: str, compile_blocks: bool, environ: Mapping[str, str] | None = None
) -> list[tuple[str, Path, str]]:
    """The folders this run makes under the user's caches: (the variable that placed it, the folder,
    what it holds), in the order the run makes them."""
    env = os.environ if environ is None else environ
    var, root = cache_root(env)
    out = []
    if backend == "deepspeed":
        ext = env.get("TORCH_EXTENSIONS_DIR")
        out.append(
            ("TORCH_EXTENSIONS_DIR", Path(ext), "DeepSpeed's extension cache")
            if ext
            else (var, root / "flopsweep" / "torch_extensions", "DeepSpeed's extension cache")
        )
    if compile_blocks and device == "cuda":
        if env.get("TRITON_CACHE_DIR"):
            out.append(("TRITON_CACHE_DIR", Path(env["TRITON_CACHE_DIR"]), "Triton's kernel cache"))
        else:
            home_var = "TRITON_HOME" if env.get("TRITON_HOME") else "HOME"
            home = Path(env.get(home_var) or os.path.expanduser("~"))
            out.append((home_var, home / ".triton" / "cache", "Triton's kernel cache"))
    return out


def cache_problem(
    *, backend: str, device: str, compile_blocks: bool, environ: Mapping[str, str] | None = None
) -> ConfigError | None:
    """The refusal of a run one of whose cache folders (:func:`cache_folders`) cannot be made, else None:
    ``Invalid config: HOME='/proc/nohome': DeepSpeed's extension cache /proc/nohome/.cache/flopsweep/
    torch_extensions cannot be made: /proc/nohome does not exist ... Fix: set XDG_CACHE_HOME=<a folder
    that passes>``; one under the base that another user's link or folder stands on (:func:`not_ours`)
    ``... torch_extensions is not this user's own: /tmp/c is a folder of another user (uid 65534)``. The
    fix's variable, typed back, gives a folder that passes this check."""
    env = os.environ if environ is None else environ
    good = writable_suggestion(env)
    for var, folder, what in cache_folders(
        backend=backend, device=device, compile_blocks=compile_blocks, environ=env
    ):
        why, verb = unmakeable(folder), "cannot be made"
        if why is None and what.startswith("DeepSpeed") and var != "TORCH_EXTENSIONS_DIR":  # flopsweep's own
            why, verb = not_ours(cache_root(env)[1], folder), "is not this user's own"
        if why is None:
            continue
        value = env.get(var) or os.path.expanduser("~")
        if what.startswith("Triton"):
            fix = f"set TRITON_CACHE_DIR={good / 'triton'} (a folder you can write), or compile=false"
        else:
            fix = (
                f"set XDG_CACHE_HOME={good} (a folder you can write; or TORCH_EXTENSIONS_DIR="
                f"{good / 'torch_extensions'} for DeepSpeed's alone)"
            )
            if var == "TORCH_EXTENSIONS_DIR":
                fix = f"set TORCH_EXTENSIONS_DIR={good / 'torch_extensions'} (a folder you can write)"
        return ConfigError(var, value, f"{what} {folder} {verb}: {why}", fix)
    return None
