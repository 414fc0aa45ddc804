"""What ``run.py`` checks of its environment and of ``conf/`` as it starts, before the command line's
own overrides (session 36). Torch-free.

- ``OMP_NUM_THREADS``: a value OpenMP cannot read refuses a run (:func:`omp_threads_line`), never a
  command line that only prints (``--help``, ``--cfg job``: :func:`runs_nothing`); a blank one is
  dropped before libgomp reads it (:func:`blank_omp_threads`): libgomp printed ``libgomp: Invalid value
  for environment variable OMP_NUM_THREADS`` for an empty value, flopsweep nothing.
- ``conf/config.yaml``'s defaults list picking an option that has no file (``model: gpt-tinyy``: Hydra's
  26-line "Could not find 'model/gpt-tinyy'" block; ``hydra/sweeper: basic_batchd``), a number for an
  option (``backend: 3``: a 33-line traceback), a typo of ``_self_`` or ``override``, a misspelt key
  (``defualts:``) or a key given twice (``hydra:``: Hydra's YAML traceback): one line (:func:`root_problem`,
  :mod:`flopsweep.root_defaults`).
- The option files no run picks that a run picking them would refuse (a link, an empty file, a list, a key
  given twice): one warning line each (:func:`option_file_lines`); they were skipped silently.
"""

from __future__ import annotations

import os

from flopsweep.conf_files import (
    read_bounded,
    repeated_key_line,
    root_config_problem,
    shown_path,
    unreadable_option_lines,
)
from flopsweep.override_schema import CONF, option_files
from flopsweep.version import version_line  # noqa: F401  (run.py and the tests name it here)

RUNS_NOTHING_FLAGS = ("--help", "-h", "--hydra-help", "--version")
"""Hydra's flags that print and run nothing, besides :func:`flopsweep.flags.prints_only`'s."""

BLANK_OMP_LINE = (
    "flopsweep: warning: OMP_NUM_THREADS is set but empty; read as unset (each CPU rank takes its share of "
    "the cores). Fix: unset OMP_NUM_THREADS, or set it to a positive integer such as OMP_NUM_THREADS=1."
)
"""The warning :func:`blank_omp_threads` gives a run."""


def runs_nothing(argv: list[str]) -> bool:
    """Whether ``argv`` only prints: ``--help``/``-h``, ``--hydra-help``, ``--version``, or
    :func:`flopsweep.flags.prints_only`'s ``--cfg``, ``--info``, ``--shell-completion`` (a prefix of a
    long flag too)."""
    from flopsweep.flags import expand_flag_prefixes, prints_only

    return prints_only(argv) or any(
        a.partition("=")[0] in RUNS_NOTHING_FLAGS for a in expand_flag_prefixes(argv)
    )


def omp_threads_line(argv: list[str], environ: dict[str, str] | None = None) -> str | None:
    """:func:`flopsweep.cli.omp_threads_problem` (``OMP_NUM_THREADS=abc``) for a command line that runs,
    else None: ``flopsweep --help`` prints its help whatever the environment (it starts no OpenMP)."""
    from flopsweep.cli import omp_threads_problem

    return None if runs_nothing(argv) else omp_threads_problem(environ)


def blank_omp_threads(argv: list[str], environ: dict[str, str] | None = None) -> str | None:
    """Drop a blank ``OMP_NUM_THREADS`` (set to ``""`` or spaces) from ``environ`` (else ``os.environ``,
    before anything loads libgomp: torch's OpenMP in this process and each rank, which inherit it), so
    that it reads as unset: each CPU rank then takes its share of the cores (``worker.cpu_threads``).
    Returns :data:`BLANK_OMP_LINE` for a command line that runs (:func:`runs_nothing`), else None; None
    when the value is unset or not blank. libgomp printed its own ``Invalid value for environment
    variable OMP_NUM_THREADS`` line for a blank value."""
    env = os.environ if environ is None else environ
    if env.get("OMP_NUM_THREADS") is None or env["OMP_NUM_THREADS"].strip():
        return None
    del env["OMP_NUM_THREADS"]
    return None if runs_nothing(argv) else BLANK_OMP_LINE


