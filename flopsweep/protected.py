"""Folders no run or sweep may write into: ``$HOME`` itself, the checkout's own folder, its code, tests and
docs, and the Python environment (:func:`protected_folder_problem`). A run's ``.hydra/`` and ``metrics.json``
there made every later run below it one "inside another sweep's or run's folder"
(:func:`flopsweep.folders.nested_folder_problem`), each then refused. Called by
:func:`flopsweep.hydrafiles.output_folder_problem`, before Hydra and in the callback, as the root ``/`` is
refused there. Nothing is written. Torch-free.
"""

from __future__ import annotations

import os
from pathlib import Path

from flopsweep.safe_read import RecordError, read_regular

CHECKOUT_SOURCES = ("analysis", "docs", "tests", "notebooks", ".ci", ".git")
"""The checkout's folders of code, tests and docs, beside the ones Hydra reads configs from (``conf/``,
``sweep/``, ``hydra_plugins/``, ``flopsweep/``: :func:`flopsweep.hydrafiles.config_folders`): no run or
sweep folder may be one or lie inside one (:func:`protected_folder_problem`)."""
CHECKOUT_HOLDERS = ("", "benchmarks")
"""The checkout's own folder and ``benchmarks/``: they hold run and sweep folders (``outputs/``,
``multirun/``, ``benchmarks/results/``), so they may hold a run's files no more than ``$HOME`` may."""
ENV_CODE = ("bin", "include", "lib", "lib64", "Lib", "Scripts")
"""A Python installation's folders of code: refused where the installation's folder holds ``$HOME`` or
the checkout (a Python installed with ``--prefix=$HOME``), which is refused itself but not all inside."""


def _git_dir(checkout: Path) -> str | None:
    """The real git folder of a worktree or submodule checkout (``.git`` a file: ``gitdir: PATH``), else
    None."""
    try:
        line = read_regular(checkout / ".git", 4096).decode("utf-8", "replace").partition("\n")[0]
    except (RecordError, OSError):
        return None
    gitdir = line.removeprefix("gitdir:").strip() if line.startswith("gitdir:") else ""
    return os.path.realpath(checkout / gitdir) if gitdir else None


def _home() -> str:
    """The real path of ``$HOME`` (the password file's where it is unset), else ``/``."""
    try:
        return os.path.realpath(Path.home())
    except (RuntimeError, KeyError):  # no $HOME and no entry in the password file
        return "/"


def protected_folders() -> list[tuple[str, str, bool]]:
    """The folders no run or sweep may write into, as ``(real path, what it is, inside)`` (``inside``:
    every folder below it is refused too, else the folder alone):

    - ``$HOME`` itself (below it stays allowed): a run's ``.hydra/`` and ``metrics.json`` there put every
      later run of this user inside its folder (:func:`flopsweep.folders.nested_folder_problem`), each
      then refused;
    - the checkout (the folder of ``run.py``, the ``flopsweep`` package's parent) and ``benchmarks/``
      (:data:`CHECKOUT_HOLDERS`), themselves; its code, tests and docs (:data:`CHECKOUT_SOURCES`, a
      worktree's git folder) with all inside;
    - the Python environment (``sys.prefix``, ``sys.exec_prefix``, the user's site-packages) with all
      inside; a base installation (``sys.base_prefix``) itself and its code folders (:data:`ENV_CODE`)
      with all inside. A prefix that holds ``$HOME`` or the checkout is taken as a base installation.

    The root ``/`` is refused on its own (:func:`flopsweep.hydrafiles.output_folder_problem`)."""
    import site
    import sys

    home = _home()
    found: list[tuple[str, str, bool]] = [(home, "your home folder $HOME", False)]
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "run.py").is_file():
        found += [
            (os.path.realpath(checkout / n), f"the checkout's {f'{n}/' if n else 'own folder'}", False)
            for n in CHECKOUT_HOLDERS
        ]
        found += [(os.path.realpath(checkout / n), f"the checkout's {n}/", True) for n in CHECKOUT_SOURCES]
        if git := _git_dir(checkout):
            found.append((git, "the checkout's git folder", True))
    env: dict[str, str] = {}
    for prefix, name in ((sys.prefix, "sys.prefix"), (sys.exec_prefix, "sys.exec_prefix")):
        env.setdefault(prefix, f"the Python environment {name}")
    env.setdefault(site.getusersitepackages(), "your site-packages")
    for prefix in dict.fromkeys([*env, sys.base_prefix, sys.base_exec_prefix]):
        real = os.path.realpath(prefix)
        if prefix in env and not any(
            h == real or h.startswith(os.path.join(real, "")) for h in (str(checkout), home)
        ):
            found.append((real, env[prefix], True))
            continue
        found.append((real, "the Python installation sys.base_prefix", False))
        found += [(os.path.join(real, name), f"the Python installation's {name}/", True) for name in ENV_CODE]
    return [(path, what, inside) for path, what, inside in found if os.path.dirname(path) != path]


def protected_folder_problem(key: str, value: str, real: str) -> str | None:
    """One line refusing ``value`` as ``key`` (``hydra.run.dir``, ``hydra.sweep.dir``; ``real``: its real
    path) when it is one of :func:`protected_folders` or inside one that is refused with all inside, else
    None. The fix names a folder of the kind that stays allowed (below ``$HOME``, the checkout's
    ``outputs/`` or ``multirun/``)."""
    for folder, what, inside in protected_folders():
        if real != folder and not (inside and real.startswith(os.path.join(folder, ""))):
            continue
        base = str(Path(__file__).resolve().parents[1]) if "checkout" in what else _home()
        example = f"{base.rstrip('/')}/{'multirun/my-sweep' if 'sweep' in key else 'outputs/my-run'}"
        where = f"is {what} ({folder})" if real == folder else f"is inside {what} ({folder})"
        return (
            f"Invalid config: {key}={value}: {where}; a run's files there (.hydra/, metrics.json) would "
            "mix with it and put every later run and sweep below it inside this one's folder, each then "
            f"refused. Fix: name a folder of its own, e.g. {key}={example}."
        )
    return None
