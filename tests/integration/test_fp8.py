"""fp8 conversion plan and torchao Float8Linear swap of flopsweep.fp8 (CPU, no GPU)."""

from __future__ import annotations

import sys


def test_import_is_cheap():
    import subprocess

    code = "import sys, flopsweep.fp8; print('torchao' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "False"
