"""Issue 46, item 7: the report is a door. On committed records (an H200 backend sweep, a CPU layout
sweep with tensor and pipeline parallelism, the fixture micro batch sweep): the HTML opens with the
verdict above its first chart, the chart is the one the sweep calls for (a bar per set-up when the
swept axes are categories, lines when a set-up was run at several micro batches), and set-ups are
named by the knobs that differ between them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.container import BarContainer

from analysis import headline, load, make_plots
from analysis.__main__ import main
from analysis.drawing import chart_kind, series_labels, spaced_ticks

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "benchmarks/results/h200/backends-v2"  # single, ddp, fsdp, ZeRO 1-3; micro batch 8
BACKENDS_X2 = ROOT / "benchmarks/results/h200x2/backends"  # single on 1 GPU, ZeRO 1 and 2 on 2
LAYOUTS = ROOT / "benchmarks/results/cpu/layouts"  # FSDP on 4 CPU ranks: dp4, dp2x2, dp2 tp2, pp2 x2
SWEEP = ROOT / "tests/fixtures/sweep"  # micro batch 1-16 per backend


def _frame(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns)


@pytest.mark.parametrize(
    ("frame", "kind"),
    [
        (
            _frame(
                backend=["ddp", "fsdp", "deepspeed"], zero_stage=[None, None, 3], micro_batch_size=[8] * 3
            ),
            "bar",
        ),
        (
            _frame(backend=["fsdp"] * 3, layout=["dp4", "dp2 tp2", "pp2/1F1B dp2"], micro_batch_size=[2] * 3),
            "bar",
        ),
        (_frame(backend=["fsdp", "fsdp", "ddp", "ddp"], micro_batch_size=[1, 2, 1, 2]), "line"),
        # each set-up at its own micro batch: a bar each, not two one-point lines
        (_frame(backend=["fsdp", "ddp"], micro_batch_size=[4, 8]), "bar"),
        # a global batch: grad accumulation follows the micro batch, the set-up is the same
        (_frame(backend=["fsdp"] * 3, micro_batch_size=[1, 2, 4], grad_accum=[4, 2, 1]), "line"),
        (_frame(backend=["fsdp"], micro_batch_size=[math.nan]), "bar"),
    ],
)
def test_the_chart_kind_follows_the_swept_axes(frame, kind) -> None:
    assert chart_kind(frame, "micro_batch_size") == kind


@pytest.mark.parametrize(("folder", "kind"), [(BACKENDS, "bar"), (LAYOUTS, "bar"), (SWEEP, "line")])
def test_committed_sweeps_get_the_chart_they_call_for(folder, kind) -> None:
    df = load(folder)
    assert chart_kind(df) == kind
    fig = make_plots(df)[0]["tflops_vs_micro_batch"]
    ax = fig.axes[0]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if kind == "bar":  # one bar per set-up, each named on its own tick: no stack on one x value
        setups = df["setup_id"].nunique()
        assert len(bars) == 1 and len(bars[0]) == setups == len(ax.get_yticklabels())
        values = [b.get_width() for b in bars[0]]
        assert values == sorted(values, reverse=True)  # the best on top
        assert math.isclose(values[0], df["model_tflops_per_device"].max())
    else:
        assert not bars and ax.get_xlabel() == "micro batch size (sequences per rank)"
        assert any(len(line.get_xdata()) > 1 for line in ax.lines)


def test_set_up_names_hold_only_the_knobs_that_differ() -> None:
    backends = [
        t.get_text() for t in make_plots(load(BACKENDS))[0]["tflops_vs_micro_batch"].axes[0].get_yticklabels()
    ]
    assert backends == ["fsdp", "single", "ddp", "deepspeed ZeRO-1", "deepspeed ZeRO-2", "deepspeed ZeRO-3"]
    layouts = [
        t.get_text() for t in make_plots(load(LAYOUTS))[0]["tflops_vs_micro_batch"].axes[0].get_yticklabels()
    ]
    # one backend for all: the layout names them, every one (pipelines included)
    assert sorted(layouts) == [
        "layout=dp2 tp2",
        "layout=dp2x2",
        "layout=dp4",
        "layout=pp2/1F1B dp2",
        "layout=pp2/GPipe dp2",
    ]
    # knobs that only the DeepSpeed runs set, all alike (attention density 1, world size 2: single's
    # record leaves both blank), name no one: it was "deepspeed ZeRO-1, density=1, world=2"
    x2 = series_labels(load(BACKENDS_X2), x=None, series="backend").tolist()
    assert sorted(x2) == ["deepspeed ZeRO-1", "deepspeed ZeRO-2", "single"]


def test_a_knob_is_named_only_where_the_set_ups_that_have_it_differ() -> None:
    runs = _frame(
        backend=["fsdp", "deepspeed", "deepspeed", "deepspeed"],
        zero_stage=pd.array([None, 1, 3, 3], dtype="Int64"),
        zero_hpz_partition_size=[None, 1, 1, 1],
        zero_quantized_weights=[None, False, False, True],
        reshard_after_forward=[True, None, None, None],
    )
    assert series_labels(runs, x="micro_batch_size", series="backend").tolist() == [
        "fsdp",
        "deepspeed ZeRO-1, qwz=false",
        "deepspeed ZeRO-3, qwz=false",
        "deepspeed ZeRO-3, qwz=true",
    ]


def test_close_micro_batches_never_get_overlapping_tick_labels() -> None:
    # a search's micro batches 25, 27 and 28 beside 1..16 on a log axis: 25 2728 overlapped
    assert spaced_ticks([1, 2, 4, 8, 16, 25, 27, 28], log=True) == [True] * 5 + [False, False, True]
    assert spaced_ticks([1, 2, 4, 8, 16], log=True) == [True] * 5
    assert spaced_ticks([8], log=False) == [True]


@pytest.mark.parametrize("folder", [BACKENDS, LAYOUTS])
def test_the_html_report_opens_with_the_verdict_above_its_first_chart(folder, tmp_path, capsys) -> None:
    out = tmp_path / "report.html"
    assert main([str(folder), "--format", "html", "--output", str(out)]) == 0, capsys.readouterr().err
    html = out.read_text()
    verdict, image = html.index('<section id="verdict">'), html.index("<img")
    assert verdict < image < html.index("<h2>Runs</h2>")
    lines = headline(load(folder))
    assert lines[0].startswith("Winner by model_tflops_per_device (higher is better): ")
    assert lines[1].startswith("Runner-up: ")
    for line in lines:
        assert f"<p>{line}</p>" in html[verdict:image]
    assert html.count("Not significant") == 1  # said once, at the top, not again under the table


def test_the_verdict_names_the_winner_its_interval_and_whether_it_beats_the_runner_up() -> None:
    assert headline(load(BACKENDS)) == [
        "Winner by model_tflops_per_device (higher is better): fsdp, 502.7 "
        "(95% interval [493.5, 512.1] over steps).",
        "Runner-up: single, 485.5 (95% interval [476.7, 494.5] over steps).",
        "Not significant: the two 95% intervals overlap, so the winner does not beat the runner-up at this "
        "level (a tie?). Measure with more repeats= to tell them apart.",
    ]
    layouts = headline(load(LAYOUTS))
    assert layouts[0].startswith("Winner by model_tflops_per_device (higher is better): fsdp, layout=dp4, ")
    assert layouts[1].startswith("Runner-up: fsdp, layout=dp2x2, 0.002332 (95% interval [0.001888, 0.00288]")
    apart = load(BACKENDS)
    apart = apart[apart["backend"].isin(["fsdp", "deepspeed"]) & apart["zero_stage"].fillna(0).ne(3)]
    assert headline(apart)[1].startswith("Runner-up: deepspeed ZeRO-1, 443.1 (95% interval [437, 449.2]")
    assert (
        headline(apart)[2]
        == "Significant: the winner beats the runner-up (their 95% intervals do not overlap)."
    )
    assert headline(apart.iloc[:0]) == [
        "No verdict: no ok run has model_tflops_per_device (every run failed, or none passed the checks)."
    ]
