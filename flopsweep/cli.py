"""The console scripts (``[project.scripts]`` in ``pyproject.toml``): ``flopsweep`` runs ``run.py``
of the checkout the package was installed from, ``flopsweep-analysis`` is ``python -m analysis``
(:func:`analysis.__main__.main`).

Both start with no folder of the user's on ``sys.path``: a console script's own folder comes first
(the environment's ``bin/``), not the working directory as with ``python -m``, so a ``pandas.py``
or an ``analysis/`` in the folder where the command is typed is never imported. Torch-free.
"""

from __future__ import annotations

import os
import runpy
import sys
import textwrap
from pathlib import Path

from flopsweep.streams import standard_streams

LOCAL_LAUNCHERS = ("basic", "basic_batched", "pool")
"""The launchers (``hydra/launcher=``) that run every job on this machine, one node: a check of this
machine's devices before Hydra holds only under them."""

COMMAND = "flopsweep"
"""The command a user types for a run or a sweep (the README's; this module's :func:`run`): the lines
flopsweep prints for the user to run (the tuner's winner, ``plan_clusters``' best of each cluster)
start with it. ``python run.py`` works only in the checkout's folder."""

CHECKOUT = Path(__file__).resolve().parents[1]
"""The folder of the ``flopsweep`` package: with ``pip install -e .``, the checkout, which holds
``run.py``, ``conf/`` and ``hydra_plugins/``."""


HELP_GROUPS_LEFT_OUT = ("hydra",)
"""Folders of ``conf/`` that :func:`help_section`'s list of groups leaves out: Hydra's own groups
(the help names the launchers and sweepers itself). The ``schema/*`` groups, the typed bases the
options extend, are not folders of ``conf/``: Hydra's own help listed them too."""


def help_section(name: str, checkout: Path = CHECKOUT) -> str:
    """A part of ``flopsweep --help`` (``conf/hydra/help/flopsweep.yaml``'s template calls it through the
    ``flopsweep_help`` resolver ``run.py`` registers):

    - ``groups``: one line per config group of ``checkout/conf`` (its folders, less
      :data:`HELP_GROUPS_LEFT_OUT`), ``  model (default gpt-tiny): gpt-1.3b, ...``, the default from
      ``conf/config.yaml``'s defaults list; a group no default picks is written ``+sweep`` (added with
      ``+``); lines wrapped at 100 characters.
    - ``docs``: where the documentation is, the checkout's ``docs/`` folder.

    Raises:
        ValueError: another ``name``.
    """
    conf = checkout / "conf"
    if name == "docs":
        return str(checkout / "docs")
    if name != "groups":
        raise ValueError(f"help_section: no section {name!r} (groups, docs)")
    from flopsweep.overrides import option_files, read_conf_yaml

    defaults = read_conf_yaml(str(conf / "config.yaml")).get("defaults") or []
    chosen = {k: str(v) for d in defaults if isinstance(d, dict) for k, v in d.items()}
    lines = []
    for group in sorted(p.name for p in conf.iterdir() if p.is_dir() and p.name not in HELP_GROUPS_LEFT_OUT):
        options = [o for o in option_files(group) if "/" not in o]
        head = f"{group} (default {chosen[group]})" if group in chosen else f"+{group} (added with +)"
        text = f"{head}: {', '.join(options)}"
        lines.append(
            textwrap.fill(text, 100, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False)
        )
    return "\n".join(lines)


INVOKED_AS: str | None = None
"""``sys.argv[0]`` of the ``flopsweep`` command (:func:`run`), else None (``python run.py``): Hydra's shell
completion (``-sc install=bash``) registers itself for its base name, ``python`` for a ``.py`` (``run.py``
puts it back for ``-sc``)."""


def checkout_problem(checkout: Path = CHECKOUT) -> str | None:
    """One line when ``checkout`` lacks ``run.py`` or ``conf/`` (a wheel install ships neither), else
    None."""
    missing = [name for name in ("run.py", "conf") if not os.path.exists(checkout / name)]
    if not missing:
        return None
    return (
        f"flopsweep: {' and '.join(missing)} not found beside the installed package ({checkout}). "
        "Fix: install from a checkout with pip install -e ., or run python run.py there"
    )


def run() -> None:
    """``flopsweep [overrides]``: ``python run.py [overrides]`` of the checkout, from any folder.

    As ``python run.py`` does, the checkout comes first on ``sys.path``: Hydra then finds the
    project's plug-ins (``hydra_plugins/flopsweep_*``: the default sweeper, the Slurm launchers),
    which an editable install alone hides from Hydra's plug-in scan (setuptools maps the
    ``hydra_plugins`` namespace through an import hook, which ``pkgutil`` does not list). The
    config folder is ``conf/`` beside ``run.py`` (its ``@hydra.main``). Exits as ``run.py`` does;
    2 with one line when the checkout is not there. The command as invoked is kept in
    :data:`INVOKED_AS` (``runpy`` sets ``sys.argv[0]`` to ``run.py``).
    """
    from flopsweep.signals import stop_before_jobs

    stop_before_jobs({})  # Ctrl-C before run.py's own handlers: one line and 130, no traceback
    standard_streams()
    if problem := checkout_problem():
        print(problem, file=sys.stderr)
        raise SystemExit(2)
    if str(CHECKOUT) not in sys.path:
        sys.path.insert(0, str(CHECKOUT))
    global INVOKED_AS
    INVOKED_AS = sys.argv[0]
    sys.argv[0] = str(CHECKOUT / "run.py")
    runpy.run_path(str(CHECKOUT / "run.py"), run_name="__main__")


def analysis() -> None:
    """``flopsweep-analysis DIR... [options]``: ``python -m analysis`` (same options, exit status; a closed
    stdout or stderr is ``os.devnull``, Ctrl-C one line and 130: :func:`analysis.cli.entry`)."""
    from analysis.__main__ import main
    from analysis.cli import entry

    raise SystemExit(entry(main))


def omp_threads_problem(environ: dict[str, str] | None = None) -> str | None:
    """One line for an ``OMP_NUM_THREADS`` (``environ``, else the process's) that OpenMP cannot read,
    else None: it is a positive whole number, or a comma-separated list of them (threads per nesting
    level), as libgomp takes it; unset or empty, each CPU rank takes its share of the cores
    (``worker.cpu_threads``). Was: ``abc`` passed through, libgomp printed ``Invalid value for environment
    variable OMP_NUM_THREADS`` and each rank took torch's default (2 ranks x 2 threads on 2 cores)."""
    value = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "")
    levels = value.strip().split(",")
    if not value.strip() or all(v.strip().isdigit() and v.strip().isascii() and int(v) > 0 for v in levels):
        return None
    return (
        f"OMP_NUM_THREADS={value!r}: is no positive whole number of threads (OpenMP would "
        f"ignore it and each rank take torch's default). Fix: unset OMP_NUM_THREADS (each CPU rank takes "
        f"its share of the cores), or set it to a positive integer such as OMP_NUM_THREADS=1."
    )
