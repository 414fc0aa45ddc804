"""A calibration is of the same kind of step (issue 41/42): a record whose optimizer or parameters live
on the host (FSDP2's ``cpu_offload``, ZeRO-Offload), whose optimizer steps in backward, or whose AdamW
kernel differs, is not "the same set-up" (``identity.CALIBRATION_KEYS``), and the nearest set-up takes a
record of the target's optimizer side (GPU or host) ahead of its backend."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from helpers import calibration_record

from flopsweep import identity, nearest, nearest_measured
from flopsweep import predict as pr


def _record(world: int, *, backend: dict, step: float = 1.0, **optim) -> dict:
    """A CUDA calibration record of ``backend``'s section and ``optim``'s keys (the rest AdamW's defaults)."""
    optim = {"in_backward": False, "implementation": "auto", **optim}
    return calibration_record(world, backend=backend, step=step, config={"device": "cuda", "optim": optim})


ZERO3 = {"name": "deepspeed", "zero_stage": 3, "offload_optimizer": "none", "offload_param": "none"}


def test_a_deepspeed_offload_record_does_not_calibrate_a_run_on_the_gpu() -> None:
    target = _record(2, backend=ZERO3)
    offloaded = _record(1, backend={**ZERO3, "offload_optimizer": "cpu"}, step=9.0)
    params = _record(1, backend={**ZERO3, "offload_param": "cpu"}, step=5.0)
    key = pr.calibration_key(target)
    pool = [("offloaded", offloaded), ("params", params)]
    assert pr.pick_calibration(key, 2, "deepspeed", pool, backend_config=ZERO3) is None
    assert pr.calibration_differences(target, offloaded) == ["backend.offload_optimizer None vs cpu"]
    assert pr.calibration_differences(target, params) == ["backend.offload_param None vs cpu"]
    # an offloading run is calibrated by its own kind of step, not by one on the GPU
    on_gpu = _record(1, backend=ZERO3, step=0.5)
    own = offloaded["config"]["backend"]
    both = [("on-gpu", on_gpu), *pool]
    assert pr.pick_calibration(pr.calibration_key(offloaded), 2, "deepspeed", both, backend_config=own)[
        0
    ] == ("offloaded")
    assert pr.pick_calibration(key, 2, "deepspeed", both, backend_config=ZERO3)[0] == "on-gpu"
    # nvme is another place than the host
    assert pr.calibration_key(offloaded) != pr.calibration_key(
        _record(1, backend={**ZERO3, "offload_optimizer": "nvme"})
    )


def test_backends_that_keep_every_state_on_the_gpu_share_a_key() -> None:
    """A knob at its on-GPU value, or absent (``single``, ``ddp``, a record before it), reads alike: the
    analysis still calibrates across such backends; ``auto`` is the fused kernel it runs on CUDA."""
    keys = {
        pr.calibration_key(_record(1, backend=b))
        for b in (
            {"name": "single"},
            {"name": "ddp"},
            {"name": "fsdp", "cpu_offload": False},
            {"name": "fsdp"},
            ZERO3,
        )
    }
    assert len(keys) == 1
    assert pr.calibration_key(_record(1, backend={"name": "fsdp"}, implementation="fused")) in keys
    old = _record(1, backend={"name": "fsdp"})
    del old["config"]["optim"]["implementation"], old["config"]["optim"]["in_backward"]  # before the keys
    assert pr.calibration_key(old) in keys
    assert identity.HOST_OFFLOAD == {
        "cpu_offload": False,
        "offload_optimizer": "none",
        "offload_param": "none",
    }


def test_the_optimizer_in_backward_and_its_kernel_are_part_of_the_step() -> None:
    fsdp = {"name": "fsdp", "cpu_offload": False}
    target = _record(2, backend=fsdp)
    pool = [
        ("in-backward", _record(1, backend=fsdp, in_backward=True)),
        ("foreach", _record(1, backend=fsdp, implementation="foreach")),
    ]
    assert pr.pick_calibration(pr.calibration_key(target), 2, "fsdp", pool, backend_config=fsdp) is None
    assert pr.calibration_differences(target, pool[0][1]) == ["optim.in_backward False vs True"]
    assert pr.calibration_differences(target, pool[1][1]) == ["optim.implementation fused vs foreach"]


def test_the_nearest_set_up_keeps_to_the_targets_optimizer_side() -> None:
    """An FSDP2 ``cpu_offload`` record of the target's backend (a host-bound step: 7.41 s where the GPU one
    took 0.36 s) never stands for a run on the GPU, nor a GPU record for an offloading run."""
    target = nearest_measured.describe("t", _record(1, backend={"name": "fsdp", "cpu_offload": False}))
    on_host = _record(1, backend={"name": "fsdp", "cpu_offload": True}, step=7.4)
    host = nearest_measured.describe("host", on_host)
    ddp = _record(1, backend={"name": "ddp"}, step=0.4)
    ddp["config"]["model"] = {"name": "other", "n_layer": 24}
    gpu = nearest_measured.describe("ddp", ddp)
    assert target.backend[2] != nearest_measured.HOST and host.backend[2] == nearest_measured.HOST
    assert [m.name for m in nearest.candidates(target, [host, gpu])[0]] == ["ddp"]
    found, why = nearest.candidates(target, [host])
    assert found == [] and why.startswith(
        "none of the 1 ok records of other set-ups steps its optimizer on the GPU"
    )
    offloading = dataclasses.replace(host, name="t2", setup=None)
    assert [m.name for m in nearest.candidates(offloading, [gpu, host])[0]] == ["host"]
    assert "on the host, as the run does" in nearest.candidates(offloading, [gpu])[1]


def test_the_3b_fsdp_plan_on_h200_is_not_calibrated_from_an_offload_record(
    hydra_compose, tmp_path: Path
) -> None:
    """The trial's plan: ``plan_gpu=H200 model=llama3.2-3b backend=fsdp batch.micro_batch_size=4`` took
    ``h200/session23/new-off`` (``cpu_offload``: 7.41 s, MFU 0.024) as its own calibration; the shipped
    records hold no eager 3B FSDP2 step on the GPU, so the nearest set-up stands for it."""
    from flopsweep.job import JobInfo, plan_job

    args = ["plan=true", "plan_gpu=H200", "model=llama3.2-3b", "backend=fsdp", "batch.micro_batch_size=4"]
    row = plan_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    source = row["prediction_source"]
    assert row["status"] == "ok", row["note"]
    assert "new-off" not in source and "span-off" not in source and not source.startswith("calibrated"), (
        source
    )
    assert float(row["predicted_iteration_time_s"]) < 1.0 and float(row["predicted_mfu"]) > 0.3, row
    offload = plan_job(
        hydra_compose([*args, "backend.cpu_offload=true"]), JobInfo(job_dir=tmp_path, overrides=[])
    )
    assert "h200/session23/new-off/0/metrics.json" in offload["plan"]["prediction_source"], offload["plan"]
    assert offload["plan"]["prediction_source"].startswith("calibrated (shipped records)"), offload["plan"]
