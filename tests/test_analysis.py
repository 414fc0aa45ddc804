"""analysis/: loading, checks, comparisons, the CLI, plots, the HTML report and the notebook.

Fixture records live in tests/fixtures/ (written by ``python -m tests.fixtures.make_fixtures``
with the real record builder): ``records/NAME`` holds one case each, ``sweep/`` a small
H200-like sweep.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis import best, compare, load, pivot, select, summary
from analysis.__main__ import main
from analysis.load import COLUMNS, GIB, recompute_tflops
from analysis.plots import PlotSkipped, make_plots, save_plots
from analysis.query import AnalysisError, ColumnError
from analysis.schema import RecordError, read_record, upgrade_v0_to_v1

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDS = FIXTURES / "records"
SWEEP = FIXTURES / "sweep"
BROKEN = ("empty", "truncated", "future-version", "missing-key")


def case(name: str) -> Path:
    return RECORDS / name / "metrics.json"


def raw(name: str) -> dict:
    return json.loads(case(name).read_text())


def one(name: str) -> pd.Series:
    df = load(case(name))
    assert len(df) == 1
    return df.iloc[0]


# --- loading: current schema ------------------------------------------------------------------


def test_v1_ok_row_has_the_record_values_with_units_in_names():
    rec, r = raw("v1-ok"), one("v1-ok")
    m = rec["metrics"]
    assert (r.model, r.backend, r.precision, r.status) == ("gpt-1.3b", "fsdp", "bf16", "ok")
    assert (r.micro_batch_size, r.grad_accum, r.world_size, r.seq_len) == (8, 1, 2, 2048)
    assert r.tflops_per_device == m["tflops_per_device"]
    assert r.iteration_time_s_mean == m["iteration_time_s"]["mean"]
    assert r.peak_cuda_allocated_gib == pytest.approx(m["peak_cuda_allocated_bytes"] / GIB)
    assert r.peak_cuda_allocated_gib == pytest.approx(86.30, abs=0.01)
    assert r.run_id == "run-ok" and r.run_dir == str(RECORDS / "v1-ok")
    assert pd.isna(r.zero_stage)  # only meaningful for DeepSpeed
    assert r.schema_version == 1 and not r.tflops_mismatch and not r.duplicate_run_id


def test_columns_keep_the_original_names_and_order():
    original = [
        "model",
        "attention",
        "backend",
        "zero_stage",
        "precision",
        "micro_batch_size",
        "grad_accum",
        "seq_len",
        "activation_checkpointing",
        "compile",
        "world_size",
        "device_name",
        "status",
        "tflops_per_device",
        "model_tflops_per_device",
        "mfu",
        "hfu",
        "tokens_per_s",
        "iteration_time_s_median",
        "peak_cuda_allocated_gib",
        "peak_cuda_reserved_gib",
        "peak_host_rss_gib",
        "loss_first",
        "error",
        "run_id",
        "run_dir",
    ]
    assert COLUMNS[: len(original)] == original
    assert list(load(SWEEP).columns) == COLUMNS


@pytest.mark.parametrize(
    "name, status, phase",
    [("v1-oom", "oom", "warmup"), ("v1-error", "error", "measure"), ("v1-invalid", "invalid", "config")],
)
def test_failed_runs_keep_their_row_with_blank_metrics(name, status, phase):
    r = one(name)
    assert r.status == status and r.error_phase == phase
    assert r.error == raw(name)["error"]["message"]
    for col in (
        "tflops_per_device",
        "mfu",
        "tokens_per_s",
        "iteration_time_s_median",
        "peak_cuda_allocated_gib",
    ):
        assert math.isnan(r[col]), col  # blank, never 0
    assert not r.tflops_mismatch


def test_failed_run_metrics_are_blank_even_when_the_record_says_0(tmp_path):
    rec = raw("v1-oom")
    rec["metrics"].update(tflops_per_device=0.0, tokens_per_s=0.0, peak_cuda_allocated_bytes=0)
    (tmp_path / "metrics.json").write_text(json.dumps(rec))
    r = load(tmp_path).iloc[0]
    assert r.status == "oom"
    assert (
        math.isnan(r.tflops_per_device)
        and math.isnan(r.tokens_per_s)
        and math.isnan(r.peak_cuda_allocated_gib)
    )


def test_failed_runs_never_count_in_best_or_averages(tmp_path):
    fast_oom = raw("v1-oom")  # a bogus 9999 TFLOPs on a run that ran out of memory
    fast_oom["metrics"]["tflops_per_device"] = 9999.0
    shutil.copytree(RECORDS / "v1-ok", tmp_path / "ok")
    (tmp_path / "oom").mkdir()
    (tmp_path / "oom" / "metrics.json").write_text(json.dumps(fast_oom))
    df = load(tmp_path)
    assert best(df, by=["model"]).tflops_per_device.tolist() == [raw("v1-ok")["metrics"]["tflops_per_device"]]
    assert df.tflops_per_device.mean() == pytest.approx(raw("v1-ok")["metrics"]["tflops_per_device"])


# --- older schema ---------------------------------------------------------------------------------


def test_v0_record_is_upgraded_by_its_named_function():
    old = raw("v0-ok")
    assert old["schema_version"] == 0 and "run" not in old and "iteration_time_s_mean" in old["metrics"]
    new = upgrade_v0_to_v1(old)
    assert new["schema_version"] == 1 and new["run"]["id"] == "run-v0"
    assert new["metrics"]["iteration_time_s"]["mean"] == old["metrics"]["iteration_time_s_mean"]
    assert new["metrics"]["model_tflops_per_device"] is None  # v0 did not record it
    assert new["model"]["n_params"] == 1_315_819_520
    assert new["system"]["world_size"] == 2


def test_v0_rows_match_the_same_run_written_as_v1():
    v0 = one("v0-ok")
    assert v0.schema_version == 0
    assert (v0.model, v0.backend, v0.micro_batch_size, v0.world_size, v0.status) == (
        "gpt-1.3b",
        "fsdp",
        4,
        2,
        "ok",
    )
    assert v0.tflops_per_device == pytest.approx(463.0, abs=0.05)
    assert v0.tflops_per_device_recomputed == pytest.approx(v0.tflops_per_device, rel=1e-9)
    assert not v0.tflops_mismatch and math.isnan(v0.model_tflops_per_device)
    oom = one("v0-oom")
    assert (
        oom.status == "oom"
        and oom.error.startswith("CUDA out of memory")
        and math.isnan(oom.tflops_per_device)
    )


# --- unreadable files -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, reason",
    [
        ("empty", "empty file"),
        ("truncated", "invalid JSON (truncated?)"),
        ("future-version", "schema_version 2 is newer"),
        ("missing-key", "missing required key 'run'"),
    ],
)
def test_read_record_says_why_a_file_is_unreadable(name, reason):
    with pytest.raises(RecordError, match=re.escape(reason)):
        read_record(case(name))


def test_unreadable_files_are_reported_once_by_path_counted_and_skipped(caplog):
    paths = [case(n) for n in (*BROKEN, "v1-ok", "v1-oom")]
    with caplog.at_level(logging.WARNING, logger="analysis"):
        df = load([*paths, RECORDS / "empty"])  # the empty one twice: still reported once
    assert sorted(df.run_id) == ["run-ok", "run-oom"]
    assert sorted(df.attrs["unreadable"]) == sorted(str(case(n)) for n in BROKEN)
    for name in BROKEN:
        hits = [r for r in caplog.records if str(case(name)) in r.getMessage()]
        assert len(hits) == 1 and hits[0].levelno == logging.WARNING
    assert "4 unreadable record(s) skipped" in summary(df)


# --- flags ---------------------------------------------------------------------------------------------


def test_duplicate_run_id_is_flagged_on_both_rows_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="analysis"):
        df = load([RECORDS / "v1-ok", RECORDS / "duplicate", RECORDS / "v1-oom"])
    flagged = df.set_index("run_dir").duplicate_run_id
    assert flagged[str(RECORDS / "v1-ok")] and flagged[str(RECORDS / "duplicate")]
    assert not flagged[str(RECORDS / "v1-oom")]
    assert any("duplicate run id run-ok" in r.getMessage() for r in caplog.records)
    assert "2 rows share a run id" in summary(df)


def test_tflops_mismatch_above_1_percent_is_flagged(caplog):
    with caplog.at_level(logging.WARNING, logger="analysis"):
        r = one("mismatch")
    truth = raw("v1-ok")["metrics"]["tflops_per_device"]
    assert r.tflops_mismatch
    assert r.tflops_per_device == pytest.approx(truth * 1.05)
    assert r.tflops_per_device_recomputed == pytest.approx(truth, rel=1e-9)
    assert any("TFLOPs mismatch" in m and "mismatch" in m for m in caplog.messages)


def test_recompute_counts_checkpointing_as_f4_like_the_published_run():
    hw, model = recompute_tflops(raw("published"))  # 8 x 36 seqs, 8.32 s/iter, checkpointing on
    assert hw == pytest.approx(124.45, abs=0.05)
    assert model == pytest.approx(124.45 * 3 / 4, abs=0.05)
    r = one("published")
    assert r.activation_checkpointing and not r.tflops_mismatch


def test_recompute_needs_every_input():
    rec = raw("v1-ok")
    rec["system"]["world_size"] = None
    assert recompute_tflops(rec) == (None, None)


def test_effective_tflops_and_attention_density_when_present():
    df = load([case("effective"), case("v1-ok")]).set_index("run_id")
    eff = raw("effective")["metrics"]
    assert df.loc["run-effective", "effective_tflops_per_device"] == pytest.approx(
        eff["tflops_per_device"] / 4
    )
    assert df.loc["run-effective", "attention_density"] == 0.25
    # A dense record written before the key existed: effective TFLOPs equal its TFLOPs.
    assert df.loc["run-ok", "effective_tflops_per_device"] == df.loc["run-ok", "tflops_per_device"]


def test_old_dense_records_get_density_1_and_unlaunched_runs_a_blank_world_size(tmp_path):
    dense, sparse, never = raw("v1-ok"), raw("effective"), raw("v1-invalid")
    dense["config"]["attention"].pop("density", None)
    sparse["config"]["attention"] = {"name": "blocksparse", "layout": "local"}
    never["system"]["world_size"] = 0
    for name, rec in (("dense", dense), ("sparse", sparse), ("never", never)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(rec))
    df = load(tmp_path).set_index("run_id")
    assert df.loc[dense["run"]["id"], "attention_density"] == 1.0
    # A block-sparse record without its density stays blank: its density is not known.
    assert math.isnan(df.loc[sparse["run"]["id"], "attention_density"])
    assert pd.isna(df.loc[never["run"]["id"], "world_size"])


# --- paths ----------------------------------------------------------------------------------------------


def test_load_takes_directories_files_and_globs():
    by_dir = load(SWEEP)
    assert len(by_dir) == 38
    assert len(load(str(SWEEP / "1*" / "metrics.json"))) == 11  # 1, 10..19
    assert len(load([SWEEP / "0" / "metrics.json", SWEEP])) == 38  # a file reached twice counts once
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load(FIXTURES / "nowhere")


# --- best, compare, pivot ----------------------------------------------------------------------------------


def test_best_per_model_is_the_fastest_ok_run():
    top = best(load(SWEEP), by=["model"]).set_index("model")
    assert (
        top.loc["gpt-1.3b", "backend"] == "fsdp" and top.loc["gpt-1.3b", "micro_batch_size"] == 8
    )  # 16 is OOM
    assert top.loc["gpt-125m", "micro_batch_size"] == 16
    assert top.loc["gpt-1.3b", "tflops_per_device"] == pytest.approx(485.9, abs=0.05)
    low = best(load(SWEEP), by=["model"], metric="peak_cuda_allocated_gib").set_index("model")
    assert low.loc["gpt-1.3b", "micro_batch_size"] == 1  # memory: lowest is best


def test_compare_gives_speedup_over_the_matching_baseline_run():
    df = compare(load(SWEEP), baseline={"backend": "fsdp"})
    pick = select(df, {"model": "gpt-1.3b", "micro_batch_size": 4}).set_index("backend")
    assert pick.loc["fsdp", "speedup"] == 1.0
    expected = pick.loc["ddp", "tflops_per_device"] / pick.loc["fsdp", "tflops_per_device"]
    assert pick.loc["ddp", "speedup"] == pytest.approx(expected) and expected == pytest.approx(0.5 / 0.52)
    assert pick.loc["deepspeed", "speedup"] == pytest.approx(0.42 / 0.52)  # zero_stage ignored when matching
    oom = select(df, {"status": "oom"})
    assert oom.speedup.isna().all()


def test_compare_errors_name_the_problem():
    df = load(SWEEP)
    with pytest.raises(AnalysisError, match="no ok run matches the baseline backend=single"):
        compare(df, baseline={"backend": "single"})
    with pytest.raises(ColumnError, match="unknown column 'backnd'.*valid columns: model, attention"):
        compare(df, baseline={"backnd": "fsdp"})


def test_pivot_lays_out_ok_runs_and_marks_failed_cells():
    df = load(SWEEP)
    p = pivot(
        df[df.model == "gpt-1.3b"], index="micro_batch_size", columns="backend", values="tflops_per_device"
    )
    assert p.loc[8, "fsdp"] == pytest.approx(485.9, abs=0.05)
    assert 16 not in p.index  # only OOM there
    marked = pivot(
        df[df.model == "gpt-1.3b"], "micro_batch_size", "backend", "tflops_per_device", mark_failed=True
    )
    assert marked.loc[16, "ddp"] == "oom"
    assert marked.loc[8, "ddp"] == pytest.approx(467.2, abs=0.05)


# --- CLI --------------------------------------------------------------------------------------------------


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_table_fits_120_columns_and_has_a_footer(capsys):
    code, out, err = cli(capsys, RECORDS, SWEEP)
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 120
    assert "TFLOPs/dev" in out and "oom" in out and "invalid" in out
    assert "48 runs (40 ok, 6 oom, 1 error, 1 invalid); 4 unreadable record(s) skipped" in err


def test_cli_failed_runs_show_blank_not_zero(capsys):
    _, out, _ = cli(capsys, case("v1-oom"), "--columns", "model,status,tflops_per_device,tokens_per_s")
    row = out.splitlines()[1].split()
    assert row == ["gpt-1.3b", "oom"]


@pytest.mark.parametrize(
    "option, value, column",
    [
        ("--sort", "tflop", "tflop"),
        ("--filter", "backnd=fsdp", "backnd"),
        ("--columns", "model,nope", "nope"),
        ("--pivot", "model:backend:speed", "speed"),
    ],
)
def test_cli_unknown_column_names_it_and_lists_valid_ones(capsys, option, value, column):
    with pytest.raises(SystemExit) as exc:
        main([str(SWEEP), option, value])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert f"unknown column '{column}'" in err and "valid columns: model, attention, backend" in err
    assert "Traceback" not in err


def test_cli_bad_option_values_exit_2_with_a_message(capsys):
    for args, msg in (
        [["--filter", "backend"], "expected KEY=VALUE"],
        [["--pivot", "model:backend"], "expected INDEX:COLUMNS:VALUES"],
        [["--filter", "backend=nope"], "values present: backend: ddp, deepspeed, fsdp"],
    ):
        with pytest.raises(SystemExit) as exc:
            main([str(SWEEP), *args])
        assert exc.value.code == 2 and msg in capsys.readouterr().err


def test_cli_filter_sort_and_csv(capsys):
    _, out, _ = cli(
        capsys,
        SWEEP,
        "--filter",
        "model=gpt-1.3b",
        "--filter",
        "backend=ddp,fsdp",
        "--sort",
        "tokens_per_s",
        "--format",
        "csv",
    )
    df = pd.read_csv(pd.io.common.StringIO(out))
    assert set(df.backend) == {"ddp", "fsdp"} and set(df.model) == {"gpt-1.3b"} and len(df) == 10
    ok = df[df.status == "ok"]
    assert ok.tokens_per_s.is_monotonic_decreasing  # metrics sort best first
    assert df.tail(2).status.tolist() == ["oom", "oom"] and df.tail(2).tflops_per_device.isna().all()
    _, out, _ = cli(
        capsys, SWEEP, "--filter", "model=gpt-1.3b", "--sort", "micro_batch_size:desc", "--format", "json"
    )
    assert [r["micro_batch_size"] for r in json.loads(out)][:3] == [16, 16, 16]


def test_cli_best_by_ranks_on_effective_tflops_unless_told(capsys, tmp_path):
    sparse = raw("effective")  # density 0.25: more dense-convention TFLOPs, fewer effective
    sparse["metrics"].update(tflops_per_device=600.0, effective_tflops_per_device=400.0)
    (tmp_path / "sparse").mkdir()
    (tmp_path / "sparse" / "metrics.json").write_text(json.dumps(sparse))
    shutil.copytree(case("v1-ok").parent, tmp_path / "dense")  # 485.9 TFLOPs, dense
    _, out, _ = cli(capsys, str(tmp_path), "--best-by", "model", "--format", "json")
    assert [r["run_id"] for r in json.loads(out)] == ["run-ok"]
    _, out, _ = cli(
        capsys, str(tmp_path), "--best-by", "model", "--metric", "tflops_per_device", "--format", "json"
    )
    assert [r["run_id"] for r in json.loads(out)] == ["run-effective"]


def test_cli_best_by_baseline_and_pivot(capsys):
    _, out, _ = cli(capsys, SWEEP, "--best-by", "model", "--format", "json")
    rows = {r["model"]: r for r in json.loads(out)}
    assert rows["gpt-1.3b"]["micro_batch_size"] == 8 and rows["gpt-1.3b"]["backend"] == "fsdp"
    _, out, _ = cli(
        capsys, SWEEP, "--baseline", "backend=fsdp", "--filter", "model=gpt-125m", "--sort", "speedup"
    )
    assert "speedup" in out and "1.00x" in out and "0.96x" in out
    _, out, _ = cli(
        capsys, SWEEP, "--filter", "model=gpt-1.3b", "--pivot", "micro_batch_size:backend:tflops_per_device"
    )
    lines = out.splitlines()
    assert lines[0].split() == ["micro_batch_size", "\\", "backend", "ddp", "deepspeed", "fsdp"]
    assert lines[-1].split() == ["16", "oom", "oom", "oom"]


def test_cli_markdown_shows_effective_tflops_when_present(capsys):
    _, out, _ = cli(capsys, case("effective"), case("v1-ok"), "--format", "markdown")
    assert "| eff_TFLOPs" in out and "115.8" in out


def test_cli_no_records_exits_1(capsys, tmp_path):
    code, _, err = cli(capsys, tmp_path)
    assert code == 1 and "no readable metrics.json" in err


# --- plots and HTML -----------------------------------------------------------------------------------------


def image_shape(path: Path) -> tuple[int, ...]:
    import matplotlib.image

    return matplotlib.image.imread(path).shape


def test_plots_of_the_sweep_are_pngs_of_reasonable_size(tmp_path):
    paths, skipped = save_plots(load(SWEEP), tmp_path)
    assert skipped == {}
    assert set(paths) == {"tflops_vs_micro_batch", "memory_vs_micro_batch", "tokens_vs_seq_len"}
    for path in paths.values():
        h, w, _ = image_shape(path)
        assert 300 <= h <= 2000 and 400 <= w <= 3000, path


def test_plots_are_skipped_with_a_reason_when_the_data_cannot_support_them():
    figures, skipped = make_plots(load([case("v1-ok"), case("v1-oom")]))
    assert "tflops_vs_micro_batch" in figures
    assert "does not vary seq_len" in skipped["tokens_vs_seq_len"]
    cpu = load(case("v1-ok"))
    cpu["peak_cuda_allocated_gib"] = float("nan")
    assert "no run recorded peak GPU memory" in make_plots(cpu)[1]["memory_vs_micro_batch"]
    with pytest.raises(PlotSkipped):
        from analysis.plots import plot_tflops_vs_micro_batch

        plot_tflops_vs_micro_batch(load(case("v1-oom")))


def test_failed_runs_are_marked_on_the_plot():
    fig = make_plots(load(SWEEP))[0]["tflops_vs_micro_batch"]
    ax = next(a for a in fig.axes if a.get_title() == "gpt-1.3b")
    crosses = [ln for ln in ax.lines if ln.get_marker() == "x"]
    assert len(crosses) == 3 and {ln.get_xdata()[0] for ln in crosses} == {16.0}
    assert [t.get_text() for t in ax.texts] == ["oom"] * 3
    assert ax.get_xlabel() == "micro batch size (sequences per rank)"
    assert "TFLOPs per device" in ax.get_ylabel()


def test_html_report_is_self_contained(capsys, tmp_path):
    report = tmp_path / "report.html"
    code, _, _ = cli(capsys, SWEEP, RECORDS, "--format", "html", "--output", report)
    text = report.read_text()
    assert code == 0 and text.startswith("<!DOCTYPE html>")
    assert text.count('src="data:image/png;base64,') == 3
    assert "<th>TFLOPs/dev</th>" in text and '<tr class="failed">' in text
    assert "Unreadable, skipped: " + str(case("truncated")) in text
    assert not re.search(r'(src|href)="(?!data:)', text)  # nothing to fetch from elsewhere


# --- notebook ---------------------------------------------------------------------------------------------


def test_results_notebook_runs_headless_on_the_fixture_sweep(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("FLOPSWEEP_RESULTS", str(SWEEP))
    nb = nbformat.read(ROOT / "notebooks" / "results.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = json.dumps([o.get("text", "") for o in outputs]) + json.dumps([o.get("data", {}) for o in outputs])
    assert "38 runs (34 ok, 4 oom)" in text and "image/png" in text


# --- end to end -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cpu_sweep_then_html_report_and_plots(tmp_path):
    sweep = tmp_path / "sweep"
    base = [
        sys.executable,
        "run.py",
        "-m",
        "device=cpu",
        "nproc_per_node=2",
        "steps.warmup=1",
        "steps.measure=2",
    ]
    runs = [
        [*base, "backend=ddp,fsdp", "batch.micro_batch_size=2,4", f"hydra.sweep.dir={sweep}/ok"],
        [*base, "backend=fsdp", "precision=fp16", f"hydra.sweep.dir={sweep}/invalid"],
    ]  # fp16 on CPU: invalid
    for cmd in runs:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    report, plots = tmp_path / "report.html", tmp_path / "plots"
    analysis = [sys.executable, "-m", "analysis", str(sweep)]
    done = subprocess.run(
        [*analysis, "--format", "html", "--output", str(report)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "5 runs (4 ok, 1 invalid)" in done.stderr
    done = subprocess.run(
        [*analysis, "--plot", str(plots)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "skipped plot memory_vs_micro_batch: no run recorded peak GPU memory" in done.stderr
    h, w, _ = image_shape(plots / "tflops_vs_micro_batch.png")
    assert h >= 300 and w >= 400
    text = report.read_text()
    assert "<table>" in text and "<td>gpt-tiny</td>" in text and "<td>invalid</td>" in text
    assert text.count('src="data:image/png;base64,') == 1  # TFLOPs; no GPU memory, one seq_len
