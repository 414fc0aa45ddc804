"""The tuner's figure for a set-up is the analysis's pooled ``repeats=`` row's for the same records: both
take it from :func:`analysis.spread.pooled_figure` (a rate: work / the runs' mean step; a step time or
J/token: the runs' mean; dollars per million tokens: its cost per second of step x the mean step), and
the tuner's cuts, winner, "differ significantly" test and table follow that figure, not the median of
the runs. Hand-computed values: 16,384 tokens per step at one rank (``tests/fixtures/records/v2-ok``
rescaled); t(0.975, 2) = 4.30265, t(0.975, 3) = 3.18245, t(0.975, 1) = 12.7062."""

from __future__ import annotations

import json
import math
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
        # 3 rounds, skewed: steps mean 1.1 s, s = 0.17321, h = 4.30265 x 0.17321 / sqrt(3) = 0.43027; the
        # median round's 16,384 tokens/s is not the figure, 16,384 / 1.1 = 14,894.5 is; J/token mean 0.6
        # (median 0.5), h = 4.30265 x 0.17321 / sqrt(3) = 0.43027
        (
            [1.0, 1.0, 1.3],
            [0.5, 0.5, 0.8],
            {
                "tokens_per_s": (14894.55, 10706.64, 24463.42),
                "iteration_time_s_mean": (1.1, 0.66973, 1.53027),
                "joules_per_token": (0.6, 0.16973, 1.03027),
                "usd_per_million_tokens": (USD_PER_S * 1.1, USD_PER_S * 0.66973, USD_PER_S * 1.53027),
            },
        ),
        # 4 rounds, skewed: mean 1.15 s, s = sqrt((3 x 0.0225 + 0.2025) / 3) = 0.3, h = 3.18245 x 0.3 / 2
        # = 0.47737: 16,384 / 1.62737 = 10,067.8 to 16,384 / 0.67263 = 24,358.0; J/token mean 0.6
        # (median 0.5), s = 0.2, h = 3.18245 x 0.1 = 0.31824
        (
            [1.0, 1.0, 1.0, 1.6],
            [0.5, 0.5, 0.5, 0.9],
            {
                "tokens_per_s": (14246.96, 10067.80, 24358.01),
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
            assert s["winner"]["ci_low"] == pytest.approx(low, rel=1e-4)
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
    interval has no upper bound (inf, null in tune.json), its low end 16,384 / 14.7062 = 1,114.1."""
    time = _cand(0, "iteration_time_s_mean", [1.0, 3.0])
    assert tunereport.interval(time) == (0.0, pytest.approx(14.7062, rel=1e-5), "repeats")
    rate = _cand(1, "tokens_per_s", [1.0, 3.0])
    assert rate.measured == pytest.approx(TOKENS / 2)  # not the mean rate 10,922.7
    assert tunereport.interval(rate) == (pytest.approx(1114.09, rel=1e-5), math.inf, "repeats")
    close = _cand(2, "iteration_time_s_mean", [1.0, 1.0, 1.0001])  # tight: the low end stays above 0
    low, high, _ = tunereport.interval(close)
    assert 0 < low < close.measured < high
