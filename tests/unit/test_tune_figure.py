"""The tuner's figure for a set-up is the analysis's pooled ``repeats=`` row's for the same records: both
take it from :func:`analysis.spread.pooled_figure` (a rate: work / the runs' mean step; a step time or
J/token: the runs' mean; dollars per million tokens: its cost per second of step x the mean step), and
the tuner's cuts, winner, "differ significantly" test and table follow that figure, not the median of
the runs. Hand-computed values: 16,384 tokens per step at one rank (``tests/fixtures/records/v2-ok``
rescaled); t(0.975, 2) = 4.30265, t(0.975, 3) = 3.18245, t(0.975, 1) = 12.7062."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis.spread import pooled_figure
from flopsweep import cost, tunereport
from flopsweep.tune import Budget, Candidate, challengers, cut, ranked

TOKENS = 16384
PRICE = 2.0
"""``cost.usd_per_gpu_hour`` of the records: $/M tokens = 2 / 3600 / (16384 / step) x 1e6 = 0.0339 x step."""
USD_PER_S = PRICE / 3600 / TOKENS * 1e6
OBJECTIVES = ("tokens_per_s", "mfu", "model_tflops_per_device", "iteration_time_s_mean")
OBJECTIVES += ("joules_per_token", "usd_per_million_tokens")


def _records(folder: Path, steps: list[float], joules: list[float]) -> list[Path]:
    """One set-up's ``repeats=len(steps)`` rounds at those mean steps (s) and J/token, every derived
    figure consistent (the analysis's checks pass them): their job folders."""
    from helpers import round_records, write_rounds

    recs = round_records([TOKENS / step for step in steps])
    for rec, step, jpt in zip(recs, steps, joules, strict=True):
        rec["config"]["cost"] = {**(rec["config"].get("cost") or {}), "usd_per_gpu_hour": PRICE}
        m = rec["metrics"]
        measured = len(m["iteration_time_s"]["values"])
        m["energy_j"] = jpt * TOKENS * measured
        m["joules_per_token"] = jpt
        m["power_w_mean"] = m["energy_j"] / (measured * step)
        m["usd_per_million_tokens"] = cost.usd_per_million_tokens(
            PRICE, world=1, tokens_per_s=m["tokens_per_s"]
        )
    return write_rounds(folder, recs)


def _taken(objective: str, jobs: list[Path]) -> Candidate:
    """A set-up as the tuner holds it after its runs: ``Tuning.take`` of each job's record."""
    from hydra_plugins.flopsweep_tune.tuning import Tuning

    c = Candidate(0, ("device=cpu",), "", objective=objective)
    tuning = SimpleNamespace(objective=objective, budget=Budget(1e9))  # what take() reads of the tuner
    for job in jobs:
        Tuning.take(tuning, c, job)
    return c


@pytest.mark.parametrize(
    ("steps", "joules", "hand"),
    [
        # 2 rounds 18% apart (the tuner's [x, inf] of session 32): mean 1.1 s, s / sqrt(2) = 0.1, h = 12.7062
        # x 0.1 = 1.27062 >= 1.1; the rate 14,894.5 x exp(-+1.15511), finite; a time or cost the t-interval,
        # its low end 0 (never negative)
        (
            [1.0, 1.2],
            [0.5, 0.7],
            {
                "tokens_per_s": (14894.55, 4692.13, 47280.79),
                "iteration_time_s_mean": (1.1, 0.0, 2.37062),
                "joules_per_token": (0.6, 0.0, 1.87062),
                "usd_per_million_tokens": (USD_PER_S * 1.1, 0.0, USD_PER_S * 2.37062),
            },
        ),
        # 3 rounds, skewed: steps mean 1.1 s, s = 0.17321, h = 4.30265 x 0.17321 / sqrt(3) = 0.43027; the
        # median round's 16,384 tokens/s is not the figure, 16,384 / 1.1 = 14,894.5 is; J/token mean 0.6
        # (median 0.5), h = 4.30265 x 0.17321 / sqrt(3) = 0.43027
        (
            [1.0, 1.0, 1.3],
            [0.5, 0.5, 0.8],
            {
                "tokens_per_s": (14894.55, 10072.82, 22024.37),  # x exp(-+0.43027 / 1.1)
                "iteration_time_s_mean": (1.1, 0.66973, 1.53027),
                "joules_per_token": (0.6, 0.16973, 1.03027),
                "usd_per_million_tokens": (USD_PER_S * 1.1, USD_PER_S * 0.66973, USD_PER_S * 1.53027),
            },
        ),
        # 4 rounds, skewed: mean 1.15 s, s = sqrt((3 x 0.0225 + 0.2025) / 3) = 0.3, h = 3.18245 x 0.3 / 2
        # = 0.47737: 16,384 / 1.15 x exp(-+0.41510) = 9,406.86 to 21,577.4; J/token mean 0.6
        # (median 0.5), s = 0.2, h = 3.18245 x 0.1 = 0.31824
        (
            [1.0, 1.0, 1.0, 1.6],
            [0.5, 0.5, 0.5, 0.9],
            {
                "tokens_per_s": (14246.96, 9406.86, 21577.43),
                "iteration_time_s_mean": (1.15, 0.67263, 1.62737),
                "joules_per_token": (0.6, 0.28176, 0.91824),
                "usd_per_million_tokens": (USD_PER_S * 1.15, USD_PER_S * 0.67263, USD_PER_S * 1.62737),
            },
        ),
    ],
)
def test_tune_json_s_figure_is_the_analysis_pooled_row_s(tmp_path, steps, joules, hand):
    import analysis

    jobs = _records(tmp_path, steps, joules)
    df = analysis.load(tmp_path)
    assert len(df) == 1 and df.iloc[0]["repeats"] == len(steps)
    row = df.iloc[0]
    for objective in OBJECTIVES:
        c = _taken(objective, jobs)
        s = tunereport.summary(
            [c], [c], objective=objective, direction="maximize", budget=Budget(1e9), rounds=[], stopped="x"
        )
        json.dumps(s, allow_nan=False)
        assert "nulls" not in s["winner"] and "inf" not in tunereport.lines(s)[1], (
            objective
        )  # no unbounded end
        assert s["winner"]["value"] == pytest.approx(row[objective], rel=1e-12), objective
        assert s["setups"][0]["measured"] == s["winner"]["value"] and s["winner"]["runs"] == len(steps)
        if f"{objective}_ci_low" in row:  # the analysis's interval columns (the rates)
            assert (s["winner"]["ci_low"], s["winner"]["ci_high"]) == (
                pytest.approx(row[f"{objective}_ci_low"], rel=1e-12),
                pytest.approx(row[f"{objective}_ci_high"], rel=1e-12),
            )
        if objective in hand:
            figure, low, high = hand[objective]
            assert s["winner"]["value"] == pytest.approx(figure, rel=1e-5)
            assert s["winner"]["ci_low"] == pytest.approx(low, rel=1e-4, abs=1e-12)
            assert s["winner"]["ci_high"] == pytest.approx(high, rel=1e-4)
            assert s["winner"]["ci_over"] == "repeats"
    assert row["tokens_per_s"] != pytest.approx(TOKENS)  # not the median round's 16,384 tokens/s
    assert row["joules_per_token"] == pytest.approx(0.6)  # not the median 0.5


def _cand(i: int, objective: str, steps: list[float], work: float = TOKENS) -> Candidate:
    """A set-up measured at those mean steps: its objective is a rate (``work / step``) or the step."""
    c = Candidate(i, (f"backend=b{i}", "device=cpu"), f"backend=b{i}", objective=objective)
    c.steps = list(steps)
    c.values = [s if objective == "iteration_time_s_mean" else work / s for s in steps]
    c.gpu_s = [10.0] * len(steps)
    return c


@pytest.mark.parametrize(
    ("objective", "direction"), [("tokens_per_s", "maximize"), ("iteration_time_s_mean", "minimize")]
)
def test_halving_and_the_winner_follow_the_shared_figure_not_the_median(objective, direction):
    """``skewed`` has the better median (1.0 s steps in two of three runs) but the worse mean step (1.2 s
    against ``steady``'s 1.1 s): the cut, the winner and the table rank by the figure."""
    skewed = _cand(0, objective, [1.0, 1.0, 1.6])
    steady = _cand(1, objective, [1.1, 1.1, 1.1])
    median = {c.label: sorted(c.values)[1] for c in (skewed, steady)}
    assert (median["backend=b0"] > median["backend=b1"]) == (direction == "maximize")  # median: skewed
    want = TOKENS / 1.2 if objective == "tokens_per_s" else 1.2
    assert (
        skewed.measured == pytest.approx(want) == pooled_figure(objective, skewed.values, skewed.steps).value
    )
    assert ranked([skewed, steady], direction) == [steady, skewed]
    assert cut([skewed, steady], direction, eta=2, finalists=1) == [steady]
    late = _cand(2, objective, [])
    late.predicted = (TOKENS / 1.15) if objective == "tokens_per_s" else 1.15  # beats 1.2, not the median
    assert challengers([late], [steady, skewed], direction, 3) == [late]
    s = tunereport.summary(
        [skewed, steady], [skewed, steady], objective=objective, direction=direction, budget=Budget(100.0),
        rounds=[], stopped="the finalists are measured",
    )  # fmt: skip
    assert s["winner"]["label"] == "backend=b1" and s["runner_up"]["label"] == "backend=b0"
    assert s["runner_up"]["value"] == pytest.approx(want)
    assert [r[0] for r in tunereport.table_rows(s)] == ["backend=b1", "backend=b0"]
    # steady's interval is its one point (no spread); skewed's, about 1.2 s, h = 4.30265 x 0.34641 /
    # sqrt(3) = 0.86053, holds it: they overlap, so not significant
    assert s["significant"] is False
    assert (
        s["winner"]["ci_low"] == pytest.approx(s["winner"]["value"]) == pytest.approx(s["winner"]["ci_high"])
    )


def test_a_time_objective_s_interval_is_the_t_interval_low_end_a_true_bound():
    """Steps of 1 and 3 s: mean 2, h = 12.7062 x 1 = 12.7062; the low end is 0, never negative; the rate's
    interval is finite (``inf`` before session 33): 8,192 x exp(-+6.3531), 14.265 to 4,704,421."""
    time = _cand(0, "iteration_time_s_mean", [1.0, 3.0])
    assert tunereport.interval(time) == (0.0, pytest.approx(14.7062, rel=1e-5), "repeats")
    rate = _cand(1, "tokens_per_s", [1.0, 3.0])
    assert rate.measured == pytest.approx(TOKENS / 2)  # not the mean rate 10,922.7
    assert tunereport.interval(rate) == (
        pytest.approx(14.2651, rel=1e-5),
        pytest.approx(4704421, rel=1e-5),
        "repeats",
    )
    close = _cand(2, "iteration_time_s_mean", [1.0, 1.0, 1.0001])  # tight: the low end stays above 0
    low, high, _ = tunereport.interval(close)
    assert 0 < low < close.measured < high


def test_one_run_says_one_run_no_interval_and_two_runs_a_finite_one():
    """After one run of a figure with no steps over which to take an interval, the tuner's line says
    ``(one run, no interval)``, never a made-up or ``inf`` end; two runs 1.0 s and 1.2 s (h = 1.27 s over a
    1.1 s mean: ``[x, inf]`` in session 32) give the analysis's finite interval, 14,894.5 x exp(-+1.15511)."""
    one = _cand(0, "joules_per_token", [1.0])
    s = tunereport.summary([one], [one], objective="joules_per_token", direction="minimize",
                           budget=Budget(1e9), rounds=[], stopped="x")  # fmt: skip
    assert s["winner"]["ci_low"] is None and s["winner"]["runs"] == 1
    assert tunereport.lines(s)[1].endswith("(one run, no interval), 1 run(s)")
    two = _cand(1, "tokens_per_s", [1.0, 1.2])
    s = tunereport.summary([two], [two], objective="tokens_per_s", direction="maximize",
                           budget=Budget(1e9), rounds=[], stopped="x")  # fmt: skip
    assert (s["winner"]["ci_low"], s["winner"]["ci_high"]) == pytest.approx((4692.13, 47280.8), rel=1e-5)
    assert "[4692, 47,280] (95%, over repeats), 2 run(s)" in tunereport.lines(s)[1]
