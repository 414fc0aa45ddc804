"""A host-bound record in the nearest-set-up prediction (issue 41, session 40; the model in
docs/prediction-nearest.md#host-bound-records-session-40, reliability row 760 for the calibration
path): its step is a floor on the compute of a run of its host work, never a rate carried by the FLOPs,
and the rule runs without it (:mod:`flopsweep.nearest_host`). Before, Qwen3-1.7B FSDP2 compiled at micro
batch 5 on one H200 took its micro batch 2 H100 record (0.135 s, MFU 2%) x2.5: 0.286 s, 9x ``single``."""

from __future__ import annotations

import pytest

from flopsweep import forecast, nearest_host, nearest_measured
from flopsweep import plan_space as ps
from flopsweep.clusters import parse_cluster
from tests.unit.test_predict_nearest import P, predicted, record


def _pool() -> dict[str, dict]:
    """Three compute-bound one-H200 records (4.9e13 FLOP in 0.1 s: 491 TFLOP/s) and one host-bound one:
    model ``m1`` FSDP2 at sequence 128, micro batch 2 (1.5e12 FLOP in 0.135 s: 11.4 TFLOP/s)."""
    return {
        "m2-fsdp": record(model="m2", step=0.1),
        "m3-fsdp": record(model="m3", n_params=2 * P, step=0.2),
        "m2-single": record(model="m2", backend="single", step=0.1),
        "m1-host": record(model="m1", seq=128, mbs=2, step=0.135),
    }


def _without_host(target: dict):
    return predicted(target, {k: v for k, v in _pool().items() if k != "m1-host"})


def test_the_host_bound_record_is_told_by_its_rate_against_its_peers() -> None:
    pool = nearest_measured.pool_of(list(_pool().items()))
    shares = nearest_host.shares(pool)
    assert shares["m1-host"] == pytest.approx(1.536e12 / 0.135 / 4.9152e14, rel=1e-3)  # 0.023
    assert nearest_host.bound(pool) == {"m1-host": shares["m1-host"]}
    assert min(v for k, v in shares.items() if k != "m1-host") >= nearest_host.HOST_BOUND_SHARE


@pytest.mark.parametrize("mbs", [5, 1])
def test_a_host_bound_reference_is_a_floor_for_a_bigger_and_a_smaller_run(mbs: int) -> None:
    """Was 0.135 s x mbs/2 (0.3375 s at 5, 0.0675 s at 1): the step set by the host, carried by the FLOPs."""
    compute, why, first = predicted(record(model="m1", seq=128, mbs=mbs, step=0.0), _pool())
    assert why == "" and first is not None and first.name == "m2-fsdp"  # R_dev: the nearest compute-bound
    assert compute.compute_s == pytest.approx(0.135)  # the floor: 6e9 x 128 x mbs at 491 TFLOP/s is far less
    assert (
        "host-bound reference m1-host (MFU 1.1%, 0.023 x its peers' median rate): its 0.135 s step a floor"
        in (compute.source)
    )


def test_a_run_above_the_floor_takes_the_compute_bound_rate() -> None:
    target = record(model="m1", seq=2048, mbs=16, step=0.0)  # 1.97e14 FLOP: 0.4 s at 491 TFLOP/s
    compute, _, _ = predicted(target, _pool())
    assert compute.compute_s == pytest.approx(0.4)
    assert compute.compute_s == pytest.approx(_without_host(target)[0].compute_s)


def test_a_compute_bound_reference_is_unchanged() -> None:
    target = record(model="m2", mbs=8, step=0.0)
    compute, _, first = predicted(target, _pool())
    assert first is not None and first.name == "m2-fsdp"
    assert compute == _without_host(target)[0]
    assert compute.compute_s == pytest.approx(0.2) and "host-bound" not in compute.source


def test_a_host_bound_reference_of_other_host_work_is_passed_over_and_no_floor() -> None:
    """``full`` recomputes the forward's operators: another host work, so its step is no floor."""
    target = record(model="m1", seq=128, mbs=5, policy="full", step=0.0)
    compute, _, first = predicted(target, _pool())
    assert first is not None and first.name != "m1-host"
    assert compute.compute_s == pytest.approx(_without_host(target)[0].compute_s)
    assert compute.compute_s < 0.05
    assert "host-bound reference m1-host (MFU 1.1%, 0.023 x its peers' median rate) passed over: its " in (
        compute.source
    )
    assert "activation_checkpointing not the run's" in compute.source


