"""``plan=true``: every job validated and estimated, no worker started, no record written."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest
from helpers import run_py

from flopsweep.backends import DeepSpeedConfig, FSDPConfig
from flopsweep.config import BackendConfig, RunConfig
from flopsweep.memory import estimate
from flopsweep.models.gpt2 import GPT2Config

GPT_13B = GPT2Config(name="gpt-1.3b", n_layer=24, n_embd=2048, n_head=16, seq_len=2048, vocab_size=50304)
P = 1_315_819_520


def _cfg(backend, **kw) -> RunConfig:
    cfg = dataclasses.replace(RunConfig(), model=GPT_13B, backend=backend, device="cuda", **kw)
    cfg.batch.micro_batch_size = 8
    return cfg


def test_model_states_follow_the_backend() -> None:
    single = estimate(_cfg(BackendConfig(name="single")), 1)
    assert single.model_states == 18 * P  # fp32 weights, grads, AdamW moments + bf16 autocast copies
    assert estimate(_cfg(BackendConfig(name="ddp")), 1).model_states == 22 * P
    assert estimate(_cfg(FSDPConfig()), 8).model_states == 16 * P // 8
    zero2 = estimate(_cfg(DeepSpeedConfig(zero_stage=2)), 4)
    assert zero2.model_states == 2 * P + int(18 * P / 4) and "estimate_zero2" in zero2.method
    assert "estimate_zero3" in estimate(_cfg(DeepSpeedConfig(zero_stage=3)), 4).method


def test_checkpointing_keeps_only_block_inputs() -> None:
    plain = estimate(_cfg(BackendConfig(name="single")), 1)
    ckpt = estimate(_cfg(BackendConfig(name="single"), activation_checkpointing=True), 1)
    assert ckpt.activations < plain.activations / 4 and ckpt.logits == plain.logits


@pytest.mark.slow
def test_plan_on_a_gpu_sweep_starts_nothing(tmp_path: Path) -> None:
    proc = run_py("-m", "+sweep=backends", "plan=true", f"hydra.sweep.dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert [r["status"] for r in rows] == ["ok"] * 6
    assert {r["n_params"] for r in rows} == {str(P)}
    assert "launching" not in proc.stdout + proc.stderr and not list(tmp_path.rglob("metrics.json"))
    assert proc.stdout.count("| backend=") == 6  # one table, a row per job
