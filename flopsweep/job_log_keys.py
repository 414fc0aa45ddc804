"""The keys of ``hydra.job_logging`` that Python's logging takes, checked before Hydra starts (``run.py``'s
``refusal``, exit 2): :func:`job_logging_key_problem`.

``hydra.job_logging`` is handed to :func:`logging.config.dictConfig` as it is (``conf/hydra/job_logging/
flopsweep.yaml``: handlers ``console`` and ``file``). A key it does not take was a traceback:
``+hydra.job_logging.handlers.file.baseFilename=x`` (the ``FileHandler``'s attribute, not its argument)
ended in ``TypeError: FileHandler.__init__() got an unexpected keyword argument 'baseFilename'`` and
``ValueError: Unable to configure handler 'file'``, exit 1; a misspelt one without ``+``
(``handlers.file.filenme=x``) Hydra's five lines ``Could not override ... Key 'filenme' is not in struct``; a
level Python's logging does not name (``handlers.file.level=LOUD``, ``root.level=info``: its table is upper
case), an encoding :func:`codecs.lookup` does not know (``+handlers.file.encoding=nope``) and a formatter not
defined under ``hydra.job_logging.formatters`` (``handlers.file.formatter=nofmt``), a traceback too (session
38). Each fix is typed as it is accepted: ``+`` where the file lacks the key. Torch-free.
"""

from __future__ import annotations

import codecs
import logging
import os

from flopsweep.near_keys import ranked
from flopsweep.override_parsing import overrides_of, split_override

PREFIX = "hydra.job_logging."
TOP_KEYS = (
    "version",
    "formatters",
    "filters",
    "handlers",
    "loggers",
    "root",
    "incremental",
    "disable_existing_loggers",
)
"""The keys of :func:`logging.config.dictConfig`'s schema (the Python docs, "Dictionary Schema Details")."""
HANDLER_KEYS = ("class", "level", "formatter", "filters")
"""Every handler's keys in that schema; the others are its class's arguments (:data:`CLASS_KEYS`)."""
CLASS_KEYS = {
    "file": ("filename", "mode", "encoding", "delay", "errors"),
    "console": ("stream",),
}
"""The arguments of the class of each handler of ``conf/hydra/job_logging/flopsweep.yaml``:
``flopsweep.hydrafiles.JobLogHandler`` (a ``logging.FileHandler``) and ``logging.StreamHandler``."""
IN_FILE = {"file": ("class", "formatter", "filename"), "console": ("class", "formatter", "stream")}
"""The keys each handler has in ``conf/hydra/job_logging/flopsweep.yaml``: another needs ``+`` to be added."""
LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG", "NOTSET")
"""The level names Python's logging takes, shown in a refusal (:data:`LEVEL_NAMES`, less the aliases)."""
LEVEL_NAMES = frozenset(getattr(logging, "getLevelNamesMapping", lambda: logging._nameToLevel)())
"""Every name :func:`logging.config.dictConfig` takes as a ``level`` (logging's own table, case as it is:
``info`` is ``ValueError: Unknown level: 'info'``); an unquoted whole number is a level too."""
FILE_KEYS = (
    *("version", "formatters", "formatters.simple", "formatters.simple.format", "handlers"),
    *(f"handlers.{h}{k}" for h, ks in IN_FILE.items() for k in ("", *(f".{k}" for k in ks))),
    *("root", "root.level", "root.handlers", "disable_existing_loggers"),
)
"""Every key (below ``hydra.job_logging.``) that ``conf/hydra/job_logging/flopsweep.yaml`` sets: a ``+``
there is Hydra's five lines (``Could not append to config. An item is already at ...``); a key not
among them needs its ``+`` on the command line (:func:`_typed`)."""
FILE_FORMATTERS = ("simple",)
"""The formatters ``conf/hydra/job_logging/flopsweep.yaml`` defines under ``formatters``."""


def _said(key: str, value: str, why: str, fix: str) -> str:
    """The house's one line: ``Invalid config: KEY=VALUE: why. Fix: fix.`` (no ``.`` after a ``?``)."""
    return f"Invalid config: {key}={value}: {why}. Fix: {fix}{'' if fix.endswith('?') else '.'}"


def _near(parts: list[str], at: int, known: tuple[str, ...], value: str) -> str:
    """``did you mean KEY'=VALUE?``, the key's part ``at`` replaced by the nearest of ``known``
    (:func:`flopsweep.near_keys.ranked`), else ``drop the override`` and the keys there are."""
    near = ranked(parts[at], known, 1)
    if not near:
        return f"drop the override (the keys there: {', '.join(known)})"
    return f"did you mean {'.'.join([*parts[:at], near[0], *parts[at + 1 :]])}={value}?"


