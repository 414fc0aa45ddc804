"""Hydra's flags on flopsweep's command line (``-m``, ``--cfg job``, ``--config-dir DIR``) and a config
group's ``+``: one line each, before Hydra starts (``run.py``'s :func:`refusal`, exit 2).

Hydra answered these itself: an unknown flag (``--bogus``) with argparse's nine-line usage block
ending ``run.py: error``; ``--config-path /etc`` or a missing ``--config-dir`` with "Cannot find
primary config", the search path and the ``HYDRA_FULL_ERROR`` hint, exit 1; ``sweep=smoke`` (the
``+`` forgotten) with "Could not override 'sweep'. No match in the defaults list", exit 1.

The flags are read by Hydra's own parser (``hydra._internal.utils.get_args_parser``: the same
options, abbreviations and errors as Hydra's ``--help`` lists), its ``error`` made to raise.

What a config folder may be: flopsweep reads its configs from the checkout's ``conf/`` alone. Its
``config.yaml`` is the primary config (the defaults, ``hydra.output_subdir: null`` and the job log
that never follows a link, :mod:`flopsweep.hydrafiles`), and every check before Hydra starts reads
the options and sweeps of ``conf/``. So ``--config-path``, ``--config-dir`` and ``--config-name``
are taken only when they name ``conf/`` and its ``config.yaml`` (what they are without the flag);
another folder is refused, missing or not, with the fix: put the option or sweep file in ``conf/``.
``--experimental-rerun FILE`` is refused too: it unpickles FILE (loading a pickle runs code), and
flopsweep writes no ``config.pickle`` (``hydra.output_subdir: null``). No folder of configs is
ever put on ``sys.path``: Hydra finds plug-ins (code) in the ``hydra_plugins`` packages of
``sys.path`` only. Torch-free.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import unicodedata

from flopsweep.cli import COMMAND
from flopsweep.override_parsing import is_override, override_key, overrides_of
from flopsweep.overrides import CONF, near_names
from flopsweep.text import article, printable

RUN_PY_FOLDER = os.path.dirname(CONF)
"""The folder of ``run.py``: Hydra reads a relative ``--config-path`` from there."""

_EXAMPLES = {
    "--cfg": "job",
    "--package": "model",
    "--config-path": "conf",
    "--config-name": "config",
    "--config-dir": "conf",
    "--info": "defaults",
}
"""An example value of each Hydra flag that takes one (the fix of a flag given none)."""


class _Refused(Exception):
    """argparse's refusal of a flag (its ``error`` made to raise this)."""


