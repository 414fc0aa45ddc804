"""Every column of a pooled ``repeats=`` row follows one documented rule (``analysis.spread.pool_repeats``),
never one round's value shown as the pool's: the recomputed TFLOPs from the pooled step, the energy
(``energy_j`` and ``joules_per_token`` alike) the rounds' mean as the step, the checks derived again, text
the rounds' shared value or blank. And what the analysis and the tuner write as JSON is strict: no bare
``Infinity`` or ``NaN``; a number JSON cannot hold is null, its object's ``nulls`` saying why
(``flopsweep.strict_json``).

Hand-built records: the committed ``v2-ok`` rescaled (``tests/helpers.round_records``), 16,384 tokens per
step at one rank; the real loader, the CLI's ``main`` in process, the tuner's report."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pandas as pd
import pytest
from helpers import round_records, write_rounds

import analysis
from analysis.catalogue import COLUMNS
from analysis.spread import HIGHEST
from flopsweep.strict_json import NULLS_KEY, UNBOUNDED, dumps, nulled

TOKENS = 16384
RATES = [1000.0, 1250.0, 2000.0]
"""Tokens/s per device of the three rounds: steps 16.384, 13.107 and 8.192 s, mean 12.561 s (no round's)."""
JOULES = [0.5, 0.6, 1.3]
"""J/token of the rounds: mean 0.8, median 0.6."""
PREDICTED = [10.0, 11.0, 15.0]
"""The rounds' predicted step (s): mean 12, median 11."""
PEAKS = [(80.0, 86.0), (82.0, 88.0), (90.0, 95.0)]
"""(predicted, allocated) peak GiB of the rounds."""


def _rounds(folder, rates=RATES, joules=JOULES):
    """Three rounds of one set-up, each with its own step, energy, loss, wall time, prediction and peak
    memory, every figure consistent (the analysis's checks pass them): their job folders."""
    recs = round_records(rates)
    for n, rec in enumerate(recs):
        m = rec["metrics"]
        step, measured = m["iteration_time_s"]["mean"], len(m["iteration_time_s"]["values"])
        if joules[n] is not None:
            m["energy_j"] = joules[n] * TOKENS * measured
            m["joules_per_token"] = joules[n]
            m["power_w_mean"] = m["energy_j"] / (measured * step)
        m["loss_first"], m["loss_last"] = 11.0 + n**2 / 4, 9.0 - n**2 / 3  # means 11.417, 8.444
        m["predicted"] = {"iteration_time_s": PREDICTED[n], "tokens_per_s": TOKENS / PREDICTED[n]}
        m["predicted_peak_gib"] = PEAKS[n][0]
        m["peak_cuda_allocated_bytes"] = PEAKS[n][1] * 2**30
        rec["run"]["wall_s"] = 300.0 + 40 * n**2
    return write_rounds(folder, recs)


def _same(a: object, b: object) -> bool:
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return a == b
    if pd.isna(a) or pd.isna(b):
        return bool(pd.isna(a) and pd.isna(b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-12)
    return a == b


def test_no_column_of_a_pooled_row_is_one_round_s_value(tmp_path):
    """Was: ``model_tflops_per_device_recomputed`` (and ``repeat``, ``run_id``, ``peak_memory_error``, the
    loss, the wall time) was the first round's, beside a TFLOPs from the pooled step. Every column whose
    rounds differ is now the pool's by its rule, or blank; only :data:`analysis.spread.HIGHEST` (the
    busiest load) takes one round's by design."""
    jobs = _rounds(tmp_path)
    pooled = analysis.load(tmp_path)
    alone = [analysis.load(job).iloc[0] for job in jobs]
    assert len(pooled) == 1 and pooled.iloc[0]["repeats"] == 3
    row = pooled.iloc[0]
    differ = [c for c in COLUMNS if not all(_same(alone[0][c], r[c]) for r in alone[1:])]
    assert {"model_tflops_per_device_recomputed", "energy_j", "peak_memory_error", "run_id"} <= set(differ)
    for column in differ:
        if column in HIGHEST or _same(row[column], None):
            continue
        assert not any(_same(row[column], r[column]) for r in alone), (column, row[column])


def test_the_pooled_row_s_derived_columns_follow_its_pooled_figures(tmp_path):
    _rounds(tmp_path)
    row = analysis.load(tmp_path).iloc[0]
    steps = [TOKENS / r for r in RATES]
    step = statistics.fmean(steps)
    assert row["iteration_time_s_mean"] == pytest.approx(step)
    flops = row["model_flops_per_iteration"]
    # the recomputed TFLOPs are the pooled step's, as the pooled TFLOPs are (was: the first round's 16.384 s)
    assert row["model_tflops_per_device_recomputed"] == pytest.approx(flops / step / 1e12, rel=1e-12)
    assert row["model_tflops_per_device"] == pytest.approx(
        row["model_tflops_per_device_recomputed"], rel=1e-12
    )
    assert not row["tflops_mismatch"]
    # the prediction: its step the rounds' mean, its tokens/s that step's, its error against the pooled step
    assert row["predicted_iteration_time_s"] == pytest.approx(12.0)
    assert row["predicted_tokens_per_s"] == pytest.approx(TOKENS / 12.0)
    assert row["prediction_error"] == pytest.approx((12.0 - step) / step)
    predicted, allocated = (statistics.fmean(p) for p in zip(*PEAKS, strict=True))
    assert row["predicted_peak_gib"] == pytest.approx(predicted)
    assert row["peak_memory_error"] == pytest.approx((predicted - allocated) / allocated)
    # the other numbers are the rounds' mean too; a round's own place is blank; every round's id is listed
    assert row["loss_first"] == pytest.approx(11 + 5 / 12) and row["loss_last"] == pytest.approx(9 - 5 / 9)
    assert row["run_wall_s"] == pytest.approx(300 + 40 * 5 / 3)
    assert pd.isna(row["repeat"]) and row["run_id"] == "round-0, round-1, round-2"


@pytest.mark.parametrize(
    ("joules", "mean"),
    [(JOULES, 0.8), ([0.5, None, 1.3], 0.9)],  # a round without NVML's counter: over the two that have it
)
def test_energy_and_joules_per_token_pool_by_one_rule_the_step_s(tmp_path, joules, mean):
    """Was: ``energy_j`` the rounds' median (0.6 J/token's worth) beside ``joules_per_token`` their mean
    (0.8): the row's energy over its tokens was not its J/token. Both are the mean over the rounds that
    measured it, as the step is."""
    jobs = _rounds(tmp_path, joules=joules)
    row = analysis.load(tmp_path).iloc[0]
    measured = len(
        json.loads((jobs[0] / "metrics.json").read_text())["metrics"]["iteration_time_s"]["values"]
    )
    assert row["joules_per_token"] == pytest.approx(mean)
    assert row["energy_j"] == pytest.approx(mean * TOKENS * measured)
    assert row["energy_j"] / (TOKENS * measured) == pytest.approx(row["joules_per_token"])
    powers = [j * TOKENS / (TOKENS / r) for j, r in zip(joules, RATES, strict=True) if j is not None]
    assert row["power_w_mean"] == pytest.approx(statistics.fmean(powers))


def test_rounds_that_differ_in_a_set_up_column_leave_it_blank_and_say_so(tmp_path):
    """Two rounds of 2 ranks, one as 2 x 1 and one as 1 x 2 (``setup_id`` leaves the rank count out): the
    pooled row shows neither round's ``nproc_per_node``/``nnodes`` but blanks them and names them."""
    recs = round_records([1000.0, 1200.0], world=2)
    for n, rec in enumerate(recs):
        rec["config"]["nproc_per_node"], rec["config"]["nnodes"] = 2 - n, 1 + n
    write_rounds(tmp_path, recs)
    df = analysis.load(tmp_path)
    assert len(df) == 1
    row = df.iloc[0]
    assert pd.isna(row["nproc_per_node"]) and pd.isna(row["nnodes"]) and row["world_size"] == 2
    assert "pooled rounds differ in nproc_per_node (2, 1), nnodes (1, 2): left blank" in row["warnings"]


# --- strict JSON ------------------------------------------------------------------------------------


def _strict(text: str) -> object:
    """``json.loads`` that refuses ``Infinity``, ``-Infinity`` and ``NaN``, as RFC 8259 does."""

    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_nulled_names_each_non_finite_number_in_its_object():
    got = nulled({"a": 1.0, "ci_high": math.inf, "b": [1.0, -math.inf, {"c": math.nan}], "nulls": {"x": "y"}})
    assert got == {
        "a": 1.0,
        "ci_high": None,
        "b": [1.0, None, {"c": None, NULLS_KEY: {"c": "nan: not a finite number (JSON has none)"}}],
        NULLS_KEY: {"x": "y", "ci_high": UNBOUNDED, "b[1]": "-inf: not a finite number (JSON has none)"},
    }
    assert nulled([math.inf, 2]) == [None, 2] and nulled(math.nan) is None  # no object to say why
    assert _strict(dumps({"v": [math.inf]})) == {
        "v": [None],
        NULLS_KEY: {"v[0]": "inf: not a finite number (JSON has none)"},
    }


def test_the_analysis_json_is_strict_and_two_rounds_far_apart_have_finite_ends(tmp_path, capsys):
    """Two rounds far apart (steps 1 s and 2 s): the rates' intervals had no upper bound, written as null
    with the row's ``nulls`` saying so (session 32); on the log scale (session 33) every end is a finite
    number, so no interval end is null, and a blank stays a plain null."""
    from analysis.__main__ import main

    write_rounds(tmp_path, round_records([TOKENS / 1.0, TOKENS / 2.0]))
    code = main([str(tmp_path), "--format", "json", "--output", "-"])
    out = capsys.readouterr().out
    assert code == 0 and "Infinity" not in out and "NaN" not in out
    (row,) = _strict(out)
    assert row["tokens_per_s_ci_high"] == pytest.approx(TOKENS / 1.5 * 69.0893, rel=1e-4)
    assert row["tokens_per_s_ci_low"] == pytest.approx(TOKENS / 1.5 / 69.0893, rel=1e-4)
    assert not any(k.endswith(("_ci_low", "_ci_high")) for k in row.get(NULLS_KEY, {}))
    assert row["energy_j"] is None and "energy_j" not in row.get(NULLS_KEY, {})  # blank: not measured


def test_to_json_takes_numpy_blank_and_list_cells():
    from analysis.display import to_json
    from analysis.prediction_error import render_summary

    df = pd.DataFrame(
        {"n": pd.array([1, None], dtype="Int64"), "x": [math.inf, math.nan], "l": [[1.0, math.inf], None]}
    )
    assert _strict(to_json(df)) == [
        {"n": 1, "x": None, "l": [1.0, None], NULLS_KEY: {"x": "inf: not a finite number (JSON has none)",
                                                        "l[1]": "inf: not a finite number (JSON has none)"}},
        {"n": None, "x": None, "l": None},
    ]  # fmt: skip
    summary = pd.DataFrame({"backend": ["fsdp"], "worst_error": [math.inf]})
    assert _strict(render_summary(summary, "json"))[0]["worst_error"] is None


def test_tune_json_is_strict_a_wide_interval_finite_and_a_bad_prediction_named(tmp_path):
    """The tuner's report: the runner-up's two runs 1 s and 2 s apart have a finite interval (its high end
    was null, ``inf`` in the text, before session 33); a prediction that came out inf would have made
    ``atomic_write_json`` (strict) refuse the whole report at the end of the sweep: it is null and named."""
    from flopsweep import tunereport
    from flopsweep.files import atomic_write_json
    from flopsweep.tune import Budget, Candidate

    def cand(i: int, *steps: float) -> Candidate:
        c = Candidate(i, (f"backend=b{i}",), f"backend=b{i}", objective="tokens_per_s")
        c.steps, c.values, c.gpu_s = list(steps), [TOKENS / s for s in steps], [10.0] * len(steps)
        return c

    close, apart = cand(0, 1.0, 1.1), cand(1, 1.0, 2.0)
    apart.predicted, apart.held_out = math.inf, math.nan
    s = tunereport.summary(
        [close, apart], [close, apart], objective="tokens_per_s", direction="maximize",
        budget=Budget(100.0), rounds=[], stopped="x",
    )  # fmt: skip
    assert s["runner_up"]["ci_high"] == pytest.approx(TOKENS / 1.5 * 69.0893, rel=1e-4)
    assert NULLS_KEY not in s["runner_up"]
    assert NULLS_KEY not in s["winner"]
    setup = s["setups"][1]
    assert setup["predicted"] is None and setup["error"] is None and setup["held_out"] is None
    assert set(setup[NULLS_KEY]) == {"predicted", "error", "held_out", "held_out_error"}
    assert "[" in (line := tunereport.lines(s)[2]) and "inf" not in line and "(95%, over repeats)" in line
    atomic_write_json(tmp_path / tunereport.JSON_FILE, s)
    assert _strict((tmp_path / tunereport.JSON_FILE).read_text()) == json.loads(json.dumps(s))


def test_pool_repeats_sets_each_kind_of_column_by_its_rule():
    """``pool_repeats`` on a hand-built frame: a whole-number column's mean that is no whole number, a numpy
    bool column whose rounds differ (blank, not an error), a list column's union, the highest load."""
    from analysis.spread import pool_repeats

    df = pd.DataFrame(
        {
            "repeat_group": ["g", "g"],
            "setup_id": ["s", "s"],
            "world_size": [1, 1],
            "run_id": ["a", "b"],
            "run_dir": ["x/0", "x/1"],
            "status": ["ok", "ok"],
            "iteration_time_s_mean": [1.0, 3.0],
            "tokens_per_s": [100.0, 100 / 3],
            "loss_first": pd.array([11, 12], dtype="Int64"),
            "flag": np.array([True, False]),
            "throttle_reasons": [["sw_power_cap"], ["hw_slowdown", "sw_power_cap"]],
            "loadavg_1m_start": [0.5, 2.0],
            "noise": ["noisy", None],
            "warnings": [None, "w"],
        }
    )
    (row,) = pool_repeats(df, pd.Series(True, index=df.index), numeric=["loss_first"]).to_dict("records")
    assert row["iteration_time_s_mean"] == 2.0 and row["tokens_per_s"] == pytest.approx(50.0)
    assert row["loss_first"] == 11.5 and pd.isna(row["flag"])
    assert row["throttle_reasons"] == ["sw_power_cap", "hw_slowdown"] and row["loadavg_1m_start"] == 2.0
    assert (row["noise"], row["warnings"], row["run_id"], row["repeats"]) == ("noisy", "w", "a, b", 2)
