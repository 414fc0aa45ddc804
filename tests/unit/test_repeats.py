"""repeats=: rounds interleaved across set-ups, 95% intervals, and the best-two verdict."""

from __future__ import annotations

import math
import statistics

import pandas as pd
import pytest

from analysis.significance import overlap, speedup_interval, verdict
from analysis.spread import interval, step_factors, t_quantile
from flopsweep.config import ConfigError, RunConfig
from flopsweep.noise import noise_warnings, noisy, overloaded
from flopsweep.plan import check_repeats
from hydra_plugins.flopsweep_repeats import repeat_axis


def test_t_quantiles_are_the_tables():
    assert t_quantile(1) == pytest.approx(12.706, abs=1e-3)
    assert t_quantile(4) == pytest.approx(2.776, abs=1e-3)


def test_interval_over_repeats_is_student_t_on_the_mean():
    low, high = interval([1.0, 2.0, 3.0])  # mean 2, s 1, n 3: 2 +- 4.303 / sqrt(3)
    assert (low, high) == pytest.approx((2 - 4.3027 / math.sqrt(3), 2 + 4.3027 / math.sqrt(3)), abs=1e-3)
    assert interval([5.0]) is None


def test_step_factors_turn_the_time_interval_into_rate_factors():
    low, high = step_factors([1.0, 1.0, 1.0, 1.0])
    assert (low, high) == (1.0, 1.0)  # no spread: the rate is exact
    low, high = step_factors([0.9, 1.1])  # mean 1, h = 12.706 * 0.1414 / 1.414 = 1.27 >= mean: exp(-+1.27)
    assert (low, high) == pytest.approx((0.28066, 3.56306), rel=1e-4)  # finite (inf before session 33)
    assert step_factors([1.0]) is None and step_factors(None) is None


def _runs(a: tuple[float, float, float], b: tuple[float, float, float]) -> pd.DataFrame:
    rows = [
        {
            "backend": n,
            "status": "ok",
            "model_tflops_per_device": v,
            "model_tflops_per_device_ci_low": lo,
            "model_tflops_per_device_ci_high": hi,
        }
        for n, (v, lo, hi) in (("fsdp", a), ("single", b))
    ]
    return pd.DataFrame(rows)


def test_verdict_not_significant_when_the_intervals_overlap():
    runs = _runs((100.0, 95.0, 105.0), (98.0, 93.0, 103.0))
    tied, line = verdict(runs, "model_tflops_per_device", runs["status"].eq("ok"))
    assert tied == [0, 1] and line.startswith("Not significant")


def test_verdict_significant_when_they_do_not():
    runs = _runs((100.0, 99.0, 101.0), (90.0, 89.0, 91.0))
    tied, line = verdict(runs, "model_tflops_per_device", runs["status"].eq("ok"))
    assert tied == [] and line.startswith("Significant: the best by model_tflops_per_device, 100")


def test_verdict_says_nothing_for_a_metric_without_interval():
    runs = _runs((100.0, 99.0, 101.0), (90.0, 89.0, 91.0))
    assert verdict(runs, "peak_cuda_allocated_gib", runs["status"].eq("ok")) == ([], None)


def test_speedup_interval_is_the_extreme_ratios():
    assert speedup_interval((90.0, 110.0), (45.0, 55.0), lower=False)[:2] == pytest.approx(
        (90 / 55, 110 / 45)
    )
    assert speedup_interval((1.0, 2.0), (4.0, 8.0), lower=True)[:2] == pytest.approx((4 / 2, 8 / 1))
    assert speedup_interval((1.0, 2.0), (4.0, 8.0), lower=True).reason is None
    assert overlap((1, 2), (2, 3)) and not overlap((1, 2), (2.1, 3))


def test_repeats_bounds_refused_in_one_line():
    check_repeats(RunConfig(repeats=3, repeat=2))
    for cfg, key in (
        (RunConfig(repeats=0), "repeats=0"),
        (RunConfig(repeats=101), "repeats=101"),
        (RunConfig(repeats=2, repeat=2), "repeat=2"),
    ):
        with pytest.raises(ConfigError, match=f"Invalid config: {key}:"):
            check_repeats(cfg)