@functools.cache
def hydra_flags_parser() -> argparse.ArgumentParser:
    """Hydra's own argument parser (``run.py --help`` and ``--hydra-help`` list its flags), whose
    ``error`` raises :class:`_Refused` with argparse's message instead of printing the usage block. Made
    once a process (argparse keeps no state between parses); do not change it."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()

    def error(message: str) -> None:
        raise _Refused(message)

    parser.error = error  # type: ignore[method-assign]
    return parser


def _flag_names(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings]


def expand_flag_prefixes(argv: list[str]) -> list[str]:
    """``argv`` with each long flag written as a prefix spelled out, as Hydra's parser reads it
    (argparse's ``allow_abbrev``: ``--multi`` and ``--multir`` are ``--multirun``, ``--config-n=x`` is
    ``--config-name=x``), so that every check before Hydra, and Hydra, see the one spelling.

    A prefix of several flags (``--conf``) or of none (``--bogus``) is left as written, for
    :func:`flag_problem` to refuse in one line; so are overrides and ``--`` itself.
    """
    names = [n for n in _flag_names(hydra_flags_parser()) if n.startswith("--")]
    out = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and len(name) > 2 and name not in names:
            matches = [n for n in names if n.startswith(name)]
            if len(matches) == 1:
                arg = matches[0] + eq + value
        out.append(arg)
    return out


def is_multirun(argv: list[str]) -> bool:
    """Whether ``argv`` asks for a sweep: ``-m``, ``--multirun`` or a prefix of it that Hydra's parser
    reads as ``--multirun`` (``--multi``; :func:`expand_flag_prefixes`)."""
    return "-m" in argv or "--multirun" in expand_flag_prefixes(argv)


def prints_only(argv: list[str]) -> bool:
    """Whether ``argv`` asks Hydra to print and run nothing: ``--cfg``/``-c``, ``--info``/``-i`` or
    ``--shell-completion``/``-sc`` (a prefix too, :func:`expand_flag_prefixes`). A choice that acts only
    under ``-m`` (a sweeper, ``repeats=``) is then no mistake: ``-m`` and ``--cfg`` are two commands,
    refused together (:func:`flag_problem`), so the fix that prints the config must pass without it."""
    parser = hydra_flags_parser()
    printing = {
        s for a in parser._actions if a.dest in ("cfg", "info", "shell_completion") for s in a.option_strings
    }
    return any(a.partition("=")[0] in printing for a in expand_flag_prefixes(argv))


def _unknown_flag(flag: str, parser: argparse.ArgumentParser, argv: list[str] | None = None) -> str:
    """The line for a flag Hydra has not: the nearest flag, or the override it may have meant (``--format
    csv`` and ``--format=csv``: ``plan_format=csv``, the key the dashes hid named, not ``format=csv``, which
    is refused in turn)."""
    name, eq, value = flag.partition("=")
    key = name.lstrip("-")
    rest = (argv or [])[(argv or []).index(flag) + 1 :] if flag in (argv or []) else []
    if not eq and rest and not rest[0].startswith("-") and "=" not in rest[0]:  # --format csv
        flag, eq, value = f"{flag} {rest[0]}", "=", rest[0]
    if eq and key and re.fullmatch(r"[A-Za-z_][\w./@-]*", key) and len(name) - len(key) <= 2:
        fix = f"an override has no dashes: {key}={value}"
        if not _settable(key):
            said = suggestion_of(key, value, overrides_of(argv or []))
            fix = f"an override has no dashes, and {key} is no key: {said}"
    elif near := near_names(name, _flag_names(parser), n=1):  # never --experimental-rerun
        fix = f"write {near[0]}{eq}{value}"
    else:
        fix = f"drop it ({COMMAND} --help lists the flags; an override is KEY=VALUE)"
    return f"Invalid config: {flag}: is no flag of {COMMAND} (Hydra's command line). Fix: {fix}."


def suggestion_of(key: str, value: str, overrides: list[str]) -> str:
    """:func:`flopsweep.near_keys.suggestion` of ``key=value`` beside ``overrides`` (the command line's,
    so that a key they set, ``plan=true``, is not asked for again), without its last full stop."""
    from flopsweep.near_keys import suggestion
    from flopsweep.override_parsing import parsed_all_or_none

    parsed = parsed_all_or_none(overrides)  # None: the grammar's own line comes later
    if parsed is None:
        parsed = []
    said = suggestion(key, parsed, value).rstrip(".")
    return re.sub(
        r"did you mean ([\w./-]+)\?", lambda m: f"did you mean {m.group(1)}={value}?", said, count=1
    )


def _settable(key: str) -> bool:
    """Whether ``key`` is a key of the config or a config group's name (``backend``)."""
    from flopsweep.override_schema import known_keys

    return key in known_keys() or os.path.isdir(os.path.join(CONF, key.split("/")[0]))


def _argparse_line(message: str, parser: argparse.ArgumentParser) -> str:
    """The line for argparse's own refusal of a known flag: a value missing, not among its choices,
    or given to a flag that takes none (``-mx``)."""
    match = re.match(r"argument ([^:]+): (.*)", message)
    if not match:
        return f"Invalid config: {message}. Fix: see {COMMAND} --help."
    names, why = match.group(1).split("/"), match.group(2)
    flag = next((n for n in names if n.startswith("--")), names[0])
    shown = match.group(1)
    action = next((a for a in parser._actions if flag in a.option_strings), None)
    if "expected one argument" in why:
        fix = f"give it a value, e.g. {flag} {_EXAMPLES.get(flag, 'VALUE')}"
    elif "invalid choice" in why and action is not None and action.choices:
        fix = f"give one of them, e.g. {flag} {next(iter(action.choices))}"
    elif "ignored explicit argument" in why:
        fix = f"write {flag} alone, then the overrides"
    else:
        fix = f"see {COMMAND} --help"
    return f"Invalid config: {shown}: {why}. Fix: {fix}."


