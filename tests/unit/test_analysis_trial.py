"""A fresh user's trial of ``flopsweep-analysis DIR``: exit statuses alike for every output option, a plan's
folder told as one, every column the default table shows selectable, and a footer that counts the
records the pooled rows hold.

The CLI's ``main`` in process over real records (the committed fixture) and real folders; nothing
is mocked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import RECORDS, fixture_record, put, round_records, write_rounds
from helpers import analysis_cli as cli

from analysis import load
from analysis.__main__ import build_parser, select_runs
from analysis.catalogue import SHORT
from analysis.discover import PLAN_FILE
from analysis.display import compact, summary
from analysis.query import normalize
from flopsweep.column_spec import COLUMN_SPECS

# --- 2: exit statuses ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    [
        ["--output", "{bad}/x.csv", "--format", "csv"],
        ["--output", "{bad}/report.html", "--format", "html"],
        ["--plot", "{bad}/plots"],
        ["--notebook", "{bad}/results.ipynb"],
    ],
    ids=["output", "report", "plot", "notebook"],
)
@pytest.mark.parametrize("bad", ["file", "proc"])
def test_every_output_option_whose_folder_cannot_take_a_file_exits_2(tmp_path, capsys, option, bad):
    """Was: an unwritable --output exited 2, an unwritable --plot 1 (it failed only when written)."""
    put(tmp_path / "runs" / "0", fixture_record())
    (tmp_path / "a-file").write_text("x")
    where = str(tmp_path / "a-file") if bad == "file" else "/proc/flopsweep-test"
    args = [a.format(bad=where) for a in option]
    code, out, err = cli(capsys, tmp_path / "runs", *args)
    assert code == 2, err
    line = [x for x in err.splitlines() if "error:" in x]
    assert len(line) == 1 and f"{args[0]} " in line[0], err
    assert "Fix: " in line[0] or "give a folder" in line[0], err
    assert not os.path.exists("/proc/flopsweep-test")


def test_nothing_there_exits_2_and_only_unreadable_records_exit_1(tmp_path, capsys):
    """The rule docs/analysis.md states: 2 the command line is refused (nothing to read where it points),
    1 what it names is there but fails (records that cannot be read)."""
    (tmp_path / "empty").mkdir()
    assert cli(capsys, tmp_path / "empty")[0] == 2
    (tmp_path / "bad" / "0").mkdir(parents=True)
    os.mkfifo(tmp_path / "bad" / "0" / "metrics.json")
    (tmp_path / "bad" / "1").mkdir()
    (tmp_path / "bad" / "1" / "metrics.json").symlink_to(RECORDS / "v2-ok" / "metrics.json")
    code, _, err = cli(capsys, tmp_path / "bad")
    assert code == 1 and "2 unreadable records skipped" in err and "resume=true" in err


def test_a_plans_folder_is_told_as_one_with_what_to_read(tmp_path, capsys):
    """Was: "no metrics.json under DIR ... the folder exists", no word of the plan it holds."""
    from flopsweep.job.plantable import PLAN_FILE as WRITTEN

    assert PLAN_FILE == WRITTEN
    plan = tmp_path / "plan"
    plan.mkdir()
    (plan / PLAN_FILE).write_text("rank,backend\n1,fsdp\n")
    for named in (plan, plan / PLAN_FILE):
        code, out, err = cli(capsys, named)
        line = err.splitlines()[-1]
        assert code == 2 and not out, err
        assert "is the table of a plan" in line and "plan=true" in line
        assert f"Fix: read {plan / PLAN_FILE}" in line


# --- 3: every column the default table shows is selectable ----------------------------------------


def _runs(tmp_path: Path) -> Path:
    """Three records that make the default table show set-up columns, the interval columns, error
    and flags (a failed run, a duplicate id)."""
    a, b, c = fixture_record(), fixture_record(), fixture_record("v2-oom")
    b["config"]["precision"]["name"] = "fp32"
    put(tmp_path / "runs" / "0", a)
    put(tmp_path / "runs" / "1", b)
    put(tmp_path / "runs" / "2", c)
    return tmp_path / "runs"


def test_every_column_of_the_default_table_is_taken_by_columns_sort_and_filter(tmp_path, capsys):
    """Was: the table showed ``flags``; ``--columns model,flags`` was an unknown column. Each column the
    default table shows, by its name and by its header: ``--columns`` (all in one table), ``--sort``
    and ``--filter`` (the rows the options select, :func:`analysis.__main__.select_runs`)."""
    runs = _runs(tmp_path)
    df = load(runs)
    shown = compact(df)
    assert "flags" in shown and "error" in shown
    names = [n for c in shown.columns for n in dict.fromkeys([c, SHORT.get(c, c)])]
    code, out, err = cli(capsys, runs, "--columns", ",".join(names), "--format", "csv")
    assert code == 0 and out.splitlines()[0].count(",") == len(shown.columns) - 1, err
    for column in shown.columns:
        value = next((normalize(v) for v in shown[column] if normalize(v)), None)  # None: blank in every row
        value = value.split(",")[0] if value and column == "flags" else value
        for name in dict.fromkeys([column, SHORT.get(column, column)]):
            picked = select_runs(df, build_parser().parse_args([str(runs), "--sort", name]))
            assert len(picked) == len(df), name
            if value:
                args = build_parser().parse_args([str(runs), "--filter", f"{name}={value}"])
                assert 1 <= len(select_runs(df, args)) <= len(df), (name, value)


def test_filter_flags_keeps_the_rows_with_that_flag(tmp_path, capsys):
    runs = _runs(tmp_path)
    asked = ["--filter", "flags=dup-id", "--columns", "precision,flags", "--format=csv"]
    code, out, _ = cli(capsys, runs, *asked)
    rows = out.strip().splitlines()
    assert code == 0 and rows[0] == '"precision","flags"' and len(rows) == 3
    assert all("dup-id" in r for r in rows[1:])
    code, out, _ = cli(capsys, runs, "--sort", "flags", "--columns", "status,flags", "--format", "csv")
    assert code == 0 and out.strip().splitlines()[-1] == '"oom",""'  # blank flags last


# --- 4: the footer counts records; the legend says how rounds pool ---------------------------------


def _rounds(tmp_path: Path, n: int) -> Path:
    recs = round_records([1000.0] * n)
    for rec in recs:
        rec["config"]["repeats"] = n
    write_rounds(tmp_path / "rep", recs)
    return tmp_path / "rep"


def test_the_footer_counts_the_records_pooled_into_a_row(tmp_path, capsys):
    """Was: 3 ``repeats=`` records ended "1 run (1 ok)"."""
    rep = _rounds(tmp_path, 3)
    df = load(rep)
    assert len(df) == 1 and df.iloc[0]["repeats"] == 3
    assert summary(df) == "3 runs (3 ok), pooled into 1 row"
    code, _, err = cli(capsys, rep)
    assert code == 0 and err.splitlines()[-1] == "3 runs (3 ok), pooled into 1 row"
    put(tmp_path / "rep" / "oom", fixture_record("v2-oom"))
    assert summary(load(rep)) == "4 runs (3 ok, 1 oom), pooled into 2 rows"
    assert summary(load(tmp_path / "rep" / "0")) == "1 run (1 ok)"


def test_the_reps_legend_says_what_pool_repeats_does():
    """The legend named every pooled figure a median; the step is the rounds' mean, the rates and step
    costs follow from it, the objective figures are their mean (``spread.pooled_figure``)."""
    from analysis.spread import FIGURES, MEAN_STEP_RATES, STEP_COLUMN, STEP_COSTS

    (reps,) = [s for s in COLUMN_SPECS if s.name == "repeats"]
    text = reps.description
    assert "their median" not in text.split(",")[0] and "step their mean" in text
    assert "rates and step costs that step's" in text and "figure of merit their mean" in text
    assert STEP_COLUMN in FIGURES and set(MEAN_STEP_RATES) | set(STEP_COSTS) <= set(FIGURES)
