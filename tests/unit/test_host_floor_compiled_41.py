"""A compiled host-bound record floors an eager run of otherwise the same host work (issue 41, session
41; docs/prediction-nearest.md#host-bound-records-session-40, "Across compile settings"; a model change,
no reliability row). Before, the eager Qwen3-1.7B FSDP2 record at sequence 128
(`h100/session39/probe/p3/1`, 0.227 s) had no record of its host work left once its own set-up was left
out (its compiled twin, 0.135 s, is of the other compile setting) and was predicted from a compute-bound
record: -97.3% in the H100 leave-one-out; now its compiled twin's step is a floor on it (compiling removes
host work): -40.4%. The reverse, an eager step as a floor for a compiled run, is no bound and is not
taken."""

from __future__ import annotations

import pytest

from flopsweep import nearest_host, nearest_measured
from tests.unit.test_predict_nearest import P, predicted, record


def _compiled(rec: dict) -> dict:
    rec["config"]["compile"] = True
    return rec


def _pool(host_compiled: bool) -> dict[str, dict]:
    """Compute-bound one-H200 records (4.9e13 FLOP in 0.1 s: 491 TFLOP/s) eager and compiled, and one
    host-bound record of model ``m1`` FSDP2 at sequence 128, micro batch 2 (0.135 s), compiled or eager."""
    pool: dict[str, dict] = {}
    for compiled in (False, True):
        tag = "c" if compiled else "e"
        for name, rec in (
            (f"m2-fsdp-{tag}", record(model="m2", step=0.1)),
            (f"m3-fsdp-{tag}", record(model="m3", n_params=2 * P, step=0.2)),
            (f"m2-single-{tag}", record(model="m2", backend="single", step=0.1)),
        ):
            pool[name] = _compiled(rec) if compiled else rec
    host = record(model="m1", seq=128, mbs=2, step=0.135)
    pool["m1-host"] = _compiled(host) if host_compiled else host
    return pool


def test_a_compiled_host_bound_record_floors_the_eager_run() -> None:
    """Was the compute-bound rate alone: 6e9 x 128 x 2 FLOP at 491 TFLOP/s, 3 ms."""
    pool = _pool(host_compiled=True)
    assert set(nearest_host.bound(nearest_measured.pool_of(list(pool.items())))) == {"m1-host"}
    compute, why, first = predicted(record(model="m1", seq=128, mbs=2, step=0.0), pool)
    assert why == "" and first is not None and first.name == "m2-fsdp-e"
    assert compute.compute_s == pytest.approx(0.135)
    assert "host-bound reference m1-host" in compute.source
    assert "compiled, a lower bound on the eager run's host work" in compute.source


def test_an_eager_host_bound_record_is_no_floor_for_a_compiled_run() -> None:
    """Eager host work is above the compiled run's: an upper bound, not a floor; the rate alone, as before."""
    pool = _pool(host_compiled=False)
    target = _compiled(record(model="m1", seq=128, mbs=2, step=0.0))
    compute, _, first = predicted(target, pool)
    assert first is not None and first.name == "m2-fsdp-c"
    assert compute.compute_s < 0.01 and "host-bound" not in compute.source


def test_a_compiled_floor_needs_the_rest_of_the_host_work_the_same() -> None:
    """A recompute (``full``) runs the forward's operators again: another host work, no floor either way."""
    target = record(model="m1", seq=128, mbs=2, policy="full", step=0.0)
    compute, _, _ = predicted(target, _pool(host_compiled=True))
    assert compute.compute_s < 0.01
    me, host = (nearest_measured.describe(n, r) for n, r in (("t", target), ("h", _pool(True)["m1-host"])))
    assert not nearest_host.lower_bound(me, host)
