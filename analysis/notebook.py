"""The results notebook: its parameter, building it from its cells (:mod:`analysis.notebook_cells`,
the one source of them), and headless execution.

    python -m analysis DIR... --notebook OUT.ipynb                               # build, execute, write
    python -m analysis benchmarks/results/h200 --notebook notebooks/results.ipynb  # the committed one

:func:`build` returns an nbformat v4 notebook built on the :mod:`analysis` API alone. Its
second cell, tagged ``parameters`` (papermill's convention), holds ``RESULTS``: the records
to read, one path or a list (sweep or run directories, ``metrics.json`` files, globs), each
relative to the notebook's folder unless absolute. The notebook's folder is the kernel's
working directory under Jupyter, ``jupyter nbconvert --execute`` and :func:`execute`, so
nothing else in the notebook depends on where it lies: a copy moved anywhere runs once
``RESULTS`` names the records (edit the cell, or ``papermill IN OUT -p RESULTS /path``). The
kernel imports ``analysis`` from the checkout that holds the notebook, else the installed
package, and says so in one line when it cannot.

nbformat, nbclient and ipykernel are imported only when a notebook is built or executed
(the ``dev`` and ``notebook`` extras), so ``python -m analysis`` needs none of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from analysis.discover import display_path
from analysis.notebook_cells import CELLS, NOTEBOOK_DIR_ENV, load_results

__all__ = [
    "CELL_TIMEOUT_S",
    "KERNEL",
    "NotebookError",
    "NotebookInterrupted",
    "build",
    "execute",
    "load_results",
    "make_notebook",
    "ProgressLine",
    "results_parameter",
    "write",
]

CELL_TIMEOUT_S = 600
"""Seconds one cell may run, and the kernel may take to start, before execution stops (the 109
H200 records take about 6 s for the whole notebook on a 2-core CPU: the limit only catches a hung
kernel)."""
IOPUB_TIMEOUT_S = 60
"""Seconds to wait for a cell's last outputs after its reply (nbclient's default, 4 s, can drop
outputs on a loaded machine); it costs nothing when they come at once."""

KERNEL = "python3"
"""The Jupyter kernel that runs the notebook; jupyter_client starts it with this interpreter."""

Progress = Callable[[int, int, str], None]
"""``progress(n, total, label)``: code cell ``n`` of ``total`` (1-based) starts; ``label`` names it."""


class NotebookError(Exception):
    """The notebook could not be executed; ``str()`` is one line naming the cell and the cause."""


def _import_nbformat() -> Any:
    try:
        import nbformat
    except ImportError as exc:
        raise NotebookError(f'needs nbformat and nbclient ({exc}): pip install -e ".[notebook]"') from None
    return nbformat


def results_parameter(paths: Sequence[str | os.PathLike], notebook_dir: str | os.PathLike) -> str | list[str]:
    """The value of ``RESULTS`` for records at ``paths`` read by a notebook in ``notebook_dir``.

    An absolute path stays as it is; a relative one (to the current directory) is rewritten
    relative to ``notebook_dir``, so that the notebook holds no absolute path of this machine
    when given none. One path gives a string, several a list.

    Raises:
        NotebookError: when a path is not valid UTF-8 (a notebook is JSON text).
    """
    out = []
    for p in paths:
        text = os.fspath(p)
        if not os.path.isabs(text):
            text = os.path.relpath(os.path.abspath(text), os.path.abspath(notebook_dir))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise NotebookError(f"path {display_path(p)} is not UTF-8: a notebook cannot hold it") from None
        out.append(text)
    return out[0] if len(out) == 1 else out


def build(results: str | Sequence[str]) -> Any:
    """The results notebook (``nbformat.NotebookNode``, v4, not executed) reading ``results``.

    Args:
        results: ``RESULTS``, a path or a list of paths, relative to the notebook's folder
            unless absolute (see :func:`results_parameter`).

    Cell ids are fixed (``intro``, ``parameters``, ``import``, ...), so that a rebuilt notebook
    differs from the last one only where its cells or outputs do.
    """
    nbformat = _import_nbformat()
    value = json.dumps(results if isinstance(results, str) else list(results), ensure_ascii=False)
    cells = []
    for kind, cell_id, source in CELLS:
        if cell_id == "parameters":
            source = source.format(value=value)
        if kind == "markdown":
            cell = nbformat.v4.new_markdown_cell(source)
        else:
            cell = nbformat.v4.new_code_cell(source)
        cell.id = cell_id
        if cell_id == "parameters":
            cell.metadata["tags"] = ["parameters"]
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": KERNEL}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def label(cell: Any) -> str:
    """A cell's name for messages: its first line without ``# `` (``Load the records.``)."""
    first = cell.source.strip().splitlines()[0] if cell.source.strip() else "(empty)"
    return first.lstrip("#").strip()