def _config_folder(flag: str, value: str, state: str, shown: str | None = None) -> str:
    """The line refusing ``flag`` (``shown`` as written, default ``flag value``): ``state`` says why."""
    return (
        f"Invalid config: {shown or f'{flag} {value}'}: {state}; flopsweep reads its configs from {CONF} "
        "alone (its config.yaml keeps the records safe, and every override is checked against it before "
        f"Hydra starts). Fix: drop {flag}; put your own option or sweep file in conf/ (e.g. "
        "conf/sweep/mine.yaml, then +sweep=mine)."
    )


_SEARCHPATH = re.compile(r"hydra\.searchpath(?:[.\[].*)?")
"""``hydra.searchpath`` and an element of it (``hydra.searchpath.0``, ``hydra.searchpath[0]``)."""


def searchpath_problem(argv: list[str]) -> str | None:
    """One line refusing an override of ``hydra.searchpath`` (``hydra.searchpath=[pkg://mine.conf]``,
    ``[file://DIR]``, an element of it, with ``+``, ``++`` or ``~``), else None.

    Hydra looks for configs in each place it lists, before ``conf/``'s options are read: a ``pkg://``
    package it imports (code, found on ``sys.path``) or a ``file://`` folder, relative to the working
    directory, whose YAML it reads; either may be another user's on a shared machine, and shadows
    ``conf/`` as ``--config-dir`` would (refused by :func:`flag_problem`). flopsweep's plug-ins add their
    own config packages through Hydra's ``SearchPathPlugin``, not through this key.
    """
    for arg in argv:
        if arg.startswith("-") or not _SEARCHPATH.fullmatch(override_key(arg).strip()):
            continue
        value = arg.partition("=")[2]
        state = (
            "names a Python package, which Hydra would import to search it for configs"
            if "pkg://" in value
            else "adds a folder whose YAML Hydra would read as configs (a relative one: the working "
            "directory's)"
            if value.strip()
            else "changes where Hydra searches for configs"
        )
        return _config_folder(arg, value, state, shown=arg)
    return None


def _folder_state(path: str) -> str:
    """What is at ``path``, in a few words (the folder a ``--config-*`` flag names)."""
    if not os.path.lexists(path):
        return "does not exist"
    if os.path.islink(path):
        return "is a symbolic link to another folder"
    if not os.path.isdir(path):
        return "is a file, not a folder"
    if not os.access(path, os.R_OK | os.X_OK):
        return "is a folder that cannot be read"
    return "is another folder than conf/"


def _same_folder(path: str, conf: str) -> bool:
    return os.path.isdir(path) and os.path.realpath(path) == os.path.realpath(conf)


_COMMANDS = {
    "run": "run one job",
    "multirun": "run the sweep",
    "cfg": "print the config",
    "info": "print Hydra's information",
    "shell_completion": "set up shell completion",
}
"""Hydra's commands, by the parser's ``dest`` (``hydra._internal.utils._run_hydra`` runs one: "Only one of
--run, --multirun, --cfg, --info and --shell_completion can be specified"), with what each does."""


def one_value(override: str) -> str:
    """``override`` with a sweep's first value (``seed=0,1`` -> ``seed=0``): a command other than
    ``--multirun`` refuses a sweep (:func:`flopsweep.override_multirun.sweep_without_m_problem`)."""
    from flopsweep.override_parsing import parsed_or_none
    from flopsweep.overrides import listed_values

    parsed = parsed_or_none(override)  # None: the grammar's own line comes later
    if parsed is None or not parsed.is_sweep_override() or not (values := listed_values(parsed)):
        return override
    return f"{override.partition('=')[0]}={values[0]}"


