"""The files Hydra would write in a sweep folder, written by flopsweep instead: never through a
link, never blocking on a FIFO.

Hydra opens ``multirun.yaml``, each job's ``.hydra/config.yaml``, ``hydra.yaml`` and
``overrides.yaml`` and its log ``<job name>.log`` with a plain ``open``, before any flopsweep code
of the job runs: a link planted at one of those paths is written through (another file becomes
YAML), and a FIFO hangs the sweep. So flopsweep's config sets ``hydra.output_subdir: null`` (Hydra
writes no ``.hydra/``), ``hydra/job_logging: flopsweep`` (the log through :class:`JobLogHandler`) and
its sweeper writes ``multirun.yaml`` with :func:`write_multirun`. The job writes its ``.hydra/``
files with :func:`write_hydra_files` once its checks have passed (a run refused there leaves
another run's ``.hydra/`` as it was). The files hold what Hydra wrote there before, word for word.

The rest of the sweep folder, checked where the sweep starts (:class:`flopsweep.callbacks.SweepSummary`):
only flopsweep's sweepers run (:func:`sweeper_problem`: Hydra's own ``basic`` and the plugin's own
``optuna`` write ``multirun.yaml`` and ``optimization_results.yaml`` with plain opens;
``optuna_objective`` writes the latter through :func:`saved_safely`), and a submitit launcher's
``submitit_folder`` is a private folder of this user (:func:`submitit_folder`). A job folder that is a
link is refused, never followed (:func:`flopsweep.safe_folders.job_folder`; the log: :class:`JobLogHandler`).
Before the sweeper writes ``multirun.yaml``, the folder is locked (:mod:`flopsweep.locks`) and must be
no single run's and, without ``resume=true``, hold no job records
(:func:`flopsweep.folders.sweep_folder_problem`); a single run is refused in a sweep's folder
(:func:`flopsweep.folders.run_folder_problem`).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from flopsweep.files import RecordUnwritable, replace_text
from flopsweep.free_folder import another
from flopsweep.protected import protected_folder_problem
from flopsweep.safe_folders import foreign_link_refusal, own_folder, private_folder

HYDRA_DIR = ".hydra"
"""The job's folder of Hydra files (Hydra's default ``hydra.output_subdir``)."""
MULTIRUN_FILE = "multirun.yaml"
RUN_FILES_FOLDERS = (HYDRA_DIR, ".submitit", ".flopsweep")
"""A run's own files (Hydra's ``.hydra/``, submitit's pickles and logs, flopsweep's scratch folder,
:data:`flopsweep.launch.SCRATCH`): no run or sweep directory may lie inside one of them (its record,
log and Hydra files would be written among another run's files, and replaced with them)."""


MAX_JOB_FOLDERS = 100_000
"""At most this many entries of a sweep folder are looked at for job folders planted before it
starts (:func:`flopsweep.callbacks.job_folders_problem`, :func:`hydra_mark_problem`) or for its job records
(:func:`flopsweep.folders._job_records`)."""


SYSTEM_FOLDERS = ("/dev", "/proc", "/sys", "/run")
"""Folders of the system's own special files (devices, a process's files, sockets): nothing there is
a user's to remove."""


def removable(path: str, st: os.stat_result) -> bool:
    """Whether a refusal may suggest removing ``path`` (``lstat`` result ``st``): a regular file, a
    symbolic link, a FIFO or a socket of this user's, outside :data:`SYSTEM_FOLDERS`; never a
    device (``/dev/null`` is no one's to remove) nor another user's file."""
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or st.st_uid != os.geteuid():
        return False
    return not any(path == top or path.startswith(top + os.sep) for top in SYSTEM_FOLDERS)


def output_folder_problem(key: str, value: str) -> str | None:
    """One line refusing ``value`` as ``key`` (``hydra.run.dir``, ``hydra.sweep.dir``) before
    anything is made or written, else None (missing, or a real folder):

    - something there that is not a folder: a symbolic link (to a folder, a file, dangling or
      looping: never followed, the records and Hydra's files would go where it leads), a FIFO, a
      file, a socket, a device;
    - the root of the file system (``/``, ``/..``): its ``.hydra/`` would make every other folder of the
      machine one inside a run's, refused to every later run (``folders.nested_folder_problem``);
    - a path inside a run's own files (:data:`RUN_FILES_FOLDERS`), as written or once its links are
      resolved (``R/.hydra``, ``S/0/.flopsweep/x``, ``S/.submitit/1``);
    - a path inside a folder Hydra reads configs or code from (:func:`config_folder_problem`);
    - ``$HOME`` itself, the checkout's own folder, a path inside its code, tests or docs, or inside the
      Python environment (:func:`flopsweep.protected.protected_folder_problem`);
    - a folder whose ``.hydra`` (a sweep's: a job folder's, ``S/0/.hydra``) is a file, a link, a FIFO
      (:func:`hydra_mark_problem`);
    - a path through another user's symbolic link, in any part (``/tmp/x/link/sub``, ``outputs/`` a
      link planted by another user: :func:`flopsweep.links.foreign_link`); a link of this user's or
      root's in the middle (``outputs -> /scratch/me/outputs``) is followed.

    The value is taken as Hydra takes it: relative to the current directory, ``.`` and ``..`` and a
    trailing ``/`` as ``os.path.normpath`` reads them.
    """
    path = os.path.normpath(os.path.abspath(os.path.expanduser(value)))
    fix = f"Fix: {another(path, key)}"
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # missing, or under a file: making it says why
        st = None
    except OSError as exc:
        return f"Invalid config: {key}={value}: cannot be checked ({exc.strerror or exc}). {fix}."
    if st is not None and not stat.S_ISDIR(st.st_mode):
        what = _not_a_folder(path, st)
        yours = removable(path, st)
        return (
            f"Invalid config: {key}={value}: is {what}, not a folder of this run; it is never followed "
            f"or written through (the records, the log and Hydra's files would go there). "
            f"Fix: {f'remove {path} if it is yours, or ' if yours else ''}{another(path, key)}."
        )
    real = os.path.realpath(path)
    if os.path.dirname(real) == real:  # ``/``, ``/..``, a link to it: every other folder is inside it
        example = "multirun/my-sweep" if "sweep" in key else "outputs/my-run"
        return (
            f"Invalid config: {key}={value}: is the root of the file system ({real}); the files written "
            f"there would put every later run and sweep on this machine inside this one's folder, each then "
            f"refused. "
            f"Fix: name a folder of its own, e.g. {key}={example}."
        )
    if foreign := foreign_link_refusal(value, f"Invalid config: {key}={value}"):  # ``..`` kept, as the kernel
        return f"{foreign.line}. Fix: {foreign.fix}."
    if problem := config_folder_problem(key, value, real):
        return problem
    if problem := protected_folder_problem(key, value, real) or hydra_mark_problem(key, value, path):
        return problem
    for parts in (Path(path).parts, Path(os.path.realpath(path)).parts):
        if inside := next((part for part in parts if part in RUN_FILES_FOLDERS), None):
            outside = Path(*parts[: parts.index(inside)])  # the run's folder that holds it: one beside that
            return (
                f"Invalid config: {key}={value}: is inside a {inside} folder, a run's own files; the "
                f"records and Hydra's files would be written among them. Fix: {another(outside, key)}, "
                f"outside any {', '.join(RUN_FILES_FOLDERS)} folder."
            )
    return None


def hydra_mark_problem(key: str, value: str, folder: str) -> str | None:
    """One line refusing ``value`` as ``key`` when the run's ``.hydra`` (``folder/.hydra``; for
    ``hydra.sweep.dir``, each job folder's already there, ``folder/N/.hydra``, at most
    :data:`MAX_JOB_FOLDERS` entries looked at) is not a folder: a regular file, a symbolic link (never
    followed), a FIFO. The job refused it only after Hydra made ``run.log`` and a plan wrote ``plan.csv``
    (exit 1); now before anything is written (exit 2). Else None."""
    from flopsweep.safe_read import file_kind

    jobs = [Path(folder)]
    if "sweep" in key:
        try:
            with os.scandir(folder) as entries:
                jobs = [
                    Path(e.path)
                    for e in itertools.islice(entries, MAX_JOB_FOLDERS)
                    if e.is_dir(follow_symlinks=False)
                ]
        except OSError:  # missing (a new sweep) or unreadable: each job checks its own
            jobs = []
    for job in jobs:
        mark = job / HYDRA_DIR
        try:
            st = os.lstat(mark)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            yours = f"remove {mark} if it is yours, or " if removable(str(mark), st) else ""
            return (
                f"Invalid config: {key}={value}: {mark} is a {file_kind(st.st_mode)}, not a folder; a run "
                f"writes its Hydra files into {HYDRA_DIR}/ and never follows or writes through it. "
                f"Fix: {yours}{another(value, key)}."
            )
    return None


def config_folders() -> dict[str, str]:
    """The folders Hydra reads configs or code from, real path -> what it is: the checkout's ``conf/``
    (the only ``--config-dir``/``--config-path`` taken: :func:`flopsweep.flags.flag_problem`), each
    ``hydra_plugins`` folder on ``sys.path`` (the plug-ins' code and ``conf/``:
    ``pkg://hydra_plugins.flopsweep_slurm.conf``), the installed ``flopsweep`` package and Hydra's own
    configs (``pkg://hydra.conf``), and each folder a link in ``conf/`` names (``conf/sweep`` ->
    ``sweep/``). Found without importing a package."""
    import importlib.util

    from flopsweep.override_schema import CONF

    found = {os.path.realpath(CONF): "conf/, the config folder"}
    with os.scandir(CONF) as entries:  # a group linked in (conf/sweep -> ../sweep: the +sweep= group)
        for entry in entries:
            if entry.is_symlink() and entry.is_dir():
                found.setdefault(os.path.realpath(entry.path), f"conf/{entry.name}, a config group linked in")
    for name, what in (
        ("hydra_plugins", "the Hydra plug-ins' folder"),
        ("flopsweep", "the flopsweep package"),
    ):
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            found.setdefault(os.path.realpath(folder), what)
    hydra = importlib.util.find_spec("hydra")
    if hydra is not None and hydra.origin:
        found.setdefault(
            os.path.realpath(os.path.join(os.path.dirname(hydra.origin), "conf")), "Hydra's configs"
        )
    return found


def config_folder_problem(key: str, value: str, real: str, *, here: bool = False) -> str | None:
    """One line refusing ``value`` as ``key`` (``hydra.run.dir``, ``hydra.sweep.dir``; ``real``: its real
    path, links and ``..`` resolved) when it is, or lies inside, one of :func:`config_folders`, else None;
    ``here``: the value is the default folder, made in the current one (the fix: run from another).
    Hydra reads every YAML and folder there: a run's ``.hydra/`` became a config group (``+.hydra`` in
    ``flopsweep --help``), a sweep's ``multirun.yaml`` in ``conf/backend/`` an option (``backend=multirun``,
    refused with Hydra's ConfigKeyError)."""
    for folder, what in config_folders().items():
        if real == folder or real.startswith(os.path.join(folder, "")):
            example = "multirun/my-sweep" if "sweep" in key else "outputs/my-run"
            if here:
                example = f"/path/outside/{example}, or run from a folder outside it"
            return (
                f"Invalid config: {key}={value}: is inside {folder} ({what}), which Hydra and flopsweep read "
                f"configs and code from; the run's files there (.hydra/, multirun.yaml) would become config "
                f"options of every later command. Fix: choose a folder outside it, e.g. {key}={example}."
            )
    return None


def unwritable_folder_problem(key: str, value: str) -> str | None:
    """One line refusing ``value`` as the folder of ``key`` (``hydra.run.dir``, ``hydra.sweep.dir``) when
    this user cannot write there: the folder, or where it would be made (its nearest existing folder), is
    on a read-only file system or takes no new entry for this user (``os.access``); else None.

    The fix names another folder, never ``mkdir -p`` of this one: the default folder
    (``outputs/DATE/TIME-PID-XXXX``) is new each time, and cannot be made where its parent is read-only.
    A folder in the working folder (the default's, relative) may also be moved by running from another."""
    path = os.path.abspath(value)
    head = path
    while not os.path.lexists(head) and os.path.dirname(head) != head:
        head = os.path.dirname(head)
    if not os.path.isdir(head) or os.access(head, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(head).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    where = "is" if head == path else f"would be made in {head}, which is"
    why = "on a read-only file system" if read_only else "not writable for you"
    inside = not os.path.isabs(value) or path.startswith(os.path.join(os.getcwd(), ""))
    relative = ", or run from a folder you can write to" if inside else ""
    return (
        f"Invalid config: {key}={value}: {where} {why}. Fix: choose a folder you can write to "
        f"({key}=/path/you/can/write){relative}."
    )


def sweep_dir(hydra: Any) -> Path:
    """The sweep's directory, absolute: ``hydra.sweep.dir`` of ``hydra`` (a config's ``hydra``
    node, or its root, which has one), joined to ``hydra.runtime.cwd`` (the folder the sweep was
    started from) when relative. With ``hydra.job.chdir=true`` each job runs, and Hydra calls the
    job-end callbacks, inside the job's folder, where a relative ``S`` (Hydra's default
    ``multirun/<date>/<time>`` is one) would name ``S/0/S``."""
    hydra = hydra.hydra if "hydra" in hydra else hydra
    path = Path(str(hydra.sweep.dir))
    if path.is_absolute():
        return path
    cwd = hydra.runtime.get("cwd") if "runtime" in hydra else None
    return Path(str(cwd)) / path if cwd else Path(os.path.abspath(path))


def first_job_folder(config: Any) -> tuple[str, Path] | None:
    """``(subdir, folder)``: ``hydra.sweep.subdir`` of ``config`` (the composed config, at the sweep's
    start) as written, and the folder Hydra makes for job 0 (``sweep_dir/<subdir resolved with
    hydra.job.num=0>``, as Hydra's launchers join them). None when the subdir does not resolve then (it
    names another job's overrides, ``${hydra:...}``): each job still refuses its own folder. The config
    is copied, never changed."""

    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    written = str(OmegaConf.to_container(config.hydra.sweep, resolve=False).get("subdir"))
    copied = copy.deepcopy(config)
    try:
        OmegaConf.set_readonly(copied, False)
        with open_dict(copied):
            copied.hydra.job.num = 0
            copied.hydra.job.id = "job_id_for_0"  # Hydra's BasicLauncher's
        subdir = str(copied.hydra.sweep.subdir)
    except OmegaConfBaseException:
        return None
    return written, sweep_dir(config) / subdir


def from_start_folder(run_cfg: Any, start: str | os.PathLike[str]) -> None:
    """Make the relative file paths of ``run_cfg`` (a ``RunConfig``) absolute from ``start``, the
    folder the run or sweep was started from (``hydra.runtime.cwd``), as Hydra's
    ``hydra.utils.to_absolute_path`` does: ``predict.calibration``, and ``model.config`` of
    ``model=hf`` unless it is a shipped name. Under ``hydra.job.chdir=true`` the job runs inside its
    own folder, where ``cfgs/m.json`` would name ``S/0/cfgs/m.json``. In place."""
    from flopsweep.models.hf_files import is_shipped

    calibration = getattr(run_cfg.predict, "calibration", None)
    if calibration and not os.path.isabs(os.path.expanduser(calibration)):
        run_cfg.predict.calibration = os.path.join(start, calibration)
    config = getattr(run_cfg.model, "config", None)
    if isinstance(config, str) and config and not is_shipped(config):
        if not os.path.isabs(os.path.expanduser(config)):
            run_cfg.model.config = os.path.join(start, config)


def _not_a_folder(path: str, st: os.stat_result) -> str:
    """``a symbolic link to /x``, ``a dangling symbolic link to /x``, ``a FIFO``, ``a regular file``."""
    from flopsweep.safe_read import file_kind

    if not stat.S_ISLNK(st.st_mode):
        return f"a {file_kind(st.st_mode)}"
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return f"a {'' if os.path.exists(path) else 'dangling '}symbolic link (to {target})"


def _as_hydra_wrote(hydra_root: Any) -> Any:
    """A copy of a config holding the ``hydra`` node, with ``hydra.output_subdir`` as Hydra's default
    (``.hydra``, where these files are), so that the files read as Hydra wrote them."""
    from omegaconf import open_dict, read_write

    node = copy.deepcopy(hydra_root)
    with read_write(node), read_write(node.hydra), open_dict(node.hydra):  # Hydra makes it read-only
        node.hydra.output_subdir = HYDRA_DIR
    return node


def hydra_files(task_cfg: Any, hydra_cfg: Any, task_overrides: Any) -> dict[str, str]:
    """The text of the job's ``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml``, as Hydra's
    ``run_job`` writes them (``OmegaConf.to_yaml``, unresolved).

    Args:
        task_cfg: the job's config (the task function's ``cfg``).
        hydra_cfg: ``HydraConfig.instance().cfg``, the config that holds the ``hydra`` node.
        task_overrides: ``hydra.overrides.task``.
    """
    from omegaconf import OmegaConf

    return {
        "config.yaml": OmegaConf.to_yaml(task_cfg),
        "hydra.yaml": OmegaConf.to_yaml(_as_hydra_wrote(hydra_cfg)),
        "overrides.yaml": OmegaConf.to_yaml(task_overrides),
    }


def write_hydra_files(job_dir: Path, files: dict[str, str]) -> None:
    """Write ``files`` (name -> text, :func:`hydra_files`) into ``job_dir/.hydra``, each a new file
    renamed into place (:func:`flopsweep.files.replace_text`: a link or FIFO there is replaced,
    never followed or opened). Nothing when ``files`` is empty.

    Raises:
        RecordUnwritable: ``job_dir`` or ``.hydra`` is not a folder (a link, a FIFO: never
            followed), or a file cannot be written; one line naming the path.
    """
    if not files:
        return
    own_folder(Path(job_dir))  # a job folder that is a link: refused, never followed
    folder = own_folder(Path(job_dir) / HYDRA_DIR)
    for name, text in files.items():
        replace_text(folder / name, text)


def write_multirun(config: Any) -> None:
    """``multirun.yaml`` of the sweep ``config`` in its ``hydra.sweep.dir`` (made if missing), as
    Hydra's basic sweeper writes it (``OmegaConf.save``, unresolved), through
    :func:`flopsweep.files.replace_text`.

    Raises:
        RecordUnwritable: when it cannot be written (one line naming the path).
    """
    from omegaconf import OmegaConf

    folder = sweep_dir(config)
    folder.mkdir(parents=True, exist_ok=True)
    replace_text(folder / MULTIRUN_FILE, OmegaConf.to_yaml(_as_hydra_wrote(config)))


SAFE_SWEEPERS = (
    "hydra_plugins.flopsweep_repeats.RepeatingSweeper",
    "hydra_plugins.flopsweep_optuna.OptunaSweeper",
    "hydra_plugins.flopsweep_tune.TuneSweeper",
)
"""The sweepers that write their files in the sweep folder never through a link: ``basic_batched``
(the default: Hydra's basic sweeper, ``multirun.yaml`` by :func:`write_multirun`),
``optuna_objective`` (``optimization_results.yaml`` by :func:`saved_safely`) and ``tune``
(``multirun.yaml``, ``tune.json`` and ``tune.md``, each a new file renamed into place)."""


def sweeper_problem(config: Any) -> str | None:
    """One line refusing the sweep of ``config`` (the composed config) when its sweeper is not one of
    :data:`SAFE_SWEEPERS`: Hydra's own ``hydra/sweeper=basic`` writes ``multirun.yaml``, the plugin's
    own ``optuna`` ``optimization_results.yaml``, with a plain ``open`` that follows a link planted
    there (another file becomes YAML) and blocks on a FIFO; else None."""
    target = str(config.hydra.sweeper.get("_target_", ""))
    if target in SAFE_SWEEPERS:
        return None
    choice = config.hydra.runtime.choices.get("hydra/sweeper")
    return (
        f"hydra/sweeper={choice} ({target}) writes its files in the sweep folder (multirun.yaml, "
        "optimization_results.yaml) with a plain open, through any link planted there. Fix: drop "
        "hydra/sweeper= (the default, basic_batched, is Hydra's basic sweeper writing them safely), "
        "or use hydra/sweeper=optuna_objective for an Optuna study"
    )


def submitit_folder(launcher: Any, *, make: bool = True) -> Path | None:
    """The folder a submitit launcher (``hydra/launcher=submitit_local``, ``slurm``, ...) writes its
    pickles and logs in, made private (:func:`flopsweep.safe_folders.private_folder`): the part of
    ``hydra.launcher.submitit_folder`` before its first ``%`` pattern (``S/.submitit`` of
    ``S/.submitit/%j``); None for a launcher without one. submitit writes there with plain opens and
    its tasks unpickle what they find, so no other user may write in it. ``make=False``: checked only
    when something is there already, made by nobody (flopsweep's Slurm launchers make it when they
    submit, after their refusals, so a refused sweep leaves no folder).

    Raises:
        RecordUnwritable: the folder is a link, a FIFO, a file or another user's (one line).
    """
    folder = launcher.get("submitit_folder") if launcher is not None else None
    if not folder:
        return None
    parts = Path(str(folder)).parts
    kept = next((i for i, part in enumerate(parts) if "%" in part), len(parts))
    if not kept or not (make or os.path.lexists(Path(*parts[:kept]))):
        return None
    return private_folder(Path(*parts[:kept]))


class _SafeSave:
    """``OmegaConf`` as a plug-in module sees it, but whose ``save`` writes through
    :func:`flopsweep.files.replace_text` (a new file renamed into place)."""

    def __init__(self, omegaconf: Any) -> None:
        self._omegaconf = omegaconf

    def save(self, config: Any, f: Any, resolve: bool = False) -> None:
        if not isinstance(f, (str, os.PathLike)):
            return self._omegaconf.save(config, f, resolve=resolve)  # an open file: the caller's
        replace_text(Path(f), self._omegaconf.to_yaml(config, resolve=resolve))
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._omegaconf, name)


@contextlib.contextmanager
def saved_safely(module: ModuleType) -> Iterator[None]:
    """While in the block, ``OmegaConf.save`` called by ``module`` (hydra-optuna-sweeper's ``_impl``,
    which saves ``optimization_results.yaml`` with a plain ``open``) writes a new file renamed into
    place: a link or FIFO planted at the path is replaced, never written through or opened."""
    plain = module.OmegaConf
    module.OmegaConf = _SafeSave(plain)
    try:
        yield
    finally:
        module.OmegaConf = plain


class JobLogHandler(logging.FileHandler):
    """Hydra's job log (``hydra/job_logging: flopsweep``, its ``default`` otherwise), appended to
    as ``logging.FileHandler`` does, but opened without following a link or blocking
    (``O_NOFOLLOW | O_NONBLOCK``). Whatever is at the path and is not a regular file of one link (a
    symbolic link, a FIFO, a device, a file hard-linked elsewhere) is first replaced by an empty file
    (:func:`flopsweep.files.replace_text`), never opened, after one line on stderr saying so
    (:func:`replaced_line`; the run's checks refuse it first where they can tell the log's name:
    :func:`flopsweep.folders.log_link_problem`). When even that fails (a folder there), or
    the job's folder is itself a link or lies below another user's link
    (:func:`flopsweep.links.foreign_link`; the job refuses both: :func:`flopsweep.safe_folders.job_folder`),
    the log goes to the console only, after one line on stderr saying so.
    """

    def _open(self) -> Any:
        path = Path(self.baseFilename)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            if os.path.islink(path.parent):
                raise OSError(f"{path.parent} is a symbolic link, not a folder of this job; never followed")
            if foreign := foreign_link_refusal(path.parent):  # another user's link above the job's folder
                raise foreign
            if not _plain_file(path):  # the checks before refuse it where they can tell the name: said here
                if said := replaced_line(path):
                    print(f"flopsweep: warning: {said}", file=sys.stderr, flush=True)
                replace_text(path, "")
            fd = os.open(path, flags, 0o666)
            if not _plain_file(path, os.fstat(fd)):
                os.close(fd)
                raise OSError(f"{path} changed while it was opened")
        except OSError as exc:
            why = exc.line if isinstance(exc, RecordUnwritable) else str(exc)
            print(f"flopsweep: warning: {why}; the job's log goes to the console only", file=sys.stderr)
            return open(os.devnull, "a", encoding=self.encoding)  # noqa: SIM115 - the handler's stream
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def replaced_line(path: Path) -> str | None:
    """What :class:`JobLogHandler` says before it replaces what is at its ``path``: ``PATH is a symbolic link,
    not the job's log: replaced by the log, never written through (a link's target is left as it was)``;
    None for a folder, which is not replaced (the log goes to the console)."""
    from flopsweep.safe_read import file_kind

    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return None
    kind = file_kind(st.st_mode) if not stat.S_ISREG(st.st_mode) else "file with other hard links"
    return (
        f"{path} is a {kind}, not the job's log: replaced by the log, never written through (a link's "
        "target is left as it was)"
    )


def to_job_log(text: str) -> bool:
    """Write ``text`` to the job's log file alone (``run.log``: the root logger's :class:`JobLogHandler`),
    not to the console: a sweep's plan job keeps its own table there while the sweep prints one table
    of every job at its end. False where no such handler is set up (Hydra's logging off, a test)."""
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, JobLogHandler)]
    record = logging.LogRecord("flopsweep", logging.INFO, __file__, 0, "\n%s", (text,), None)
    for handler in handlers:
        handler.handle(record)
    return bool(handlers)


def _plain_file(path: Path, st: os.stat_result | None = None) -> bool:
    """True when ``path`` is missing (``st`` None) or is a regular file with one link."""
    if st is None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return True
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1
