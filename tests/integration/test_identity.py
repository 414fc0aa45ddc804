"""flopsweep.identity: one "same set-up" for resume, the analysis and its baselines.

The two faults it mends: a record from before ``optim.in_backward`` was re-run by ``resume=true``
although the analysis pooled it with today's records; and ``--baseline backend=fsdp`` never gave a
DDP run a speedup (DDP's layout is recorded ``dp2x1``, FSDP2's ``dp2``): its acceptance line runs on
``test_llama_backends.py``'s sweep (the same set-ups, CI time).
"""

from __future__ import annotations

import json
import sys

import pytest
from unit.test_identity import _before_in_backward  # shared with the unit tier

from tests.helpers import records, run_py


def test_identity_is_torch_free():
    import subprocess

    code = "import sys, flopsweep.identity; assert 'torch' not in sys.modules, 'torch'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_resume_skips_a_record_from_before_in_backward(tmp_path):
    """A single run's ok record, rewritten as a flopsweep from before ``optim.in_backward`` wrote it,
    is kept by ``resume=true`` (not set aside and re-run)."""
    args = ("model=gpt-tiny", "device=cpu", "steps.warmup=1", "steps.measure=2", f"hydra.run.dir={tmp_path}")
    proc = run_py(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    path = tmp_path / "metrics.json"
    old = _before_in_backward(json.loads(path.read_text()))
    path.write_text(json.dumps(old))
    proc = run_py(*args, "resume=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert records(tmp_path) == [old]  # the same record, nothing set aside
    assert not list(tmp_path.glob("metrics.*-*.json"))