def test_the_repeat_axis_only_when_repeated():
    assert repeat_axis(1) == [] and repeat_axis(True) == [] and repeat_axis("3") == []
    assert repeat_axis(3) == ["repeat=range(0,3)"]


def test_noise_thresholds():
    assert noisy(0.06) and not noisy(0.05) and not noisy(None)
    assert overloaded(1.5, 1.0, 2, 1) and overloaded(0.0, 2.5, 2, 1) and not overloaded(0.2, 1.1, 16, 8)
    assert not overloaded(50.0, 50.0, None, 1)  # no core count: no verdict
    assert [
        w.split(":")[0] for w in noise_warnings(cv=0.2, load_start=3.0, load_end=3.0, cpu_count=2, ranks=1)
    ] == ["noisy_steps", "host_load"]
    [load] = noise_warnings(cv=None, load_start=3.0, load_end=3.0, cpu_count=2, ranks=1)
    # a loaded host makes steps slower: step times high, throughput low (it said "timings are low")
    assert load.endswith("its step times are high (its throughput low) by an unknown amount")


def test_a_copied_round_counts_once_in_the_pooled_row(tmp_path):
    """Three rounds of one set-up, and a copy of one of them in another folder (same run id): the
    pooled row has 3 rounds, and the median and interval are those of the three."""
    from helpers import put, round_records, write_rounds

    import analysis

    recs = round_records([1000.0, 1100.0, 1200.0], world=2)
    write_rounds(tmp_path / "sweep", recs)
    put(tmp_path / "copy", recs[2])  # the same record, copied elsewhere
    alone = analysis.load(tmp_path / "sweep")
    both = analysis.load(tmp_path)
    assert len(alone) == len(both) == 1
    for df in (alone, both):
        row = df.iloc[0]
        assert row["repeats"] == 3 and row["ci_over"] == "repeats"
        rate = 3 / (1 / 1000 + 1 / 1100 + 1 / 1200)  # the rate of the rounds' mean step
        assert row["tokens_per_s_per_device"] == pytest.approx(rate)
    assert both.iloc[0]["tokens_per_s_ci_low"] == pytest.approx(alone.iloc[0]["tokens_per_s_ci_low"])


def test_rounds_with_and_without_a_probe_are_not_pooled(tmp_path):
    """One set-up of one ``repeats=`` sweep run without the probes, with ``predict.layer_probe=true`` and
    with ``predict.probe=true``: three rows, each the median and interval of its own rounds (a round of
    a record from before the keys is unprobed); ``setup_id`` is one (``predict.*`` stays out of it), and
    the table shows a probe column, which alone tells the rows apart."""
    from helpers import round_records, write_rounds

    import analysis
    from analysis.catalogue import SETUP_NAMES
    from analysis.display import compact

    rounds = [  # (predict, tokens/s per device); None: a record without config.predict
        (None, 1000.0),
        (None, 1100.0),
        ({"probe": False, "layer_probe": False}, 1200.0),
        ({"probe": False, "layer_probe": True}, 2000.0),
        ({"probe": False, "layer_probe": True}, 2200.0),
        ({"probe": True, "layer_probe": False}, 3000.0),
        ({"probe": True, "layer_probe": False}, 3300.0),
    ]
    recs = round_records([rate for _, rate in rounds], world=2)
    for n, (rec, (predict, _)) in enumerate(zip(recs, rounds, strict=True)):
        rec["run"].update(repeat=n % 3, repeats=3)
        if predict is not None:
            rec["config"]["predict"] = predict
    write_rounds(tmp_path, recs)
    df = analysis.load(tmp_path)
    assert df["setup_id"].nunique() == 1 and len(df) == 3
    got = {
        (bool(r["predict_probe"] is True), bool(r["layer_probe"] is True)): (
            r["repeats"],
            r["tokens_per_s_per_device"],
            r["ci_over"],
        )
        for _, r in df.iterrows()
    }
    assert got == {
        (False, False): (3, pytest.approx(3 / (1 / 1000 + 1 / 1100 + 1 / 1200)), "repeats"),
        (False, True): (2, pytest.approx(2 / (1 / 2000 + 1 / 2200)), "repeats"),
        (True, False): (2, pytest.approx(2 / (1 / 3000 + 1 / 3300)), "repeats"),
    }
    steps = sorted(df["iteration_time_s_mean"])  # each row's step is its own rounds' median
    assert steps[0] < steps[1] < steps[2]
    setup = [c for c in compact(df).columns if c in SETUP_NAMES]  # the table tells the three rows apart
    assert "predict_probe" in setup and len(df[setup].astype(str).drop_duplicates()) == 3


