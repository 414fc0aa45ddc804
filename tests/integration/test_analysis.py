"""analysis/: loading, upgrades, checks, comparisons, the CLI, plots and the HTML report (the notebook:
tests/unit/test_notebook.py).

Fixture records live in tests/fixtures/ (written by ``python -m tests.fixtures.make_fixtures``
with the real record builder): ``records/NAME`` holds one case each (v2 records, the same runs
in the v1 and v0 layouts, broken files), ``sweep/`` a small H200-like v2 sweep. Expected values
come from the records themselves, :data:`flopsweep.record.METRIC_SPECS` and the model families
(:mod:`flopsweep.models`), not from hand-copied numbers or column lists.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from unit.test_analysis import RECORDS, ROOT, SWEEP, image_shape  # shared with the unit tier

from analysis import load
from analysis.__main__ import main
from analysis.load import (
    RANK_METRIC,
)
from flopsweep.record import SCHEMA_VERSION
from integration.test_imports import LOADED_THROUGH_COLUMNS, TORCH_FREE  # noqa: E402 - the one list of them

"""The flopsweep modules the analysis may import (the metric and set-up column declarations and
the schemas they derive from): none imports torch."""


def test_analysis_imports_only_torch_free_flopsweep_modules_and_no_torch():
    ALLOWED = TORCH_FREE + LOADED_THROUGH_COLUMNS  # noqa: N806
    code = (
        "import sys, analysis, analysis.__main__, analysis.plots, analysis.report; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'torch' "
        f"or (m.startswith('flopsweep') and m not in ('flopsweep', *{ALLOWED!r}))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for source in (ROOT / "analysis").glob("*.py"):
        imports = re.findall(r"^\s*(?:from|import) (flopsweep[\w.]*)", source.read_text(), re.M)
        assert set(imports) <= set(TORCH_FREE), (source.name, imports)


def test_the_table_fits_the_terminal_it_is_shown_in(capsys):
    """On a terminal the table takes the terminal's width (a trial's 80-column terminal got 120);
    piped, 120 (the other tests); a negative --width is refused in one line, exit 2."""
    from helpers import on_a_terminal

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    code, shown = on_a_terminal(
        [sys.executable, "-m", "analysis", str(RECORDS), str(SWEEP)], env=env, columns=80
    )
    assert code == 0, shown[-2000:]
    assert main([str(RECORDS), str(SWEEP), "--width", "80"]) == 0
    asked = capsys.readouterr().out
    assert main([str(RECORDS), str(SWEEP)]) == 0
    piped = capsys.readouterr().out
    words = lambda text: " ".join(text.split())  # noqa: E731 - the terminal also shows the stderr lines
    assert words(asked) in words(shown) and words(piped) not in words(shown)  # 80 columns, not 120
    with pytest.raises(SystemExit) as info:
        main([str(RECORDS), "--width", "-5"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "--width: -5 is negative: give 0 (no limit)" in err


def test_the_benchmark_command_lines_refuse_in_one_line_too(tmp_path: Path):
    """The benchmarks' parsers are the analysis's (:class:`flopsweep.text.OneLineParser`): a run of
    ``benchmarks/kernel_table.py`` without its traces is one line, exit 2."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kernel_table.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and done.stderr == (
        "kernel_table.py: error: the following arguments are required: LABEL=TRACE; "
        "see kernel_table.py --help\n"
    ), done.stderr


@pytest.mark.slow
def test_cpu_sweep_then_html_report_and_plots(tmp_path):
    sweep = tmp_path / "sweep"
    base = [
        sys.executable,
        "run.py",
        "-m",
        "device=cpu",
        "nproc_per_node=2",
        "steps.warmup=1",
        "steps.measure=2",
    ]
    runs = [
        [*base, "backend=ddp,fsdp", "batch.micro_batch_size=2,4", f"hydra.sweep.dir={sweep}/ok"],
        [*base, "backend=fsdp", "precision=fp16", f"hydra.sweep.dir={sweep}/invalid"],
    ]  # fp16 on CPU: invalid
    for cmd in runs:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    report, plots = tmp_path / "report.html", tmp_path / "plots"
    analysis = [sys.executable, "-m", "analysis", str(sweep)]
    done = subprocess.run(
        [*analysis, "--format", "html", "--output", str(report)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "5 runs (4 ok, 1 invalid)" in done.stderr and "mismatch" not in done.stderr
    done = subprocess.run(
        [*analysis, "--plot", str(plots)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "skipped plot memory_vs_micro_batch: no run recorded peak GPU memory" in done.stderr
    h, w, _ = image_shape(plots / "tflops_vs_micro_batch.png")
    assert h >= 300 and w >= 400
    text = report.read_text()
    assert "<table>" in text and "<td>gpt-tiny</td>" in text and "<td>invalid</td>" in text
    # TFLOPs, and predicted against measured (every ok run records metrics.predicted); no GPU
    # memory, one seq_len
    assert text.count('src="data:image/png;base64,') == 2
    assert (plots / "predicted_vs_measured.png").exists()
    df = load(sweep)
    assert (df.schema_version == SCHEMA_VERSION).all() and df[df.status.eq("ok")][RANK_METRIC].notna().all()