def _commands_problem(argv: list[str], parser: argparse.ArgumentParser) -> str | None:
    """One line for two of Hydra's commands on one command line (``-m seed=0,1 --cfg job``, ``--info -m``),
    which Hydra answered with a 16-line ``ValueError`` traceback, exit 1; else None. It names both flags
    as written, and gives as the fix the command line with each one alone (with one value per swept key
    where the one kept is not ``-m``)."""
    by_flag = {s: a for a in parser._actions if a.dest in _COMMANDS for s in a.option_strings}
    found = []  # (index, tokens taken, dest)
    for i, arg in enumerate(argv):
        action = by_flag.get(arg.partition("=")[0])
        if action is None:
            continue
        takes = "=" not in arg and action.nargs is None and action.const is None  # --cfg VALUE
        optional = "=" not in arg and action.nargs == "?"  # --info [VALUE]
        follows = i + 1 < len(argv) and (takes or (optional and argv[i + 1] in (action.choices or ())))
        found.append((i, 2 if follows else 1, action.dest))
    if len({dest for _, _, dest in found}) < 2:
        return None
    (i, n, first), (j, m, second) = found[0], next(f for f in found if f[2] != found[0][2])
    shown = [" ".join(argv[i : i + n]), " ".join(argv[j : j + m])]
    fixes = []
    for dest, (drop, dropped) in ((first, (j, m)), (second, (i, n))):  # each kept, the other dropped
        kept = [a for x, a in enumerate(argv) if not drop <= x < drop + dropped]
        if dest != "multirun":
            kept = [one_value(a) if is_override(a) else a for a in kept]
        fixes.append(f"{COMMAND} {' '.join(kept)} ({_COMMANDS[dest]})")
    return (
        f"Invalid config: {shown[0]} and {shown[1]}: Hydra runs one of --run, --multirun, --cfg, --info and "
        f"--shell-completion at a time. Fix: {fixes[0]}, or {fixes[1]}."
    )