def root_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a damaged ``conf/config.yaml``, else None: a top-level key or a defaults entry Hydra
    would refuse with its own output (:func:`flopsweep.root_defaults.root_entries_problem`: a typo of an
    option, ``hydra/sweeper: basic_batchd`` or ``model: gpt-tinyy``, of ``_self_`` or of a keyword, a
    number for an option, a group picked twice, ``defualts:``), then
    :func:`flopsweep.conf_files.root_config_problem` (not YAML, no defaults list, a group unpicked), then a
    key given twice (``hydra:``, which OmegaConf's reader refuses: Hydra printed its traceback). A choice
    the command line makes itself (``model=llama-tiny``, directly or by a ``+sweep=`` file) is never read,
    so its option is not checked. The fix names the spelling meant, and ``git checkout``."""
    from flopsweep.root_defaults import DAMAGED, root_entries_problem

    if problem := root_entries_problem(argv, conf) or root_config_problem(argv, conf):
        return problem
    if any(a in ("-cn", "--config-name") or a.startswith("--config-name=") for a in argv):
        return None
    from flopsweep.option_file_keys import repeats_a_key

    path = os.path.join(conf, "config.yaml")
    shown = shown_path(path, conf)
    try:
        text = read_bounded(path).decode("utf-8")
    except (OSError, ValueError):
        return None  # root_config_problem's, or Hydra's own "cannot read"
    if repeats_a_key(text) and (twice := repeated_key_line(text, shown)):
        why = twice.removeprefix("Invalid config: ").partition(". Fix: ")[0]
        return (
            f"Invalid config: {why}: {DAMAGED}. Fix: give each key once, or restore it from the checkout: "
            f"git checkout {shown}."
        )
    return None


def option_file_lines(conf: str = CONF) -> list[str]:
    """The warnings ``run.py`` prints before Hydra for a run that goes ahead: each option file no listing
    can read (:func:`flopsweep.conf_files.unreadable_option_lines`), then each that a run picking it would
    have refused for its form (:func:`flopsweep.option_file_keys.form_problem`: a symbolic link, empty, a
    list or one value, a key given twice), one line naming the file, why and the fix:
    ``flopsweep: warning: conf/model/empty.yaml: is empty, so model=empty sets none of its keys;
    model=empty would be refused. Fix: write its keys (as conf/model/llama-tiny.yaml), or remove the
    file.`` A run that picks such a file is refused in one line before (:func:`option_file_problem`)."""
    from flopsweep.conf_files import LISTED_GROUPS
    from flopsweep.option_file_keys import form_problem

    lines = unreadable_option_lines(conf)
    for group in sorted(os.listdir(conf)):
        if group in LISTED_GROUPS or not os.path.isdir(os.path.join(conf, group)):
            continue
        for option in option_files(group, conf):
            path = os.path.join(conf, group, f"{option}.yaml")
            shown = shown_path(path, conf)
            if any(line.startswith(f"flopsweep: warning: {shown}:") for line in lines):
                continue
            if found := form_problem(path, group, option, conf):
                what, fix = found
                fix += "" if "remove" in fix else ", or remove the file"
                lines.append(
                    f"flopsweep: warning: {shown}: {what}; {group}={option} would be refused. Fix: {fix}."
                )
    return lines


def version_asked(argv: list[str]) -> bool:
    """Whether ``argv`` (prefixes spelled out: :func:`flopsweep.flags.expand_flag_prefixes`) holds
    ``--version`` before any ``--``: :func:`version_line` is printed then, exit 0, no config composed,
    whatever else the line holds (Hydra's parser printed its own ``Hydra 1.3.8`` alone, ahead of a
    ``--help`` too)."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    return "--version" in words
