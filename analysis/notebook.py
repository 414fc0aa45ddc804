"""The results notebook: its cells (the one source of them), its parameter, and headless execution.

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

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from analysis.load import display_path

__all__ = [
    "CELL_TIMEOUT_S",
    "KERNEL",
    "NotebookError",
    "build",
    "execute",
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

_INTRO = """\
# flopsweep results

Every `metrics.json` under `RESULTS` (the parameters cell below) as one table, the best set-ups
and the plots, built only on the `analysis` API (`load`, `best`, `compare`, `pivot`,
`make_plots`), the same code as `python -m analysis`. The cells come from `analysis/notebook.py`:
`python -m analysis DIR --notebook OUT.ipynb` writes and executes this notebook for any results
directory. A relative path in `RESULTS` starts at this notebook's folder; a copy moved elsewhere
needs `RESULTS` set to where its records are.

Failed runs (oom, error, invalid) keep their rows with blank metrics; they never count in a best
or an average. Warnings name unreadable records, duplicate run ids and records whose model TFLOPs
disagree with their own stored FLOPs (those are left out of every ranking)."""

_PARAMETERS = """\
# Parameters (papermill's tag "parameters").
# RESULTS: the records to read, a path or a list of paths (sweep or run directories, metrics.json
# files, globs); a relative path starts at this notebook's folder.
RESULTS = {value}"""

_IMPORT = """\
# Import analysis.
# From the flopsweep checkout that holds this notebook, else the installed package.
import os
import sys
from pathlib import Path

import pandas as pd
from IPython.display import Image, Markdown, display

pd.set_option("display.max_rows", None, "display.max_columns", None)  # every run, every column

CHECKOUT = next(
    (
        p
        for p in [Path.cwd(), *Path.cwd().parents]
        if (p / "analysis" / "__init__.py").is_file() and (p / "flopsweep" / "record.py").is_file()
    ),
    None,
)
if CHECKOUT is not None and str(CHECKOUT) not in sys.path:
    sys.path.insert(0, str(CHECKOUT))
try:
    import analysis
except ImportError as exc:
    raise ImportError(
        f"this kernel cannot import the analysis package ({exc}): pip install -e PATH_TO_FLOPSWEEP"
    ) from None"""

_LOAD = """\
# Load the records.
# One row per run, failed runs included.
paths = [RESULTS] if isinstance(RESULTS, (str, os.PathLike)) else list(RESULTS)
try:
    df = analysis.load(paths)
except FileNotFoundError as exc:
    raise FileNotFoundError(f"{exc} (from {Path.cwd()}): set RESULTS in the parameters cell") from None
if df.empty:
    raise ValueError(f"no readable metrics.json under {', '.join(map(str, paths))}; {analysis.summary(df)}")
print(f"{', '.join(map(str, paths))}: {analysis.summary(df)}")"""

_CELLS: list[tuple[str, str, str]] = [
    ("markdown", "intro", _INTRO),
    ("code", "parameters", _PARAMETERS),
    ("code", "import", _IMPORT),
    ("code", "load", _LOAD),
    (
        "markdown",
        "runs-doc",
        """\
## All runs

The best first (model TFLOPs per device); failed runs last. Units are in the headers: model
TFLOPs per device (10¹² FLOP/s: model FLOPs, attention counted at the blocks computed, no
recompute), tokens per second over all ranks, the mean iteration time in seconds (the one the
rates come from), memory in GiB. The legend under the table explains the short headers.""",
    ),
    (
        "code",
        "runs",
        """\
# All runs, the best first.
runs = analysis.compact(analysis.table(df, columns=list(df.columns)))
display(analysis.for_display(runs))
print(analysis.legend(list(runs.columns)))""",
    ),
    (
        "markdown",
        "best-doc",
        "## Best set-up per model\n\nThe ok run with the most model TFLOPs per device for each model.",
    ),
    (
        "code",
        "best",
        """\
# Best set-up per model.
analysis.for_display(analysis.compact(analysis.best(df, by=["model"], metric=analysis.RANK_METRIC)))""",
    ),
    (
        "markdown",
        "baseline-doc",
        """\
## Against a baseline

Speedup of each run over the FSDP run with the same set-up otherwise (model, attention,
precision, micro batch, world size, ...).""",
    ),
    (
        "code",
        "baseline",
        """\
# Speedup over the matching FSDP run.
baseline = {"backend": "fsdp"}
if analysis.select(df[df.status == "ok"], baseline).empty:
    print("no ok run with backend=fsdp in these results: no baseline comparison")
