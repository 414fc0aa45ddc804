"""The Llama family on the backends that hold or shard its parameters (two gloo ranks, fp32).

One sweep of llama-tiny over DDP, FSDP2, ZeRO-2 and ZeRO-3 (:func:`llama_sweep`) serves three files' checks:
the backends' first-step loss, the analysis' acceptance line of ``flopsweep.identity`` (moved here from
``test_identity.py``) and the reference of the offload runs (moved here from ``test_offload.py``), which ran
the same set-ups again (CI time: 7 two-rank jobs in three Hydra starts, where they took 12 in four).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import LLAMA_TINY_TWO_RANKS, ok_sweep
from unit.test_identity import _without_keys  # shared with the unit tier

import analysis
from analysis.__main__ import main as analysis_main
from flopsweep import identity

TORCH_ADAMW_ON_CPU = {
    "class": "torch.optim.adamw.AdamW",
    "fused": False,
    "foreach": False,
    "in_backward": False,
    "overlap_forward": False,
}
"""``system.optimizer`` of a CPU run: torch's AdamW, its for-loop implementation (CPU tensors)."""


@pytest.fixture(scope="module")
def llama_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """``backend=ddp,fsdp,zero2,zero3`` over :data:`helpers.LLAMA_TINY_TWO_RANKS`: its folder and its
    records (every one ``ok``), in job order."""
    sweep = tmp_path_factory.mktemp("llama")
    return sweep, ok_sweep(sweep, *LLAMA_TINY_TWO_RANKS, "backend=ddp,fsdp,zero2,zero3")


def _backend(record: dict) -> str:
    """``ddp``, ``fsdp``, ``zero2`` or ``zero3``: the backend a record ran."""
    backend = record["config"]["backend"]
    return f"zero{backend['zero_stage']}" if backend["name"] == "deepspeed" else backend["name"]


@pytest.mark.slow
def test_llama_tiny_first_step_loss_is_the_same_on_every_backend(llama_sweep: tuple) -> None:
    """Same seed, same data: DDP, FSDP2, ZeRO-2 and ZeRO-3 (tied embedding registered for ZeRO-3) give the
    same first-step loss within 1e-4. ZeRO-2 runs as the offload tests' reference; ZeRO-1 (and ZeRO-2)
    shard no parameter, only the optimizer state and the gradients, whatever the model:
    test_run.py::test_backends_start_from_same_weights_and_data holds them to DDP's first-step loss
    within 1e-4 on gpt-tiny (tied embedding too, the same two ranks and steps)."""
    _, recs = llama_sweep
    assert [_backend(r) for r in recs] == ["ddp", "fsdp", "zero2", "zero3"]
    losses = [r["metrics"]["loss_first"] for r in recs]
    assert max(losses) - min(losses) < 1e-4, losses
    for r in recs:
        assert (
            r["model"]["arch"] == "llama" and r["metrics"]["tflops_per_device"] is None
        )  # eq. 3 is GPT-only
        assert r["metrics"]["model_flops_per_iteration"] > 0


@pytest.mark.slow
def test_sweep_ddp_fsdp_zero3_every_row_has_a_speedup(llama_sweep: tuple, capsys) -> None:
    """The acceptance line of ``flopsweep.identity``: ``python -m analysis DIR --baseline backend=fsdp`` on a
    real ``backend=ddp,fsdp,zero3`` sweep (ZeRO-2 too) gives every row a speedup."""
    sweep, recs = llama_sweep
    assert {r["system"]["parallel"]["dp_replicate"] for r in recs} == {1, 2}  # DDP's dp2x1 among them
    assert all(r["run"]["setup_key"] == identity.setup_key(_without_keys(r)) for r in recs)
    assert (
        analysis_main([str(sweep), "--baseline", "backend=fsdp", "--columns", "backend,layout,speedup"]) == 0
    )
    out, err = capsys.readouterr()
    assert "dp2x1" in out and "speedup is blank" not in out + err
    df = analysis.compare(analysis.load(sweep), baseline={"backend": "fsdp"})
    assert len(df) == 4 and df["speedup"].notna().all(), df[["backend", "layout", "speedup"]]


def _first_losses(recs: list[dict]) -> dict[str, float]:
    """The first-step loss of each record, by its backend config; every record ran torch's AdamW on
    the CPU (``system.optimizer``, read from the live optimizer; DeepSpeed's ``torch_adam``)."""
    assert [r["system"]["optimizer"] for r in recs] == [TORCH_ADAMW_ON_CPU] * len(recs)
    return {str(sorted(r["config"]["backend"].items())): r["metrics"]["loss_first"] for r in recs}


@pytest.mark.slow
def test_fsdp_cpu_offload_gives_the_same_first_step_loss(llama_sweep: tuple, tmp_path: Path) -> None:
    """FSDP2's ``CPUOffloadPolicy`` (``backend.cpu_offload=true``) against the sweep's FSDP2 run
    without it."""
    _, recs = llama_sweep
    offloaded = ok_sweep(tmp_path, *LLAMA_TINY_TWO_RANKS, "backend=fsdp", "backend.cpu_offload=true")
    losses = _first_losses([r for r in recs if _backend(r) == "fsdp"] + offloaded)
    assert len(losses) == 2
    first, second = losses.values()
    assert first == pytest.approx(second, abs=1e-5)


@pytest.mark.slow
def test_zero_offload_optimizer_gives_the_same_first_step_loss(llama_sweep: tuple, tmp_path: Path) -> None:
    """ZeRO-2 and ZeRO-3 with the optimizer states on the host (the CPU step: ``torch.optim.AdamW``
    on a CPU run, ``torch_adam``) against the same stage without offload (the sweep's)."""
    _, recs = llama_sweep
    # choice(): a sweep of one value, composed with each job's backend (a plain value is composed first,
    # into the default backend, which has no such key)
    offload = ("backend=zero2,zero3", "backend.offload_optimizer=choice(cpu)")
    offloaded = ok_sweep(tmp_path, *LLAMA_TINY_TWO_RANKS, *offload)
    losses = _first_losses([r for r in recs if _backend(r) in ("zero2", "zero3")] + offloaded)
    assert len(losses) == 4
    values = list(losses.values())
    assert max(values) - min(values) < 1e-5, losses
