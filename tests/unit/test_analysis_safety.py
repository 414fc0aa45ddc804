"""Issue 30, the analysis side: spreadsheet formulas (class 3), outputs that would destroy inputs
(class 4), links and non-regular files where records are expected (class 5), records that lie
(class 9) and hostile strings in outputs (class 10).

Everything runs for real: the CLI in process or as ``python -m analysis`` in a subprocess, real
FIFOs, links, hard links and ``/dev/zero``, a real file-size limit for the full disk. A test that
could hang on a regression runs under a deadline (``signal.alarm`` or a subprocess timeout), which
fails it instead of hanging the suite; no test asserts a speed.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest
from helpers import deadline, put
from helpers import fixture_record as ok_record  # the committed ok record, to edit

from analysis import best, load
from analysis.__main__ import main
from analysis.checks import record_problems
from analysis.load import discover, rankable
from analysis.output import write_atomic
from analysis.plots import make_plots, save_plots
from analysis.sanitize import MAX_LABEL, csv_cell, markdown_cell, printable
from flopsweep.safe_read import RecordError, read_json

ROOT = Path(__file__).resolve().parents[2]


RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "records"


RESULTS = ROOT / "benchmarks" / "results"


ESC = "\x1b"


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


FORMULAS = {
    "leading_space": "  =HYPERLINK(1)",
    "tab": "\t=cmd|' /C calc'!A0",
    "carriage_return": "\r=1+1",
    "space_then_at": " @SUM(A1)",
    "plus": "+1+1",
    "minus": "-2+3",
    "nul": "\x00=1",
    "full_width_equals": "\uff1dHYPERLINK(1)",
    "newline_then_equals": "\n=1+1",
    "byte_order_mark_then_equals": "\ufeff=1+1",
    "zero_width_space_then_equals": "\u200b=1+1",
}


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_csv_formula_cell_is_defused_after_whitespace_tab_and_cr(name):
    cell = csv_cell(FORMULAS[name])
    assert cell.startswith("'"), cell
    assert "\r" not in cell


def test_csv_harmless_text_pipes_and_percent_are_left_alone():
    assert csv_cell("gpt-1.3b") == "gpt-1.3b"
    assert csv_cell("a|b") == "a|b" and csv_cell("50%") == "50%"  # not triggers on their own (OWASP)
    assert csv_cell(-1.5) == -1.5 and csv_cell(None) is None
    assert csv_cell("-1.5") == "-1.5" and csv_cell("+2e-3") == "+2e-3"  # a number as text stays a number


def test_csv_cli_defuses_every_owasp_prefix_and_a_bare_cr_never_splits_a_row(tmp_path, capsys):
    for i, text in enumerate(FORMULAS.values()):
        rec = ok_record()
        rec["run"]["id"] = f"run-{i}"
        rec["config"]["model"]["name"] = text
        rec["config"]["tag"] = "a\rb\r\nc"
        put(tmp_path / f"r{i}", rec)
    code, out, _ = cli(capsys, tmp_path, "--format", "csv", "--columns", "model,tag,loss_first,tokens_per_s")
    assert code == 0 and "\r" not in out
    rows = list(csv.reader(io.StringIO(out)))
    assert len(rows) == 1 + len(FORMULAS)  # no row split by a CR or LF inside a cell
    assert all(r[0].startswith("'") for r in rows[1:])
    assert {r[1] for r in rows[1:]} == {"a\nb\nc"}


def test_csv_numbers_stay_numbers(tmp_path, capsys):
    rec = ok_record()
    rec["metrics"]["loss_first"] = -1.5  # a negative number is not a formula
    put(tmp_path / "r", rec)
    _, out, _ = cli(capsys, tmp_path, "--format", "csv", "--columns", "model,loss_first,tokens_per_s")
    line = out.splitlines()[1]
    assert ",-1.5," in line and "'-1.5" not in line
    df = pd.read_csv(io.StringIO(out))
    assert df["loss_first"].tolist() == [-1.5]
    assert pd.api.types.is_float_dtype(df["tokens_per_s"])


def test_output_naming_a_record_being_read_is_refused_in_one_line(tmp_path, capsys):
    path = put(tmp_path / "run", ok_record())
    before = path.read_bytes()
    code, out, err = cli(capsys, tmp_path, "--output", path)
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "usage:" not in err
    assert f"--output {path} is the record {path} being read" in err
    assert path.read_bytes() == before


@pytest.mark.parametrize("how", ["symlink", "hardlink", "dotted"])
def test_output_resolving_to_a_record_being_read_is_refused(tmp_path, capsys, how):
    path = put(tmp_path / "run", ok_record())
    before = path.read_bytes()
    other = tmp_path / "report.md"
    if how == "symlink":
        other.symlink_to(path)
    elif how == "hardlink":
        os.link(path, other)
    else:
        other = tmp_path / "run" / ".." / "run" / "metrics.json"
    code, _, err = cli(capsys, tmp_path / "run", "--format", "markdown", "--output", other)
    assert code == 2 and "being read" in err and "usage:" not in err
    assert path.read_bytes() == before


def test_notebook_naming_a_record_being_read_is_refused_before_any_kernel(tmp_path, capsys):
    """The record itself is no notebook name (not .ipynb); a notebook name that is the record under
    another name (a hard link) is refused as the record being read."""
    path = put(tmp_path / "run", ok_record())
    before = path.read_bytes()
    with pytest.raises(SystemExit) as exit_:  # argparse's refusal (analysis.cli_paths.notebook_path)
        cli(capsys, tmp_path, "--notebook", path)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --notebook" in err
    assert "a notebook's name ends in .ipynb" in err
    os.link(path, tmp_path / "run" / "results.ipynb")
    code, _, err = cli(capsys, tmp_path, "--notebook", tmp_path / "run" / "results.ipynb")
    assert code == 2 and "--notebook" in err and "being read" in err
    assert "starting a kernel" not in err
    assert path.read_bytes() == before


def test_write_atomic_replaces_a_planted_link_and_never_writes_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = tmp_path / "report.html"
    target.symlink_to(victim)
    write_atomic(target, b"report\n")
    assert victim.read_text() == "keep me\n"
    assert not target.is_symlink() and target.read_text() == "report\n"


def test_plot_files_planted_as_links_are_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    plots = tmp_path / "plots"
    plots.mkdir()
    (plots / "tflops_vs_micro_batch.png").symlink_to(victim)
    paths, _ = save_plots(load(ROOT / "tests" / "fixtures" / "sweep"), plots)
    assert "tflops_vs_micro_batch" in paths
    assert victim.read_text() == "keep me\n"
    assert not paths["tflops_vs_micro_batch"].is_symlink()


def test_read_json_never_blocks_on_a_fifo(tmp_path):
    fifo = tmp_path / "metrics.json"
    os.mkfifo(fifo)
    with deadline(60), pytest.raises(RecordError, match="a FIFO, not a regular file"):
        read_json(fifo)


def test_read_json_does_not_follow_links_not_even_to_dev_zero(tmp_path):
    zero = tmp_path / "zero" / "metrics.json"
    zero.parent.mkdir()
    zero.symlink_to("/dev/zero")
    with deadline(60), pytest.raises(RecordError, match="symbolic link"):
        read_json(zero)
    good = put(tmp_path / "real", ok_record())
    link = tmp_path / "link.json"
    link.symlink_to(good)
    with pytest.raises(RecordError, match=r"a symbolic link \(not followed: a record is a regular file\)"):
        read_json(link)
    assert read_json(good)["run"]["id"] == "run-ok"


def test_read_json_refuses_a_device_and_a_directory(tmp_path):
    with deadline(60), pytest.raises(RecordError, match="a character device, not a regular file"):
        read_json(Path("/dev/zero"))
    with pytest.raises(RecordError, match="a directory, not a regular file"):
        read_json(tmp_path)


def hostile_tree(root: Path) -> Path:
    """Two real records, and beside them a FIFO, a link to /dev/zero, a self-looping link, a
    dangling link, a link to a real record, and directory links that loop."""
    put(root / "a", ok_record())
    rec = ok_record()
    rec["run"]["id"] = "run-b"
    put(root / "sub" / "b", rec)
    os.mkfifo(root / "sub" / "fifo")  # a directory name would hide it; the file name counts
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "metrics.json")
    (root / "zero").mkdir()
    (root / "zero" / "metrics.json").symlink_to("/dev/zero")
    (root / "self").mkdir()
    (root / "self" / "metrics.json").symlink_to("metrics.json")
    (root / "dangling").mkdir()
    (root / "dangling" / "metrics.json").symlink_to(root / "nowhere")
    (root / "linked").mkdir()
    (root / "linked" / "metrics.json").symlink_to(root / "a" / "metrics.json")
    (root / "sub" / "up").symlink_to("..")
    (root / "sub" / "here").symlink_to(".")
    return root


SKIPPED = {"fifo": "a FIFO", "zero": "symbolic link", "self": "symbolic link", "dangling": "symbolic link"}


def test_walk_skips_links_fifos_and_devices_with_a_reason_and_never_loops(tmp_path):
    root = hostile_tree(tmp_path / "runs")
    with deadline(120):
        found, skipped = discover([root])
    assert found == [root / "a" / "metrics.json", root / "sub" / "b" / "metrics.json"]
    for name, why in SKIPPED.items():
        assert why in skipped[str(root / name / "metrics.json")]
    assert "symbolic link" in skipped[str(root / "linked" / "metrics.json")]


def test_glob_meeting_a_link_loop_a_fifo_and_a_device_skips_them_and_never_loops(tmp_path):
    root = hostile_tree(tmp_path / "runs")
    with deadline(120):
        found, skipped = discover([f"{root}/**/metrics.json"])
        found_star, skipped_star = discover([f"{root}/*/metrics.json"])
    assert found == [root / "a" / "metrics.json", root / "sub" / "b" / "metrics.json"]
    assert found_star == [root / "a" / "metrics.json"]
    for name, why in SKIPPED.items():
        assert why in skipped[str(root / name / "metrics.json")]
        assert why in skipped_star[str(root / name / "metrics.json")]


def _lie(rec: dict, how: str) -> None:
    m = rec["metrics"]
    if how == "tokens_x10":
        m["tokens_per_s"] *= 10
        m["tokens_per_s_per_device"] *= 10
    elif how == "per_device":
        m["tokens_per_s_per_device"] = m["tokens_per_s"]
    elif how == "mfu_without_peak":
        m["peak_tflops"] = None
    elif how == "hfu":
        m["hfu"] *= 2
    elif how == "mean":
        m["iteration_time_s"]["mean"] *= 0.5
    elif how == "median":
        m["iteration_time_s"]["median"] *= 0.5
    elif how == "max":
        m["iteration_time_s"]["max"] = m["iteration_time_s"]["min"]
    elif how == "negative":
        m["peak_host_rss_bytes"] = -1
    elif how == "global_batch":
        m["global_batch_size"] *= 2
    elif how == "timestamps":
        rec["run"]["finished_at"] = "2026-11-29T14:00:00+00:00"


LIES = {
    "tokens_x10": "tokens_per_s ",
    "per_device": "tokens_per_s_per_device",
    "mfu_without_peak": "mfu 0.",
    "hfu": "hfu ",
    "mean": "iteration_time_s.mean",
    "median": "iteration_time_s.median",
    "max": "iteration_time_s.max",
    "negative": "peak_host_rss_bytes -1 is negative",
    "global_batch": "global_batch_size",
    "timestamps": "run.finished_at 2026-11-29T14:00:00+00:00 is before run.started_at",
}


@pytest.mark.parametrize("how", sorted(LIES))
def test_a_record_that_lies_is_flagged_naming_the_figure_and_left_out_of_rankings(tmp_path, how):
    rec = ok_record()
    assert record_problems(rec) == []
    _lie(rec, how)
    rec["run"]["id"] = "liar"
    put(tmp_path / "liar", rec)
    put(tmp_path / "honest", ok_record())
    df = load(tmp_path).set_index("run_id")
    assert LIES[how] in df.loc["liar", "implausible"]
    assert pd.isna(df.loc["run-ok", "implausible"])
    assert rankable(df).to_dict() == {"liar": False, "run-ok": True}
    assert best(df.reset_index())["run_id"].tolist() == ["run-ok"]


def test_a_non_finite_figure_is_flagged_and_kept_out_of_plots(tmp_path, capsys):
    text = json.dumps(ok_record()).replace('"swap_used_bytes": 0', '"swap_used_bytes": 1e999')
    assert "1e999" in text
    put(tmp_path / "inf", text)
    df = load(tmp_path)
    assert df["implausible"].tolist() == ["swap_used_bytes is not finite"]
    figures, skipped = make_plots(df)
    assert figures == {} and "tflops_vs_micro_batch" in skipped
    code, out, err = cli(capsys, tmp_path)
    assert code == 0 and "check?" in out
    assert "left out of rankings and plots" in err and "swap_used_bytes is not finite" in err


def test_every_committed_record_passes_every_check():
    df = load(RESULTS)
    assert len(df) >= 100
    assert df["implausible"].isna().all(), df.loc[df["implausible"].notna(), ["run_dir", "implausible"]]
    assert not df["tflops_mismatch"].any()


HOSTILE = ("\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x9b2J |col| <b>x</b>\nnew row\r " * 12)[:400]


def hostile_records(root: Path) -> Path:
    for mbs in (4, 8):
        rec = ok_record()
        rec["run"]["id"] = f"run-{mbs}"
        rec["config"]["model"]["name"] = HOSTILE
        rec["config"]["batch"]["micro_batch_size"] = mbs
        rec["config"]["tag"] = "\x1b[2J"
        put(root / f"mbs{mbs}", rec)
    err = json.loads((RECORDS / "v2-error" / "metrics.json").read_text())
    err["config"]["model"]["name"] = HOSTILE
    err["error"]["message"] = "\x1b[31mboom\x1b[0m | x\nforged line"
    put(root / "err", err)
    return root


def test_printable_escapes_every_control_sequence():
    assert printable("\x1b[31mred\x07\r\n\x9b\u202e") == "\\x1b[31mred\\x07\\r\\n\\x9b\\u202e"
    assert printable("gpt-1.3b ü") == "gpt-1.3b ü"
    # the Arabic letter mark (bidi), soft hyphen, no-break space, a tag character: invisible or reordering
    assert printable("a\u061cb\u00adc\u00a0d\U000e0041") == "a\\u061cb\\xadc\\xa0d\\U000e0041"
    assert printable(ValueError("x\ny")) == "x\\ny"  # any object, as str() writes it


def test_one_escaper_for_the_sweep_and_the_analysis():
    """analysis.sanitize re-exports flopsweep.text's escaper: log lines and tables escape alike."""
    from flopsweep import text

    assert printable is text.printable
    assert markdown_cell("a|b<i>") == "a\\|b&lt;i&gt;"


