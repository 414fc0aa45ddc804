"""The set-up columns declared once (:mod:`flopsweep.columns`), and what the tables show of them:
every set-up column that tells rows apart, and which set-up won a ``--pivot`` cell."""

from __future__ import annotations

import copy
import dataclasses
import json
import typing
from pathlib import Path

import pandas as pd
import pytest

from analysis.__main__ import main
from analysis.display import compact, render
from analysis.load import COLUMNS, SHORT, TABLE_COLUMNS, load
from analysis.query import SETUP_COLUMNS, compare, pivot_winners
from flopsweep.columns import KINDS, SETUP_SPECS, SHOW, UNSHOWN_KEYS, dependents, kind, only_for
from flopsweep.config import RunConfig
from flopsweep.options import GROUP_BASES, OPTION_SCHEMAS

RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "records"
TIMED = ("tokens_per_s", "tokens_per_s_per_device", "model_tflops_per_device", "hardware_tflops_per_device")
TIMED += ("tflops_per_device", "mfu", "hfu", "matmul_fraction")


def _leaves(cls: type, prefix: str) -> set[str]:
    """Every key path of a schema (``config.backend.zero_stage``), sub-configs as their leaves."""
    out = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        path, hint = f"{prefix}.{f.name}", hints[f.name]
        if prefix == "config" and f.name in GROUP_BASES:  # a group (search.model is a plain key)
            for schema in (GROUP_BASES[f.name], *OPTION_SCHEMAS[f.name].values()):
                out |= _leaves(schema, path)
        elif dataclasses.is_dataclass(hint):
            out |= _leaves(hint, path)
        else:
            out.add(path)
    return out


def test_every_schema_key_is_a_column_or_declared_unshown() -> None:
    """A new knob cannot be forgotten: each key of every schema (the options' own included) is a
    :data:`SETUP_SPECS` path or in :data:`UNSHOWN_KEYS`, and every declared path exists."""
    paths = {spec.path for spec in SETUP_SPECS}
    leaves = _leaves(RunConfig, "config")
    undeclared = {p for p in leaves if p not in paths and not any(p.startswith(u) for u in UNSHOWN_KEYS)}
    assert not undeclared, f"declare these in flopsweep.columns: {sorted(undeclared)}"
    assert {p for p in paths if p.startswith("config.")} <= leaves
    assert all(any(leaf.startswith(u) for leaf in leaves) for u in UNSHOWN_KEYS), "a stale UNSHOWN_KEYS entry"
    assert len({s.name for s in SETUP_SPECS}) == len(SETUP_SPECS)
    assert all(kind(s) in KINDS and s.show in SHOW for s in SETUP_SPECS)


def test_types_options_and_dependents_come_from_the_schemas() -> None:
    kinds = {s.name: kind(s) for s in SETUP_SPECS}
    assert kinds["zero_stage"] == "int" and kinds["reshard_after_forward"] == "bool"
    assert kinds["attention_density"] == "float" and kinds["precision"] == "text"
    assert kinds["world_size"] == "int" and kinds["device_name"] == "text"
    owners = {s.name: only_for(s) for s in SETUP_SPECS}
    assert owners["zero_stage"] == ("backend", ("deepspeed",)) and owners["block_size"] == (
        "attention",
        ("blocksparse",),
    )
    assert owners["seq_len"] is None and owners["precision"] is None
    assert {"zero_stage", "reshard_after_forward"} <= set(dependents("backend"))
    assert dependents("model") == ["arch", "n_layer", "experts", "seq_len"] and dependents("precision") == []
    assert owners["experts"] == ("arch", ("hf",))
    assert [c for c in COLUMNS if c in SETUP_COLUMNS] == SETUP_COLUMNS
    assert all(SHORT.get(s.name, s.name) == s.header for s in SETUP_SPECS)
    assert TABLE_COLUMNS[: TABLE_COLUMNS.index("status")] == [
        s.name for s in SETUP_SPECS if s.show == "table"
    ]


def _record(**config: object) -> dict:
    """The v2 ok fixture with ``config`` keys set (``precision`` -> ``config.precision.name``;
    ``device_name`` -> ``system.device_name``)."""
    rec = json.loads((RECORDS / "v2-ok" / "metrics.json").read_text())
    rec = copy.deepcopy(rec)
    for key, value in config.items():
        if key == "device_name":
            rec["system"]["device_name"] = value
        elif key == "precision":
            rec["config"]["precision"]["name"] = value
        else:
            rec["config"][key] = value
    return rec


def _faster(rec: dict, factor: float) -> dict:
    """The same run with every step ``factor`` times shorter, each figure consistent with it."""
    m = rec["metrics"]
    m["iteration_time_s"] = {
        k: ([x / factor for x in v] if k == "values" else v if k == "cv" else v / factor)
        for k, v in m["iteration_time_s"].items()
    }
    for key in TIMED:
        if m.get(key) is not None:
            m[key] *= factor
    return rec


def _write(root: Path, records: dict[str, dict]) -> pd.DataFrame:
    for name, rec in records.items():
        rec["run"]["id"] = f"run-{name}"
        (root / name).mkdir(parents=True)
        (root / name / "metrics.json").write_text(json.dumps(rec))
    return load(root)


