"""Session 41's splits (no behaviour change, so no reliability row): the new parts stay torch-free, as
Python loads them in a fresh interpreter (the point of the subprocess: nothing imported before)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARTS = (
    "flopsweep.space",
    "flopsweep.plan_space",
    "flopsweep.forecast_link",
    "flopsweep.column_spec",
    "flopsweep.columns",
    "flopsweep.job.plantable",
    "flopsweep.job.planprint",
    "flopsweep.job.planoutcome",
)


def test_the_split_modules_import_no_torch() -> None:
    code = (
        f"import importlib, sys; [importlib.import_module(m) for m in {PARTS!r}]; "
        "loaded = sorted({'torch', 'deepspeed', 'transformers'} & set(sys.modules)); "
        "assert not loaded, loaded"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
