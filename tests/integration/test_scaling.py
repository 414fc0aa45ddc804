"""Scaling as a first-class result: ``sweep/scaling.yaml``, ``scaling_efficiency``, the plots."""

from __future__ import annotations

import os

import pytest
from helpers import records, run_py

import analysis
from flopsweep.plan import MAX_CPU_RANKS_PER_CORE


@pytest.mark.slow
def test_scaling_sweep_on_a_machine_without_gpus_is_refused_once_before_any_job(tmp_path) -> None:
    """No point is skipped silently: the 12 jobs (3 backends x 4 rank counts) are named in one line before
    any job starts, exit 2, no record (docs/reliability-11.md #782; each job had been its own ``invalid``
    record)."""
    out = run_py("-m", "+sweep=scaling", f"hydra.sweep.dir={tmp_path}", timeout=600)
    assert out.returncode == 2, out.stderr[-3000:]
    lines = [line for line in out.stderr.splitlines() if "Invalid config" in line]
    assert len(lines) == 1 and "device='cuda': no CUDA GPU" in lines[0], out.stderr[-3000:]
    assert "each of the sweep's 12 jobs sets it" in lines[0] and "plan=true" in lines[0], lines[0]
    assert records(tmp_path) == []


@pytest.mark.slow
def test_scaling_sweep_on_gloo_ranks(tmp_path) -> None:
    """The real sweep on CPU ranks, cut to DDP: 1 and 2 ranks run and are profiled, a count above
    this machine's CPU-rank cap is recorded invalid; the analysis computes the efficiency."""
    too_many = MAX_CPU_RANKS_PER_CORE * (os.cpu_count() or 1) + 1
    out = run_py(
        "-m",
        "+sweep=scaling",
        "device=cpu",
        "model=gpt-tiny",
        "steps.warmup=1",
        "steps.measure=3",
        "backend=ddp",
        f"nproc_per_node=1,2,{too_many}",
        f"hydra.sweep.dir={tmp_path}",
    )
    recs = {int(r["config"]["nproc_per_node"]): r for r in records(tmp_path)}
    assert sorted(recs) == [1, 2, too_many], out.stderr[-3000:]
    assert recs[too_many]["status"] == "invalid"
    assert "nproc_per_node" in recs[too_many]["error"]["message"]
    for n in (1, 2):
        assert recs[n]["status"] == "ok", recs[n]["error"]
        assert recs[n]["metrics"]["breakdown"]["ranks"] == n
    df = analysis.load(tmp_path).set_index("world_size")
    expected = df.loc[2, "tokens_per_s_per_device"] / df.loc[1, "tokens_per_s_per_device"]
    assert df.loc[2, "scaling_efficiency"] == pytest.approx(expected)
    figures, skipped = analysis.make_plots(df.reset_index())
    assert {"scaling", "step_breakdown"} <= set(figures), skipped


def test_system_records_the_interconnect(monkeypatch) -> None:
    from flopsweep.metrics import system_info

    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    system = system_info("cpu", 1)
    assert system["nccl_env"]["NCCL_NVLS_ENABLE"] == "0"
    assert all(k.startswith("NCCL_") for k in system["nccl_env"])
    assert system["nccl"] is None and system["gpu_topology"] is None  # a CPU run has neither
