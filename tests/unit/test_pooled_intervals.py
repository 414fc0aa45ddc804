"""The 95% intervals of a pooled ``repeats=`` row follow from its step's, as its rates do: a rate is
work / step, so its interval is the figure work / m times exp(-+ h / m), the step's t half width ``h`` on
the log scale (``analysis.spread.rate_ends``), holding the figure and finite also where the step's linear
interval reaches 0 (two rounds 16% apart). Hand-computed values: the fixture's step does 16,384 tokens at
one rank; t(0.975, 1) = 12.7062, t(0.975, 2) = 4.3027."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.catalogue import CI_METRICS
from analysis.significance import ci_of, verdict
from analysis.spread import rate_ends

TOKENS = 16384
"""Tokens per step of ``tests/fixtures/records/v2-ok`` at one rank (``helpers.rescaled``)."""


def _pooled(folder: Path, steps: list[float]) -> tuple[pd.DataFrame, dict]:
    """``analysis.load`` of one set-up's ``repeats=len(steps)`` rounds at those mean step times (s)."""
    from helpers import round_records, write_rounds

    import analysis

    recs = round_records([TOKENS / step for step in steps])
    write_rounds(folder, recs)
    df = analysis.load(folder)
    assert len(df) == 1 and df.iloc[0]["repeats"] == len(steps) and df.iloc[0]["ci_over"] == "repeats"
    assert recs[0]["metrics"]["tokens_per_step"] == TOKENS
    return df, recs[0]["metrics"]


@pytest.mark.parametrize(
    ("steps", "mean", "h", "tokens"),
    [
        # 2 rounds: s / sqrt(2) = |1.1 - 1.0| / 2 = 0.05, h = 12.7062 x 0.05 = 0.63531
        ([1.0, 1.1], 1.05, 0.63531, (15603.8, 8520.35, 28576.1)),  # x exp(-+0.60506)
        # 3 rounds: s = sqrt(0.03 / 2 x 2) = 0.17321, s / sqrt(3) = 0.1, h = 0.43027; the median round
        # (1.0 s, 16,384 tokens/s) is not the figure: the mean step is, as its interval is the mean's
        ([1.0, 1.0, 1.3], 1.1, 0.43027, (14894.5, 10072.8, 22024.4)),
        # 9 rounds, five of 1.0 s and four of 1.5 s: mean 1.2222, s = 0.26352, h = 2.3060 x 0.26352 / 3
        # = 0.20256, the step's interval [1.0197, 1.4248] s, which their median (1.0 s) is outside
        ([1.0] * 5 + [1.5] * 4, 11 / 9, 0.20256, (13405.1, 11357.8, 15821.4)),
        # identical rounds: no spread, the interval is the figure
        ([1.2, 1.2, 1.2], 1.2, 0.0, (13653.3, 13653.3, 13653.3)),
    ],
)
def test_a_pooled_row_s_rate_intervals_follow_from_its_step_interval(tmp_path, steps, mean, h, tokens):
    df, m = _pooled(tmp_path, steps)
    row = df.iloc[0]
    assert row["iteration_time_s_mean"] == pytest.approx(mean)
    figure, low, high = tokens
    assert (row["tokens_per_s"], row["tokens_per_s_ci_low"], row["tokens_per_s_ci_high"]) == pytest.approx(
        (figure, low, high), rel=1e-5
    )
    flops = m["model_flops_per_iteration"] / 1e12  # TFLOPs per step, one rank
    assert (row["model_tflops_per_device_ci_low"], row["model_tflops_per_device_ci_high"]) == pytest.approx(
        (flops / mean * math.exp(-h / mean), flops / mean * math.exp(h / mean)), rel=1e-4
    )
    assert row["mfu_ci_low"] == pytest.approx(flops / mean * math.exp(-h / mean) / m["peak_tflops"], rel=1e-4)
    for metric in CI_METRICS:  # every interval holds the figure shown, above 0
        assert 0 < row[f"{metric}_ci_low"] <= row[metric] * (1 + 1e-12), metric
        assert row[metric] <= row[f"{metric}_ci_high"] * (1 + 1e-12), metric


