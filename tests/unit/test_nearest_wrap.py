"""One-rank data parallel wrapping in the nearest-set-up prediction (:mod:`flopsweep.nearest_wrap`): a
compiled one-rank DDP or ZeRO-1/2 target takes a record of its model before one of its backend, the
backend's cost added per parameter as measured in a set-up that ran both (docs/prediction-nearest.md)."""

from __future__ import annotations

import pytest

from tests.unit.test_predict_nearest import P, predicted, record


def _rec(arch: str, model: str, n_params: int, backend: str, step: float, *, compiled: bool = True) -> dict:
    """An ok one-H200 record (:func:`record`) of ``backend`` (``zero1``: ZeRO-1), family ``arch``."""
    stage = {"zero1": 1, "zero2": 2}.get(backend)
    r = record(model=model, n_params=n_params, backend="deepspeed" if stage else backend, step=step)
    if stage:
        r["config"]["backend"]["zero_stage"] = stage
    r["config"]["model"]["arch"] = arch
    r["config"]["compile"] = compiled
    return r


def _pool(compiled: bool) -> dict[str, dict]:
    return {
        "gpt-zero1": _rec("gpt2", "g", P, "zero1", 1.0, compiled=compiled),
        "llama-single": _rec("llama", "l", 2 * P, "single", 3.0, compiled=compiled),
        "small-single": _rec("llama", "s", P // 2, "single", 0.5, compiled=compiled),
        "small-zero1": _rec("llama", "s", P // 2, "zero1", 0.6, compiled=compiled),
    }


def test_a_compiled_one_rank_zero1_target_takes_its_model_and_adds_the_measured_wrapper() -> None:
    """Llama 3.2 3B ZeRO-1 compiled on one H200 took a gpt-1.3b ZeRO-1 record: -10.8% (session 32)."""
    target = _rec("llama", "l", 2 * P, "zero1", 0.0)
    compute, why, first = predicted(target, _pool(True))
    assert why == "" and first is not None and first.name == "llama-single"
    # 3.0 s of the same FLOPs, plus (0.6 - 0.5) s per P/2 parameters x 2P = 0.4 s
    assert compute.compute_s == pytest.approx(3.4)
    assert "deepspeed-1 over single: +200 ps per parameter" in compute.source


def test_an_eager_target_keeps_the_backend_first() -> None:
    """Eager: the rate of a record of another micro batch does not carry (a per-step host cost), so the
    order is unchanged: the record of the target's backend first, nothing added."""
    target = _rec("llama", "l", 2 * P, "zero1", 0.0, compiled=False)
    compute, why, first = predicted(target, _pool(False))
    assert why == "" and first is not None and first.name == "gpt-zero1"
    assert compute.compute_s == pytest.approx(2.0)
    assert "per parameter, as measured" not in compute.source
