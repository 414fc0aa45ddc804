"""``metrics.predicted`` for a record that was measured without one (``python -m analysis --predict``):
:func:`predict_record`, from the other loaded records, by the model of :mod:`flopsweep.predict`, a
calibration or the nearest set-up (:mod:`flopsweep.nearest`). Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from flopsweep import nearest, nearest_measured, zero3_floor
from flopsweep.comm_time import foreign_bandwidth
from flopsweep.fp8_cast import cast_time
from flopsweep.predict import (
    COLLECTIVES,
    Link,
    PredictionError,
    assumed_link,
    backend_of,
    calibrated_busbw,
    calibration_compute,
    calibration_key,
    compute_uncalibrated,
    link_from_probe,
    memory_tbps,
    optimizer_family,
    optimizer_rate,
    overlap_from_records,
    pick_calibration,
    predict,
    workload_from_record,
)
from flopsweep.record import value_at


def predict_record(
    name: str,
    record: dict[str, Any],
    records: Sequence[tuple[str, dict[str, Any]]],
    *,
    pool: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """``metrics.predicted`` for a measured record that lacks one (``python -m analysis
    --predict``): calibrated from ``records`` (:func:`pick_calibration`, never ``name`` itself),
    else from the nearest set-up among them that is not its own (:func:`flopsweep.nearest.nearest_compute`;
    ``pool``: :func:`flopsweep.nearest_measured.pool_of` of ``records``, made once by a caller that predicts
    many), else uncalibrated at its measured GEMM rate, the reason no set-up was near said in
    ``source``; bandwidths from its own probe
    (``system.interconnect``), else the calibration's; overlap from the profiled records of its
    backend among ``records``, else assumed; without any probe, the bandwidth that the profiled
    records among ``records`` imply (:func:`calibrated_busbw`); never the bandwidth of a record of
    another device (:func:`flopsweep.comm_time.foreign_bandwidth`: a CPU record for a GPU one). Made
    from inputs that predate its measured steps, the other records aside.

    Returns:
        :meth:`Prediction.as_dict`, or ``{iteration_time_s: None, tokens_per_s: None,
        source: "no prediction: <why>"}``.
    """
    try:
        target = workload_from_record(record)
        world = target.world_size
        others = [(n, r) for n, r in records if n != name]
        picked = pick_calibration(
            calibration_key(record),
            world,
            target.backend,
            others,
            backend_config=value_at(record, ("config", "backend")),
            hostname=value_at(record, ("system", "hostname")),
            started_at=value_at(record, ("run", "started_at")),
        )
        metrics = record.get("metrics") or {}
        if picked:
            family = optimizer_family(picked[1])
            compute = calibration_compute(
                target,
                *picked,
                rate=optimizer_rate(others, family, value_at(picked[1], ("system", "device_name")))
                if family
                else None,
            )
        else:
            me = nearest_measured.describe(name, record, target)
            found, why = (None, "no nearest set-up: the record has no config")
            if me is not None:
                near = nearest_measured.pool_of(others) if pool is None else pool
                found, why, _ = nearest.nearest_compute(me, near, others)
            cast = cast_time(record, target, memory_tbps(value_at(record, ("system", "device_name"))))
            compute = found or compute_uncalibrated(
                target, gemm_tflops=metrics.get("measured_matmul_tflops"), cast=cast
            )
            if found is None:
                compute = dataclasses.replace(compute, source=f"{compute.source}; {why}")
        if zero3_floor.applies(record):  # DeepSpeed's own, on one GPU
            compute = zero3_floor.with_floor(compute, target.n_params)
        own = value_at(record, ("system", "interconnect"))
        link = link_from_probe(own, source="the run's probe")
        device = value_at(record, ("system", "device_name"))  # another device's bandwidth is not its link
        if not link.intra and picked and not foreign_bandwidth(picked[1], device):
            link = link_from_probe(
                value_at(picked[1], ("system", "interconnect")), source="the calibration's probe"
            )
        own_backend = backend_of(record)
        same = [(n, r) for n, r in others if not foreign_bandwidth(r, device, what="profile")]
        bus = calibrated_busbw(same, backend=own_backend) or calibrated_busbw(same)
        if not link.intra and bus:
            link = Link(intra=dict.fromkeys(COLLECTIVES, bus[0]), source=bus[1])
        why = None  # the bandwidth of a record of another device passed over: the GPU's own link instead
        if picked and value_at(picked[1], ("system", "interconnect")):
            why = foreign_bandwidth(picked[1], device)
        if not why and not bus and calibrated_busbw(others):
            why = next(w for _, r in others if (w := foreign_bandwidth(r, device, what="profile")))
        if not link.intra and why and (assumed := assumed_link(device)):
            link = dataclasses.replace(assumed, source=f"{assumed.source} (not another device's: {why})")
        nproc = value_at(record, ("system", "nproc_per_node"))
        result = predict(
            target,
            compute,
            link,
            gpus_per_node=nproc if isinstance(nproc, int) and nproc > 0 else world,
            overlap=overlap_from_records(own_backend, others) or overlap_from_records(target.backend, others),
            peak_tflops=metrics.get("peak_tflops"),
        )
    except PredictionError as exc:
        return {"iteration_time_s": None, "tokens_per_s": None, "source": f"no prediction: {exc}"}
    return result.as_dict()
