"""batch=auto: the search itself, and a real CPU run through run.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from flopsweep.autobatch import choose_micro_batch, next_retry_probe, retry_bounds
from flopsweep.sizesearch import predict_largest, search_max

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200x2"


@pytest.mark.parametrize("start", [1, 3, 8])
@pytest.mark.parametrize("limit", [1, 8, 100, 256])
def test_search_finds_the_largest_fitting_size(start: int, limit: int) -> None:
    if limit < start:
        pytest.skip("limit below start is rejected by validation")
    for threshold in range(0, 300, 7):
        found, probed = search_max(lambda n, t=threshold: n <= t, start, limit)
        expected = None if threshold < start else min(threshold, limit)
        assert found == expected, (start, limit, threshold, probed)
        assert len(probed) == len(set(probed))  # no size is probed twice
        assert len(probed) <= 2 * math.ceil(math.log2(max(limit, 2))) + 2
        assert all(start <= n <= limit for n in probed)


def test_search_doubles_then_bisects() -> None:
    _, probed = search_max(lambda n: n <= 21, 1, 256)
    assert probed == [1, 2, 4, 8, 16, 32, 24, 20, 22, 21]


GIB = 2**30


def memory_model(threshold: int, fixed_gib: float, per_sample_gib: float, capacity_gib: float):
    """A ``fits`` whose sizes up to ``threshold`` fit with a linear peak, and a ``predict``
    that extrapolates those peaks to ``capacity_gib`` (as find_micro_batch does)."""
    points: list[tuple[int, int]] = []

    def fits(n: int) -> bool:
        if n <= threshold:
            points.append((n, int((fixed_gib + per_sample_gib * n) * GIB)))
        return n <= threshold

    return fits, lambda: predict_largest(points, int(capacity_gib * GIB))


@pytest.mark.parametrize("threshold", [1, 5, 19, 20, 37, 100, 255, 256])
@pytest.mark.parametrize("capacity_gib", [40.0, 80.0, 140.0, 400.0])
def test_a_guided_search_finds_the_same_size_whatever_the_prediction(
    threshold: int, capacity_gib: float
) -> None:
    """The predictions are right, too low or too high (the memory line and the threshold
    disagree); the result is the exact largest fitting size, never probed twice."""
    fits, predict = memory_model(threshold, fixed_gib=20.0, per_sample_gib=3.0, capacity_gib=capacity_gib)
    found, probed = search_max(fits, 2, 256, predict)
    assert found == min(threshold, 256) if threshold >= 2 else found is None
    assert len(probed) == len(set(probed)) and all(2 <= n <= 256 for n in probed)


def test_a_right_prediction_needs_four_probes() -> None:
    """Peaks of Llama 3.2 1B eager on an H200 (143,771 MiB): 67.4 GiB at micro batch 8,
    118.6 GiB at 16; 19 fit, 20 did not. The unguided search took seven probes."""
    capacity = 143771 * 2**20
    peaks = {8: 72350224384, 16: 127331454976}
    slope = (peaks[16] - peaks[8]) / 8
    points: list[tuple[int, int]] = []

    def fits(n: int) -> bool:
        if n <= 19:
            points.append((n, int(peaks[8] + slope * (n - 8))))
        return n <= 19

    assert search_max(fits, 8, 32, lambda: predict_largest(points, capacity)) == (19, [8, 16, 19, 20])
    assert search_max(lambda n: n <= 19, 8, 32) == (19, [8, 16, 32, 24, 20, 18, 19])


def test_prediction_needs_two_rising_points() -> None:
    assert predict_largest([], 100) is None
    assert predict_largest([(4, 50)], 100) is None
    assert predict_largest([(4, 50), (4, 60)], 100) is None  # one size
    assert predict_largest([(4, 50), (8, 50)], 100) is None  # a flat line
    assert predict_largest([(2, 20), (4, 40)], 100, headroom=1.0) == 10
    assert predict_largest([(2, 20), (4, 40), (1, 99)], 100, headroom=1.0) == 10  # the two largest sizes


def _probe(record: dict) -> dict:
    """A probe's figures (as ``find_micro_batch`` keeps them) from a committed H200 record."""
    m = record["metrics"]
    return {
        "micro_batch_size": record["config"]["batch"]["micro_batch_size"],
        "status": record["status"],
        "peak_cuda_allocated_bytes": m["peak_cuda_allocated_bytes"],
        "cuda_alloc_retries": m["cuda_alloc_retries"],
    }


