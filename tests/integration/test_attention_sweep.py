"""A CPU sweep over every attention option, as a user runs it (``python run.py -m``): the
options that run on the CPU write ok records, the others write ``invalid`` with their reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import make_plan, records, run_py

from flopsweep.launch import launch_local

# seq 100 in blocks of 16: 7 blocks, the last partial
COMMON = [
    "device=cpu",
    "precision=fp32",
    "model.seq_len=100",
    "batch.micro_batch_size=2",
    "steps.warmup=1",
    "steps.measure=2",
]
SPARSE = ["attention.block_size=16", "attention.window_blocks=2", "attention.stride_blocks=3"]
"""Block-sparse knobs: keys of attention=blocksparse only (a dense kernel refuses them)."""
UNAVAILABLE = {  # option -> words its reason must contain
    "flex": "no backward pass on the CPU",
    "sdpa-flash": "only on CUDA",
    "sdpa-cudnn": "only on CUDA",
    "sdpa-efficient": "only on CUDA",
    "xformers": "CUDA kernels only",
}


def _sweep(tmp: Path, *overrides: str) -> list[dict]:
    proc = run_py("-m", *overrides, *COMMON, f"hydra.sweep.dir={tmp}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return records(tmp)


def _label(a: dict) -> str:
    return f"blocksparse {a['layout']}" if a["name"] == "blocksparse" else a["name"]


@pytest.mark.slow
def test_cpu_sweep_every_attention_option(tmp_path: Path) -> None:
    dense = ["standard", "sdpa", "sdpa-math"]
    recs = _sweep(tmp_path / "dense", "attention=" + ",".join(dense + list(UNAVAILABLE)))
    recs += _sweep(
        tmp_path / "sparse",
        "attention=blocksparse",
        "attention.layout=causal,local,bigbird,strided",
        *SPARSE,
    )
    assert len(recs) == len(dense) + len(UNAVAILABLE) + 4
    by_label = {_label(r["config"]["attention"]): r for r in recs}
    for name, reason in UNAVAILABLE.items():
        r = by_label[name]
        assert r["status"] == "invalid" and r["error"]["phase"] == "config", name
        assert reason in r["error"]["message"] and "Fix:" in r["error"]["message"]
        assert r["metrics"]["model_tflops_per_device"] is None
    for label, r in by_label.items():
        if label in UNAVAILABLE:
            continue
        assert r["status"] == "ok", (label, r["error"])
        m, a = r["metrics"], r["config"]["attention"]
        assert m["tokens_per_s"] > 0 and m["flops_convention"]
        dense_flops = by_label["sdpa"]["metrics"]["model_flops_per_iteration"]
        if a["name"] == "blocksparse":
            assert a["impl"] == "gather" and 0 < a["density"] < 1
            assert m["model_flops_per_iteration"] < dense_flops  # only the layout's blocks count
        else:
            assert set(a) == {"name", "density"} and a["density"] == 1.0
            assert m["model_flops_per_iteration"] == dense_flops
    assert by_label["blocksparse causal"]["config"]["attention"]["density"] == 28 / 49  # 7 blocks
    # the same weights and data: a causal layout trains exactly like the dense kernels
    assert by_label["blocksparse causal"]["metrics"]["loss_last"] == pytest.approx(
        by_label["standard"]["metrics"]["loss_last"], abs=1e-4
    )


@pytest.mark.slow
def test_kernel_unavailable_in_a_worker_is_invalid(tmp_path: Path) -> None:
    """A kernel that validation cannot rule out, but that fails in the worker's probe (here
    sdpa-cudnn on the CPU, with validation skipped), ends as ``invalid``, phase init."""
    import dataclasses

    from flopsweep.config import AttentionConfig, RunConfig

    p = make_plan(RunConfig(device="cpu", precision=dataclasses.replace(RunConfig().precision, name="fp32")))
    cfg = dataclasses.replace(p.cfg, attention=AttentionConfig(name="sdpa-cudnn", density=1.0))
    outcome = launch_local(dataclasses.replace(p, cfg=cfg), tmp_path)
    assert outcome.status == "invalid", outcome.error
    assert outcome.error["type"] == "KernelUnavailable" and outcome.error["phase"] == "init"
    assert "attention=sdpa-cudnn cannot run on cpu" in outcome.error["message"]
