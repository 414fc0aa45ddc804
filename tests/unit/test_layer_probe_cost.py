"""What the layer probe costs and how it stops early: ``flopsweep.layer_probe.schedule`` (the early stop,
``predict.layer_probe_settle``), ``metrics.probe_s``/``probe_share`` (``flopsweep.job.records``) and the
probe share in ``--prediction-errors`` (``analysis.prediction_error``, ``analysis.fields.probe_share``);
the run: integration/test_layer_probe.py."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.fields import probe_share as record_probe_share
from analysis.prediction_error import COLUMNS, error_summary, render_summary
from flopsweep.config import ConfigError
from flopsweep.job.records import probe_seconds, probe_share
from flopsweep.job.result import RankFacts
from flopsweep.layer_probe import MEASURED_STEPS, WARMUP_STEPS, schedule, settled


def _stepped(times: list[float], settle: float, others: bool = True) -> tuple[list[float], int, list[bool]]:
    """:func:`schedule` over scripted step times (the host's the same); ``others``: whether the other
    ranks settled. Returns the steps run, the first timed step and what this rank said each check."""
    said: list[bool] = []
    script = iter(times)

    def step() -> tuple[float, float]:
        seconds = next(script)
        return seconds, seconds / 2

    def agree(mine: bool) -> bool:
        said.append(mine)
        return mine and others

    ran, hosts, first = schedule(step, settle, agree)
    assert hosts == [t / 2 for t in ran]
    return ran, first, said


def test_a_copy_whose_last_three_steps_agree_stops_there() -> None:
    ran, first, said = _stepped([5.0, 1.0, 1.02, 1.04, 9, 9, 9], 0.05)  # rising within 5%: steady
    assert ran == [5.0, 1.0, 1.02, 1.04] and first == 1  # one untimed step, three timed
    assert said == [True]  # checked once: after the first untimed step and three more


def test_a_slow_second_step_is_left_untimed_by_the_window() -> None:
    ran, first, said = _stepped([5.0, 2.0, 1.0, 1.01, 1.03, 9, 9], 0.05)
    assert ran[first:] == [1.0, 1.01, 1.03] and len(ran) == 5 and said == [False, True]


def test_a_copy_still_getting_faster_within_the_limit_keeps_stepping() -> None:
    ran, first, said = _stepped([5.0, 1.04, 1.02, 1.0, 1.0, 1.01, 9], 0.05)
    assert said == [False, True] and ran[first:] == [1.02, 1.0, 1.0] and len(ran) == 5


def test_a_copy_that_never_settles_runs_the_old_schedule() -> None:
    times = [5.0, 1.0, 1.2, 1.0, 1.2, 1.0, 1.2, 99.0]
    ran, first, said = _stepped(times, 0.05)
    assert ran == times[: WARMUP_STEPS + MEASURED_STEPS] and first == WARMUP_STEPS
    assert said == [False, False, False]  # after steps 4, 5 and 6; the 7th is the last anyway


def test_no_early_stop_at_zero_nor_while_another_rank_is_unsettled() -> None:
    steady = [1.0] * 9
    ran, first, said = _stepped(steady, 0.0)
    assert len(ran) == 7 and first == 2 and said == []  # 0: the ranks are not even asked
    ran, first, said = _stepped(steady, 0.05, others=False)
    assert len(ran) == 7 and first == 2 and said == [True, True, True]


@pytest.mark.parametrize(
    ("times", "settle", "want"),
    [
        ([1.0, 1.05, 1.0], 0.05, True),  # at the limit
        ([1.04, 1.02, 1.0], 0.05, False),  # each faster than the last: still warming up
        ([1.04, 1.0, 1.02], 0.05, True),
        ([1.0, 1.06, 1.0], 0.05, False),
        ([9.0, 1.0, 1.0, 1.0], 0.05, True),  # the last three only
        ([1.0, 1.0], 0.05, False),  # fewer than three
        ([1.0, 1.0, 1.0], 0.0, False),  # 0: off
        ([0.0, 0.0, 0.0], 0.5, False),  # no time is no measurement
    ],
)
def test_settled_compares_the_slowest_of_the_last_three_with_the_fastest(times, settle, want) -> None:
    assert settled(times, settle) is want


@pytest.mark.parametrize("value", ["-0.01", "1", "1.5", "nan"])
def test_a_settle_outside_zero_to_one_is_refused_in_one_line(hydra_compose, value) -> None:
    from flopsweep.plan import validate

    with pytest.raises(ConfigError) as err:
        validate(hydra_compose(["device=cpu", f"predict.layer_probe_settle={value}"]))
    text = str(err.value)
    assert "\n" not in text and f"predict.layer_probe_settle={value}" in text
    if value != "nan":  # nan: the generic finite-number check's line, before this rule
        assert "set e.g. predict.layer_probe_settle=0.05, or 0 for no early stop" in text


def test_probe_seconds_sum_both_probes_and_their_share_is_of_the_job() -> None:
    both = RankFacts(layer_probe={"wall_s": 2.5, "fallback": None}, compute_probe={"wall_s": 1.25})
    assert probe_seconds(both) == 3.75
    assert probe_seconds(RankFacts(layer_probe={"fallback": "OOM", "wall_s": 0.5})) == 0.5
    assert probe_seconds(RankFacts()) is None
    assert probe_share({"probe_s": 3.75}, 30.0) == 0.125
    assert probe_share({"probe_s": None}, 30.0) is None and probe_share({"probe_s": 1.0}, None) is None


def test_an_old_record_without_the_share_reads_it_from_its_times() -> None:
    run = {"started_at": "2026-12-04T10:00:00+00:00", "finished_at": "2026-12-04T10:00:40+00:00"}
    probes = {"layer_probe": {"wall_s": 8.0}, "probe": {"wall_s": 2.0}}
    old = {"run": run, "metrics": {"predicted": probes}}
    assert record_probe_share(old) == pytest.approx(0.25)
    assert record_probe_share({**old, "metrics": {"predicted": probes, "probe_share": 0.1}}) == 0.1
    assert record_probe_share({"run": run, "metrics": {"predicted": {}}}) is None
    assert record_probe_share({"run": {**run, "finished_at": None}, "metrics": {"predicted": probes}}) is None


def test_the_error_summary_reports_the_probe_share_per_group() -> None:
    runs = pd.DataFrame(
        {
            "backend": ["fsdp", "fsdp", "fsdp", "single"],
            "zero_stage": [None] * 4,
            "status": ["ok"] * 4,
            "prediction_error": [0.01, -0.02, 0.05, 0.1],
            "predicted_compute_source": ["layers"] * 3 + ["flops"],
            "predicted_source": ["layer probe: ..."] * 3 + ["uncalibrated"],
            "probe_share": [0.05, 0.30, 0.07, math.nan],
        }
    )
    got = error_summary(runs)
    assert list(got.columns) == COLUMNS
    rows = {(r.backend, r.source): r for r in got.itertuples()}
    assert rows[("fsdp", "layers")].median_probe_share == pytest.approx(0.07)
    assert rows[("fsdp", "layers")].worst_probe_share == pytest.approx(0.30)
    assert math.isnan(rows[("single", "flops")].median_probe_share)
    text = render_summary(got, "markdown")
    assert "probe share (median)" in text and "| 7.0%" in text and "| 30.0%" in text and "| —" in text


def test_the_probes_net_cost_comes_from_set_ups_run_with_and_without_them() -> None:
    from analysis.prediction_error import probe_cost_line

    loaded = pd.DataFrame(
        {
            "setup_id": ["a", "a", "a", "b", "b", "c"],
            "status": ["ok", "ok", "ok", "ok", "error", "ok"],
            "probe_s": [4.0, math.nan, math.nan, 9.0, math.nan, 2.0],
            "run_wall_s": [22.0, 20.0, 18.0, 30.0, 5.0, 10.0],
        }
    )
    # a: 22 s with against the median 19 s without (+3 s, +15.8%); b's unprobed run failed; c has no pair
    assert probe_cost_line(loaded) == (
        "probe cost from pairs: 1 set-up(s) run with and without the probes: the job's wall time +3 s "
        "(median; +15.8% of the job without them, worst +15.8%); the probes' own probe_s 4 s (median), "
        "part of it work the run then skips"
    )
    assert probe_cost_line(loaded[loaded["setup_id"] != "a"]) is None
    assert probe_cost_line(loaded.drop(columns="run_wall_s")) is None