def test_two_rounds_far_apart_leave_the_rates_a_finite_interval(tmp_path):
    """Steps of 1.0 s and 2.0 s: mean 1.5, h = 12.7062 x 0.5 = 6.353 >= 1.5, the step's linear interval
    reaches below 0 (before session 33 no rate had an upper bound: ``inf`` in the table, null in JSON);
    on the log scale the figure 10,922.7 tokens/s times exp(-+4.2354): [158.09, 754,639], finite and above
    0, in the table, the JSON (no ``nulls``), the csv, the verdict and the headline."""
    from analysis.display import render
    from analysis.drawing import bar_figure
    from analysis.headline import headline

    df, _ = _pooled(tmp_path, [1.0, 2.0])
    row = df.iloc[0]
    assert row["tokens_per_s"] == pytest.approx(10922.7, rel=1e-5)
    assert row["tokens_per_s_ci_low"] == pytest.approx(158.095, rel=1e-4)
    assert row["tokens_per_s_ci_high"] == pytest.approx(754639, rel=1e-4)
    for metric in CI_METRICS:
        assert 0 < row[f"{metric}_ci_low"] < row[metric] < row[f"{metric}_ci_high"] < math.inf, metric
    assert ci_of(row, "mfu") == (
        pytest.approx(row["mfu_ci_low"]),
        pytest.approx(row["mfu"] * 69.0893, rel=1e-4),
    )
    columns = ["model_tflops_per_device", "model_tflops_per_device_ci_low", "model_tflops_per_device_ci_high"]
    table = render(df[[*columns, "mfu", "mfu_ci_high"]], "markdown").splitlines()
    cells = [c.strip() for c in table[2].strip("|").split("|")]
    assert "inf" not in table[2] and float(cells[1]) > 0 and float(cells[2]) > float(cells[0]), table
    said = json.loads(render(df[columns], "json"))[0]  # strict JSON: a number, no null to explain
    assert said["model_tflops_per_device_ci_high"] > said["model_tflops_per_device"] and "nulls" not in said
    assert "inf" not in render(df[columns], "csv")
    # a second set-up whose interval lies above the first one's low end: not told apart (the wide
    # interval overlaps it), in the table's verdict and in the headline
    other = df.assign(**{c: df[c] * 3 for c in columns}, backend="ddp", run_dir="elsewhere")
    other["setup_id"] = "another-set-up"  # another backend is another set-up (spread.setup_text)
    other["model_tflops_per_device_ci_high"] = other["model_tflops_per_device"] * 1.01
    both = pd.concat([df, other], ignore_index=True)
    tied, line = verdict(both, "model_tflops_per_device", both["status"].eq("ok"))
    assert tied == [1, 0] and line.startswith("Not significant") and "inf" not in line, line
    said = headline(both, "model_tflops_per_device")
    assert said[2].startswith("Not significant") and "inf" not in said[1], said
    fig = bar_figure(both, y="model_tflops_per_device", series="backend", title="t", xlabel="TFLOPs")
    limits = fig.axes[0].get_xlim()
    assert math.isfinite(limits[1]) and limits[1] > other["model_tflops_per_device_ci_high"].iloc[0]


def test_rate_ends_are_the_figure_times_exp_of_the_step_s_relative_half_width():
    assert rate_ends(10.0, 2.0, 0.5) == pytest.approx((3.89400, 6.42013), rel=1e-5)  # 5 exp(-+0.25)
    assert rate_ends(10.0, 2.0, 0.0) == (5.0, 5.0)
    assert rate_ends(10.0, 2.0, 2.0) == pytest.approx((1.83940, 13.5914), rel=1e-5)  # h = m: 5 / e, 5 e
    assert rate_ends(10.0, 2.0, 1e6) == (pytest.approx(5 * math.exp(-700)), pytest.approx(5 * math.exp(700)))
    assert rate_ends(10.0, 2.0, 0.02) == pytest.approx((10 / 2.02, 10 / 1.98), rel=2e-4)  # small h: as before


def test_an_unbounded_end_carries_into_the_speedup_as_zero_or_a_reason():
    from analysis.significance import speedup_interval

    # the baseline may be as fast as anything: the speedup's low end is 0 (its infimum), its high end kept
    assert speedup_interval((1.0, 2.0), (1.0, math.inf), lower=False) == (0.0, 2.0, None)
    # the run's unbounded: no high end, and why (inf before session 34)
    assert speedup_interval((1.0, math.inf), (1.0, 2.0), lower=False) == (
        0.5,
        None,
        "no high end: the run's 95% interval has no upper bound",
    )