def kernel_env(notebook_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """The kernel's environment: this one, with the folder this ``analysis`` was imported from first
    on ``PYTHONPATH``, so that the kernel imports exactly the package that wrote the notebook (a
    checkout's, or the installed one: never one found by searching folders). ``PYTHONSAFEPATH=1``
    keeps the kernel's working directory off ``sys.path``, and :data:`NOTEBOOK_DIR_ENV` names
    ``notebook_dir``, where relative ``RESULTS`` start."""
    env = dict(os.environ)
    root = Path(__file__).resolve().parents[1]  # the folder that holds this analysis package
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    env["PYTHONSAFEPATH"] = "1"  # python -m ipykernel_launcher must not look in its working directory
    if notebook_dir is not None:
        env[NOTEBOOK_DIR_ENV] = os.path.abspath(notebook_dir)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # debugpy's frozen-modules warning on stderr
    return env


def _cell_error(cell: Any, number: int, total: int, why: str) -> NotebookError:
    return NotebookError(f"notebook cell {number}/{total} ({label(cell)}) failed: {why}")


def execute(
    nb: Any,
    notebook_dir: str | os.PathLike,
    *,
    timeout: int = CELL_TIMEOUT_S,
    progress: Progress | None = None,
) -> Any:
    """Execute every code cell of ``nb`` in place in a fresh :data:`KERNEL` kernel.

    The kernel starts in a private directory (``tempfile.mkdtemp``, removed afterwards), never in
    the output folder, which others may write to: with ``PYTHONSAFEPATH=1`` and ipykernel's
    ``ignore_cwd`` no working directory is on its ``sys.path``, so no module planted there (an
    ``analysis/``, a ``pandas.py``, an ``ipykernel_launcher.py``) is imported.

    Args:
        nb: an nbformat v4 notebook; its cells get outputs and execution counts.
        notebook_dir: the folder the notebook will be written to: relative paths in ``RESULTS``
            start there (the kernel gets it as :data:`NOTEBOOK_DIR_ENV`), as under Jupyter.
        timeout: seconds one cell may run.
        progress: called as each code cell starts (:data:`Progress`).

    Returns:
        ``nb``, executed.

    Raises:
        NotebookError: one line: the cell (number among the code cells and its first line) and
            the exception it raised, a timeout, a dead kernel, or no kernel/nbclient installed.
    """
    _import_nbformat()
    try:
        from jupyter_client.kernelspec import NoSuchKernel
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    except ImportError as exc:
        raise NotebookError(f'needs nbclient and ipykernel ({exc}): pip install -e ".[notebook]"') from None
    numbers = {i: n for n, i in enumerate((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), 1)}
    total = len(numbers)
    current: dict[str, Any] = {"cell": None, "n": 0}

    stopped: list[int] = []  # signals received (see _run_client)

    def started(cell: Any, cell_index: int) -> None:
        if stopped:  # Ctrl-C between two cells, or while the kernel started
            raise NotebookInterrupted()
        current.update(cell=cell, n=numbers[cell_index])
        if progress is not None:
            progress(current["n"], total, label(cell))

    private = tempfile.mkdtemp(prefix="flopsweep-kernel-")
    # The kernel process's own stderr (not a cell's: that reaches the notebook over zmq) goes to a
    # file in the private folder, shown only when the kernel fails: after the last cell, libzmq can
    # abort a kernel that is shutting down ("Assertion failed: pfd.revents & POLLIN", zeromq/libzmq
    # #1307), a line that says nothing about the notebook, which was executed and is written.
    from flopsweep.files import create_new

    log_fd, _ = create_new(Path(private), "kernel-", ".log")
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=KERNEL,
        startup_timeout=timeout,
        iopub_timeout=IOPUB_TIMEOUT_S,
        record_timing=False,
        # Not ipykernel 7's warning about TCP; no working directory on sys.path.
        extra_arguments=["--IPKernelApp.log_level=ERROR", "--IPKernelApp.ignore_cwd=True"],
        resources={"metadata": {"path": private}},
        on_cell_execute=started,
    )
    try:
        _run_client(client, kernel_env(notebook_dir), stopped, stderr=log_fd)
    except CellExecutionError as exc:
        why = f"{exc.ename}: {str(exc.evalue).strip().splitlines()[0] if str(exc.evalue).strip() else ''}"
        raise _cell_error(current["cell"], current["n"], total, why.rstrip(": ")) from None
    except (CellTimeoutError, DeadKernelError) as exc:
        said = _last_line(log_fd)
        if current["cell"] is None:
            raise NotebookError(f"the {KERNEL} kernel died before any cell ran: {exc}{said}") from None
        why = f"no result within {timeout} s" if isinstance(exc, CellTimeoutError) else "the kernel died"
        raise _cell_error(current["cell"], current["n"], total, why + said) from None
    except NoSuchKernel:
        raise NotebookError(f'no Jupyter kernel named {KERNEL}: pip install -e ".[notebook]"') from None
    except RuntimeError as exc:  # the kernel did not start or answer (nbclient's own RuntimeError)
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if current["cell"] is None:
            raise NotebookError(f"the {KERNEL} kernel did not start: {why}{_last_line(log_fd)}") from None
        raise _cell_error(current["cell"], current["n"], total, why + _last_line(log_fd)) from None
    finally:
        os.close(log_fd)
        shutil.rmtree(private, ignore_errors=True)
    return nb


