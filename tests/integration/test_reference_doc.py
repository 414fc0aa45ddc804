"""``python -m flopsweep.reference --check`` run as a user runs it: it passes on the committed
references and loads neither torch nor transformers (the unit tier checks what it generates)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_command_checks_the_committed_references_torch_free() -> None:
    script = (
        "import json, sys, runpy\n"
        "sys.argv = ['flopsweep.reference', '--check']\n"
        "try:\n    runpy.run_module('flopsweep.reference', run_name='__main__')\n"
        "except SystemExit as exc:\n    print(json.dumps([exc.code, [m for m in ('torch', 'transformers') "
        "if m in sys.modules]]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [0, []], done.stderr[-3000:]