else:
    speedups = analysis.sort_runs(analysis.compare(df, baseline=baseline), "speedup")
    display(analysis.for_display(analysis.compact(speedups)))""",
    ),
    (
        "markdown",
        "pivot-doc",
        """\
## Model TFLOPs per device by model and backend

The best ok run of each cell; a failed-only cell shows its status.""",
    ),
    (
        "code",
        "pivot",
        """\
# Model TFLOPs per device by model and backend.
table = analysis.pivot(
    df, index="model", columns=["backend", "zero_stage"], values=analysis.RANK_METRIC, mark_failed=True
)
analysis.for_display(analysis.flat_pivot(table))""",
    ),
    (
        "markdown",
        "plots-doc",
        """\
## Plots

Model TFLOPs per device and peak GPU memory against micro batch size (a line per backend, a panel
per model, at most nine models: the best), and tokens per second against sequence length when the
sweep varies it. An × marks a failed run at its micro batch size.""",
    ),
    (
        "code",
        "plots",
        """\
# Plots (PNG).
# At 72 dots per inch: a nine-panel plot of the H200 records is 1483 x 2132 pixels, 0.4 MB here.
figures, skipped = analysis.make_plots(df)
for name, fig in figures.items():
    display(Markdown(f"### {name}"), Image(analysis.png_bytes(fig, dpi=72), metadata={"alt": name}))
for name, reason in skipped.items():
    print(f"skipped {name}: {reason}")""",
    ),
]


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
    for kind, cell_id, source in _CELLS:
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


def kernel_env() -> dict[str, str]:
    """The kernel's environment: this one, with the checkout that holds this ``analysis`` first on
    ``PYTHONPATH`` (when it runs from a checkout), so that the kernel runs the same analysis code as
    the caller; an installed package is left to the kernel's own ``sys.path``."""
    env = dict(os.environ)
    root = Path(__file__).resolve().parents[1]
    if (root / "flopsweep" / "record.py").is_file() and (root / "pyproject.toml").is_file():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # debugpy's frozen-modules warning on stderr
    return env


def _cell_error(cell: Any, number: int, total: int, why: str) -> NotebookError:
    return NotebookError(f"notebook cell {number}/{total} ({label(cell)}) failed: {why}")


def execute(
    nb: Any, cwd: str | os.PathLike, *, timeout: int = CELL_TIMEOUT_S, progress: Progress | None = None
) -> Any:
    """Execute every code cell of ``nb`` in place in a fresh :data:`KERNEL` kernel started in ``cwd``.

    Args:
        nb: an nbformat v4 notebook; its cells get outputs and execution counts.
        cwd: the kernel's working directory: the folder the notebook will be written to, as
            Jupyter runs it, so that relative paths in ``RESULTS`` resolve the same way.
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

    def started(cell: Any, cell_index: int) -> None:
        current.update(cell=cell, n=numbers[cell_index])
        if progress is not None:
            progress(current["n"], total, label(cell))

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=KERNEL,
        startup_timeout=timeout,
        iopub_timeout=IOPUB_TIMEOUT_S,
        record_timing=False,
        extra_arguments=["--IPKernelApp.log_level=ERROR"],  # not ipykernel 7's warning about TCP
        resources={"metadata": {"path": str(cwd)}},
        on_cell_execute=started,
    )
    try:
        client.execute(env=kernel_env())
    except CellExecutionError as exc:
        why = f"{exc.ename}: {str(exc.evalue).strip().splitlines()[0] if str(exc.evalue).strip() else ''}"
        raise _cell_error(current["cell"], current["n"], total, why.rstrip(": ")) from None
    except (CellTimeoutError, DeadKernelError) as exc:
        if current["cell"] is None:
            raise NotebookError(f"the {KERNEL} kernel died before any cell ran: {exc}") from None
        why = f"no result within {timeout} s" if isinstance(exc, CellTimeoutError) else "the kernel died"
        raise _cell_error(current["cell"], current["n"], total, why) from None
    except NoSuchKernel:
        raise NotebookError(f'no Jupyter kernel named {KERNEL}: pip install -e ".[notebook]"') from None
    except RuntimeError as exc:  # the kernel did not start or answer (nbclient's own RuntimeError)
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if current["cell"] is None:
            raise NotebookError(f"the {KERNEL} kernel did not start: {why}") from None
        raise _cell_error(current["cell"], current["n"], total, why) from None
    return nb


def write(nb: Any, path: str | os.PathLike) -> None:
    """Write ``nb`` to ``path`` atomically (a temporary file beside it, then a rename); parents are made.

    Raises:
        OSError: when ``path`` cannot be written.
    """
    nbformat = _import_nbformat()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            nbformat.write(nb, f)
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
