"""flopsweep.identity: one "same set-up" for resume, the analysis and its baselines.

The two faults it mends: a record from before ``optim.in_backward`` was re-run by ``resume=true``
although the analysis pooled it with today's records; and ``--baseline backend=fsdp`` never gave a
DDP run a speedup (DDP's layout is recorded ``dp2x1``, FSDP2's ``dp2``).
"""

from __future__ import annotations

import json
import sys

import pytest
from unit.test_identity import _before_in_backward, _without_keys  # shared with the unit tier

import analysis
from analysis.__main__ import main as analysis_main
from flopsweep import identity
from tests.helpers import LLAMA_TINY_TWO_RANKS, ok_sweep, records, run_py


def test_identity_is_torch_free():
    import subprocess

    code = "import sys, flopsweep.identity; assert 'torch' not in sys.modules, 'torch'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_sweep_ddp_fsdp_zero3_every_row_has_a_speedup(tmp_path, capsys):
    """The acceptance line: ``python -m analysis DIR --baseline backend=fsdp`` on a real
    ``backend=ddp,fsdp,zero3`` sweep gives every row a speedup."""
    recs = ok_sweep(tmp_path, *LLAMA_TINY_TWO_RANKS, "backend=ddp,fsdp,zero3")
    assert {r["system"]["parallel"]["dp_replicate"] for r in recs} == {1, 2}  # DDP's dp2x1 among them
    assert all(r["run"]["setup_key"] == identity.setup_key(_without_keys(r)) for r in recs)
    assert (
        analysis_main([str(tmp_path), "--baseline", "backend=fsdp", "--columns", "backend,layout,speedup"])
        == 0
    )
    out, err = capsys.readouterr()
    assert "dp2x1" in out and "speedup is blank" not in out + err
    df = analysis.compare(analysis.load(tmp_path), baseline={"backend": "fsdp"})
    assert len(df) == 3 and df["speedup"].notna().all(), df[["backend", "layout", "speedup"]]


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
