"""The backend specs (:mod:`flopsweep.backend_specs`) and the GPU rows (:mod:`flopsweep.peaks`): one
torch-free object per option, which the memory estimate and the step-time model ask instead of the
option's name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_specs_and_the_estimators_import_no_torch() -> None:
    modules = "backend_specs, steptime, predict, peaks, gpu_memory, sinfo, cluster"
    code = f"import sys; from flopsweep import {modules}; assert 'torch' not in sys.modules, 'torch'"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
