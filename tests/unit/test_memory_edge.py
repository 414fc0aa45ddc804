"""The memory edge (issue 41, :mod:`flopsweep.memory_edge`): the headroom rule on constructed estimates,
the flag in a prediction's source, the plan's judge and the tuner's ranking line, and the rule on the
committed Llama 3.1 8B grid on one H200 (benchmarks/results/h200/session28/grid8b)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flopsweep import memory_edge
from flopsweep.memory_edge import (
    EDGE_HEADROOM,
    EDGE_WORDS,
    at_edge,
    device_capacity_bytes,
    edge_note,
    headroom,
    mark,
)
from flopsweep.safe_read import read_json

GIB = 2**30
GRID = Path(__file__).resolve().parents[2] / "benchmarks/results/h200/session28/grid8b"


def test_headroom_is_the_share_left_free_and_the_edge_is_strictly_under_the_threshold():
    assert EDGE_HEADROOM == 0.13
    assert headroom(88 * GIB, 100 * GIB) == pytest.approx(0.12)
    assert headroom(110 * GIB, 100 * GIB) == pytest.approx(-0.10)  # an estimate over the memory
    assert at_edge(88 * GIB, 100 * GIB) and at_edge(110 * GIB, 100 * GIB)
    assert not at_edge(86 * GIB, 100 * GIB)
    assert not at_edge(87 * GIB, 100 * GIB)  # exactly 13% free: not under it
    assert at_edge(87.01 * GIB, 100 * GIB)
    assert at_edge(86 * GIB, 100 * GIB, threshold=0.2)
    assert not at_edge(None, 100 * GIB) and not at_edge(99 * GIB, None) and not at_edge(99 * GIB, 0)
    with pytest.raises(ValueError, match="capacity_bytes=0: must be positive"):
        headroom(1, 0)


def test_the_note_says_the_estimate_the_memory_and_the_share_free(monkeypatch: pytest.MonkeyPatch):
    note = edge_note(123.574295 * GIB, 140.4 * GIB)  # the grid's FSDP2 estimate on an H200
    assert note.startswith(f"{EDGE_WORDS} (estimated 123.6 of 140.4 GiB per rank, 12.0% free, under 13%;")
    assert note.endswith("the predicted step counts no retry")
    assert "16 of 63 committed records so close retried" in note  # no backend named: every backend's
    fsdp, single = edge_note(123.6 * GIB, 140.4 * GIB, "fsdp"), edge_note(123.6 * GIB, 140.4 * GIB, "single")
    assert "15 of 33 committed fsdp records so close retried (all backends: 16 of 63)" in fsdp
    assert "0 of 15 committed single records so close retried" in single and "fsdp" not in single
    assert "0 of 1 committed ddp records so close retried" in edge_note(123.6 * GIB, 140.4 * GIB, "ddp")
    monkeypatch.setitem(memory_edge.RETRIED, "ddp", (0, 0))  # a backend without such a record
    assert "no committed ddp record so close" in edge_note(123.6 * GIB, 140.4 * GIB, "ddp")
    assert edge_note(119.66 * GIB, 140.4 * GIB) == ""  # 14.8% free
    assert edge_note(None, 140.4 * GIB) == "" and edge_note(130 * GIB, None) == ""


def test_mark_appends_the_flag_once_and_only_to_a_prediction_with_a_step():
    made = {"iteration_time_s": 0.43, "tokens_per_s": 9445.0, "source": "calibrated: x"}
    marked = mark(made, 130 * GIB, 140.4 * GIB)
    assert marked["source"] == f"calibrated: x; {edge_note(130 * GIB, 140.4 * GIB)}"
    assert marked["iteration_time_s"] == 0.43 and made["source"] == "calibrated: x"  # a copy
    assert mark(marked, 130 * GIB, 140.4 * GIB) == marked  # never twice
    assert mark(made, 100 * GIB, 140.4 * GIB) is made  # 28.8% free
    none = {"iteration_time_s": None, "tokens_per_s": None, "source": "no prediction: why"}
    assert mark(none, 130 * GIB, 140.4 * GIB) is none


def test_the_capacity_of_a_device_name_is_the_peak_tables():
    assert device_capacity_bytes("NVIDIA H200") / GIB == pytest.approx(140.4)
    assert device_capacity_bytes("NVIDIA H100 80GB HBM3") / GIB == pytest.approx(79.6)
    assert device_capacity_bytes("cpu") is None and device_capacity_bytes(None) is None


def test_the_committed_8b_grid_retried_only_where_flagged_and_its_record_is_marked():
    """The grid's 18 ok single-GPU and FSDP2 records (ZeRO-3's 9 too): each that retried
    (``metrics.cuda_alloc_retries`` > 0: FSDP2 without checkpointing at micro batch 2 and 3) is at the
    edge by its own before-run estimate on the H200's 140.4 GiB, and the record's prediction, marked
    as the job marks it now (:func:`flopsweep.job.records.edge_marked`), says so; a single-GPU set-up
    with 14.8% free is not flagged."""
    from flopsweep.job.records import edge_marked

    seen, retried = 0, []
    for path in sorted(GRID.glob("*/*/metrics.json")):
        record = read_json(path)
        m = record["metrics"] if record["status"] == "ok" else None
        if m is None:
            continue
        seen += 1
        capacity = device_capacity_bytes(record["system"]["device_name"])
        flagged = at_edge(m["predicted_peak_gib"] * GIB, capacity)
        if m["cuda_alloc_retries"]:
            retried.append(path.parent.relative_to(GRID).as_posix())
            assert flagged, path
            marked = edge_marked(m["predicted"], m["predicted_peak_gib"], record["system"]["device_name"])
            assert (
                EDGE_WORDS in marked["source"]
                and marked["iteration_time_s"] == m["predicted"]["iteration_time_s"]
            )
    assert seen == 25 and retried == ["fsdp/1", "fsdp/2"]
    single = read_json(GRID / "single/0/metrics.json")["metrics"]
    assert not at_edge(single["predicted_peak_gib"] * GIB, 140.4 * GIB)
    assert (
        EDGE_WORDS
        not in edge_marked(single["predicted"], single["predicted_peak_gib"], "NVIDIA H200")["source"]
    )


def test_the_plan_judge_flags_an_edge_set_up_and_the_tuner_says_so_when_it_ranks_it(hydra_compose):
    """:func:`flopsweep.plan_assess.assess` of one tiny set-up on a memory its estimate fills to 88% (the
    flag after the prediction's source) and to 50% (none); :func:`flopsweep.tune.edge_lines` names the
    edge set-up ranked first, and nothing for a pool without one."""
    from flopsweep.memory import estimate, peak_bytes
    from flopsweep.plan import Environment, plan
    from flopsweep.plan_space import Machine, assess
    from flopsweep.tune import Candidate, edge_lines

    cfg = hydra_compose(["device=cpu", "nproc_per_node=2", "model=gpt-tiny", "backend=fsdp"])
    env = Environment(cpu_count=2)
    p = plan(cfg, env)
    peak = peak_bytes(p.cfg, p.layout, estimate(p.cfg, p.layout))
    rows = {}
    for share in (0.88, 0.5):
        where = Machine(
            label="here", nnodes=1, gpus_per_node=2, device_name="H100", capacity=(int(peak / share), "x")
        )
        rows[share], _ = assess(cfg, env, where, choices=None, setup=None, overrides=[], min_headroom=0.1)
    assert rows[0.88].status == rows[0.5].status == "ok", rows[0.88].reason
    assert EDGE_WORDS in rows[0.88].prediction_source and EDGE_WORDS not in rows[0.5].prediction_source
    edge = Candidate(
        index=0, overrides=(), label="batch.micro_batch_size=2", source=rows[0.88].prediction_source
    )
    safe = Candidate(
        index=1, overrides=(), label="batch.micro_batch_size=1", source=rows[0.5].prediction_source
    )
    lines = edge_lines([edge, safe])
    assert len(lines) == 1 and lines[0].startswith("batch.micro_batch_size=2: ranked first by a prediction")
    assert EDGE_WORDS in lines[0]
    assert edge_lines([safe, edge])[0].startswith("batch.micro_batch_size=2: ranked 2 by a prediction")
    assert edge_lines([safe]) == []
