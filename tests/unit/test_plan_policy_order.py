"""A plan's rows that differ only by activation checkpointing policy are predicted from one base
(issue 42, "a plan that decides"): ``none`` recomputes nothing, so it is never predicted slower than
``selective`` or ``full`` of the same set-up on the same cluster. Before, each policy took the nearest
record of its own policy, often another model's, and ``plan=true`` over the records flopsweep ships
ranked Llama 3.1 8B ZeRO-3 ``full`` faster than ``none`` on 8 H100s (0.377 s against 0.462 s a step)."""

from __future__ import annotations

import pytest

from flopsweep import forecast, nearest_measured
from flopsweep import plan_space as ps
from flopsweep.clusters import parse_cluster

FAMILIES = [
    ("llama3.1-8b", "H100:8", "zero3", 1),  # none 0.462 s from gpt-1.3b, full 0.377 s from gpt-2.7b
    ("llama3.1-8b", "H100:8", "zero3", 2),  # none 0.826 s, full 0.656 s
    ("llama3.1-8b", "H100:8", "zero1", 2),  # none 0.568 s from llama3.2-1b, selective 0.536 s from another
    (
        "llama3.2-1b",
        "H200:8",
        "fsdp",
        8,
    ),  # none calibrated 0.297 s, selective 0.279 s from gpt-1.3b at 2 GPUs
]
"""``(model, cluster, backend, micro batch)`` of families whose order the old rule inverted."""


def _rows(hydra_compose, model: str, cluster: str, backend: str, mbs: int) -> dict[str, ps.Row]:
    cfg = hydra_compose([f"model={model}"])
    records = forecast.prediction_records(cfg)
    rows = {}
    for policy in ("none", "selective", "full"):
        setup = ps.Setup(
            backend=backend, layout="dp", checkpointing=policy, precision="bf16", micro_batch=mbs
        )
        row = ps.evaluate(cfg, setup, parse_cluster(cluster), records)
        assert row is not None and row.status == "ok", (policy, row and row.reason)
        rows[policy] = row
    return rows


def _first_record(source: str) -> str:
    """The record a source names first (``nearest (shipped records): NAME ...``, ``calibrated ...: NAME``)."""
    return source.split(": ", 1)[1].split()[0].rstrip(",;")


@pytest.mark.parametrize(("model", "cluster", "backend", "mbs"), FAMILIES)
def test_none_is_never_predicted_slower_than_a_policy_that_recomputes(
    hydra_compose, model: str, cluster: str, backend: str, mbs: int
) -> None:
    rows = _rows(hydra_compose, model, cluster, backend, mbs)
    step = {p: r.predicted_iteration_time_s for p, r in rows.items()}
    assert step["none"] <= step["selective"] and step["none"] <= step["full"], step
    # one base for the family: each row's first record is of one set-up less its policy (in it, a record of
    # the row's own policy where the base ran one: session 31's 3B ZeRO-3 eager base ran full and selective)
    cfg = hydra_compose([f"model={model}"])
    by_name = dict(forecast.prediction_records(cfg))
    firsts = {p: _first_record(r.prediction_source) for p, r in rows.items()}
    assert len({nearest_measured.base_key(by_name[n]) for n in firsts.values()}) == 1, firsts


def test_a_policy_sibling_s_calibration_is_scaled_by_the_hardware_flops(hydra_compose) -> None:
    """Llama 3.2 1B FSDP2 on 8 H200s: a shipped record of ``none`` calibrates it; ``selective`` and
    ``full`` have none of their own and take that record, their compute times their hardware FLOPs over
    ``none``'s (the recompute), said in the source; the rest of the step is the same model's."""
    rows = _rows(hydra_compose, "llama3.2-1b", "H200:8", "fsdp", 8)
    assert rows["none"].prediction_source.startswith("calibrated (shipped records): ")
    assert "policy sibling" not in rows["none"].prediction_source
    for policy in ("selective", "full"):
        source = rows[policy].prediction_source
        assert source.startswith("calibrated (shipped records): "), source
        assert f"activation_checkpointing={policy} from its policy sibling none's calibration" in source, (
            source
        )
        assert "hardware FLOPs (recompute included) x1." in source
    step = {p: r.predicted_iteration_time_s for p, r in rows.items()}
    assert step["none"] < step["selective"] < step["full"], step


ORDER_OF_THE_RECORDS = [
    ("llama3.1-8b", "H200:8", "fsdp", 4, "llama3.1-8b"),
    ("llama3.1-8b", "H100:8", "fsdp", 4, "llama3.1-8b"),
    ("gpt-1.3b", "H200:8", "fsdp", 4, None),
]
"""``(model, cluster, backend, micro batch, model of the dispatch ratio)``: Llama 3.1 8B FSDP2, whose
shipped records (session28/grid8b, one H200, compiled) ran ``selective`` ahead of ``full`` (0.687 s
against 0.758 s at micro batch 3), and gpt-1.3b FSDP2, whose own eager records ran ``full`` ahead
(0.198 s against 0.264 s): its ``selective`` and ``full`` rows are its own base's records, no ratio."""


@pytest.mark.parametrize(("model", "cluster", "backend", "mbs", "said"), ORDER_OF_THE_RECORDS)
def test_selective_and_full_keep_the_order_of_the_nearest_records_that_ran_both(
    hydra_compose, model: str, cluster: str, backend: str, mbs: int, said: str | None
) -> None:
    """``selective``'s dispatch ratio is the nearest set-up's that measured both (:func:`flopsweep.nearest.
    dispatch`: for 8B, 8B's own), said in the source; the backend-wide median of s28-planorder, from
    gpt-1.3b, whose short operators pay more of it, put 8B's ``full`` ahead in 133 of 209 plan families."""
    rows = _rows(hydra_compose, model, cluster, backend, mbs)
    step = {p: r.predicted_iteration_time_s for p, r in rows.items()}
    if said is None:
        assert step["none"] < step["full"] < step["selective"], step
        assert all("dispatch" not in r.prediction_source for r in rows.values())
        return
    assert step["none"] < step["selective"] < step["full"], step
    carried = [r.prediction_source for r in rows.values() if "selective's dispatch" in r.prediction_source]
    assert carried and all(f"the nearest set-up that ran both ({said} " in s for s in carried), carried


def test_an_h200_is_never_predicted_slower_than_an_h100_of_the_same_set_up(hydra_compose) -> None:
    """Llama 3.1 8B FSDP2 micro batch 4 on 8 GPUs: the H100 SXM has the H200 SXM's datasheet peak, so both
    take one base record (:func:`flopsweep.nearest.same_peak`); the H200's memory bandwidth (4.8 against
    3.35 TB/s) makes its optimizer the faster. Before, the H100 took a gpt-2.7b H100 record and was ranked
    above the H200 (10,886 against 10,306 tokens/s per GPU)."""
    h100 = _rows(hydra_compose, "llama3.1-8b", "H100:8", "fsdp", 4)
    h200 = _rows(hydra_compose, "llama3.1-8b", "H200:8", "fsdp", 4)
    for policy in ("none", "selective", "full"):
        assert h200[policy].predicted_iteration_time_s <= h100[policy].predicted_iteration_time_s, policy
        assert _first_record(h200[policy].prediction_source) == _first_record(h100[policy].prediction_source)
