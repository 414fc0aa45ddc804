"""analysis/: loading, upgrades, checks, comparisons, the CLI, plots and the HTML report (the notebook:
tests/unit/test_notebook.py).

Fixture records live in tests/fixtures/ (written by ``python -m tests.fixtures.make_fixtures``
with the real record builder): ``records/NAME`` holds one case each (v2 records, the same runs
in the v1 and v0 layouts, broken files), ``sweep/`` a small H200-like v2 sweep. Expected values
come from the records themselves, :data:`flopsweep.record.METRIC_SPECS` and the model families
(:mod:`flopsweep.models`), not from hand-copied numbers or column lists.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis import best, compare, load, pivot, select, summary
from analysis.__main__ import main
from analysis.display import SHORT
from analysis.load import (
    COLUMNS,
    DESCRIPTIONS,
    METRIC_COLUMNS,
    METRIC_FIELDS,
    NOT_COLUMNS,
    RANK_METRIC,
    TABLE_COLUMNS,
    recompute_tflops,
)
from analysis.plots import MAX_PANELS, PLOTS, PlotSkipped, make_plots, save_plots
from analysis.query import HIGHER_IS_BETTER, LOWER_IS_BETTER, AnalysisError, ColumnError
from analysis.schema import RecordError, read_record, upgrade_v0_to_v1, upgrade_v1_to_v2
from flopsweep.record import METRIC_KEYS, METRIC_SPECS, SCHEMA_VERSION
from flopsweep.safe_read import MAX_RECORD_BYTES
from flopsweep.text import plural

ROOT = Path(__file__).resolve().parents[2]


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


RECORDS = FIXTURES / "records"


SWEEP = FIXTURES / "sweep"


H200 = ROOT / "benchmarks" / "results" / "h200"


BROKEN = ("empty", "truncated", "future-version", "missing-key")


def case(name: str) -> Path:
    return RECORDS / name / "metrics.json"


def raw(name: str) -> dict:
    return json.loads(case(name).read_text())


def one(name: str) -> pd.Series:
    df = load(case(name))
    assert len(df) == 1
    return df.iloc[0]


def put(directory: Path, rec: dict | str) -> Path:
    """Write ``rec`` (a record or raw text) as ``directory/metrics.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "metrics.json"
    path.write_text(rec if isinstance(rec, str) else json.dumps(rec))
    return path


def spec_value(metrics: dict, spec) -> object:
    value = metrics
    for key in spec.path or (spec.key,):
        value = value.get(key) if isinstance(value, dict) else None
    return value / spec.scale if spec.scale and value is not None else value


def gpt2_flops(cfg: dict, world: int) -> tuple[float, float]:
    """Model and hardware FLOPs of a GPT-2 config section from the model family itself."""
    from analysis.schema import checkpointing_name
    from flopsweep.config import CheckpointingConfig
    from flopsweep.metrics import recompute_mode
    from flopsweep.models import gpt2

    m = gpt2.GPT2Config(**{k: v for k, v in cfg["model"].items() if k != "arch"})
    tokens = cfg["batch"]["micro_batch_size"] * cfg["batch"].get("grad_accum", 1) * world * m.seq_len
    density = cfg["attention"].get("density") or 1.0
    # an old record's bool read as the policy it means (analysis.schema.checkpointing_name)
    ac = CheckpointingConfig(name=checkpointing_name(cfg.get("activation_checkpointing")) or "none")
    mode = recompute_mode(SimpleNamespace(**{**cfg, "activation_checkpointing": ac}))
    return gpt2.model_flops(m, tokens, density), gpt2.hardware_flops(m, tokens, density, mode)


"""The flopsweep modules the analysis may import (the metric and set-up column declarations and
the schemas they derive from): none imports torch."""


def test_metric_columns_headers_and_directions_come_from_the_specs():
    names = [s.name for s in METRIC_SPECS if s.key not in NOT_COLUMNS]
    assert METRIC_COLUMNS == names and [s.name for s in METRIC_FIELDS] == names
    assert set(METRIC_COLUMNS) <= set(COLUMNS) and "effective_tflops_per_device" not in COLUMNS
    for spec in METRIC_FIELDS:
        assert SHORT[spec.name] == spec.header
        assert (spec.name in HIGHER_IS_BETTER) == (spec.better == "higher")
        assert (spec.name in LOWER_IS_BETTER) == (spec.better == "lower")
    assert RANK_METRIC == "model_tflops_per_device" and RANK_METRIC in HIGHER_IS_BETTER
    assert "iteration_time_s_mean" in TABLE_COLUMNS and "iteration_time_s_median" not in TABLE_COLUMNS
    assert list(load(SWEEP).columns) == COLUMNS


def test_v2_ok_row_has_every_spec_value_with_units_in_names():
    rec, r = raw("v2-ok"), one("v2-ok")
    assert rec["schema_version"] == SCHEMA_VERSION
    for spec in METRIC_FIELDS:
        expected = spec_value(rec["metrics"], spec)
        if isinstance(expected, float):
            assert r[spec.name] == pytest.approx(expected, rel=1e-12), spec.name
        elif isinstance(expected, list):
            assert list(r[spec.name]) == expected, spec.name
        elif expected is None:
            assert pd.isna(r[spec.name]), spec.name
        else:
            assert r[spec.name] == expected, spec.name
    cfg = rec["config"]
    assert (r.model, r.arch, r.backend, r.precision, r.status) == (
        cfg["model"]["name"],
        "gpt2",
        cfg["backend"]["name"],
        cfg["precision"]["name"],
        "ok",
    )
    assert (
        r.world_size == rec["system"]["world_size"] and r.micro_batch_size == cfg["batch"]["micro_batch_size"]
    )
    assert r.run_id == "run-ok" and r.run_dir == str(RECORDS / "v2-ok")
    assert pd.isna(r.zero_stage)  # only meaningful for DeepSpeed
    assert r.schema_version == 2 and not r.tflops_mismatch and not r.duplicate_run_id
    assert r.model_tflops_per_device_recomputed == pytest.approx(r.model_tflops_per_device, rel=1e-12)


@pytest.mark.parametrize(
    "name, status, phase",
    [("v2-oom", "oom", "warmup"), ("v2-error", "error", "measure"), ("v2-invalid", "invalid", "config")],
)
def test_failed_runs_keep_their_row_with_blank_metrics(name, status, phase):
    r = one(name)
    assert r.status == status and r.error_phase == phase
    assert r.error == raw(name)["error"]["message"]
    for col in METRIC_COLUMNS:
        assert r[col] is None or pd.isna(r[col]), col  # blank, never 0
    assert not r.tflops_mismatch


def test_failed_run_metrics_are_blank_even_when_the_record_says_0(tmp_path):
    rec = raw("v2-oom")
    rec["metrics"].update(model_tflops_per_device=0.0, tokens_per_s=0.0, peak_cuda_allocated_bytes=0)
    put(tmp_path, rec)
    r = load(tmp_path).iloc[0]
    assert r.status == "oom"
    assert math.isnan(r.model_tflops_per_device) and math.isnan(r.tokens_per_s)
    assert math.isnan(r.peak_cuda_allocated_gib)


