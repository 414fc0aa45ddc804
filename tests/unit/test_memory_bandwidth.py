"""The datasheet memory bandwidth of each GPU (flopsweep/memory_bandwidth.py, ``PeakRow.memory_tbps``) and
the optimizer rate scaled by it (:func:`flopsweep.predict.optimizer_rate`, the nearest set-up's optimizer)."""

from __future__ import annotations

import copy

import pytest
from helpers import calibration_record as _record

from flopsweep import nearest, nearest_measured, peaks
from flopsweep import predict as pr
from flopsweep.memory_bandwidth import BANDWIDTH
from unit.test_predict import P

WHOLE = {"step_s": 1.0, "optimizer_s": 0.01, "view": "cuda", "optimizer_from": "launch"}
"""A profile that separates the optimizer: 0.01 s of a 1 s step, P parameters on one rank."""


def _on(device_name: str | None, optimizer_s: float = 0.01) -> dict:
    record = _record(1, step=1.0, breakdown={**WHOLE, "optimizer_s": optimizer_s})
    if device_name is not None:
        record["system"]["device_name"] = device_name
    return record


def test_each_row_has_its_datasheet_bandwidth_by_size_and_form() -> None:
    assert set(BANDWIDTH) <= {row.name for row in peaks.PEAK_TABLE}
    cases = {
        "NVIDIA H100 80GB HBM3": 3.35,
        "NVIDIA H200": 4.8,
        "NVIDIA H100 NVL": 3.9,
        "NVIDIA H100 PCIe": 2.0,
        "NVIDIA A100-SXM4-80GB": 2.039,
        "NVIDIA A100 80GB PCIe": 1.935,
        "NVIDIA A100-PCIE-40GB": 1.555,
        "NVIDIA GH200 480GB": 4.0,
        "NVIDIA B200": 8.0,
        "AMD Instinct MI300X": 5.3,
        "AMD Instinct MI325X": 6.0,
    }
    assert {name: pr.memory_tbps(name)[0] for name in cases} == cases
    assert pr.memory_tbps("NVIDIA H100 80GB HBM3") == (3.35, "H100 SXM")
    assert peaks.lookup("NVIDIA H200").memory_tbps.source.endswith("4.8TB/s (HBM3e)")
    assert pr.memory_tbps("NVIDIA A10G") == (None, "no datasheet memory bandwidth for A10G")
    assert pr.memory_tbps("A100") == (
        None,
        "'A100' does not give the memory size A100's bandwidth depends on",
    )
    assert pr.memory_tbps("cpu") == (None, "'cpu' is not in the peak table")


def test_the_optimizer_rate_is_scaled_by_each_records_bandwidth_over_the_targets() -> None:
    """An H200 record's rate on an H100 is x 4.8/3.35; an H100 record's stays; the median is over the
    scaled rates, and the source says each factor once."""
    h200, h100 = _on("NVIDIA H200"), _on("NVIDIA H100 80GB HBM3", optimizer_s=0.02)
    records = [("a", h200), ("b", copy.deepcopy(h200)), ("c", h100)]
    rate, source = pr.optimizer_rate(records, "torch", "NVIDIA H100 80GB HBM3")
    assert rate == pytest.approx(0.01 * 4.8 / 3.35 / P)  # median of 0.01 x 1.433 (twice) and 0.02
    assert source == "median of 3 (a, b, c); x1.43 memory bandwidth 4.8/3.35 TB/s (H200 SXM on H100 SXM)"
    on_h200 = pr.optimizer_rate(records, "torch", "NVIDIA H200")
    assert on_h200[0] == pytest.approx(0.01 / P)  # 0.01, 0.01 and 0.02 x 3.35/4.8
    assert on_h200[1].endswith("; x0.698 memory bandwidth 3.35/4.8 TB/s (H100 SXM on H200 SXM)")
    assert pr.optimizer_rate(records[:2], "torch", "NVIDIA H200") == (
        pytest.approx(0.01 / P),
        "median of 2 (a, b)",
    )
    assert pr.optimizer_rate(records, "torch") == (pytest.approx(0.01 / P), "median of 3 (a, b, c)")  # no GPU


def test_an_unknown_bandwidth_leaves_the_rate_as_measured_and_says_why() -> None:
    h200 = [("a", _on("NVIDIA H200"))]
    rate, source = pr.optimizer_rate(h200, "torch", "NVIDIA A10G")
    assert rate == pytest.approx(0.01 / P)
    assert source == "median of 1 (a); unscaled by memory bandwidth: no datasheet memory bandwidth for A10G"
    rate, source = pr.optimizer_rate([("n", _on(None))], "torch", "NVIDIA H100 80GB HBM3")
    assert rate == pytest.approx(0.01 / P)
    assert source == "median of 1 (n); unscaled by memory bandwidth: None is not in the peak table"
    factors, words = pr.bandwidth_factors(["NVIDIA H200", "NVIDIA A800-SXM4-80GB"], "NVIDIA H100 80GB HBM3")
    assert factors == [pytest.approx(4.8 / 3.35), 1.0]
    assert words == (
        "; x1.43 memory bandwidth 4.8/3.35 TB/s (H200 SXM on H100 SXM)"
        "; unscaled by memory bandwidth: no datasheet memory bandwidth for A800"
    )


def test_the_nearest_set_up_takes_its_optimizer_at_the_targets_bandwidth() -> None:
    """An H100 set-up predicted from another H100 set-up (no profile of its own): the optimizer is the
    H200 profile's rate x 4.8/3.35, taken out of the measured step and put back for the target."""
    h100 = "NVIDIA H100 80GB HBM3"
    measured = _record(1, mbs=4, step=1.0)
    measured["system"]["device_name"] = h100
    target = _record(1, mbs=8, step=2.0)
    target["system"]["device_name"] = h100
    profile = _on("NVIDIA H200")
    profile["config"]["model"]["n_layer"] = 12  # another set-up: only its rate is taken
    pairs = [("m", measured), ("t", target), ("p", profile)]
    me = nearest_measured.describe("t", target)
    found, why, first = nearest.nearest_compute(me, nearest_measured.pool_of(pairs[:2]), pairs)
    assert why == "" and first.name == "m"
    optimizer = 0.01 * 4.8 / 3.35
    assert found.optimizer_s == pytest.approx(optimizer)
    assert found.compute_s == pytest.approx((1.0 - optimizer) * 2)  # twice the micro batch: twice the FLOPs
    assert "x1.43 memory bandwidth 4.8/3.35 TB/s (H200 SXM on H100 SXM)" in found.source