def _typed(key: str, also: frozenset[str] = frozenset()) -> str:
    """``key`` (``hydra.job_logging.X``) as the command line must type it to set it: with a ``+`` where
    ``conf/hydra/job_logging/flopsweep.yaml`` lacks it (:data:`FILE_KEYS`) and no selected sweep file sets
    it (``also``: :func:`sweep_file_log_keys`), else without (Hydra's "Could not append" for a ``+``)."""
    bare = key.removeprefix(PREFIX)
    return key if bare in FILE_KEYS or bare in also else f"+{key}"


def sweep_file_log_keys(argv: list[str], conf: str) -> frozenset[str]:
    """The keys below ``hydra.job_logging`` (``handlers.file.level``) that conf/config.yaml or a sweep file
    the command line ``argv`` selects sets (a ``# @package _global_`` file's ``hydra: job_logging:``): each
    is there before the command line's overrides, which then set it without ``+``. Empty where the files
    are refused (their own line)."""
    from flopsweep.conf_files import ConfFileProblem, read_selected

    try:
        read = read_selected(argv, conf)
    except ConfFileProblem:
        return frozenset()
    tops = (
        os.path.normpath(os.path.join(conf, "config.yaml")),
        os.path.join(os.path.normpath(conf), "sweep", ""),
    )
    keys: set[str] = set()

    def walk(node: dict, prefix: str) -> None:
        for name, value in node.items():
            keys.add(f"{prefix}{name}")
            if isinstance(value, dict):
                walk(value, f"{prefix}{name}.")

    for path, data in read.items():
        hydra = (
            data.get("hydra")
            if isinstance(data, dict) and (path == tops[0] or path.startswith(tops[1]))
            else None
        )
        logging_ = hydra.get("job_logging") if isinstance(hydra, dict) else None
        if isinstance(logging_, dict):
            walk(logging_, "")
    return frozenset(keys)


def _handler_problem(
    key: str, value: str, parts: list[str], added: bool, formatters: set[str] | None, also: frozenset[str]
) -> str | None:
    """A key of one handler (``hydra.job_logging.handlers.H.K``): one :func:`logging.config.dictConfig`
    does not take for H's class, one the file lacks typed without ``+``, a level logging does not name, an
    encoding :func:`codecs.lookup` does not know, a formatter not among ``formatters`` (None: not told)."""
    handler, name = parts[3], parts[4]
    known = HANDLER_KEYS + CLASS_KEYS.get(handler, tuple(k for ks in CLASS_KEYS.values() for k in ks))
    what = {"file": "the job log's file handler (a logging.FileHandler)", "console": "the console handler"}
    if name not in known:
        said = what.get(handler, f"the handler {handler}")
        why = f"{said} takes no key {name} (its keys: {', '.join(known)})"
        return _said(key, value, why, _near(parts, 4, known, value))
    typed = _typed(key, also)
    if name == "level" and (problem := _level_problem(key, value, typed)):
        return problem
    if name == "encoding" and handler in CLASS_KEYS and (problem := _encoding_problem(key, value, typed)):
        return problem
    if name == "formatter" and (problem := _formatter_problem(key, value, typed, formatters)):
        return problem
    if handler in IN_FILE and name not in IN_FILE[handler] and not added and typed.startswith("+"):
        why = f"the {handler} handler of conf/hydra/job_logging/flopsweep.yaml sets no {name} to override"
        return _said(key, value, why, f"add it with a +: +{key}={value}")
    return None


def _bare(value: str) -> str:
    """``value`` as a YAML string reads it: blanks and one pair of quotes off."""
    return value.strip().strip("'\"")


def _level_problem(key: str, value: str, typed: str) -> str | None:
    """A ``level`` that is no name of logging's table (:data:`LEVEL_NAMES`, upper case) nor an unquoted
    whole number; the fix (typed as ``typed``: with its ``+``) names the level it meant."""
    level = _bare(value)
    if level in LEVEL_NAMES or (level == value.strip() and level.lstrip("-").isdigit()):
        return None
    if level.upper() in LEVEL_NAMES:
        why = f"logging's level names are upper case ({level} is not one of {', '.join(LEVELS)})"
        return _said(key, value, why, f"set {typed}={level.upper()}")
    near = [x for x in LEVELS if x.startswith(level.upper()[:2])] or ["INFO"]
    why = f"not a level of Python's logging (one of {', '.join(LEVELS)})"
    return _said(key, value, why, f"set {typed}={near[0]}")