def test_a_precision_that_tells_rows_apart_is_shown_however_narrow_the_table(tmp_path: Path) -> None:
    df = _write(tmp_path, {"bf16": _record(), "fp8": _faster(_record(precision="fp8"), 1.5)})
    assert not df["tflops_mismatch"].any()
    shown = compact(df)
    assert "precision" in shown.columns
    text = render(shown, "table", width=40)
    header = text.splitlines()[0].split()
    assert SHORT["precision"] in header and "model" in header, text
    cells = [line.split() for line in text.splitlines()[1:3]]
    assert {"bf16", "fp8"} <= {c for row in cells for c in row}, text


def test_mixed_devices_show_the_device_and_a_same_device_table_does_not(tmp_path: Path) -> None:
    mixed = _write(
        tmp_path / "mixed", {"h200": _record(), "h100": _record(device_name="NVIDIA H100 80GB HBM3")}
    )
    assert "device_name" in compact(mixed).columns
    same = _write(tmp_path / "same", {"a": _record(), "b": _record(micro_batch_size=4)})
    assert "device_name" not in compact(same).columns and "precision" in compact(same).columns


def test_a_varied_knob_outside_the_default_table_is_shown(tmp_path: Path) -> None:
    df = _write(tmp_path, {"a": _record(), "b": _record(activation_checkpointing=True, seed=1)})
    cols = compact(df).columns
    assert "activation_checkpointing" in cols and "seed" in cols and "nnodes" not in cols


def test_compare_matches_on_every_knob_of_the_set_up(tmp_path: Path) -> None:
    """Runs are matched to the baseline on every identity column less the baseline key."""
    df = _write(tmp_path, {"bf16": _record(), "fp8": _faster(_record(precision="fp8"), 2.0)})
    out = compare(df, {"precision": "bf16"})
    assert sorted(out["speedup"].round(6)) == [1.0, 2.0]
    assert "reshard_after_forward" in SETUP_COLUMNS and "seed" not in SETUP_COLUMNS


def test_pivot_says_which_set_up_won_a_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    df = _write(
        tmp_path,
        {
            "bf16": _record(),
            "fp8": _faster(_record(precision="fp8"), 1.5),
            "ddp": _faster(_record(precision="fp8", backend={"name": "ddp"}), 1.2),
        },
    )
    [(row, col, note)] = pivot_winners(df, "model", "backend", "model_tflops_per_device")
    assert (row, col) == (("gpt-1.3b",), ("fsdp",))
    assert note == "precision=fp8 (max of 2 runs; the others ran precision bf16)"
    [(_, _, mean)] = pivot_winners(df, "model", "backend", "model_tflops_per_device", aggfunc="mean")
    assert mean == "mean of 2 runs that differ in precision bf16, fp8"
    assert main([str(tmp_path), "--pivot", "model:backend:model_tflops_per_device"]) == 0
    out = capsys.readouterr().out
    best = _faster(_record(), 1.5)["metrics"]["model_tflops_per_device"]
    assert f"{best:.4g} [1]" in out
    assert "[1] gpt-1.3b / fsdp: precision=fp8 (max of 2 runs; the others ran precision bf16)" in out
    assert pivot_winners(df, "model", ["backend", "precision"], "model_tflops_per_device") == []


def test_every_column_spec_names_a_column_and_a_known_presentation() -> None:
    """Each ``ColumnSpec`` line is a column the analysis has (or adds: ``speedup``, ``flags``), with a
    format, a table place and a unique hide rank of the declared kinds."""
    from flopsweep.column_spec import COLUMN_SPECS, FORMATS, TABLE

    added = {"speedup", "speedup_ci_low", "speedup_ci_high", "flags"}
    for spec in COLUMN_SPECS:
        assert spec.name in COLUMNS or spec.name in added, spec.name
        assert spec.format in FORMATS and spec.table in TABLE, spec
        assert spec.kind is None or spec.kind in KINDS, spec
    ranks = [s.hide for s in COLUMN_SPECS if s.hide is not None]
    assert len(ranks) == len(set(ranks))
    assert len({s.name for s in COLUMN_SPECS}) == len(COLUMN_SPECS)


def test_one_spec_drives_the_header_format_and_legend_of_every_output(monkeypatch) -> None:
    """Changing a column's spec in the catalogue changes the terminal and markdown tables, the HTML
    report and the notebook's cells alike (they all draw the one view); csv keeps the full name."""
    import dataclasses as dc

    from analysis import catalogue, display
    from analysis.report import Report, render_html

    df = pd.DataFrame({"model": ["gpt-a"], "mfu": [0.5], "tokens_per_s": [12345.0]})
    assert list(display.View(df).headers()) == ["model", "MFU", "tokens/s"]
    assert display.for_display(df).iloc[0].tolist() == ["gpt-a", "50.0%", "12,345"]
    changed = dc.replace(catalogue.SPECS["mfu"], header="MFU!", format="", description="changed")
    monkeypatch.setitem(catalogue.SPECS, "mfu", changed)
    for text in (render(df, "table"), render(df, "markdown")):
        assert "MFU!" in text and "50.0%" not in text and "0.5" in text and "MFU! = changed" in text, text
    html = render_html(Report(title="t", summary="1 run", tables=[("runs", df)]))
    assert "<th>MFU!</th>" in html and "MFU! = changed" in html
    assert render(df, "csv").splitlines()[0] == '"model","mfu","tokens_per_s"'


def test_the_catalogue_imports_no_other_analysis_module() -> None:
    """analysis.catalogue is the bottom of the analysis (spread and load import it): no circle."""
    import ast

    tree = ast.parse((Path(__file__).parents[2] / "analysis" / "catalogue.py").read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m and m.startswith("analysis")], imported
