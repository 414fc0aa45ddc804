"""model=hf's OPT and BLOOM run on the CPU end to end (session 37 trial, docs/reliability-7.md #416):
the meta-device count validation makes and the training step (no attention mask) both take them."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import records, run_sweep
from unit.test_hf_plan_37 import BLOOM, OPT, _file

pytest.importorskip("transformers")


def test_tiny_opt_and_bloom_train_on_the_cpu(tmp_path: Path) -> None:
    opt, bloom = _file(tmp_path, "opt", OPT), _file(tmp_path, "bloom", BLOOM)
    proc = run_sweep(
        tmp_path / "sweep",
        "model=hf",
        f"model.config={opt},{bloom}",
        "attention=standard",  # BLOOM has no sdpa in transformers (refused naming the family)
        "device=cpu",
        "precision=fp32",
        "model.seq_len=32",
        "batch.micro_batch_size=1",
        "steps.warmup=1",
        "steps.measure=1",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = records(tmp_path / "sweep")
    assert sorted(r["status"] for r in done) == ["ok", "ok"], [r.get("error") for r in done]
    assert all(r["metrics"]["tokens_per_s"] > 0 for r in done)