def test_failed_runs_never_count_in_best_or_averages(tmp_path):
    fast_oom = raw("v2-oom")  # a bogus 9999 TFLOPs on a run that ran out of memory
    fast_oom["metrics"]["model_tflops_per_device"] = 9999.0
    shutil.copytree(RECORDS / "v2-ok", tmp_path / "ok")
    put(tmp_path / "oom", fast_oom)
    df = load(tmp_path)
    truth = raw("v2-ok")["metrics"]["model_tflops_per_device"]
    assert best(df, by=["model"]).model_tflops_per_device.tolist() == [truth]
    assert df.model_tflops_per_device.mean() == pytest.approx(truth)


def test_llama_record_has_a_blank_eq3_figure_and_is_ranked_on_model_tflops():
    r = one("llama")
    assert r.arch == "llama" and pd.isna(r.tflops_per_device)
    assert r.model_tflops_per_device == pytest.approx(raw("llama")["metrics"]["model_tflops_per_device"])
    assert best(load(case("llama"))).run_id.tolist() == ["run-llama"]


def test_v1_record_maps_to_the_v2_figures_of_the_same_run():
    """v1-ok and v2-ok are one run (fsdp, no checkpointing): the upgrade gives the v2 builder's numbers."""
    old, new = raw("v1-ok"), raw("v2-ok")
    assert old["schema_version"] == 1 and "effective_tflops_per_device" in old["metrics"]
    up = upgrade_v1_to_v2(old)
    m, want = up["metrics"], new["metrics"]
    assert up["schema_version"] == 2 and up["warnings"] == []
    assert up["model"]["arch"] == up["config"]["model"]["arch"] == "gpt2"
    assert set(m) == set(METRIC_KEYS)
    for key in (
        "model_flops_per_iteration",
        "hardware_flops_per_iteration",
        "model_tflops_per_device",
        "hardware_tflops_per_device",
        "mfu",
        "hfu",
        "global_batch_size",
        "tokens_per_step",
    ):
        assert m[key] == pytest.approx(want[key], rel=1e-12), key
    assert m["tflops_per_device"] == old["metrics"]["tflops_per_device"]  # eq. 3 kept as recorded
    assert m["model_tflops_per_device"] != pytest.approx(old["metrics"]["model_tflops_per_device"], rel=1e-3)
    assert m["iteration_time_s"]["cv"] == pytest.approx(want["iteration_time_s"]["cv"])
    assert m["recompute"] == "none"
    for key in ("measured_matmul_tflops", "matmul_fraction", "loss_finite", "warmup_steps", "mfu_fp8"):
        assert m[key] is None, key


@pytest.mark.parametrize("name, mode", [("published", "early_stop"), ("v1-compiled", "early_stop")])
def test_v1_checkpointed_records_count_the_recompute_that_runs(name, mode):
    """The v1 -> v2 arithmetic equals flopsweep.models.gpt2 for each recompute mode."""
    old = raw(name)
    assert old["config"]["activation_checkpointing"]
    up = upgrade_v1_to_v2(old)
    m, world, t = up["metrics"], old["system"]["world_size"], old["metrics"]["iteration_time_s"]["mean"]
    model, hardware = gpt2_flops(old["config"], world)
    assert m["recompute"] == mode
    assert m["model_flops_per_iteration"] == pytest.approx(model, rel=1e-12)
    assert m["hardware_flops_per_iteration"] == pytest.approx(hardware, rel=1e-12)
    assert hardware > model
    assert m["hfu"] == pytest.approx(hardware / (t * world * 1e12) / m["peak_tflops"], rel=1e-12)
    assert m["mfu"] == pytest.approx(model / (t * world * 1e12) / m["peak_tflops"], rel=1e-12)
    assert m["hfu"] != pytest.approx(old["metrics"]["hfu"], rel=1e-3)
    assert m["tflops_per_device"] == old["metrics"]["tflops_per_device"]


def test_published_v1_run_keeps_its_eq3_figure():
    r = one("published")  # 8 x 36 seqs, 8.32 s/iter, checkpointing on
    assert r.tflops_per_device == pytest.approx(124.45, abs=0.05)
    assert r.schema_version == 1 and r.activation_checkpointing == "full" and not r.tflops_mismatch
    assert r.hfu < raw("published")["metrics"]["hfu"]  # early_stop recomputes less than f = 4 said


def test_v1_block_sparse_record_counts_attention_at_its_density():
    up, v2 = one("v1-blocksparse"), one("blocksparse")
    density = raw("blocksparse")["config"]["attention"]["density"]
    assert up.attention_density == v2.attention_density == density and 0 < density < 0.5
    for col in ("model_flops_per_iteration", "model_tflops_per_device", "mfu", "hfu"):
        assert up[col] == pytest.approx(v2[col], rel=1e-12), col
    assert up.mfu < raw("v1-blocksparse")["metrics"]["mfu"]  # v1 counted the full square


def test_v1_dense_records_get_density_1_and_unlaunched_runs_a_blank_world_size(tmp_path):
    dense, sparse = raw("v1-ok"), raw("v1-blocksparse")
    dense["config"]["attention"].pop("density", None)
    sparse["config"]["attention"].pop("density", None)
    put(tmp_path / "dense", dense)
    put(tmp_path / "sparse", sparse)
    shutil.copytree(RECORDS / "v1-invalid", tmp_path / "never")
    df = load(tmp_path).set_index("run_id")
    assert raw("v1-invalid")["system"]["world_size"] == 0  # what v1 wrote
    assert df.loc["run-v1", "attention_density"] == 1.0
    assert df.loc["run-v1", "model_tflops_per_device"] == pytest.approx(one("v2-ok").model_tflops_per_device)
    # A block-sparse record without its density: density and FLOPs stay blank, not guessed.
    assert math.isnan(df.loc["run-v1-sparse", "attention_density"])
    assert math.isnan(df.loc["run-v1-sparse", "model_tflops_per_device"])
    assert pd.isna(df.loc["run-v1-invalid", "world_size"])


def test_v0_record_is_upgraded_by_its_named_functions():
    old = raw("v0-ok")
    assert old["schema_version"] == 0 and "run" not in old and "iteration_time_s_mean" in old["metrics"]
    new = upgrade_v0_to_v1(old)
    assert new["schema_version"] == 1 and new["run"]["id"] == "run-v0"
    assert new["metrics"]["iteration_time_s"]["mean"] == old["metrics"]["iteration_time_s_mean"]
    assert new["metrics"]["model_tflops_per_device"] is None  # v0 did not record it
    from flopsweep.models import gpt2

    shape = {k: v for k, v in old["config"]["model"].items() if k != "arch"}
    assert new["model"]["n_params"] == gpt2.n_params(gpt2.GPT2Config(**shape)) == 1_315_819_520
    assert new["system"]["world_size"] == 2


