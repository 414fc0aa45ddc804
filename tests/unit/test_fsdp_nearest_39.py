"""A compiled one-rank FSDP2 run's nearest set-up (reliability row 640, issue 41, session 39): a ``single``
record of its model before another model's FSDP2 record, FSDP2's cost over ``single`` added per parameter
as measured in the nearest pair of its compile setting, a steady one first
(:mod:`flopsweep.nearest_wrap`, docs/prediction-host-optimizer.md)."""

from __future__ import annotations

import pytest

from tests.unit.test_nearest_wrap import _rec
from tests.unit.test_predict_nearest import P, predicted


def _pool() -> dict[str, dict]:
    """gpt-1.3b-like FSDP2 (another family), the target model's ``single``, and two pairs of ``single``
    and FSDP2: the target's model eager (FSDP2 faster, as on one H100) and a smaller Llama compiled
    (FSDP2 slower)."""
    return {
        "gpt-fsdp": _rec("gpt2", "g", P, "fsdp", 1.0),
        "llama-single": _rec("llama", "l", 2 * P, "single", 3.0),
        "l-eager-single": _rec("llama", "l", 2 * P, "single", 4.0, compiled=False),
        "l-eager-fsdp": _rec("llama", "l", 2 * P, "fsdp", 3.6, compiled=False),
        "small-single": _rec("llama", "s", P // 2, "single", 0.5),
        "small-fsdp": _rec("llama", "s", P // 2, "fsdp", 0.51),
    }


def test_a_compiled_one_rank_fsdp_target_takes_its_models_single_and_the_compiled_pairs_cost() -> None:
    """gpt-1.3b FSDP2 compiled `full` on one H100 took another model's FSDP2 record: -17.1% (now -6.9%)."""
    target = _rec("llama", "l", 2 * P, "fsdp", 0.0)
    compute, why, first = predicted(target, _pool())
    assert why == "" and first is not None and first.name == "llama-single"
    # 3.0 s, plus (0.51 - 0.5) s over P/2 parameters = +20 ps, x 2P = 0.04 s; not the eager pair's -200 ps
    assert compute.compute_s == pytest.approx(3.04)
    assert "fsdp over single: +20 ps per parameter" in compute.source
    assert "compile true" in compute.source


def test_a_noisy_pair_is_passed_over_for_a_steady_one() -> None:
    """One stalled step (Llama 3.2 3B FSDP2 `p2/2`, cv 19%) made +10.8 ps a parameter of a +7.4 ps gap."""
    pool = _pool()
    pool["l-single-mb8"] = _rec("llama", "l", 2 * P, "single", 6.0)
    pool["l-fsdp-mb8"] = _rec("llama", "l", 2 * P, "fsdp", 7.0)
    for name in ("l-single-mb8", "l-fsdp-mb8"):
        pool[name]["config"]["batch"]["micro_batch_size"] = 8
    pool["l-fsdp-mb8"]["metrics"]["iteration_time_s"]["cv"] = 0.19
    compute, _, first = predicted(_rec("llama", "l", 2 * P, "fsdp", 0.0), pool)
    assert first is not None and first.name == "llama-single"
    assert compute.compute_s == pytest.approx(3.04)  # the steady pair's +20 ps, not the noisy one's +500


def test_an_fsdp_target_does_not_take_a_zero_record_of_its_model() -> None:
    """ZeRO-1's step on one rank is DeepSpeed's wrapper, not FSDP2's: its record does not stand ahead."""
    pool = {
        "gpt-fsdp": _rec("gpt2", "g", P, "fsdp", 1.0),
        "llama-zero1": _rec("llama", "l", 2 * P, "zero1", 3.0),
    }
    compute, why, first = predicted(_rec("llama", "l", 2 * P, "fsdp", 0.0), pool)
    assert why == "" and first is not None and first.name == "gpt-fsdp"
    assert compute.compute_s == pytest.approx(2.0)  # the same rate at twice the FLOPs, nothing added
    assert "over" not in compute.source.split("rule:")[0]


def test_an_eager_fsdp_target_keeps_the_backend_first() -> None:
    """Eager FSDP2 runs faster than `single` by a cost per token, not per parameter: the order unchanged."""
    pool = {k: v for k, v in _pool().items() if k != "l-eager-single"}
    pool["gpt-fsdp-eager"] = _rec("gpt2", "g", P, "fsdp", 1.0, compiled=False)
    pool["l-eager-single-mb8"] = _rec("llama", "l", 2 * P, "single", 8.0, compiled=False)
    pool["l-eager-single-mb8"]["config"]["batch"]["micro_batch_size"] = 8
    target = _rec("llama", "l", 2 * P, "fsdp", 0.0, compiled=False)
    _, why, first = predicted(target, pool)
    assert why == "" and first is not None and first.name in ("gpt-fsdp-eager", "l-eager-fsdp")