def test_the_floor_counts_the_grad_accumulation() -> None:
    target = record(model="m1", seq=128, mbs=2, step=0.0)
    target["config"]["batch"]["grad_accum"] = 3
    compute, _, _ = predicted(target, _pool())
    assert compute.compute_s == pytest.approx(0.405)
    assert "x3 grad accumulation" in compute.source


def test_the_plan_no_longer_predicts_qwen_fsdp2_nine_times_slower_than_single(hydra_compose) -> None:
    """``plan=true plan_gpu=H200 model=hf model.config=qwen3-1.7b backend=single,fsdp compile=true
    batch.micro_batch_size=5`` over the shipped records: FSDP2 0.286 s against ``single``'s 0.032 s (9x),
    from the host-bound H100 record at micro batch 2 x2.5; now its step a floor. On an H100 it was that
    record as a calibration scaled by tokens (0.295 s): now the nearest set-up's floor too. The nearest is
    session 43's H100 record of the same model under FSDP2, compiled, at micro batch 4 (the H100 and the H200
    share the bf16 peak, so neither kind is preferred; it was ``h200/hf/1``)."""
    cfg = hydra_compose(["model=hf", "model.config=qwen3-1.7b", "compile=true"])
    records = forecast.prediction_records(cfg)
    step = {}
    for gpu, backend in (("H200", "single"), ("H200", "fsdp"), ("H100", "fsdp")):
        setup = ps.Setup(backend=backend, layout="dp", checkpointing="none", precision="bf16", micro_batch=5)
        row = ps.evaluate(cfg, setup, parse_cluster(f"{gpu}:1"), records)
        assert row is not None and row.status == "ok", row and row.reason
        step[gpu, backend] = row.predicted_iteration_time_s
        if backend == "fsdp":  # the record: 0.135 s at micro batch 2 on an H100, its optimizer inside
            assert row.prediction_source.startswith(
                "nearest (shipped records): h100/session43/probe/c3/1/metrics.json"
            )
            assert "host-bound reference h100/session39/probe/p3/3/metrics.json" in row.prediction_source
            assert 0.12 < step[gpu, backend] < 0.14, step
    assert step["H200", "fsdp"] / step["H200", "single"] < 5, step


def test_a_record_with_too_few_peers_is_not_judged() -> None:
    """One other record is no rate of the kind: under ``MIN_PEERS`` others the share is 1.0."""
    pool = {k: v for k, v in _pool().items() if k in ("m2-fsdp", "m1-host")}
    assert nearest_host.bound(nearest_measured.pool_of(list(pool.items()))) == {}
    compute, _, first = predicted(record(model="m1", seq=128, mbs=4, step=0.0), pool)
    assert first is not None and first.name == "m1-host"  # as before: carried by its rate
    assert compute.compute_s == pytest.approx(0.27)


def test_without_a_compute_bound_record_the_host_bound_one_is_carried_as_measured() -> None:
    """Its peers are the target's own set-up (never a candidate): the host-bound record stands, as before."""
    pool = {f"own{i}": record(model="m9", step=0.1) for i in range(4)}
    pool["m1-host"] = record(model="m1", seq=128, mbs=2, step=0.135)
    assert set(nearest_host.bound(nearest_measured.pool_of(list(pool.items())))) == {"m1-host"}
    compute, why, first = predicted(record(model="m9", step=0.0), pool)
    assert why == "" and first is not None and first.name == "m1-host"
    assert compute.compute_s == pytest.approx(0.135 * 4.9152e13 / 1.536e12)  # by its rate: 4.32 s
    assert "host-bound" not in compute.source


def test_where_no_compute_bound_record_has_compute_time_left_the_host_bound_one_stands() -> None:
    """A compute-bound candidate without FLOPs stands for nothing: the rule runs again, host-bound kept."""
    pool = {f"own{i}": record(model="m9", step=0.1) for i in range(4)}
    pool["m1-host"] = record(model="m1", seq=128, mbs=2, step=0.135)
    pool["empty"] = record(model="m3", step=0.1)
    pool["empty"]["metrics"]["model_flops_per_iteration"] = pool["empty"]["metrics"][
        "hardware_flops_per_iteration"
    ] = 0
    compute, why, first = predicted(record(model="m9", step=0.0), pool)
    assert why == "" and first is not None and first.name == "m1-host"
    assert compute.compute_s == pytest.approx(0.135 * 4.9152e13 / 1.536e12)