def test_the_tuner_s_rate_interval_follows_from_its_runs_steps():
    """``tune.json``'s winner: a rate's figure and interval over runs follow from its runs' mean steps
    (``analysis.spread.pooled_figure``, as a pooled row), the figure inside the interval; no clipped 0,
    and no unbounded end, also for two runs 1.0 s and 2.0 s apart (``inf`` before session 33), in
    ``tune.json`` and the text. A time keeps the t-interval of its values."""
    from flopsweep import tunereport
    from flopsweep.tune import Budget, Candidate

    def cand(i: int, objective: str, *steps: float) -> Candidate:  # 1,000 tokens (or units) a step
        c = Candidate(i, (f"backend=b{i}", "device=cpu"), f"backend=b{i}", objective=objective)
        c.steps, c.gpu_s = list(steps), [10.0] * len(steps)
        c.values = list(steps) if objective.startswith("iteration_time") else [1000.0 / t for t in steps]
        return c

    close = cand(0, "tokens_per_s", 1.0, 1.1)  # 1,000 / (1.05 s +- 0.63531 s)
    low, high, over = tunereport.interval(close)
    assert (low, high, over) == (
        pytest.approx(520.041, rel=1e-5),  # 952.38 exp(-+0.60506)
        pytest.approx(1744.15, rel=1e-5),
        "repeats",
    )
    assert low < close.measured < high and close.measured == pytest.approx(1000 / 1.05)
    apart = cand(1, "mfu", 1.0, 2.0)  # h = 6.353 s >= 1.5 s: 666.67 exp(-+4.2354)
    assert tunereport.interval(apart) == (
        pytest.approx(9.64935, rel=1e-5),
        pytest.approx(46059.5, rel=1e-5),
        "repeats",
    )
    apart.objective = "tokens_per_s"
    s = tunereport.summary(
        [apart, close], [apart, close], objective="tokens_per_s", direction="maximize",
        budget=Budget(100.0, spent_s=40.0), rounds=[], stopped="the finalists are measured",
    )  # fmt: skip
    json.dumps(s, allow_nan=False)
    assert s["winner"]["label"] == "backend=b0" and s["winner"]["ci_high"] == pytest.approx(1744.15, rel=1e-4)
    assert s["runner_up"]["ci_high"] == pytest.approx(46059.5, rel=1e-4) and "nulls" not in s["runner_up"]
    assert s["significant"] is False  # the runner-up's wide interval overlaps the winner's
    # its figure is 1,000 / the mean step 1.5 s, 666.7 (the median of its rates was 750)
    assert "runner-up: backend=b1: tokens_per_s 666.7 [9.649, 46,060] (95%, over repeats)" in "\n".join(
        tunereport.lines(s)
    )
    time = tunereport.interval(cand(2, "iteration_time_s_mean", 1.0, 1.1))
    assert time == (
        pytest.approx(1.05 - 0.63531, rel=1e-4),
        pytest.approx(1.05 + 0.63531, rel=1e-4),
        "repeats",
    )


def test_one_run_s_interval_over_far_apart_steps_is_finite_not_blank(tmp_path):
    """One run of two measured steps, 0.3 and 1.7 x its mean: h = 12.7062 x 0.7 = 8.8943 means, so its
    rates' interval over steps is the figure times exp(-+8.8943), finite as a pooled row's (``inf``
    before session 33; blank before that: no interval, no verdict)."""
    from helpers import fit_clock, fixture_record, rescaled

    import analysis
    from analysis.display import render
    from analysis.load import failed_checks
    from flopsweep.metrics import _summary, unsteady_steps

    rec = rescaled(fixture_record(), world=1, tokens_per_device=TOKENS)  # a 1 s step
    rec["config"]["steps"]["measure"] = 2
    rec["metrics"]["iteration_time_s"] = _summary([0.3, 1.7])
    rec["metrics"]["unsteady_steps"] = unsteady_steps([0.3, 1.7])
    (tmp_path / "metrics.json").write_text(json.dumps(fit_clock(rec)))
    df = analysis.load(tmp_path)
    row = df.iloc[0]
    assert not failed_checks(df).iloc[0] and row["ci_over"] == "steps", row["implausible"]
    assert row["model_tflops_per_device_ci_high"] == pytest.approx(
        row["model_tflops_per_device"] * 7290.30, rel=1e-4
    )
    assert row["model_tflops_per_device_ci_low"] == pytest.approx(
        row["model_tflops_per_device"] * 1.37169e-4, rel=1e-4
    )
    columns = ["model_tflops_per_device", "model_tflops_per_device_ci_low", "model_tflops_per_device_ci_high"]
    assert "inf" not in render(df[columns], "markdown").splitlines()[2]