def test_v0_rows_match_the_same_run_written_as_v2():
    v0 = one("v0-ok")
    same = select(load(SWEEP), {"model": "gpt-1.3b", "backend": "fsdp", "micro_batch_size": 4}).iloc[0]
    assert v0.schema_version == 0 and same.schema_version == 2
    for col in ("model", "backend", "micro_batch_size", "world_size", "status"):
        assert v0[col] == same[col], col
    for col in ("model_flops_per_iteration", "hardware_flops_per_iteration", "model_tflops_per_device"):
        assert v0[col] == pytest.approx(same[col], rel=1e-12), col
    assert v0.tflops_per_device == pytest.approx(same.tflops_per_device, rel=1e-12)
    assert not v0.tflops_mismatch and pd.isna(v0.mfu)  # v0 recorded no peak
    oom = one("v0-oom")
    assert oom.status == "oom" and oom.error.startswith("CUDA out of memory")
    assert math.isnan(oom.model_tflops_per_device)


@pytest.mark.parametrize(
    "name, reason",
    [
        ("empty", "empty file"),
        ("truncated", "invalid JSON (truncated?)"),
        ("future-version", f"schema_version {SCHEMA_VERSION + 1} is newer"),
        ("missing-key", "missing required key 'run'"),
    ],
)
def test_read_record_says_why_a_file_is_unreadable(name, reason):
    with pytest.raises(RecordError, match=re.escape(reason)):
        read_record(case(name))


def test_unreadable_files_are_reported_once_by_path_counted_and_skipped(caplog):
    paths = [case(n) for n in (*BROKEN, "v2-ok", "v2-oom")]
    with caplog.at_level(logging.WARNING, logger="analysis"):
        df = load([*paths, RECORDS / "empty"])  # the empty one twice: still reported once
    assert sorted(df.run_id) == ["run-ok", "run-oom"]
    assert sorted(df.attrs["unreadable"]) == sorted(str(case(n)) for n in BROKEN)
    for name in BROKEN:
        hits = [r for r in caplog.records if str(case(name)) in r.getMessage()]
        assert len(hits) == 1 and hits[0].levelno == logging.WARNING
    assert "4 unreadable records skipped" in summary(df)


def hostile_records() -> dict[str, tuple[str | dict, str]]:
    """Name -> (file content, words of the reason it is skipped)."""
    ok = raw("v2-ok")
    deep = json.dumps(ok)[:-1] + ', "x": ' + "[" * 10_000 + "]" * 10_000 + "}"
    digits = json.dumps(ok).replace('"tokens_per_step": 32768', '"tokens_per_step": ' + "9" * 5000)
    huge = json.loads(json.dumps(ok))
    huge["metrics"]["model_flops_per_iteration"] = 10**400
    overflow = json.loads(json.dumps(ok))
    overflow["metrics"]["model_flops_per_iteration"] = 1e300
    overflow["metrics"]["iteration_time_s"]["mean"] = 1e-300
    v1_overflow = raw("v1-ok")
    v1_overflow["config"]["model"]["n_embd"] = 10**200
    dict_name = json.loads(json.dumps(ok))
    dict_name["config"]["model"]["name"] = {"name": "gpt-1.3b"}
    return {
        "oversized": (" " * (MAX_RECORD_BYTES + 1), "byte limit"),
        "deep": (deep, "nested too deep"),
        "digits": (digits, "a whole number of 5,000 digits (a record holds none over 1000)"),
        "huge-int": (huge, "too large for a float"),
        "overflow": (overflow, "overflow"),
        "v1-overflow": (v1_overflow, "overflow"),
        "dict-name": (dict_name, "config.model.name is a JSON object, not a string"),
    }


def test_hostile_records_are_skipped_with_a_reason_each(tmp_path, capsys):
    cases = hostile_records()
    assert "9" * 5000 in cases["digits"][0]
    for name, (content, _) in cases.items():
        put(tmp_path / name, content)
    shutil.copytree(RECORDS / "v2-ok", tmp_path / "good")
    df = load(tmp_path)
    assert df.run_id.tolist() == ["run-ok"]
    reasons = df.attrs["unreadable"]
    for name, (_, why) in cases.items():
        assert why in reasons[str(tmp_path / name / "metrics.json")], (name, reasons)
    for fmt in ("table", "csv", "json", "markdown", "html"):
        code, _, err = cli(capsys, tmp_path, "--format", fmt)
        assert code == 0 and f"{len(cases)} unreadable records skipped" in err and "Traceback" not in err


MATHTEXT = r"$\undefinedmacro{$"


def test_a_mathtext_model_name_is_drawn_and_shown_literally(tmp_path, capsys):
    for mbs, name in ((8, "v2-ok"), (4, "blocksparse")):
        rec = raw(name)
        rec["config"]["model"]["name"] = MATHTEXT
        rec["run"]["id"] = f"math-{mbs}"
        put(tmp_path / "runs" / str(mbs), rec)
    report, plots = tmp_path / "report.html", tmp_path / "plots"
    code, _, err = cli(capsys, tmp_path / "runs", "--format", "html", "--output", report, "--plot", plots)
    assert code == 0, err
    text = report.read_text()
    assert f"<td>{MATHTEXT}</td>" in text and text.count('src="data:image/png;base64,') == 2
    assert (plots / "tflops_vs_micro_batch.png").stat().st_size > 1000
    fig = make_plots(load(tmp_path / "runs"))[0]["tflops_vs_micro_batch"]
    assert fig.axes[0].get_title() == MATHTEXT.replace("$", r"\$")


def test_a_non_utf8_directory_name_is_escaped_in_every_output(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths: short enough for a table cell
    odd = Path(os.fsdecode(b"runs-\xff"))
    shutil.copytree(RECORDS / "v2-ok", odd / "ok")
    put(odd / "bad", "")
    out = odd / "report"
    for fmt in ("html", "csv", "markdown", "json"):
        shown = ["--columns", "model,run_dir"] if fmt == "markdown" else []
        code, stdout, err = cli(capsys, odd, "--format", fmt, "--output", out.with_suffix("." + fmt), *shown)
        assert code == 0, err
        written = out.with_suffix("." + fmt).read_bytes().decode("utf-8")  # valid UTF-8
        if fmt == "json":
            written = json.loads(written)[0]["run_dir"]
        assert "runs-\\xff" in written, fmt
    code, stdout, _ = cli(capsys, odd, "--columns", "model,run_dir")
    assert code == 0 and "runs-\\xff" in stdout


def test_csv_defuses_formula_cells_and_only_csv(tmp_path, capsys):
    rec = raw("v2-ok")
    rec["config"]["tag"] = "=HYPERLINK(1)"
    rec["config"]["model"]["name"] = "@gpt"
    rec["error"] = None
    rec["config"]["precision"]["name"] = "+bf16"
    rec["config"]["backend"]["name"] = "-fsdp"
    put(tmp_path / "run", rec)
    _, out, _ = cli(
        capsys, tmp_path, "--format", "csv", "--columns", "model,backend,precision,tag,loss_first"
    )
    df = pd.read_csv(pd.io.common.StringIO(out))
    assert df.iloc[0].tolist() == [
        "'@gpt",
        "'-fsdp",
        "'+bf16",
        "'=HYPERLINK(1)",
        rec["metrics"]["loss_first"],
    ]
    _, out, _ = cli(capsys, tmp_path, "--format", "json", "--columns", "model,tag")
    assert json.loads(out) == [{"model": "@gpt", "tag": "=HYPERLINK(1)"}]


def test_duplicate_run_id_is_flagged_on_both_rows_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="analysis"):
        df = load([RECORDS / "v2-ok", RECORDS / "duplicate", RECORDS / "v2-oom"])
    flagged = df.set_index("run_dir").duplicate_run_id
    assert flagged[str(RECORDS / "v2-ok")] and flagged[str(RECORDS / "duplicate")]
    assert not flagged[str(RECORDS / "v2-oom")]
    assert any("duplicate run id run-ok" in r.getMessage() for r in caplog.records)
    assert "2 rows share a run id" in summary(df)