KERNEL_LOG_TAIL_BYTES = 4096
"""The most of the kernel's own stderr read back for an error message (its end)."""


def _last_line(fd: int) -> str:
    """``"; the kernel said: LINE"``: the last non-empty line of the kernel's stderr file ``fd``
    (of its last :data:`KERNEL_LOG_TAIL_BYTES`), 200 characters at most; ``""`` when it said nothing."""
    try:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, KERNEL_LOG_TAIL_BYTES, max(0, size - KERNEL_LOG_TAIL_BYTES))
    except OSError:
        return ""
    lines = [line.strip() for line in tail.decode("utf-8", "replace").splitlines() if line.strip()]
    return f"; the kernel said: {lines[-1][:200]}" if lines else ""


class NotebookInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM stopped the execution; the kernel was shut down and nothing was
    written. ``python -m analysis`` prints one line and exits 130."""


def _run_client(client: Any, env: dict[str, str], stopped: list[int], stderr: int | None = None) -> None:
    """``client.execute(env=env, stderr=stderr)`` (``stderr``: the kernel process's, a descriptor) in a
    worker thread, with the main thread taking SIGINT and SIGTERM.

    On the main thread nbclient installs its own signal handlers, which shut the kernel down under
    the running cell and end in some 70 lines of asyncio and zmq tracebacks. Here a signal is
    appended to ``stopped`` and passed on to the kernel as SIGINT until the cell stops (it raises
    KeyboardInterrupt; nbclient stops the kernel as after any failed cell); a cell about to start
    sees ``stopped``
    (:func:`execute`'s hook). Then :class:`NotebookInterrupted` is raised instead of the cell's error.
    Off the main thread (no handlers can be set) it runs ``client.execute`` as it is.
    """
    import signal
    import threading

    def stop(signum: int, frame: Any) -> None:
        stopped.append(signum)

    def signal_kernel() -> None:
        """SIGINT to the kernel's process group while it lives (an idle ipykernel ignores it, so it is
        sent again until the running cell stops); SIGKILL after a second Ctrl-C."""
        provisioner = getattr(client.km, "provisioner", None)
        process, pgid = getattr(provisioner, "process", None), getattr(provisioner, "pgid", None)
        if pgid and process is not None and process.poll() is None:
            with contextlib.suppress(OSError):  # it ended meanwhile
                os.killpg(pgid, signal.SIGINT if len(stopped) == 1 else signal.SIGKILL)

    outcome: dict[str, BaseException] = {}

    def work() -> None:
        try:
            client.execute(env=env, stderr=stderr)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            outcome["error"] = exc

    try:
        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        client.execute(env=env, stderr=stderr)
        return
    try:
        worker = threading.Thread(target=work, name="nbclient", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.5)
            if stopped and worker.is_alive():  # the kernel runs in a session of its own
                signal_kernel()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if stopped:
        raise NotebookInterrupted()
    if "error" in outcome:
        raise outcome["error"]


def write(nb: Any, path: str | os.PathLike) -> None:
    """Write ``nb`` to ``path`` atomically (a temporary file beside it, then a rename); parents are made.

    The temporary file has an unpredictable name and is created exclusively, without following a
    link (:func:`flopsweep.files.create_new`): a link planted in the folder is never written through.

    Raises:
        OutputError: when ``path`` is, or has become, a record
            (:func:`analysis.output.record_problem`); nothing is written.
        OSError: when ``path`` cannot be written.
    """
    from analysis.output import OutputError, fix_for, record_problem
    from flopsweep.files import create_new

    nbformat = _import_nbformat()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_new(path.parent, f".{path.name}.")  # exclusive, never through a link
    try:
        with open(fd, "w", encoding="utf-8") as f:
            nbformat.write(nb, f)
        if why := record_problem(path):  # checked before the kernel; a record put there since stays
            raise OutputError(f"{path} {why}: {fix_for('--notebook')}")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class ProgressLine:
    """A :data:`Progress` that prints ``executing cell n/total: label`` to ``stream``: one line
    rewritten in place on a terminal, a line per cell otherwise (a log). :meth:`close` ends the
    line on a terminal, before the next message."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.open = False

    def __call__(self, n: int, total: int, name: str) -> None:
        line = f"executing cell {n}/{total}: {name}"[:100]
        self.stream.write("\r\033[K" + line if self.tty else line + "\n")
        self.open = self.tty
        self.stream.flush()

    def close(self) -> None:
        if self.open:
            self.stream.write("\n")
            self.open = False


def make_notebook(
    paths: Sequence[str | os.PathLike], out: str | os.PathLike, *, progress: Progress | None = None
) -> tuple[Any, float]:
    """Build the notebook of the records at ``paths``, execute it in ``out``'s folder and write it to ``out``.

    Relative ``paths`` (to the current directory) are stored relative to ``out``'s folder
    (:func:`results_parameter`). No notebook is written when execution fails (``out``'s folder,
    the kernel's working directory, is made before it starts).

    Returns:
        ``(notebook, seconds)``: the executed notebook and the wall time of building, executing
        and writing it.

    Raises:
        NotebookError: one line, when the notebook cannot be built or a cell fails (:func:`execute`).
        OSError: when ``out`` cannot be written.
    """
    t0 = time.perf_counter()
    folder = Path(out).parent
    nb = build(results_parameter(paths, folder))
    folder.mkdir(parents=True, exist_ok=True)
    execute(nb, folder, progress=progress)
    write(nb, out)
    return nb, time.perf_counter() - t0