@pytest.mark.parametrize("fmt", ["table", "markdown", "html", "csv", "json"])
def test_a_400_character_model_name_with_escapes_reaches_no_output_raw(tmp_path, capsys, fmt):
    root = hostile_records(tmp_path / "runs")
    out_file = tmp_path / f"report.{fmt}"
    code, out, err = cli(capsys, root, "--format", fmt, "--output", out_file)
    text = out_file.read_text()
    assert code == 0 and ESC not in err
    if fmt in ("table", "markdown", "html"):
        assert ESC not in text and "\x9b" not in text and "\x07" not in text
        assert "\\x1b[31mred" in text
    if fmt == "markdown":
        table = [line for line in text.splitlines() if line.startswith("|")]
        assert len(table) == 2 + 3  # header, rule, three runs: no row added
        pipes = {line.replace("\\|", "").count("|") for line in table}
        assert len(pipes) == 1  # no column added


def test_hostile_names_in_plots_are_bounded_and_drawn(tmp_path):
    df = load(hostile_records(tmp_path / "runs"))
    figures, skipped = make_plots(df)
    assert "tflops_vs_micro_batch" in figures, skipped
    for fig in figures.values():
        width, height = fig.get_size_inches()
        assert width < 40 and height < 40
        texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
        assert all(ESC not in t and "\x9b" not in t for t in texts)
        assert all(len(line) <= 2 * MAX_LABEL + 10 for t in texts for line in t.splitlines())
    paths, _ = save_plots(df, tmp_path / "plots")
    assert all(p.stat().st_size > 0 for p in paths.values())


def test_the_record_keeps_its_text_only_the_outputs_escape_it(tmp_path):
    df = load(hostile_records(tmp_path / "runs"))
    assert set(df["model"]) == {HOSTILE}
    assert df["tag"].dropna().eq("\x1b[2J").all()


def test_the_global_batch_check_counts_data_parallel_ranks_not_tensor_parallel_ones() -> None:
    """Tensor- and pipeline-parallel ranks share a batch: a record whose ``system.parallel`` says
    ``dp_shard=2, tp=2`` on 4 ranks has a global batch of micro x accum x 2, and passes; the same
    figures read as pure data parallel over 4 ranks would not (records without ``system.parallel``
    are)."""
    rec = ok_record()
    world = rec["system"]["world_size"]
    rec["system"]["parallel"] = {"dp_replicate": 1, "dp_shard": world, "tp": 1, "pp": 1, "cp": 1}
    assert record_problems(rec) == []
    rec["system"]["parallel"] = {"dp_replicate": 1, "dp_shard": 1, "tp": world, "pp": 1, "cp": 1}
    problems = record_problems(rec)
    assert any(p.startswith("global_batch_size") for p in problems), problems