def test_tflops_recomputed_from_the_stored_flops():
    rec = raw("v2-ok")
    m = rec["metrics"]
    expected = m["model_flops_per_iteration"] / (
        m["iteration_time_s"]["mean"] * rec["system"]["world_size"] * 1e12
    )
    assert recompute_tflops(rec) == pytest.approx(expected, rel=1e-15)
    assert recompute_tflops(rec) == pytest.approx(m["model_tflops_per_device"], rel=1e-9)
    rec["system"]["world_size"] = None
    assert recompute_tflops(rec) is None


def test_tflops_mismatch_above_1_percent_is_flagged_and_left_out_of_rankings(caplog):
    with caplog.at_level(logging.WARNING, logger="analysis"):
        df = load([case("mismatch"), case("v2-ok"), case("v2-oom")])
    r = df.set_index("run_id").loc["run-mismatch"]
    truth = raw("v2-ok")["metrics"]["model_tflops_per_device"]
    assert r.tflops_mismatch and r.model_tflops_per_device == pytest.approx(truth * 1.05)
    assert r.model_tflops_per_device_recomputed == pytest.approx(truth, rel=1e-9)
    assert any("TFLOPs mismatch" in m for m in caplog.messages)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="analysis"):
        top = best(df, by=["model"])
    assert top.run_id.tolist() == ["run-ok"]  # the higher, mismatched figure is not ranked
    assert any("best: 1 run left out" in m for m in caplog.messages)
    assert compare(df, {"backend": "fsdp"}).set_index("run_id").speedup.isna().to_dict() == {
        "run-mismatch": True,
        "run-ok": False,
        "run-oom": True,
    }
    assert pivot(df, "model", "backend", RANK_METRIC).loc["gpt-1.3b", "fsdp"] == pytest.approx(truth)
    from analysis import table

    assert table(df, columns=["run_id"]).run_id.tolist() == ["run-ok", "run-mismatch", "run-oom"]


