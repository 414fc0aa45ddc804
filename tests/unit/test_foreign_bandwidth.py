"""A record of another device lends no bandwidth to a prediction (a new user's trial, session 27):
``plan=true plan_gpu=H100 backend=fsdp nproc_per_node=8 predict.calibration=DIR`` with DIR a CPU
(gloo) sweep took the CPU record's interconnect probe for the H100's link ("bandwidth the probe of
DIR/2/metrics.json"): step_s 54.25, 151 tokens/s/GPU, MFU 0.001. A CPU record's probe or profile is
not a GPU's link, nor one GPU kind's another's: the named GPU's assumed link is used, and its
``source`` says which record was passed over and why (:func:`flopsweep.comm_time.foreign_bandwidth`)."""

from __future__ import annotations

import pytest

from flopsweep import predict as pr
from flopsweep.comm_time import foreign_bandwidth
from flopsweep.forecast_link import link
from flopsweep.plan import validate
from flopsweep.predict_record import predict_record

P = 1_000_000_000


def _record(world: int, *, device: str, device_name: str, busbw: float | None = None, comm_s=None) -> dict:
    """An ok FSDP record of ``world`` ranks on ``device`` (``cpu``, ``cuda``) named ``device_name``,
    with an interconnect probe of ``busbw`` GB/s and a profiled ``comm_s`` where given."""
    record = {
        "status": "ok",
        "config": {
            "device": device,
            "model": {"name": "m", "n_layer": 24},
            "attention": {"name": "sdpa"},
            "precision": {"name": "bf16"},
            "activation_checkpointing": {"name": "none"},
            "compile": False,
            "batch": {"micro_batch_size": 4, "grad_accum": 1},
            "backend": {"name": "fsdp"},
        },
        "model": {"n_params": P, "n_layer": 24, "n_embd": 2048, "seq_len": 2048},
        "system": {
            "world_size": world,
            "nproc_per_node": world,
            "parallel": {"dp_shard": world},
            "device_name": device_name,
        },
        "metrics": {
            "iteration_time_s": {"mean": 1.0},
            "model_flops_per_iteration": world * 6.0 * P * 4 * 2048,
        },
    }
    if busbw is not None:
        record["system"]["interconnect"] = [
            {"collective": c, "bytes": 1 << 20, "busbw_gbps": busbw} for c in pr.COLLECTIVES
        ]
    if comm_s is not None:
        record["metrics"]["breakdown"] = {"comm_s": comm_s, "exposed_comm_s": comm_s / 2}
    return record


@pytest.mark.parametrize(
    ("record", "device_name", "why"),
    [
        (_record(2, device="cpu", device_name="cpu"), "H100", "a CPU record's probe is not this GPU's link"),
        (_record(2, device="cuda", device_name="NVIDIA A100-SXM4-80GB"), "H100", "a record of A100 GPUs"),
        (
            _record(2, device="cuda", device_name="NVIDIA H100 80GB HBM3"),
            "cpu",
            "a GPU record's probe is not",
        ),
        (_record(2, device="cuda", device_name="NVIDIA H100 80GB HBM3"), "H100", None),
        (_record(2, device="cpu", device_name="cpu"), "cpu", None),
        (_record(2, device="cpu", device_name="cpu"), None, None),
    ],
)
def test_a_record_of_another_device_is_named_as_such(record: dict, device_name: str | None, why) -> None:
    found = foreign_bandwidth(record, device_name)
    assert (found is None) if why is None else (found is not None and found.startswith(why)), found


def test_a_gpu_plan_takes_no_bandwidth_from_a_cpu_sweep(hydra_compose) -> None:
    """The trial's case: a CPU sweep's probed 2-rank record beside its 1-rank one, an H100 planned."""
    cfg = validate(hydra_compose(["backend=fsdp", "nproc_per_node=8"]))
    one, two = (
        _record(1, device="cpu", device_name="cpu"),
        _record(2, device="cpu", device_name="cpu", busbw=2.5),
    )
    records = [("DIR/1/metrics.json", one), ("DIR/2/metrics.json", two)]
    made = link(cfg, None, None, records, "H100")
    assumed = pr.assumed_link("H100")
    assert assumed is not None and made.intra == assumed.intra and made.intra["all_reduce"] > 100
    assert made.source.startswith(assumed.source)
    assert "not the probe of DIR/2/metrics.json: a CPU record's probe is not this GPU's link" in made.source
    # the calibration's own probe and the CPU records' profiles are passed over too
    made = link(cfg, None, two, records, "H100")
    assert made.intra == assumed.intra and "not the calibration's probe: a CPU record's" in made.source
    profiled = [("DIR/2/metrics.json", _record(2, device="cpu", device_name="cpu", comm_s=0.5))]
    made = link(cfg, None, None, profiled, "H100")
    assert made.intra == assumed.intra and "a CPU record's profile is not this GPU's link" in made.source
    # another GPU kind's probe: the H100's own link
    a100 = _record(2, device="cuda", device_name="NVIDIA A100-SXM4-80GB", busbw=200.0)
    made = link(cfg, None, None, [("a100/metrics.json", a100)], "H100")
    assert made.intra == assumed.intra and "a record of A100 GPUs: its probe is not the H100" in made.source


def test_a_cpu_plan_keeps_its_cpu_sweeps_probe(hydra_compose) -> None:
    """The same device's probe still gives the bandwidth (the CPU records for a CPU run)."""
    cfg = validate(hydra_compose(["device=cpu", "backend=fsdp", "nproc_per_node=2"]))
    two = _record(2, device="cpu", device_name="cpu", busbw=2.5)
    made = link(cfg, None, None, [("DIR/2/metrics.json", two)], "cpu")
    assert made.source == "the probe of DIR/2/metrics.json" and made.intra["all_reduce"] == 2.5


def test_analysis_predict_takes_no_profile_of_another_device() -> None:
    """``analysis --predict`` of an H100 record: a CPU record's profile gives no bandwidth."""
    h100 = _record(8, device="cuda", device_name="NVIDIA H100 80GB HBM3")
    h100["metrics"]["measured_matmul_tflops"] = 600.0
    cpu = _record(2, device="cpu", device_name="cpu", comm_s=0.5)
    made = predict_record("h100", h100, [("h100", h100), ("cpu", cpu)])
    assert made["iteration_time_s"] is not None, made["source"]
    said = made["bandwidth_source"]
    assert said.startswith("assumed: 0.7 x H100 SXM NVLink") and "a CPU record's profile is not" in said, said