def test_rounds_tagged_differently_are_not_pooled(tmp_path):
    """``-m tag=a,b repeats=2``: one sweep (one ``repeat_group``), one ``setup_id`` (the tag stays out of
    it), was one row of four rounds. A user who tags runs differently means them apart: one row per tag,
    each the median and interval of its own rounds; a null and a blank tag are both no tag, one row."""
    from helpers import round_records, write_rounds

    import analysis
    from analysis.catalogue import SETUP_NAMES
    from analysis.display import compact

    rounds = [("a", 1000.0), ("b", 2000.0), ("a", 1200.0), ("b", 2400.0), (None, 3000.0), ("", 3600.0)]
    recs = round_records([rate for _, rate in rounds], world=2)
    for n, (rec, (tag, _)) in enumerate(zip(recs, rounds, strict=True)):
        rec["run"].update(repeat=n // 2, repeats=2)
        rec["config"]["tag"] = tag
    write_rounds(tmp_path, recs)
    df = analysis.load(tmp_path)
    assert df["setup_id"].nunique() == 1 and len(df) == 3
    got = {
        (r["tag"] if isinstance(r["tag"], str) else ""): (
            r["repeats"],
            r["tokens_per_s_per_device"],
            r["ci_over"],
        )
        for _, r in df.iterrows()
    }
    assert got == {
        "a": (2, pytest.approx(2 / (1 / 1000 + 1 / 1200)), "repeats"),
        "b": (2, pytest.approx(2 / (1 / 2000 + 1 / 2400)), "repeats"),
        "": (2, pytest.approx(2 / (1 / 3000 + 1 / 3600)), "repeats"),
    }
    shown = compact(df)  # the table tells the rows apart by their tag
    setup = [c for c in shown.columns if c in SETUP_NAMES or c == "tag"]
    assert "tag" in setup and len(shown[setup].astype(str).drop_duplicates()) == 3


@pytest.mark.parametrize(
    ("rates", "step_rate"),
    [
        (
            [2560.0, 256.0],
            2 / (1 / 2560 + 1 / 256),
        ),  # the trial: steps 10x apart, a third of the rates' mean
        ([1000.0, 4000.0, 1500.0], 3 / (1 / 1000 + 1 / 4000 + 1 / 1500)),  # odd: the mean step's too
    ],
)
def test_a_pooled_row_s_rates_follow_from_its_pooled_step(tmp_path, rates, step_rate):
    """``repeats=2``: the pooled row's tokens/s, TFLOPs and MFU are its own step time's, as in one
    record (tokens per step / the mean of the rounds' mean steps), not the median of the rounds' rates
    (over two rounds the mean of their rates: 1,408 tokens/s where the pooled step gives 465, as the
    trial's 1,325 tokens/s beside 512 tokens / 1.177 s = 435); an odd count too (not the median round's)."""
    from helpers import round_records, write_rounds

    import analysis

    recs = round_records(rates)
    write_rounds(tmp_path, recs)
    df = analysis.load(tmp_path)
    assert len(df) == 1
    row, m = df.iloc[0], recs[-1]["metrics"]
    step = row["iteration_time_s_mean"]
    assert row["repeats"] == len(rates) and step == pytest.approx(
        statistics.fmean(m["tokens_per_step"] / r for r in rates)
    )
    assert row["tokens_per_s"] == pytest.approx(m["tokens_per_step"] / step) == pytest.approx(step_rate)
    assert row["tokens_per_s_per_device"] == pytest.approx(step_rate)
    assert row["model_tflops_per_device"] == pytest.approx(m["model_flops_per_iteration"] / step / 1e12)
    assert row["hardware_tflops_per_device"] == pytest.approx(m["hardware_flops_per_iteration"] / step / 1e12)
    assert row["mfu"] == pytest.approx(row["model_tflops_per_device"] / m["peak_tflops"])
    if len(rates) == 2:  # not the rates' median (their mean): that is what the trial showed
        assert row["tokens_per_s"] < statistics.median(rates) / 3  # 465 against 1,408