def test_the_choice_prefers_no_retries_on_the_h200_records() -> None:
    """Llama 3.2 1B eager on FSDP2, one H200: batch=auto's search fit 4, 8 and 21 (22 ran out of
    memory); the measured runs at 21 retried cudaMalloc 12 times (34,908 tokens/s) and at 16 not at all
    (59,477 tokens/s). The choice steps down from 21, bisects once between 16 and 21, and never picks
    the size that retries."""
    search = json.loads((RESULTS / "llama-auto/l1b-fsdp-sdpa-e/0/metrics.json").read_text())["run"][
        "batch_search"
    ]
    at = {n: json.loads((RESULTS / f"alloc-retries/mb{n}/0/metrics.json").read_text()) for n in (16, 21)}
    probes = [p for p in search["probes"] if p["micro_batch_size"] != 21] + [_probe(at[21])]
    assert (search["result"], at[21]["metrics"]["cuda_alloc_retries"]) == (21, 12)
    assert retry_bounds(probes) == (8, 21) and next_retry_probe(probes) == 14
    probes.append(_probe(at[16]))
    assert retry_bounds(probes) == (16, 21) and next_retry_probe(probes) == 18
    size, reason = choose_micro_batch(probes)
    assert size == 16 and "without cudaMalloc retries (16)" in reason and "21" in reason
    assert at[16]["metrics"]["tokens_per_s"] > 1.5 * at[21]["metrics"]["tokens_per_s"]


@pytest.mark.parametrize("retries_from", [2, 9, 17, 21, 22])
def test_bisecting_the_retries_finds_where_they_start(retries_from: int) -> None:
    """Sizes up to 21 fit; from ``retries_from`` on the measured step retries cudaMalloc (22: never).
    The search's probes, then the bisection, end at the largest size without retries."""
    probes: list[dict] = []

    def fits(n: int) -> bool:
        ok = n <= 21
        retries = (n - retries_from + 1) * 3 if ok and n >= retries_from else 0
        probes.append({"micro_batch_size": n, "status": "ok" if ok else "oom", "cuda_alloc_retries": retries})
        return ok

    largest, _ = search_max(fits, 1, 256)
    while (n := next_retry_probe(probes)) is not None:
        fits(n)
    size, reason = choose_micro_batch(probes)
    assert largest == 21 and size == min(retries_from - 1, 21)
    assert len({p["micro_batch_size"] for p in probes}) == len(probes)  # no size probed twice
    assert ("retried" in reason) == (retries_from <= 21)


def test_the_choice_when_every_size_retries_or_none_is_counted() -> None:
    retrying = [{"micro_batch_size": n, "status": "ok", "cuda_alloc_retries": 1} for n in (1, 2)]
    assert choose_micro_batch(retrying) == (
        2,
        "every size that fit retried cudaMalloc; the largest that fit (2)",
    )
    on_cpu = [{"micro_batch_size": n, "status": "ok", "cuda_alloc_retries": None} for n in (1, 2, 4)]
    assert choose_micro_batch(on_cpu) == (
        4,
        "the largest size that fit (4); cudaMalloc retries are counted on CUDA only",
    )
    assert (
        choose_micro_batch([{"micro_batch_size": 1, "status": "oom", "cuda_alloc_retries": None}])[0] is None
    )
