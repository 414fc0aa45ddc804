"""Where the job's log goes: ``<run folder>/<hydra.job.name>.log`` (``run.log``:
``conf/hydra/job_logging/flopsweep.yaml``), written by :class:`flopsweep.hydrafiles.JobLogHandler`.

Checked before Hydra starts (``run.py``'s ``refusal``, exit 2), as typed on the command line or in a sweep
file's ``hydra:`` (:func:`flopsweep.sweep_file_hydra.output_dir_problem`):

- ``hydra.job.name`` must be a plain file name (:func:`job_name_problem`): ``../esc2`` wrote the log to
  ``<run folder>/../esc2.log``, outside the run's folder, and an absolute ``/tmp/x/userfile`` lost it;
- a file handler's ``filename`` under ``hydra.job_logging`` must lie in the run's folder
  (:func:`log_file_problem`): ``/tmp/abs.log`` wrote the log outside every folder a run owns;
- a ``run.log`` already in the run's folder (a sweep's: in a job folder) that is no regular file, or the file
  a handler's ``filename`` names there (``${hydra.runtime.output_dir}/mine.log``: :func:`log_name_in_folder`)
  (:func:`log_link_problem`): the handler replaced a planted symbolic link with an empty file, without a
  word (:func:`flopsweep.folders.log_link_problem`, the callback's same check);
- a key of ``hydra.job_logging`` that Python's logging does not take (:mod:`flopsweep.job_log_keys`).

Each was exit 0 with the log outside the run's folder, lost, or a user's link replaced. Torch-free."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from flopsweep.flags import is_multirun
from flopsweep.job_name import JOB_NAME_KEY, job_name_problem, plain_name
from flopsweep.override_parsing import overrides_of, typed_values

OUTPUT_DIRS = ("${hydra.runtime.output_dir}", "${hydra:runtime.output_dir}")
"""How a log's ``filename`` names the job's own folder (``conf/hydra/job_logging/flopsweep.yaml``)."""
RUN_DIRS = ("${hydra.run.dir}", "${hydra:run.dir}")
"""How a single run's ``filename`` may name its folder too: there ``hydra.runtime.output_dir`` is
``hydra.run.dir``, as Hydra resolves it (session 38)."""
JOB_DIRS = ("${hydra.sweep.dir}/${hydra.sweep.subdir}", "${hydra:sweep.dir}/${hydra:sweep.subdir}")
"""How a multirun's ``filename`` may name the job's folder too (Hydra's ``output_dir``: sweep.dir/subdir)."""
NAME_PARTS = ("${hydra.job.name}", "${hydra:job.name}", "${hydra.job.num}", "${hydra:job.num}")
"""The interpolations a log's file name may hold below :data:`OUTPUT_DIRS` (each a plain name)."""
_LOG_KEY = re.compile(r"^hydra\.job_logging(\.handlers(\.[^.]+(\.filename)?)?)?$")


def below_output_dir(filename: str, *, sweep: bool | None = None) -> str | None:
    """The part of a log's ``filename`` below ``${hydra.runtime.output_dir}/`` (:data:`OUTPUT_DIRS`; also
    :data:`RUN_DIRS` where ``sweep`` is False, :data:`JOB_DIRS` where True: the folder Hydra resolves each
    to), normalised as the open will see it (``logging.FileHandler`` opens ``os.path.abspath(filename)``:
    ``/./``, ``//`` and ``a/../`` are gone before any folder is looked at): ``./mine.log``, ``/mine.log``
    and ``a/../mine.log`` are ``mine.log``, ``../x.log`` stays ``../x.log``. None when not of that form."""
    prefixes = OUTPUT_DIRS + {None: (), False: RUN_DIRS, True: JOB_DIRS}[sweep]
    rest = next((filename[len(p) :] for p in prefixes if filename.startswith(p + "/")), None)
    return None if rest is None else _normal(rest.lstrip("/"))


def _normal(rest: str) -> str:
    """A relative path as the open sees it (:func:`os.path.normpath`, lexical); ``""``: the folder itself."""
    norm = os.path.normpath(rest) if rest else "."
    return "" if norm == "." else norm


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` lies strictly below ``folder`` (both taken from the current folder, normalised)."""
    here, top = (os.path.normpath(os.path.abspath(os.path.expanduser(p))) for p in (path, folder))
    return here != top and here.startswith(top.rstrip(os.sep) + os.sep)


def _in_run_folder(filename: str, folder: str | None, chdir: bool, sweep: bool) -> str | None:
    """The path below the job's folder of a log's ``filename`` as typed (normalised: :func:`_normal`), None
    where it does not lie there: ``${hydra.runtime.output_dir}/NAME`` (NAME relative, no ``..``, only
    :data:`NAME_PARTS` interpolated), a literal path below ``folder`` (the run's or sweep's folder as typed,
    when literal), or, with ``hydra.job.chdir=true``, a relative one. ``sweep``: a multirun's
    (:func:`below_output_dir`: ``${hydra.run.dir}/x`` is the job's folder in a single run only)."""
    rest = below_output_dir(filename, sweep=sweep)
    if rest is not None:
        for part in NAME_PARTS:
            rest = rest.replace(part, "x")
    elif "${" not in filename and filename and folder and "${" not in folder and _inside(filename, folder):
        top = os.path.abspath(os.path.expanduser(folder))
        return os.path.relpath(os.path.abspath(os.path.expanduser(filename)), top)
    elif chdir and not os.path.isabs(filename):
        rest = _normal(filename)
    else:
        return None
    parts = rest.split("/")
    ok = bool(rest) and "${" not in rest and ".." not in parts and parts[-1] not in ("", ".")
    return rest if ok else None


def _made(folder: str | None, rest: str, unknown: bool) -> bool:
    """Whether the sub-folder of ``rest`` (a log's path below the job's folder) is there already, a folder,
    no link on the way: only for a single run's literal ``folder`` (``unknown``: a sweep's job folder, or
    the folder ``hydra.job.chdir`` makes, cannot be told)."""
    if unknown or not folder or "${" in folder:
        return False
    top = os.path.abspath(os.path.expanduser(folder))
    parts = rest.split("/")[:-1]
    paths = [os.path.join(top, *parts[: i + 1]) for i in range(len(parts))]
    return all(os.path.isdir(p) and not os.path.islink(p) for p in paths)


def _filenames(key: str, value: str) -> list[tuple[str, str]]:
    """The ``(key, filename)`` pairs an override of ``hydra.job_logging`` sets: its value when the key is a
    handler's ``filename``, else each ``filename`` of the handlers in its mapping value
    (``+hydra.job_logging.handlers.f={class:logging.FileHandler,filename:/tmp/x}``)."""
    match = _LOG_KEY.match(key)
    if not match:
        return []
    if match.group(3):
        return [(key, value)]
    from flopsweep.override_parsing import parsed_or_none

    parsed = parsed_or_none(f"{key}={value}")
    found = parsed.value() if parsed is not None else None
    if match.group(2):  # hydra.job_logging.handlers.H={...}: one handler
        handlers = {key: found}
    else:  # hydra.job_logging={handlers: {...}}, hydra.job_logging.handlers={H: {...}}
        if not match.group(1):
            found, key = (found.get("handlers") if isinstance(found, dict) else None), f"{key}.handlers"
        handlers = {f"{key}.{h}": v for h, v in found.items()} if isinstance(found, dict) else {}
    return [
        (f"{name}.filename", str(h["filename"]))
        for name, h in handlers.items()
        if isinstance(h, dict) and h.get("filename") is not None
    ]


FILE_LOG_KEY = "hydra.job_logging.handlers.file.filename"
"""The key of the job log's own file name (``conf/hydra/job_logging/flopsweep.yaml``)."""


def log_name_in_folder(
    filename: str, job_name: str, folder: str | None = None, *, sweep: bool | None = None
) -> str | None:
    """The file name in the job's folder of a log handler's ``filename`` as typed or composed (unresolved),
    normalised as the open sees it (:func:`below_output_dir`: ``/./``, ``//``, ``a/../``):
    ``${hydra.runtime.output_dir}/NAME`` (``${hydra.job.name}`` in NAME taken as ``job_name``), or a literal
    path directly in ``folder`` (a single run's ``hydra.run.dir`` as typed). None where it cannot be told
    without resolving (another interpolation, ``${hydra.job.num}``), lies below a sub-folder, or leaves the
    folder (:func:`log_file_problem` refuses that). ``sweep``: whether a multirun's (None: not told)."""
    rest = below_output_dir(filename, sweep=sweep)
    if rest is None:
        if "${" in filename or not folder or "${" in folder or not _inside(filename, folder):
            return None
        rest = os.path.relpath(os.path.abspath(os.path.expanduser(filename)), os.path.abspath(folder))
    for part in NAME_PARTS[:2]:
        rest = rest.replace(part, job_name)
    return None if not rest or "${" in rest or "/" in rest or rest in (".", "..") else rest


def log_file_problem(argv: list[str]) -> str | None:
    """One line refusing a ``filename`` of a ``hydra.job_logging`` handler (``handlers.file.filename=``, or a
    handler's mapping) that does not lie in the job's folder (:func:`_in_run_folder`), else None:
    ``/tmp/abs.log`` wrote the job's log outside every folder a run owns, exit 0; or that lies in a
    sub-folder of it (``${hydra.runtime.output_dir}/sub/x.log``: no one makes it, the log went to the
    console only, exit 0)."""
    typed = typed_values(overrides_of(argv))
    sweep = is_multirun(argv)
    dir_key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    chdir = typed.get("hydra.job.chdir", "false").lower() in ("true", "1", "yes", "on")
    for key, value in typed.items():
        for name, filename in _filenames(key, value):
            rest = _in_run_folder(filename, typed.get(dir_key), chdir, sweep)
            if rest is not None and "/" in rest and not _made(typed.get(dir_key), rest, sweep or chdir):
                # logging makes no folder: the log went to the console only, exit 0
                sub, _, base = rest.rpartition("/")
                return (
                    f"Invalid config: {name}={filename}: the job's log would be in {sub}/ below the job's "
                    "folder, which nothing makes (logging opens the file, it makes no folder), so it would "
                    "go to the console only. Fix: name a file in the job's folder itself: "
                    f"{name}=${{hydra.runtime.output_dir}}/{plain_name(base)}."
                )
            if rest is not None:
                continue
            where = "job's folder under hydra.sweep.dir" if sweep else "run's folder (hydra.run.dir)"
            plain = plain_name(filename.replace("${", "").replace("}", ""))
            return (
                f"Invalid config: {name}={filename}: the job's log would be written outside the {where}, "
                "where no resume, cleanup or reader of the run finds it. Fix: drop the override (the log is "
                f"the folder's run.log), or name a file in it: {name}=${{hydra.runtime.output_dir}}/{plain}."
            )
    return None


def job_log_problem(argv: list[str]) -> str | None:
    """One line for a ``hydra.job.name`` that is no plain file name (:func:`job_name_problem`) or a log file
    outside the job's folder (:func:`log_file_problem`), as typed (``argv``: the command line, or a sweep
    file's keys as overrides), else None."""
    typed = typed_values(overrides_of(argv))
    if JOB_NAME_KEY in typed and "${" not in typed[JOB_NAME_KEY]:
        if problem := job_name_problem(typed[JOB_NAME_KEY]):
            return problem
    return log_file_problem(argv)


def log_link_problem(argv: list[str]) -> str | None:
    """One line refusing a typed ``hydra.run.dir`` (``hydra.sweep.dir`` with ``-m``: each job folder in it)
    whose ``<hydra.job.name>.log`` is there and is no regular file (a symbolic link, a FIFO, a folder), before
    Hydra makes anything (:func:`flopsweep.folders.log_link_problem`), else None. A folder given through an
    interpolation or a sweep file is the callback's (:mod:`flopsweep.callbacks`)."""
    from flopsweep.folders import log_link_problem as folder_problem

    typed = typed_values(overrides_of(argv))
    sweep = is_multirun(argv)
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    folder, name = typed.get(key, ""), typed.get(JOB_NAME_KEY, "run")
    if not folder or "${" in folder or "${" in name or job_name_problem(name):
        return None
    logs = {FILE_LOG_KEY: f"{name}.log"}  # the file handler's name, unless typed; any other handler's too
    for k, value in typed.items():
        for handler, filename in _filenames(k, value):
            logs[handler] = log_name_in_folder(filename, name, None if sweep else folder, sweep=sweep)
    for log in dict.fromkeys(v for v in logs.values() if v):
        if problem := folder_problem(key, Path(os.path.expanduser(folder)), log, sweep=sweep):
            return problem
    return None


def job_log_name(config: Any) -> str:
    """The job's log file name of a composed ``config``: its file handler's ``filename`` in the job's folder
    (:func:`log_name_in_folder`: ``${hydra.runtime.output_dir}/mine.log``), else ``<hydra.job.name>.log``;
    :data:`flopsweep.unstarted.JOB_LOG` where the name cannot be resolved (each job's own check says why). The
    callback's folder checks read it (:func:`flopsweep.folders.log_link_problem`)."""
    from omegaconf import OmegaConf

    from flopsweep.unstarted import JOB_LOG

    try:
        name = str(config.hydra.job.name)
    except Exception:  # noqa: BLE001 - a callback's raise is only Hydra's warning: never raise here
        return JOB_LOG
    if job_name_problem(name):  # refused by folders.log_link_problem, by its name
        return f"{name}.log"
    try:
        handler = OmegaConf.to_container(config.hydra.job_logging, resolve=False)["handlers"]["file"]
    except Exception:  # noqa: BLE001 - no file handler (hydra/job_logging=disabled): the default name
        return f"{name}.log"
    mode = str(OmegaConf.select(config, "hydra.mode", default=None))
    sweep = True if mode.endswith("MULTIRUN") else False if mode.endswith("RUN") else None
    return log_name_in_folder(str(handler.get("filename") or ""), name, sweep=sweep) or f"{name}.log"
