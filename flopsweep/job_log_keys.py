"""The keys of ``hydra.job_logging`` that Python's logging takes, checked before Hydra starts (``run.py``'s
``refusal``, exit 2): :func:`job_logging_key_problem`.

``hydra.job_logging`` is handed to :func:`logging.config.dictConfig` as it is (``conf/hydra/job_logging/
flopsweep.yaml``: handlers ``console`` and ``file``). A key it does not take was a traceback:
``+hydra.job_logging.handlers.file.baseFilename=x`` (the ``FileHandler``'s attribute, not its argument)
ended in ``TypeError: FileHandler.__init__() got an unexpected keyword argument 'baseFilename'`` and
``ValueError: Unable to configure handler 'file'``, exit 1; a misspelt one without ``+``
(``handlers.file.filenme=x``) Hydra's five lines ``Could not override ... Key 'filenme' is not in struct``; a
level Python's logging does not name (``handlers.file.level=LOUD``), a traceback too. Torch-free.
"""

from __future__ import annotations

from flopsweep.near_keys import ranked
from flopsweep.override_grammar import overrides_of

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
"""The level names Python's logging takes (:func:`logging.getLevelNamesMapping`, less the aliases)."""


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


def _handler_problem(key: str, value: str, parts: list[str], added: bool) -> str | None:
    """A key of one handler (``hydra.job_logging.handlers.H.K``): one :func:`logging.config.dictConfig`
    does not take for H's class, one the file lacks typed without ``+``, a level logging does not name."""
    handler, name = parts[3], parts[4]
    known = HANDLER_KEYS + CLASS_KEYS.get(handler, tuple(k for ks in CLASS_KEYS.values() for k in ks))
    what = {"file": "the job log's file handler (a logging.FileHandler)", "console": "the console handler"}
    if name not in known:
        said = what.get(handler, f"the handler {handler}")
        why = f"{said} takes no key {name} (its keys: {', '.join(known)})"
        return _said(key, value, why, _near(parts, 4, known, value))
    if name == "level" and (problem := _level_problem(key, value)):
        return problem
    if handler in IN_FILE and name not in IN_FILE[handler] and not added:
        why = f"the {handler} handler of conf/hydra/job_logging/flopsweep.yaml sets no {name} to override"
        return _said(key, value, why, f"add it with a +: +{key}={value}")
    return None


def _level_problem(key: str, value: str) -> str | None:
    """A ``level`` that is no level name of Python's logging nor a number."""
    level = value.strip().strip("'\"")
    if level.upper() in LEVELS or level.lstrip("-").isdigit():
        return None
    near = [x for x in LEVELS if x.startswith(level.upper()[:2])] or ["INFO"]
    why = f"not a level of Python's logging (one of {', '.join(LEVELS)})"
    return _said(key, value, why, f"set {key}={near[0]}")


def job_logging_key_problem(argv: list[str]) -> str | None:
    """One line refusing an override of ``hydra.job_logging`` (``argv``: the command line) whose key
    :func:`logging.config.dictConfig` does not take (:data:`TOP_KEYS`; a handler's :data:`HANDLER_KEYS` and
    its class's :data:`CLASS_KEYS`), with the nearest key as its fix; a handler's key that
    ``conf/hydra/job_logging/flopsweep.yaml`` lacks (:data:`IN_FILE`) typed without ``+``; a ``level`` that
    is no level of logging's (:data:`LEVELS`). Else None. A whole mapping
    (``hydra.job_logging.handlers.f={...}``) is Hydra's and logging's to check."""
    for override in overrides_of(argv):
        key, _, value = override.partition("=")
        added, key = key.startswith("+"), key.lstrip("+")
        if not key.startswith(PREFIX) or override.startswith("~"):
            continue
        parts = key.split(".")
        if parts[2] not in TOP_KEYS:
            why = "not a key of Python's logging configuration (logging.config.dictConfig)"
            return _said(key, value, why, _near(parts, 2, TOP_KEYS, value))
        handler = parts[2] == "handlers" and len(parts) >= 5
        if handler and (problem := _handler_problem(key, value, parts, added)):
            return problem
        if parts[2] == "root" and parts[3:] == ["level"] and (problem := _level_problem(key, value)):
            return problem
    return None