def test_cli_says_which_runs_were_left_out_of_rankings(capsys):
    code, out, err = cli(capsys, case("mismatch"), case("v2-ok"), "--best-by", "model", "--format", "json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == ["run-ok"]
    assert "Note: 1 ok run left out of rankings" in err and str(RECORDS / "mismatch") in err


def test_load_takes_directories_files_and_globs():
    n = len(list(SWEEP.rglob("metrics.json")))
    assert len(load(SWEEP)) == n == 38
    assert len(load(str(SWEEP / "1*" / "metrics.json"))) == 11  # 1, 10..19
    assert len(load([SWEEP / "0" / "metrics.json", SWEEP])) == n  # a file reached twice counts once
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load(FIXTURES / "nowhere")


def sweep_value(model: str, backend: str, mbs: int, column: str = RANK_METRIC) -> float:
    df = load(SWEEP)
    return select(df, {"model": model, "backend": backend, "micro_batch_size": mbs}).iloc[0][column]


def test_best_per_model_is_the_fastest_ok_run_by_model_tflops():
    df = load(SWEEP)
    top = best(df, by=["model"]).set_index("model")
    assert (
        top.loc["gpt-1.3b", "backend"] == "fsdp" and top.loc["gpt-1.3b", "micro_batch_size"] == 8
    )  # 16: OOM
    assert top.loc["gpt-125m", "micro_batch_size"] == 16
    assert top.loc["gpt-1.3b", RANK_METRIC] == sweep_value("gpt-1.3b", "fsdp", 8)
    assert top.loc["gpt-1.3b", RANK_METRIC] == df.loc[df.model.eq("gpt-1.3b"), RANK_METRIC].max()
    low = best(df, by=["model"], metric="peak_cuda_allocated_gib").set_index("model")
    assert low.loc["gpt-1.3b", "micro_batch_size"] == 1  # memory: lowest is best


def test_compare_gives_speedup_over_the_matching_baseline_run():
    df = compare(load(SWEEP), baseline={"backend": "fsdp"})
    pick = select(df, {"model": "gpt-1.3b", "micro_batch_size": 4}).set_index("backend")
    assert pick.loc["fsdp", "speedup"] == 1.0
    expected = pick.loc["ddp", RANK_METRIC] / pick.loc["fsdp", RANK_METRIC]
    assert pick.loc["ddp", "speedup"] == pytest.approx(expected) and expected == pytest.approx(0.5 / 0.52)
    assert pick.loc["deepspeed", "speedup"] == pytest.approx(0.42 / 0.52)  # zero_stage ignored when matching
    assert select(df, {"status": "oom"}).speedup.isna().all()


def test_compare_errors_name_the_problem():
    df = load(SWEEP)
    with pytest.raises(AnalysisError, match="no ok run matches the baseline backend=single"):
        compare(df, baseline={"backend": "single"})
    with pytest.raises(ColumnError, match="unknown column 'backnd'.*valid columns: model, arch, attention"):
        compare(df, baseline={"backnd": "fsdp"})
    with pytest.raises(ColumnError, match="unknown column 'backnd' in .*; did you mean 'backend'\\?; valid"):
        compare(df, baseline={"backnd": "fsdp"})
    with pytest.raises(ColumnError, match="unknown column 'BACKEND' in .*; did you mean 'backend'\\?; valid"):
        compare(df, baseline={"BACKEND": "fsdp"})  # session 26: names are matched without case


def test_pivot_lays_out_ok_runs_and_marks_failed_cells():
    df = load(SWEEP)
    big = df[df.model == "gpt-1.3b"]
    p = pivot(big, index="micro_batch_size", columns="backend", values=RANK_METRIC)
    assert p.loc[8, "fsdp"] == sweep_value("gpt-1.3b", "fsdp", 8)
    assert 16 not in p.index  # only OOM there
    marked = pivot(big, "micro_batch_size", "backend", RANK_METRIC, mark_failed=True)
    assert marked.loc[16, "ddp"] == "oom"
    assert marked.loc[8, "ddp"] == pytest.approx(sweep_value("gpt-1.3b", "ddp", 8))


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_table_fits_120_columns_shows_mean_time_and_a_legend(capsys):
    """The H200 records (one A100 record beside them keeps ``device``, which tells the figures' GPU:
    docs/reliability-10.md #626, a wider table and the line saying why)."""
    code, out, err = cli(capsys, RECORDS, SWEEP)
    assert code == 0 and "device" in out.splitlines()[0] and "the table needs 130 columns" in out
    code, out, err = cli(capsys, RECORDS, SWEEP, "--filter", "device_name=NVIDIA H200")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 120
    header = out.splitlines()[0].split()
    assert SHORT[RANK_METRIC] in header and SHORT["iteration_time_s_mean"] == "iter_s(mean)" in header
    assert "iter_s(median)" not in out and "oom" in out and "invalid" in out
    spec = next(s for s in METRIC_FIELDS if s.name == "iteration_time_s_mean")
    text = " ".join(out[out.index("Legend:") :].split())
    assert f"{spec.header} = {spec.description}" in text
    runs = len(list(RECORDS.rglob("metrics.json"))) + len(list(SWEEP.rglob("metrics.json")))
    assert f"{runs - 4} runs (" in err and "4 unreadable records skipped" in err


def _table_lines(out: str) -> list[str]:
    """The lines of a terminal table, before its width note or legend."""
    lines = out.splitlines()
    return lines[: next(i for i, line in enumerate(lines) if line.startswith(("(", "Legend:")))]


def test_at_80_columns_a_failed_runs_error_stays_and_blank_columns_go_first(capsys):
    """A trial's 80-column table hid ``error`` while TFLOPs, tokens/s and iter_s, blank for every
    failed run, stayed: blank columns are hidden first, ``error`` last."""
    code, out, _ = cli(capsys, RECORDS, SWEEP, "--filter", "status=oom,error,invalid", "--width", "80")
    lines = _table_lines(out)
    header = lines[0].split()
    assert code == 0 and "error" in header and "status" in header, out
    assert not {"TFLOPs", "tokens/s", "iter_s(mean)"} & set(header), header
    assert "worker rank 1 exited with SIGKILL" in out and all(len(line) <= 80 for line in lines), out
    note = " ".join(out[out.index("(hidden") :].split())
    assert note.startswith("(hidden to fit 80 columns: active, TFLOPs, TFLOPs_lo95, TFLOPs_hi95, tokens/s,")


def test_the_error_column_is_cut_to_the_room_left_before_it_is_hidden():
    from analysis.display import MIN_ERROR, fit_width

    error = "CUDA out of memory. Tried to allocate 3.00 GiB"
    shown = pd.DataFrame({"model": ["gpt-1.3b", "gpt-125m"], "status": ["oom", "ok"], "error": [error, ""]})
    text, dropped = fit_width(shown, 40, order=["error"])
    assert dropped == [] and max(map(len, text.splitlines())) == 40, text
    assert text.splitlines()[1].endswith(error[: 40 - len("gpt-1.3b status ") - 1] + "…"), text
    narrow = len("gpt-1.3b status ") + MIN_ERROR - 1  # room for 15 characters: too little, hidden
    text, dropped = fit_width(shown, narrow, order=["error"])
    assert dropped == ["error"] and "CUDA" not in text


def test_a_width_below_what_the_table_needs_says_so(capsys):
    """``--width 40`` said "hidden to fit 40 columns" under a 108-column table: the note now says
    how wide the table is and that the columns left cannot be hidden."""
    code, out, _ = cli(capsys, RECORDS, SWEEP, "--width", "40")
    needs = max(map(len, _table_lines(out)))
    note = " ".join(out[out.index("(the table needs") :].split())
    assert code == 0 and needs > 40 and "hidden to fit" not in out
    assert note.startswith(
        f"(the table needs {needs} columns, more than the 40 it may take: the columns left "
    )
    assert "; hidden: " in note and "error" in note.split("; hidden: ")[1]
    code, out, _ = cli(capsys, RECORDS, "--columns", "model,status,error", "--width", "40")
    assert code == 0 and "(the table needs " in out and "hidden:" not in out  # nothing to hide


@pytest.mark.parametrize(
    "width, message",
    [
        ("3", "argument --width: 3 is below the minimum of 40 characters"),
        ("39", "argument --width: 39 is below the minimum of 40 characters"),
        ("-1", "argument --width: -1 is negative: give 0 (no limit) or at least 40 characters"),
    ],
)
def test_a_width_below_the_minimum_is_refused_in_one_line(capsys, width, message):
    """``--width 3`` was taken and the table printed wider anyway, its notes cut into 3-character
    shreds: below MIN_WIDTH the option is refused, naming the value and the minimum."""
    with pytest.raises(SystemExit) as info:
        main([str(RECORDS), "--width", width])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err, err
    assert len(err.splitlines()) == 1 and "usage:" not in err


def test_width_zero_is_no_limit_and_the_minimum_is_taken(capsys):
    code, out, _ = cli(capsys, RECORDS, "--width", "0")
    assert code == 0 and "hidden" not in out and "the table needs" not in out
    code, out, _ = cli(capsys, RECORDS, "--width", "40")
    assert code == 0 and "hidden" in out


def test_columns_named_by_columns_are_never_hidden_to_fit(capsys):
    """Blank in every failed run, ``tokens/s`` is still shown when ``--columns`` asks for it."""
    asked = "model,status,tokens_per_s,iteration_time_s_mean,error"
    code, out, _ = cli(capsys, RECORDS, "--filter", "status=oom", "--columns", asked, "--width", "40")
    assert code == 0 and _table_lines(out)[0].split() == [
        "model",
        "status",
        "tokens/s",
        "iter_s(mean)",
        "error",
    ]
    assert "(the table needs " in out


def test_a_plot_path_that_is_a_file_is_refused_before_anything_is_written(capsys, tmp_path: Path):
    """``--plot FILE`` said "cannot write FILE: File exists" after the HTML was written (a trial)."""
    (tmp_path / "a-file").write_text("kept")
    with pytest.raises(SystemExit) as info:
        main(
            [
                str(RECORDS),
                "--format",
                "html",
                "--output",
                str(tmp_path / "r.html"),
                "--plot",
                str(tmp_path / "a-file"),
            ]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(err) == 1, err  # one line, no usage block
    assert err[0].endswith(
        f"--plot {tmp_path / 'a-file'}: a regular file, not a folder; "
        "give a folder for the PNGs (made if missing); see python -m analysis --help"
    )
    assert not (tmp_path / "r.html").exists() and (tmp_path / "a-file").read_text() == "kept"
    for bad, said in (
        (
            tmp_path / "a-file" / "sub",
            f"--plot {tmp_path / 'a-file' / 'sub'}: {tmp_path / 'a-file'} is a regular file",
        ),
        ("", "argument --plot: an empty path"),
    ):
        with pytest.raises(SystemExit) as info:
            main([str(RECORDS), "--format", "html", "--output", str(tmp_path / "r.html"), "--plot", str(bad)])
        assert info.value.code == 2 and said in capsys.readouterr().err
        assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "the following arguments are required: paths"),
        ((RECORDS, "--format", "nope"), "argument --format: invalid choice: 'nope'"),
        ((RECORDS, "--width", "wide"), "argument --width: 'wide' is not a whole number of characters"),
        ((RECORDS, "--filter", "backend"), "--filter 'backend': expected KEY=VALUE"),
        # an empty value of a list was matched against blank cells in silence (issue 42)
        *(
            (
                (RECORDS, "--filter", value),
                f"--filter '{value}': an empty value in the list (a doubled or trailing comma); give each "
                f"value once: --filter backend={kept}",
            )
            for value, kept in (
                ("backend=fsdp,,ddp", "fsdp,ddp"),
                ("backend=fsdp,", "fsdp"),
                ("backend=,ddp", "ddp"),
            )
        ),
        (
            (RECORDS, "--filter", "backend= "),
            "--filter 'backend= ': no value (a shell variable left unset?); give one: --filter backend=VALUE "
            "(several: backend=a,b)",
        ),
        (
            (RECORDS, "--baseline", "backend=ddp,,fsdp"),
            "--baseline 'backend=ddp,,fsdp': an empty value in the list (a doubled or trailing comma); "
            "give each value once: --baseline backend=ddp",
        ),
        (
            (RECORDS, "--baseline", "backend="),
            "--baseline 'backend=': no value (a shell variable left unset?)",
        ),
        ((RECORDS, "--no-such-option"), "unrecognized arguments: --no-such-option"),
        # an unset shell variable (flopsweep-analysis "$DIR") read every record under the current folder
        (("",), "argument paths: an empty path '' (a shell variable left unset?) would read every record"),
        ((RECORDS, ""), "argument paths: an empty path '' (a shell variable left unset?)"),
        ((RECORDS, "--output", ""), "argument --output: an empty path: name a file, e.g. report.md"),
        ((RECORDS, "--notebook", ""), "argument --notebook: an empty path: name the notebook file"),
    ],
)
def test_a_refused_option_is_one_line_naming_the_fix_exit_2(capsys, args, said: str):
    """argparse printed its usage block before the refusal (a trial): one line now, with the fix."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "usage:" not in err, err
    assert err.startswith(f"python -m analysis: error: {said}") and err.endswith(
        "; see python -m analysis --help\n"
    )


def test_cli_legend_explains_the_short_set_up_headers(capsys):
    """Every short header of the default table is in the legend: set-up (``world``, ``accum``) and metrics."""
    _, out, _ = cli(capsys, RECORDS, SWEEP, "--width", "0")
    header = out.splitlines()[0].split()
    text = " ".join(out[out.index("Legend:") :].split())
    for short in ("attn", "prec", "mbs", "accum", "world", "rss_GiB", "iter_s(mean)"):
        assert short in header and f"{short} = " in text, short
    assert (
        "world = world size (ranks)" in text and "accum = grad accumulation steps per optimizer step" in text
    )


def test_cli_failed_runs_show_blank_not_zero(capsys):
    _, out, _ = cli(capsys, case("v2-oom"), "--columns", "model,status,model_tflops_per_device,tokens_per_s")
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
    assert f"unknown column '{column}'" in err and "valid columns: model, arch, attention" in err
    assert "Traceback" not in err
    # one line, not the ~140 columns: the first few, the count and where the rest are listed
    assert len(err.splitlines()) == 1 and len(err) < 400 and "tokens_per_s_ci_low" not in err, err
    count = int(
        re.search(r", \.\.\. \((\d+) in all\); every column: the header of --format csv --columns all", err)[
            1
        ]
    )
    assert count >= len(load(SWEEP).columns)  # the table's own columns (speedup, tie?) too


def test_cli_sort_with_an_unknown_direction_says_so_in_one_line(capsys):
    """``--sort tokens_per_s:bad`` said "unknown column 'tokens_per_s:bad'" and listed every column:
    the column is known, the direction is not."""
    with pytest.raises(SystemExit) as exc:
        main([str(SWEEP), "--sort", "tokens_per_s:bad"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "unknown column" not in err
    assert (
        "argument --sort: 'tokens_per_s:bad': unknown direction 'bad', expected asc or desc; "
        "give tokens_per_s:asc, tokens_per_s:desc, or tokens_per_s for the best first"
    ) in err
    with pytest.raises(SystemExit) as exc:
        main([str(SWEEP), "--sort", ":desc"])
    assert exc.value.code == 2 and "':desc' names no column" in capsys.readouterr().err


def test_cli_sort_directions_order_the_rows(capsys):
    for spec, descending in (
        ("tokens_per_s", True),
        ("tokens_per_s:desc", True),
        ("tokens_per_s:asc", False),
    ):
        code, out, _ = cli(capsys, SWEEP, "--sort", spec, "--format", "csv")
        values = pd.read_csv(io.StringIO(out))["tokens_per_s"].dropna().tolist()
        assert code == 0 and values == sorted(values, reverse=descending) and len(set(values)) > 1


def test_cli_bad_option_values_exit_2_with_a_message(capsys):
    for args, msg in (
        [["--filter", "backend"], "expected KEY=VALUE"],
        [["--pivot", "model:backend"], "expected INDEX:COLUMNS:VALUES"],
        [["--filter", "backend=nope"], "backend=nope matches no record; backend has: ddp, deepspeed, fsdp"],
    ):
        with pytest.raises(SystemExit) as exc:
            main([str(SWEEP), *args])
        assert exc.value.code == 2 and msg in capsys.readouterr().err


def test_cli_default_order_is_model_tflops_and_csv_keeps_full_names(capsys):
    _, out, _ = cli(capsys, SWEEP, "--format", "csv")
    df = pd.read_csv(pd.io.common.StringIO(out))
    assert list(df.columns) == COLUMNS
    ok = df[df.status == "ok"]
    assert ok[RANK_METRIC].is_monotonic_decreasing and df.tail(4).status.eq("oom").all()


def test_cli_filter_sort_and_csv(capsys):
    args = ["--filter", "model=gpt-1.3b", "--filter", "backend=ddp,fsdp", "--sort", "tokens_per_s"]
    _, out, _ = cli(capsys, SWEEP, *args, "--format", "csv")
    df = pd.read_csv(pd.io.common.StringIO(out))
    assert set(df.backend) == {"ddp", "fsdp"} and set(df.model) == {"gpt-1.3b"} and len(df) == 10
    assert df[df.status == "ok"].tokens_per_s.is_monotonic_decreasing  # metrics sort best first
    assert df.tail(2).status.tolist() == ["oom", "oom"] and df.tail(2)[RANK_METRIC].isna().all()
    _, out, _ = cli(
        capsys, SWEEP, "--filter", "model=gpt-1.3b", "--sort", "micro_batch_size:desc", "--format", "json"
    )
    assert [r["micro_batch_size"] for r in json.loads(out)][:3] == [16, 16, 16]


BEST_FIRST = {  # column -> sorted descending (higher is better) or ascending (lower is better)
    "tokens_per_s": True,
    "tokens_per_s_per_device": True,
    "model_tflops_per_device": True,
    "hardware_tflops_per_device": True,
    "mfu": True,
    "hfu": True,
    "iteration_time_s_mean": False,
    "iteration_time_s_median": False,
    "peak_cuda_allocated_gib": False,
    "peak_cuda_reserved_gib": False,
}


def _ok_values(out: str, column: str) -> list:
    return [r[column] for r in json.loads(out) if r["status"] == "ok" and r[column] is not None]


@pytest.mark.parametrize("column, descending", BEST_FIRST.items())
def test_cli_sort_puts_the_best_run_first_by_the_metrics_direction(capsys, column, descending):
    """Issue: ``--sort scaling_efficiency`` put the worst first. Each metric sorts best first, by its
    full name or its short header; ``:asc``/``:desc`` override (tests/unit/test_scaling.py: scale_eff)."""
    for name in (column, SHORT[column]):
        _, out, _ = cli(capsys, SWEEP, "--sort", name, "--format", "json")
        values = _ok_values(out, column)
        assert len(set(values)) > 2 and values == sorted(values, reverse=descending), name
    _, out, _ = cli(
        capsys, SWEEP, "--sort", f"{column}:{'asc' if descending else 'desc'}", "--format", "json"
    )
    values = _ok_values(out, column)
    assert values == sorted(values, reverse=not descending)


def test_cli_default_order_follows_the_direction_of_metric(capsys):
    _, out, _ = cli(capsys, SWEEP, "--metric", "iteration_time_s_mean", "--format", "json")
    times = _ok_values(out, "iteration_time_s_mean")
    assert times == sorted(times) and len(set(times)) > 2  # the fastest step first
    _, out, _ = cli(capsys, SWEEP, "--metric", "tokens_per_s", "--format", "json")
    rates = _ok_values(out, "tokens_per_s")
    assert rates == sorted(rates, reverse=True)


def test_cli_help_states_the_sort_rule():
    from analysis.__main__ import build_parser

    text = " ".join(build_parser().format_help().split())
    higher, _, lower = text.partition("ascending where lower is better")
    higher = higher.rpartition("descending where higher is better")[2]
    for column, descending in BEST_FIRST.items():
        assert SHORT[column] in (higher if descending else lower), column
    assert "scale_eff" in higher and "speedup" in higher and ":asc or :desc overrides" in lower


def test_counts_in_messages_agree_with_their_number(capsys, tmp_path):
    """Issue: "1 runs". One record: "1 run"; one left out of rankings: "1 ok run ... its"."""
    assert [plural(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]
    assert plural(1, "TFLOPs mismatch", "TFLOPs mismatches") == "1 TFLOPs mismatch"
    _, _, err = cli(capsys, case("v2-ok"))
    assert err.strip().splitlines()[-1] == "1 run (1 ok)"
    _, _, err = cli(capsys, case("mismatch"), case("empty"))
    assert "Note: 1 ok run left out of rankings (best, baseline, order, pivot, plots): its recorded" in err
    assert "1 unreadable record skipped" in err and "1 TFLOPs mismatch >1%" in err
    assert not re.search(r"\b1 (runs|records|ranks|rows share)\b|\(s\)|\(es\)", err), err


def test_cli_best_by_ranks_on_model_tflops_unless_told(capsys, tmp_path):
    sparse = raw("blocksparse")  # eq. 3 counts the full square; model FLOPs count the density
    sparse["metrics"]["tflops_per_device"] = 600.0
    put(tmp_path / "sparse", sparse)
    shutil.copytree(RECORDS / "v2-ok", tmp_path / "dense")
    assert sparse["metrics"][RANK_METRIC] < raw("v2-ok")["metrics"][RANK_METRIC]
    _, out, _ = cli(capsys, tmp_path, "--best-by", "model", "--format", "json")
    assert [r["run_id"] for r in json.loads(out)] == ["run-ok"]
    _, out, _ = cli(
        capsys, tmp_path, "--best-by", "model", "--metric", "tflops_per_device", "--format", "json"
    )
    assert [r["run_id"] for r in json.loads(out)] == ["run-blocksparse"]


def test_cli_best_by_baseline_and_pivot(capsys):
    _, out, _ = cli(capsys, SWEEP, "--best-by", "model", "--format", "json")
    rows = {r["model"]: r for r in json.loads(out)}
    assert rows["gpt-1.3b"]["micro_batch_size"] == 8 and rows["gpt-1.3b"]["backend"] == "fsdp"
    _, out, _ = cli(
        capsys, SWEEP, "--baseline", "backend=fsdp", "--filter", "model=gpt-125m", "--sort", "speedup"
    )
    assert "speedup" in out and "1.00x" in out and "0.96x" in out
    _, out, _ = cli(
        capsys, SWEEP, "--filter", "model=gpt-1.3b", "--pivot", f"micro_batch_size:backend:{RANK_METRIC}"
    )
    lines = out.splitlines()
    assert lines[0].split() == ["micro_batch_size", "\\", "backend", "ddp", "deepspeed", "fsdp"]
    assert lines[-1].split() == ["16", "oom", "oom", "oom"]


def test_cli_markdown_shows_mean_time_mfu_and_a_legend(capsys):
    _, out, _ = cli(capsys, case("blocksparse"), case("v2-ok"), "--format", "markdown")
    header = out.splitlines()[0]
    for col in (RANK_METRIC, "mfu", "iteration_time_s_mean"):
        assert f" {SHORT[col]} " in header, col
    assert "Legend: " in out and f"{SHORT[RANK_METRIC]} = {DESCRIPTIONS[RANK_METRIC]}" in out
    mean = raw("v2-ok")["metrics"]["iteration_time_s"]["mean"]
    assert f"{mean:.4g}" in out


def test_cli_markdown_on_the_committed_h200_v1_records(capsys):
    """MFU/HFU of the H200 v1 records follow the v2 convention: the checkpointed (seed) rows and the
    block-sparse rows differ from what v1 recorded, as the model families say they should."""
    code, out, err = cli(capsys, H200, "--format", "markdown")
    assert code == 0 and "| MFU" in out and "iter_s(mean)" in out and "Traceback" not in err
    df = load(H200)
    assert not df.tflops_mismatch.any()
    df = df[df.schema_version == 1]  # the records written before schema version 2
    assert len(df) >= 80
    changed_hfu = changed_mfu = 0
    for _, r in df[df.status.eq("ok")].iterrows():
        rec = json.loads((Path(r.run_dir) / "metrics.json").read_text())
        model, hardware = gpt2_flops(rec["config"], rec["system"]["world_size"])
        t, world, peak = r.iteration_time_s_mean, r.world_size, r.peak_tflops
        assert r.mfu == pytest.approx(model / (t * world * 1e12) / peak, rel=1e-9), r.run_dir
        assert r.hfu == pytest.approx(hardware / (t * world * 1e12) / peak, rel=1e-9), r.run_dir
        old = rec["metrics"]
        if r.activation_checkpointing == "full" and not r.compile:
            assert r.hfu < old["hfu"] * 0.99, r.run_dir  # early_stop recompute < eq. 3's f = 4
            changed_hfu += 1
        if r.attention == "blocksparse":
            assert r.mfu < old["mfu"] * 0.99, r.run_dir  # attention counted at its density
            changed_mfu += 1
    assert changed_hfu >= 5 and changed_mfu >= 5


def test_cli_no_records_exits_2_with_the_fix(capsys, tmp_path):
    code, _, err = cli(capsys, tmp_path)
    assert (
        code == 2
        and f"no metrics.json under {tmp_path} (0 runs; the folder exists, with none in it or below). "
        "Fix: name a sweep folder"
        in err
    )


def image_shape(path: Path) -> tuple[int, ...]:
    import matplotlib.image

    return matplotlib.image.imread(path).shape


def test_plots_of_the_sweep_are_pngs_of_reasonable_size(tmp_path):
    paths, skipped = save_plots(load(SWEEP), tmp_path)
    # the fixture sweep runs one world size, no profiled step (tests/unit/test_scaling.py has those)
    # and has no energy (tests/unit/test_energy.py has that) nor predictions
    # (tests/unit/test_predict.py has those), no model search (tests/unit/test_modelsearch.py)
    assert set(skipped) == {
        "scaling",
        "step_breakdown",
        "tokens_vs_joules_per_token",
        "predicted_vs_measured",
        "frontier",
    }
    assert set(paths) == set(PLOTS) - set(skipped)
    for path in paths.values():
        h, w, _ = image_shape(path)
        assert 300 <= h <= 2000 and 400 <= w <= 3000, path


def test_plots_are_skipped_with_a_reason_when_the_data_cannot_support_them():
    figures, skipped = make_plots(load([case("v2-ok"), case("v2-oom")]))
    assert "tflops_vs_micro_batch" in figures
    assert "does not vary seq_len" in skipped["tokens_vs_seq_len"]
    cpu = load(case("v2-ok"))
    cpu["peak_cuda_allocated_gib"] = float("nan")
    assert "no run recorded peak GPU memory" in make_plots(cpu)[1]["memory_vs_micro_batch"]
    with pytest.raises(PlotSkipped):
        from analysis.plots import plot_tflops_vs_micro_batch

        plot_tflops_vs_micro_batch(load(case("v2-oom")))


def test_failed_runs_are_marked_on_the_plot():
    fig = make_plots(load(SWEEP))[0]["tflops_vs_micro_batch"]
    ax = next(a for a in fig.axes if a.get_title() == "gpt-1.3b")
    crosses = [ln for ln in ax.lines if ln.get_marker() == "x"]
    assert len(crosses) == 3 and {ln.get_xdata()[0] for ln in crosses} == {16.0}
    assert [t.get_text() for t in ax.texts] == ["oom"] * 3
    assert ax.get_xlabel() == "micro batch size (sequences per rank)"
    assert "model TFLOPs per device" in ax.get_ylabel()


def test_html_report_is_self_contained(capsys, tmp_path):
    report = tmp_path / "report.html"
    code, _, _ = cli(capsys, SWEEP, RECORDS, "--format", "html", "--output", report)
    text = report.read_text()
    assert code == 0 and text.startswith("<!DOCTYPE html>")
    # no scaling, no profiled step, no energy, no prediction, no model search
    assert text.count('src="data:image/png;base64,') == len(PLOTS) - 5
    assert "Skipped scaling: no set-up was run at two or more world sizes" in text
    assert f"<th>{SHORT[RANK_METRIC]}</th>" in text and "<th>iter_s(mean)</th>" in text
    assert '<tr class="failed">' in text and '<p class="legend">Legend: ' in text
    assert "Unreadable, skipped: " + str(case("truncated")) in text
    assert "Note: 1 ok run left out of rankings" in text
    assert not re.search(r'(src|href)="(?!data:)', text)  # nothing to fetch from elsewhere


def test_load_average_at_the_start_and_end_of_a_job_is_a_column(tmp_path):
    """Issue 14, class 17: ``system.loadavg`` shows a run measured on a busy host; an older record's
    single list is the end of its job."""
    new, old = raw("v2-ok"), raw("v2-ok")
    new["run"]["id"], old["run"]["id"] = "new", "old"
    new["system"]["loadavg"] = {"start": [2.5, 1.0, 0.5], "end": [3.25, 1.5, 0.75]}
    old["system"]["loadavg"] = [4.0, 2.0, 1.0]
    put(tmp_path / "new", new)
    put(tmp_path / "old", old)
    df = load(tmp_path).set_index("run_id")
    assert df.loc["new", ["loadavg_1m_start", "loadavg_1m_end"]].tolist() == [2.5, 3.25]
    assert pd.isna(df.loc["old", "loadavg_1m_start"]) and df.loc["old", "loadavg_1m_end"] == 4.0


def test_html_report_of_many_models_draws_a_bounded_number_of_figures(tmp_path, capsys):
    """400 models: the cost is in figures and panels (166 s before the panel cap, about 2 s
    after), so assert those, not the time."""
    template, models = raw("v2-ok"), 400
    for i in range(models):
        rec = json.loads(json.dumps(template))
        rec["config"]["model"]["name"] = f"m{i:03d}"
        rec["run"]["id"] = f"many-{i}"
        put(tmp_path / "runs" / str(i), rec)
    df = load(tmp_path / "runs")
    figures, skipped = make_plots(df)
    assert len(figures) + len(skipped) == len(PLOTS)
    for name, fig in figures.items():
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert len(panels) <= MAX_PANELS, name
        assert f"{MAX_PANELS} of {models} models" in " ".join(fig.get_suptitle().split()), name
    code, _, _ = cli(capsys, tmp_path / "runs", "--format", "html", "--output", tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert code == 0 and 0 < html.count("<img") <= len(PLOTS)


def test_a_scaling_efficiency_far_above_one_is_flagged_and_named(tmp_path: Path, capsys) -> None:
    """A two-rank run at 14.77x the one-rank run's tokens/s per device was shown unflagged: a
    scaling_efficiency above 1.2 is now check? (named in implausible, left out of rankings); 1.1 is not."""
    from helpers import rescaled

    from analysis.checks import MAX_SCALING_EFFICIENCY

    base = json.loads((FIXTURES / "records" / "llama" / "metrics.json").read_text())
    rate = base["metrics"]["tokens_per_s_per_device"]
    for name, factor in (("fast", 14.77), ("fine", 1.1)):
        root = tmp_path / name
        for world, rel in ((1, 1.0), (2, factor)):
            r = rescaled(base, world=world, tokens_per_device=rate * rel)
            r["run"]["id"] = f"{name}-{world}"
            (root / str(world)).mkdir(parents=True)
            (root / str(world) / "metrics.json").write_text(json.dumps(r))
        df = load(root).set_index("world_size")
        assert df.loc[2, "scaling_efficiency"] == pytest.approx(factor, rel=1e-3)
        flagged = isinstance(df.loc[2, "implausible"], str)
        assert flagged is (factor > MAX_SCALING_EFFICIENCY)
        assert not isinstance(df.loc[1, "implausible"], str)
    assert (
        "scaling_efficiency 14.77 above 1.2"
        in load(tmp_path / "fast").set_index("world_size").loc[2, "implausible"]
    )
    assert main([str(tmp_path / "fast")]) == 0
    assert "check?" in capsys.readouterr().out
    from analysis.checks import scaling_problem

    assert scaling_problem(6.5, "cpu") is None  # a loaded machine's one-rank CPU baseline: not flagged


def test_the_step_breakdown_of_the_committed_records_draws_without_a_layout_warning() -> None:
    """With session 11's Llama ZeRO-3 record every bar's label named ``arch=`` and the ZeRO-3 knobs (up
    to 132 characters): the labels took the figure's width, constrained_layout collapsed the axes and
    warned, and the warning (with this checkout's path) went into the committed notebook. The labels
    now wrap, and the figure grows with their lines."""
    import warnings

    from analysis import png_bytes
    from analysis.plots import BAR_LABEL_CHARS, plot_step_breakdown

    fig = plot_step_breakdown(load(H200))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) >= 11 and any("\n" in label for label in labels)
    assert all(len(line) <= BAR_LABEL_CHARS for label in labels for line in label.splitlines())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # constrained_layout's "axes sizes collapsed to zero"
        assert png_bytes(fig, dpi=72).startswith(b"\x89PNG")
    assert fig.axes[0].get_position().width > 0.3  # the bars keep most of the width