def _encoding_problem(key: str, value: str, typed: str) -> str | None:
    """An ``encoding`` of a file or stream handler that :func:`codecs.lookup` does not know."""
    try:
        codecs.lookup(_bare(value))
    except (LookupError, ValueError, TypeError):
        why = "not an encoding Python knows (codecs.lookup), so logging could not open the log"
        return _said(key, value, why, f"set {typed}=utf-8")
    return None


def _formatter_problem(key: str, value: str, typed: str, formatters: set[str] | None) -> str | None:
    """A handler's ``formatter`` that no ``hydra.job_logging.formatters`` entry defines (``formatters``:
    the file's and those the overrides add; None when the overrides replace or delete them)."""
    name = _bare(value)
    if formatters is None or name in formatters:
        return None
    known = sorted(formatters)
    why = f"no formatter {name} under hydra.job_logging.formatters (defined: {', '.join(known) or 'none'})"
    if not known:
        return _said(
            key,
            value,
            why,
            f"drop the override, or define it: +hydra.job_logging.formatters.{name}.format=%(message)s",
        )
    near = ranked(name, tuple(known), 1) or known[:1]
    return _said(key, value, why, f"set {typed}={near[0]}")


def _formatters(argv: list[str]) -> set[str] | None:
    """The formatter names a handler may name: :data:`FILE_FORMATTERS` and each
    ``hydra.job_logging.formatters.NAME...`` the overrides set; None where an override replaces or deletes
    the formatters as a whole, or picks another ``hydra/job_logging`` option (its own formatters)."""
    names = set(FILE_FORMATTERS)
    for override in overrides_of(argv):
        prefix, key, _ = split_override(override)
        if key in ("hydra.job_logging", "hydra.job_logging.formatters", "hydra/job_logging"):
            return None
        parts = key.split(".")
        if parts[:2] == ["hydra", "job_logging"] and parts[2:3] == ["formatters"] and "~" not in prefix:
            names.add(parts[3])
    return names


def job_logging_key_problem(
    argv: list[str], conf: str | None = None, also: frozenset[str] = frozenset()
) -> str | None:
    """One line refusing an override of ``hydra.job_logging`` (``argv``: the command line) whose key
    :func:`logging.config.dictConfig` does not take (:data:`TOP_KEYS`; a handler's :data:`HANDLER_KEYS` and
    its class's :data:`CLASS_KEYS`), with the nearest key as its fix; a handler's key that
    ``conf/hydra/job_logging/flopsweep.yaml`` lacks (:data:`IN_FILE`) typed without ``+``; a ``level`` (of a
    handler, the root, a logger) that is no level of logging's (:data:`LEVEL_NAMES`), an ``encoding``
    :func:`codecs.lookup` does not know, a ``formatter`` not defined (:func:`_formatters`); a ``+`` on a key
    the file sets (:data:`FILE_KEYS`; ``++``, a sweep file's keys, adds or sets). Else None.
    A whole mapping (``hydra.job_logging.handlers.f={...}``) is Hydra's and logging's to check. A key a
    sweep file sets (``also``, and :func:`sweep_file_log_keys` of ``conf`` where given) is typed without
    ``+``, as the file's (``+...file.level=INFO`` beside a file's ``level: info``: Hydra's five lines)."""
    also = also | (sweep_file_log_keys(argv, conf) if conf else frozenset())
    formatters = _formatters(argv)
    for override in overrides_of(argv):
        key, _, value = override.partition("=")
        once = key.startswith("+") and not key.startswith("++")  # ++ adds or sets: a file's keys (its check)
        added, key = key.startswith("+"), key.lstrip("+")
        if not key.startswith(PREFIX) or override.startswith("~"):
            continue
        parts = key.split(".")
        if parts[2] not in TOP_KEYS:
            why = "not a key of Python's logging configuration (logging.config.dictConfig)"
            return _said(key, value, why, _near(parts, 2, TOP_KEYS, value))
        handler = parts[2] == "handlers" and len(parts) >= 5
        if handler and (problem := _handler_problem(key, value, parts, added, formatters, also)):
            return problem
        level = parts[2:] == ["root", "level"] or (parts[2] == "loggers" and parts[4:] == ["level"])
        if level and (problem := _level_problem(key, value, _typed(key, also))):
            return problem
        if (
            once and formatters is not None and _typed(key, also) == key
        ):  # the file's key: + is Hydra's 5 lines
            file = "conf/hydra/job_logging/flopsweep.yaml" if _typed(key) == key else "the sweep file"
            why = f"{file} sets it already, and + adds only a new key"
            return _said(f"+{key}", value, why, f"set it without the +: {key}={value}")
    return None
