"""The results notebook: ``python -m analysis DIR --notebook OUT`` (analysis/notebook.py) and the committed
``notebooks/results.ipynb``.

Execution starts a real ipykernel through nbclient (a few seconds each on a 2-core CPU) on the
committed fixture records (tests/fixtures, see tests/unit/test_analysis.py); no worker runs. Expected
values come from the same records through the analysis API. Each cell may take
:data:`analysis.notebook.CELL_TIMEOUT_S` (600 s): nothing here depends on timing.
"""

from __future__ import annotations

import os

import pytest
from integration.test_notebook import (  # shared with the integration tier
    ABSOLUTE,
    COMMITTED,
    COMMITTED_RESULTS,
    ROOT,
    SWEEP,
    assert_executed_without_errors,
    cell,
    nbformat,
    text_of,
)

from analysis import load, summary
from analysis.__main__ import main
from analysis.notebook import NotebookError, build, results_parameter

pytest.importorskip("nbclient")


pytest.importorskip("ipykernel")


# notebooks/results.ipynb` stores it, from the repository root
H200 = ROOT / "benchmarks" / "results" / "h200"


def test_results_parameter_is_relative_to_the_notebook_folder(tmp_path):
    assert results_parameter(["data/sweep"], "out") == "../data/sweep"
    assert results_parameter(["data/sweep"], ".") == "data/sweep"
    assert results_parameter([SWEEP, "a/*/metrics.json"], "out") == [str(SWEEP), "../a/*/metrics.json"]
    with pytest.raises(NotebookError, match="not UTF-8"):
        results_parameter([os.fsdecode(b"caf\xe9")], ".")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["missing"], 2, "missing: no such file, directory or glob match"),
        (
            ["empty"],
            2,
            "no metrics.json under empty (0 runs; the folder exists, with none in it or below). "
            "Fix: name a sweep folder",
        ),
        ([str(SWEEP), "--format", "csv"], 2, "it takes none of --format"),
        ([str(SWEEP), "--filter", "backend=fsdp"], 2, "it takes none of --filter"),
    ],
)
def test_a_bad_directory_or_option_is_one_line_and_non_zero(
    tmp_path, monkeypatch, capsys, args, code, message
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    assert main([*args, "--notebook", "out.ipynb"]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m analysis: error: ") and message in err, err
    assert not (tmp_path / "out.ipynb").exists()


def test_the_committed_notebook_is_executed_current_and_holds_no_absolute_path():
    text = COMMITTED.read_text(encoding="utf-8")
    # 1.4 MB with the records of 2026-12-01 (palette PNGs; 2.9 MB as RGBA), 2.0 MB with those of
    # 2026-12-02 (the two tables of every run grow with the records; the plots are 0.95 MB): room for
    # new records, and a plot drawn many times over, or stored as RGBA again (+1.5 MB), would break it.
    # 2.58 MB on 2026-12-04 (the verdict's chart first, and 38 more H200 records); 3.29 MB after session
    # 20's 25 records (the runs and baseline tables, about 0.6 MB each, grow about 2 KB a record);
    # 3.998 MB after session 28's 27 (341 runs; each table's HTML and its text/plain both grow).
    assert len(text.encode()) < 5_000_000
    assert str(ROOT) not in text and not ABSOLUTE.search(text), ABSOLUTE.search(text)
    nb = nbformat.read(COMMITTED, as_version=4)
    assert_executed_without_errors(nb)
    fresh = build(COMMITTED_RESULTS)  # the cells of analysis/notebook.py: regenerate when this fails
    assert [(c.id, c.cell_type, c.source) for c in nb.cells] == [
        (c.id, c.cell_type, c.source) for c in fresh.cells
    ]
    df = load(H200)
    assert f"{COMMITTED_RESULTS}: {summary(df)}" in text_of(cell(nb, "load"))
    assert text_of(cell(nb, "runs")).count("<tr>") == len(df) > 60  # no rows elided (pandas: over 60)


def test_a_palette_png_is_the_same_picture_in_fewer_bytes() -> None:
    """``png_bytes(palette=True)`` (the notebook's plots): the same pixels' size, a 256-colour
    palette, white where the figure is white, and fewer bytes than RGBA."""
    import io

    from PIL import Image

    from analysis import PLOTS, PlotSkipped, png_bytes
    from analysis.load import failed_checks

    df = load(H200)
    df = df[~failed_checks(df)]  # as make_plots draws them; the first plot the records support
    fig = None
    for plot in PLOTS.values():
        try:
            fig = plot(df)
            break
        except PlotSkipped:
            continue
    assert fig is not None
    rgba, palette = png_bytes(fig, dpi=72), png_bytes(fig, dpi=72, palette=True)
    with Image.open(io.BytesIO(rgba)) as a, Image.open(io.BytesIO(palette)) as b:
        assert (a.mode, b.mode) == ("RGBA", "P") and a.size == b.size
        assert b.convert("RGB").getpixel((0, 0)) == a.convert("RGB").getpixel((0, 0)) == (255, 255, 255)
        assert len(b.getcolors(256) or []) > 8  # the plot's colours are kept, not flattened
    assert len(palette) < len(rgba) / 2
