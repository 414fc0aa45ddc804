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
"""

from __future__ import annotations

import copy
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any

from flopsweep.files import RecordUnwritable, own_folder, replace_text

HYDRA_DIR = ".hydra"
"""The job's folder of Hydra files (Hydra's default ``hydra.output_subdir``)."""
MULTIRUN_FILE = "multirun.yaml"


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
        RecordUnwritable: ``.hydra`` is not a folder (a link, a FIFO: never followed), or a file
            cannot be written; one line naming the path.
    """
    if not files:
        return
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

    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    replace_text(sweep_dir / MULTIRUN_FILE, OmegaConf.to_yaml(_as_hydra_wrote(config)))


class JobLogHandler(logging.FileHandler):
    """Hydra's job log (``hydra/job_logging: flopsweep``, its ``default`` otherwise), appended to
    as ``logging.FileHandler`` does, but opened without following a link or blocking
    (``O_NOFOLLOW | O_NONBLOCK``). Whatever is at the path and is not a regular file of one link (a
    symbolic link, a FIFO, a device, a file hard-linked elsewhere) is first replaced by an empty file
    (:func:`flopsweep.files.replace_text`), never opened. When even that fails (a folder there) the
    log goes to the console only, after one line on stderr saying so.
    """

    def _open(self) -> Any:
        path = Path(self.baseFilename)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            if not _plain_file(path):
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


def _plain_file(path: Path, st: os.stat_result | None = None) -> bool:
    """True when ``path`` is missing (``st`` None) or is a regular file with one link."""
    if st is None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return True
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1
