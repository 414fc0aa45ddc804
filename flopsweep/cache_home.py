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

import os
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


def writable_suggestion(environ: Mapping[str, str] | None = None) -> Path:
    """A cache base this user can make: ``./.cache`` of the current folder (where the run writes its
    outputs), else ``flopsweep-cache-<uid>`` in the temporary folder; each passes :func:`unmakeable`."""
    spare = Path(tempfile.gettempdir()) / f"flopsweep-cache-{os.getuid()}"
    for candidate in (Path(os.getcwd()) / ".cache", spare):
        if unmakeable(candidate) is None:
            return candidate
    return spare


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
    that passes>``. The fix's variable, typed back, gives a folder that passes this check."""
    env = os.environ if environ is None else environ
    good = writable_suggestion(env)
    for var, folder, what in cache_folders(
        backend=backend, device=device, compile_blocks=compile_blocks, environ=env
    ):
        if (why := unmakeable(folder)) is None:
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
        return ConfigError(var, value, f"{what} {folder} cannot be made: {why}", fix)
    return None