def flag_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line refusing a flag of the command line before Hydra starts, else None:

    - a flag Hydra has not (``--bogus``; the nearest flag named, ``--multi-run``: ``--multirun``;
      ``--steps.measure=3``: the override without dashes);
    - a flag Hydra's parser refuses: no value (``--config-name``), a value not among its choices
      (``--cfg jb``), a value given to a flag that takes none (``-mx``);
    - overrides both before and after a flag (``a=1 -m b=2``: argparse reads one run of them);
    - ``--config-path``/``-cp``, ``--config-dir``/``-cd`` naming another folder than ``conf`` (module
      doc: missing, a file, unreadable, or a folder), or ``pkg://`` (that imports a package);
    - ``--experimental-rerun`` (it unpickles a file).
    """
    if problem := _dash_lookalike(argv):
        return problem
    parser = hydra_flags_parser()
    try:
        args, extras = parser.parse_known_args(argv)
    except _Refused as exc:
        return _argparse_line(str(exc), parser)
    if flags := [e for e in extras if e.startswith("-")]:
        return _unknown_flag(flags[0], parser, argv)
    if extras:  # overrides after a flag, once argparse had read the first run of them
        overrides = set(args.overrides) | set(extras)
        flags = [a for a in argv if a not in overrides]
        fixed = " ".join([COMMAND, *flags, *(a for a in argv if a in overrides)])
        return (
            f"Invalid config: {extras[0]}: an override after a flag is not read when others come before "
            f"it (Hydra reads one run of overrides). Fix: put the flags first: {fixed}"
        )
    if problem := _commands_problem(argv, parser):
        return problem
    if args.experimental_rerun is not None:
        return (
            f"Invalid config: --experimental-rerun {args.experimental_rerun}: loads a pickle, which runs "
            "code, and flopsweep writes no config.pickle (hydra.output_subdir is null). Fix: drop it; run "
            f"the job's overrides again ({COMMAND} OVERRIDES: its .hydra/overrides.yaml lists them)."
        )
    for flag, value in (("--config-path", args.config_path), ("--config-dir", args.config_dir)):
        if value is None:
            continue
        if value.startswith("pkg://"):
            return _config_folder(flag, value, "names a Python package, which Hydra would import")
        path = os.path.join(
            RUN_PY_FOLDER if flag == "--config-path" else os.getcwd(), os.path.expanduser(value)
        )
        if not _same_folder(path, conf):
            return _config_folder(flag, value, _folder_state(path))
    return None


def _dash_lookalike(argv: list[str]) -> str | None:
    """One line for an argument that starts with a dash other than ASCII ``-`` (an em dash from a word
    processor's autocorrect, U+2212 MINUS SIGN): ``—multirun`` or ``−m`` reached Hydra's override
    grammar as an override and failed there (``LexerNoViableAltException``, exit 1). Named with its
    character and the flag meant: a dash run folded to ASCII (:func:`flopsweep.lookalike.fold_char`),
    ``--`` before a word of several letters, ``-`` before one letter."""
    from flopsweep.lookalike import fold_char

    for arg in argv:
        dashes = len(arg) - len(arg.lstrip("".join(c for c in set(arg[:3]) if fold_char(c) == "-")))
        if not dashes or arg[:dashes].isascii():
            continue
        name = arg[dashes:].partition("=")[0]
        meant = ("-" if len(name) == 1 else "--") + arg[dashes:]
        odd = next(c for c in arg[:dashes] if not c.isascii())
        return (
            f"Invalid config: {printable(arg)}: {odd!r} (U+{ord(odd):04X} {unicodedata.name(odd, 'a dash')}) "
            f"is not the ASCII hyphen a flag starts with. Fix: write {meant}"
        )
    return None


def _listed_groups(conf: str) -> dict[str, str]:
    """The groups ``conf/config.yaml``'s defaults list picks, with the option each picks."""
    from flopsweep.overrides import read_conf_yaml

    defaults = read_conf_yaml(os.path.join(conf, "config.yaml")).get("defaults") or []
    return {k: str(v) for d in defaults if isinstance(d, dict) for k, v in d.items() if " " not in k}


def group_prefix_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for a config group of ``conf/`` given the wrong prefix, else None: a group the
    defaults list does not pick, without ``+`` (``sweep=smoke``: Fix ``+sweep=smoke``) or with
    ``++`` (Hydra: "force-add of config groups is not supported"), or ``~`` (nothing to delete); a
    group it picks, with ``+`` or ``++`` (``+model=gpt-125m``: "Multiple values for model"; Fix
    ``model=gpt-125m``). Hydra's own ``hydra/`` groups, a package (``+model@x=...``) and a
    sub-group (``batch/auto``) are left to Hydra."""
    from flopsweep.override_parsing import parsed_or_none

    listed = _listed_groups(conf)
    for text in overrides_of(argv, deletions=True):
        if (o := parsed_or_none(text)) is None:  # syntax_problem's
            continue
        group = o.key_or_group
        if (
            o.package is not None
            or "/" in group
            or group == "hydra"
            or not os.path.isdir(os.path.join(conf, group))
        ):
            continue
        bare = text.lstrip("+~")
        if group in listed and (o.is_add() or o.is_force_add()):
            return (
                f"Invalid config: {text}: {group} is picked by the defaults already "
                f"({group}={listed[group]}, conf/config.yaml); + adds a group that is not. Fix: {bare}"
            )
        if group in listed:
            continue
        if o.is_delete():
            return (
                f"Invalid config: {text}: no {group} is picked, so there is none to remove. Fix: drop {text}"
            )
        if not o.is_add():
            why = f"{group} is a group added with + (no default picks one)"
            return f"Invalid config: {text}: {why}. Fix: +{bare}"
    return None


def delete_problem(argv: list[str], conf: str = CONF) -> str | None:
    """One line for ``~KEY`` (Hydra's delete) of a key of flopsweep's config or of a group
    ``conf/config.yaml`` picks, else None (``~hydra...`` is Hydra's, an unpicked group's
    :func:`group_prefix_problem`'s).

    The schema (:class:`flopsweep.config.RunConfig` and each option's) keeps every key: Hydra answered
    ``~fault.rank`` with OmegaConf's "FaultConfig (DictConfig) does not support deletion" block, exit 1,
    ``~backend.zero_stage`` with "Could not delete from config"; ``~seed`` and ``~model`` ran, the key
    back at its default, as if nothing had been asked. The fix gives the key a value (its default as the
    example) or drops the override."""
    from omegaconf import OmegaConf

    from flopsweep.config import RunConfig
    from flopsweep.override_schema import structured_schema
    from flopsweep.overrides import unknown_key_problem

    listed = _listed_groups(conf)
    for text in overrides_of(argv, deletions=True):
        if not text.startswith("~"):
            continue
        key = text[1:].partition("=")[0].strip()
        if (
            not key
            or key.startswith("hydra")
            or (os.path.isdir(os.path.join(conf, key)) and key not in listed)
        ):
            continue
        if key in listed:
            return (
                f"Invalid config: {text}: every job needs {article(key)} option (conf/config.yaml picks "
                f"{key}={listed[key]}), so none can be removed. Fix: pick the one you want "
                f"({COMMAND} --help lists them), e.g. {key}={listed[key]}, or drop {text}."
            )
        if problem := unknown_key_problem(key):
            return f"Invalid config: {text}: {problem.removeprefix(f'Invalid config: {key}: ')}"
        schema = structured_schema(RunConfig)
        default = None  # a key of an option (model.n_layer): its default is the option's, not shown here
        if key.partition(".")[0] not in listed:
            default = OmegaConf.select(schema, key, throw_on_missing=False)
        while OmegaConf.is_dict(default) and len(default):  # a section (~steps): one of its keys
            first = next(iter(default))
            key, default = f"{key}.{first}", default[first]
        example = (
            f"{key}={str(default).lower() if isinstance(default, bool) else default} (its default)"
            if isinstance(default, bool | int | float | str) and default != ""
            else f"{key}=VALUE"
        )
        return (
            f"Invalid config: {text}: flopsweep's schema keeps every key, so ~ cannot delete one (Hydra "
            f"refuses it, or runs the default as if nothing was asked). Fix: give the value you want, e.g. "
            f"{example}, or drop {text}."
        )
    return None


COMPLETION_SHELLS = ("bash", "zsh", "fish")
"""The shells of Hydra's completion plug-ins (``hydra._internal.core_plugins``)."""


def completes(argv: list[str]) -> bool:
    """Whether ``argv`` asks for Hydra's shell completion: ``--shell-completion``/``-sc`` (a prefix too,
    :func:`expand_flag_prefixes`). Its words (``install=bash``) are no overrides: the checks of a run's
    command line are not asked (``run.py``), only :func:`completion_problem`."""
    return any(a in ("-sc", "--shell-completion") for a in expand_flag_prefixes(argv))


def completion_problem(argv: list[str], environ: dict[str, str] | None = None) -> str | None:
    """One line for a shell-completion command line Hydra would answer with a ``ValueError`` traceback
    (exit 1), else None: it takes exactly one of ``install=SHELL``, ``uninstall=SHELL`` or ``query=SHELL``,
    SHELL one of :data:`COMPLETION_SHELLS` (``eval "$(flopsweep -sc install=bash)"`` installs it); a
    ``query`` reads the line to complete from ``COMP_LINE`` (``environ``, else the process's), which the
    installed function sets: typed by hand without it, Hydra's ``KeyError: 'COMP_LINE'``."""
    words = [a for a in argv if not a.startswith("-")]
    subs = [w for w in words if w.partition("=")[0] in ("install", "uninstall", "query")]
    fix = f'eval "$({COMMAND} -sc install=bash)" (or zsh, fish) in the shell'
    if len(subs) != 1 or len(words) != 1:
        shown = " ".join(words) or "no subcommand"
        return (
            f"Invalid config: --shell-completion {shown}: takes one of install=SHELL, uninstall=SHELL or "
            f"query=SHELL and nothing else. Fix: {fix}."
        )
    shell = subs[0].partition("=")[2]
    if shell not in COMPLETION_SHELLS:
        return (
            f"Invalid config: {subs[0]}: {shell!r} is no shell of Hydra's completion "
            f"({', '.join(COMPLETION_SHELLS)}). Fix: {fix}."
        )
    if subs[0].startswith("query=") and "COMP_LINE" not in (os.environ if environ is None else environ):
        return (
            f"Invalid config: {subs[0]}: completes the line in COMP_LINE, which is not set (the installed "
            f"completion sets it). Fix: {fix}, then press Tab after {COMMAND}."
        )
    return None
