"""What ``run.py`` checks of its environment and of ``conf/`` as it starts, before the command line's
own overrides (session 36). Torch-free.

- ``OMP_NUM_THREADS``: a value OpenMP cannot read refuses a run (:func:`omp_threads_line`), never a
  command line that only prints (``--help``, ``--cfg job``: :func:`runs_nothing`); a blank one is
  dropped before libgomp reads it (:func:`blank_omp_threads`): libgomp printed ``libgomp: Invalid value
  for environment variable OMP_NUM_THREADS`` for an empty value, flopsweep nothing.
- ``conf/config.yaml``'s defaults list picking an option that has no file (``model: gpt-tinyy``: Hydra's
  26-line "Could not find 'model/gpt-tinyy'" block) or a key given twice (``hydra:``: Hydra's YAML
  traceback): one line (:func:`root_problem`).
- The option files no run picks that a run picking them would refuse (a link, an empty file, a list, a key
  given twice): one warning line each (:func:`option_file_lines`); they were skipped silently.
"""

from __future__ import annotations

import os

from flopsweep.conf_files import (
    ConfFileProblem,
    checked_yaml,
    read_bounded,
    repeated_key_line,
    root_config_problem,
    shown_path,
    unreadable_option_lines,
)
from flopsweep.override_schema import CONF, option_files

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


def _picked_elsewhere(argv: list[str], group: str, conf: str) -> bool:
    """Whether the command line picks an option of ``group`` itself (``model=gpt-tiny``, a sweep over
    several) or through a ``+sweep=`` file's ``override /group: option``: conf/config.yaml's choice is
    then never read."""
    from flopsweep.conf_files import picks_of, read_selected

    keys = {a.partition("=")[0].lstrip("+") for a in argv if "=" in a and not a.startswith("-")}
    if group in keys:
        return True
    try:
        return any(g == group for g, _ in picks_of(read_selected(argv, conf), conf))
    except ConfFileProblem:
        return False  # conf_file_problem's line


def root_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a damaged ``conf/config.yaml``, else None:
    :func:`flopsweep.conf_files.root_config_problem` (not YAML, no defaults list, a group unpicked), then a
    key given twice (``hydra:``, which OmegaConf's reader refuses: Hydra printed its traceback), then a
    defaults entry of an option group that names no file of the group (``model: gpt-tinyy``: Hydra's
    26-line "Could not find" block), unless the command line picks that group's option itself (directly or
    by a ``+sweep=`` file). The fix names the nearest option and ``git checkout``."""
    if problem := root_config_problem(argv, conf):
        return problem
    if any(a in ("-cn", "--config-name") or a.startswith("--config-name=") for a in argv):
        return None
    from flopsweep.option_file_keys import repeats_a_key
    from flopsweep.options import GROUP_BASES
    from flopsweep.override_schema import near_names

    path = os.path.join(conf, "config.yaml")
    shown = shown_path(path, conf)
    restore = f"restore it from the checkout: git checkout {shown}"
    try:
        text = read_bounded(path).decode("utf-8")
        data = checked_yaml(path, conf)
    except (OSError, ValueError, ConfFileProblem):
        return None  # root_config_problem's, or Hydra's own "cannot read"
    if repeats_a_key(text) and (twice := repeated_key_line(text, shown)):
        why = twice.removeprefix("Invalid config: ").partition(". Fix: ")[0]
        return (
            f"Invalid config: {why}: the checkout's root config is damaged. Fix: give each key once, or "
            f"{restore}."
        )
    for entry in (data.get("defaults") if isinstance(data, dict) else None) or []:
        for group, option in entry.items() if isinstance(entry, dict) else ():
            if group not in GROUP_BASES or not isinstance(option, str):
                continue
            folder = os.path.join(conf, group)
            if not os.path.isdir(folder) or os.path.isfile(os.path.join(folder, f"{option}.yaml")):
                continue  # a config folder without the group (a test's): Hydra's own choices
            if _picked_elsewhere(argv, group, conf):
                continue
            near = near_names(option, option_files(group, conf), n=1)
            fix = f"write {group}: {near[0]} there, or {restore}" if near else f"{restore}"
            return (
                f"Invalid config: {shown}: its defaults list picks {group}: {option}, and there is no "
                f"{shown_path(os.path.join(conf, group, option + '.yaml'), conf)}: the checkout's root "
                f"config is damaged. Fix: {fix}."
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
