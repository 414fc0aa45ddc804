"""The results notebook: ``python -m analysis DIR --notebook OUT`` (analysis/notebook.py) and the committed
``notebooks/results.ipynb``.

Execution starts a real ipykernel through nbclient (a few seconds each on a 2-core CPU) on the
committed fixture records (tests/fixtures, see tests/unit/test_analysis.py); no worker runs. Expected
values come from the same records through the analysis API. Each cell may take
:data:`analysis.notebook.CELL_TIMEOUT_S` (600 s): nothing here depends on timing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import best, for_display, headline, load, make_plots, summary
from analysis.load import RANK_METRIC, SHORT
from analysis.notebook import NotebookError, build, execute

nbformat = pytest.importorskip("nbformat")


pytest.importorskip("nbclient")


pytest.importorskip("ipykernel")


ROOT = Path(__file__).resolve().parents[2]


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


SWEEP = FIXTURES / "sweep"


COMMITTED = ROOT / "notebooks" / "results.ipynb"


COMMITTED_RESULTS = "../benchmarks/results/h200"  # as `python -m analysis benchmarks/results/h200 --notebook


# What an absolute path of this machine looks like in a notebook's text.
ABSOLUTE = re.compile(r"(/work/|/home/|/root/|/tmp/|/usr/|site-packages)")


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m analysis ARGS`` from ``cwd``, importing this checkout's analysis."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    cmd = [sys.executable, "-m", "analysis", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)


def cell(nb, cell_id: str):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def text_of(c) -> str:
    """Everything a cell printed or displayed, as text (stream text, text/plain, text/html)."""
    parts = []
    for o in c.get("outputs", []):
        parts.append(o.get("text", ""))
        parts += [o.get("data", {}).get(kind, "") for kind in ("text/plain", "text/html")]
    return "\n".join(parts)


def assert_executed_without_errors(nb) -> None:
    for c in (c for c in nb.cells if c.cell_type == "code"):
        assert isinstance(c.execution_count, int), c.id
        assert not [o for o in c.outputs if o.output_type == "error"], c.id
        # stderr may carry the analysis' own warnings about the data (a scaling baseline whose
        # one-rank runs disagree), never a traceback or an error
        stderr = "".join(o.get("text", "") for o in c.outputs if o.get("name") == "stderr")
        assert "Traceback" not in stderr and "Error" not in stderr, (c.id, stderr)
        assert c.id == "parameters" or c.id == "import" or c.outputs, c.id  # every other cell shows something


@pytest.mark.slow
def test_cli_writes_an_executed_notebook_of_the_fixture_sweep_from_another_cwd(tmp_path):
    shutil.copytree(SWEEP, tmp_path / "data" / "sweep")
    done = cli("data/sweep", "--notebook", "out/results.ipynb", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    n = sum(c.cell_type == "code" for c in build("data/sweep").cells)  # whatever the cell count
    assert (
        f"executing cell 1/{n}: Parameters" in lines[1]
        and f"executing cell {n}/{n}: Plots (PNG)." in lines[-2]
    )
    assert lines[-1].startswith("wrote out/results.ipynb (executed in ")
    nb = nbformat.read(tmp_path / "out" / "results.ipynb", as_version=4)
    params = cell(nb, "parameters")
    assert params.metadata.tags == ["parameters"] and 'RESULTS = "../data/sweep"' in params.source
    assert_executed_without_errors(nb)

    df = load(SWEEP)
    assert f"../data/sweep: {summary(df)}" in text_of(cell(nb, "load"))  # 38 runs (34 ok, 4 oom)
    runs, tops = text_of(cell(nb, "runs")), text_of(cell(nb, "best"))
    for _, row in for_display(best(df, by=["model"])).iterrows():  # gpt-1.3b 485.9, ...
        assert f"<td>{row['model']}</td>" in tops and f"<td>{row[SHORT[RANK_METRIC]]}</td>" in tops
        assert f"<td>{row[SHORT[RANK_METRIC]]}</td>" in runs
    assert runs.count("<tr>") == len(df)  # a row per run (the header's <tr> has a style)
    # the notebook opens with the verdict (issue 46, item 7): the winner, its interval, the runner-up,
    # whether it beats it; then the first chart, before every table of runs and every other plot
    first = next(
        i
        for i, c in enumerate(nb.cells)
        if any("image/png" in o.get("data", {}) for o in c.get("outputs", []))
    )
    assert nb.cells[first].id == "verdict" and nb.cells.index(cell(nb, "runs")) > first
    assert text_of(cell(nb, "verdict")).splitlines()[:3] == headline(df)
    pngs = [o for c in ("verdict", "plots") for o in cell(nb, c).outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == len(make_plots(df)[0]) == 3
    assert not ABSOLUTE.search(json.dumps(nb)), "an absolute path in the notebook"


@pytest.mark.slow
def test_a_moved_copy_of_the_committed_notebook_runs_when_given_a_path(tmp_path):
    """Outside the repository: no checkout above it, so the kernel imports the package from
    PYTHONPATH (here this checkout, as an installed package would be)."""
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.copy(COMMITTED, moved / "results.ipynb")
    nb = nbformat.read(moved / "results.ipynb", as_version=4)
    with pytest.raises(NotebookError) as info:  # the relative path of the committed copy is gone here
        execute(nb, moved)
    message = str(info.value)
    code_cells = sum(c.cell_type == "code" for c in nb.cells)  # whatever the notebook's cell count
    assert message.startswith(f"notebook cell 3/{code_cells} (Load the records.) failed: FileNotFoundError: ")
    assert f"{COMMITTED_RESULTS}: no such file, directory or glob match" in message
    assert "\n" not in message

    nb = nbformat.read(moved / "results.ipynb", as_version=4)
    params = cell(nb, "parameters")
    params.source = params.source.replace(json.dumps(COMMITTED_RESULTS), json.dumps(str(SWEEP)))
    execute(nb, moved)
    assert_executed_without_errors(nb)
    assert f"{SWEEP}: {summary(load(SWEEP))}" in text_of(cell(nb, "load"))


@pytest.mark.slow
def test_the_kernels_own_stderr_is_shown_only_when_it_dies(tmp_path, capfd):
    """What the kernel process writes to its stderr (not a cell's output, which reaches the notebook)
    stays out of the terminal while the notebook runs (libzmq can print an assertion as the kernel
    shuts down) and is named, by its last line, when the kernel dies."""
    new = nbformat.v4.new_code_cell
    quiet = nbformat.v4.new_notebook(cells=[new("import os\nos.write(2, b'said by the kernel process\\n')")])
    execute(quiet, tmp_path)
    assert_executed_without_errors(quiet)
    assert "said by the kernel process" not in capfd.readouterr().err

    dies = nbformat.v4.new_notebook(
        cells=[new("1"), new("import os\nos.write(2, b'first\\nlast words\\n')\nos._exit(3)")]
    )
    with pytest.raises(NotebookError) as info:
        execute(dies, tmp_path)
    message = str(info.value)
    assert message.startswith("notebook cell 2/2 (import os) failed: the kernel died")
    assert message.endswith("; the kernel said: last words") and "\n" not in message
    assert "last words" not in capfd.readouterr().err
