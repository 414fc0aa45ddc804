"""search.model=largest: its checks, its memory rule, a real CPU search through run.py, and the
frontier table and plot of the analysis."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import uuid
from pathlib import Path

import pandas as pd
import pytest
from helpers import make_plan, rescaled

from analysis import load
from analysis.__main__ import main
from analysis.frontier import (
    NO_OK_RUN,
    NO_SEARCH,
    frontier_points,
    frontier_table,
    searched,
    telling_columns,
    unmeasured_lines,
)
from analysis.load import search_failed, setup_id, sized_name
from analysis.plots import PlotSkipped, plot_frontier
from flopsweep.config import ConfigError, typed_form
from flopsweep.job import comparable_config, search_cut_short
from flopsweep.memory import estimate
from flopsweep.sizesearch import GIB, budget_problem
from flopsweep.text import format_count

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"


H200_FRONTIER = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200" / "frontier"
"""The committed H200 frontier: FSDP2 (full and no checkpointing, CPU offload) and ZeRO-3 set-ups."""


TINY = ["model=llama-tiny", "device=cpu", "nproc_per_node=1", "batch.micro_batch_size=1"]


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["search.model=biggest"], "search.model='biggest'"),
        (["search.grow=n_embd"], "search.grow='n_embd'"),
        (["search.min_n_layer=9", "search.max_n_layer=8"], "search.max_n_layer=8"),
        (["search.memory_budget_gib=0"], "search.memory_budget_gib=0"),
        (["search.max_n_layer=5000"], "search.max_n_layer=5000"),
        (["model=hf", "search.model=largest"], "search.model='largest'"),
        (["search.min_n_layer=0"], "search.min_n_layer=0"),
        (
            ["search.model=largest", "backend=fsdp", "nproc_per_node=2", "parallel.pp=2", "model.n_layer=4"],
            "search.model='largest'",
        ),
    ],
)
def test_a_bad_search_is_refused_in_one_line_naming_the_key(hydra_compose, overrides, key) -> None:
    cfg = hydra_compose(["device=cpu", *overrides])
    with pytest.raises(ConfigError) as err:
        make_plan(cfg)
    assert key in str(err.value) and "Fix: " in str(err.value) and "\n" not in str(err.value)


def test_a_memory_budget_without_a_search_to_read_it_is_refused(hydra_compose) -> None:
    """search.memory_budget_gib is read only by the probes of search.model=largest and batch=auto: set
    without either it did nothing, silently; now one line names the key and both fixes."""
    with pytest.raises(ConfigError) as err:
        make_plan(hydra_compose([*TINY, "search.memory_budget_gib=1"]))
    message = str(err.value)
    assert message.startswith("Invalid config: search.memory_budget_gib=1: ") and "\n" not in message
    assert "Fix: add search.model=largest or batch=auto, or drop search.memory_budget_gib" in message
    for searching in (["batch=auto"], ["search.model=largest"]):
        assert make_plan(hydra_compose([*TINY, *searching, "search.memory_budget_gib=1"]))


def sized(plan, n_layer: int):
    return dataclasses.replace(plan.cfg, model=dataclasses.replace(plan.cfg.model, n_layer=n_layer))


def test_the_cpu_rule_is_the_estimated_peak_and_the_cuda_rule_the_measured_one(hydra_compose) -> None:
    plan = make_plan(hydra_compose([*TINY, "search.model=largest", "search.memory_budget_gib=0.02"]))
    budget = int(0.02 * GIB)
    sizes = {n: estimate(sized(plan, n), plan.layout).total for n in range(1, 12)}
    fitting = [n for n, est in sizes.items() if est <= budget]
    assert fitting and fitting == list(range(1, max(fitting) + 1)) and max(fitting) < 11  # monotone
    for n, est in sizes.items():
        problem = budget_problem(sized(plan, n), estimated=est, peak=None, budget=budget, nproc=1)
        assert bool(problem) == (n > max(fitting)), (n, problem)
    assert "search.memory_budget_gib=0.02" in budget_problem(
        sized(plan, 11), estimated=sizes[11], peak=None, budget=budget, nproc=1
    )
    gpu = dataclasses.replace(plan.cfg, device="cuda")
    assert budget_problem(gpu, estimated=10 * budget, peak=budget, budget=budget, nproc=1) == ""
    assert "peak allocated" in budget_problem(gpu, estimated=0, peak=budget + 1, budget=budget, nproc=1)
    assert budget_problem(gpu, estimated=0, peak=10 * budget, budget=None, nproc=1) == ""  # the GPU's own OOM


def test_resume_and_setup_id_see_a_search_by_its_set_up_not_its_size() -> None:
    record = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    config = record["config"]
    searching = {
        **config,
        "search": {
            "model": "largest",
            "grow": "n_layer",
            "min_n_layer": 1,
            "max_n_layer": 256,
            "memory_budget_gib": None,
        },
    }
    found = {**searching, "model": {**config["model"], "n_layer": 40, "name": "llama3.2-1b-L40"}}
    assert comparable_config(found) == comparable_config(searching)  # resume: the search decides again
    assert comparable_config({**config, "model": found["model"]}) != comparable_config(config)
    off = {**config, "search": {**searching["search"], "model": "none"}}
    assert comparable_config(off) == comparable_config(config)  # a record from before the search
    assert setup_id({**record, "config": off}) == setup_id(record)  # keeps its set-up id
    assert setup_id({**record, "config": searching}) != setup_id(record)


def variant(base: dict, *, ckpt: str, n_params: int, tokens: float, status: str = "ok", search: bool = False):
    """The llama fixture as a run of another size and set-up (its figures consistent)."""
    r = rescaled(base, world=1, tokens_per_device=tokens if status == "ok" else 1.0)
    r["run"]["id"] = uuid.uuid4().hex
    r["config"]["activation_checkpointing"] = {"name": ckpt}
    r["config"]["search"] = {
        "model": "largest" if search else "none",
        "grow": "n_layer",
        "min_n_layer": 1,
        "max_n_layer": 256,
        "memory_budget_gib": None,
    }
    r["model"]["n_params"] = n_params
    r["model"]["name"] = r["config"]["model"]["name"] = f"llama-{n_params // 10**9}b"
    if status != "ok":
        r["status"], r["metrics"] = status, dict.fromkeys(r["metrics"])  # a failed run's figures are null
        r["error"] = {
            "type": "OutOfMemoryError",
            "message": "CUDA out of memory",
            "phase": "warmup",
            "rank": 0,
        }
    return r


def write(root: Path, records: list[dict]) -> Path:
    for i, r in enumerate(records):
        (root / str(i)).mkdir(parents=True)
        (root / str(i) / "metrics.json").write_text(json.dumps(r))
    return root


def test_the_frontier_is_the_largest_ok_size_of_each_set_up(tmp_path: Path) -> None:
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    records = [
        variant(base, ckpt="none", n_params=1 * 10**9, tokens=9000.0),
        variant(base, ckpt="none", n_params=3 * 10**9, tokens=5000.0, search=True),
        variant(base, ckpt="none", n_params=3 * 10**9, tokens=4000.0),  # slower at the same size
        variant(base, ckpt="none", n_params=8 * 10**9, tokens=0.0, status="oom"),
        variant(base, ckpt="full", n_params=1 * 10**9, tokens=7000.0),
        variant(base, ckpt="full", n_params=6 * 10**9, tokens=2500.0, search=True),
    ]
    records[-1]["run"]["model_search"] = {  # two probes trained, one was too large
        "result": 12,
        "probes": [
            {"n_layer": 4, "n_params": 2 * 10**9, "status": "ok", "tokens_per_s": 6000.0},
            {"n_layer": 8, "n_params": 4 * 10**9, "status": "ok", "tokens_per_s": 3500.0},
            {"n_layer": 16, "n_params": 8 * 10**9, "status": "oom", "tokens_per_s": None},
        ],
    }
    df = load(write(tmp_path, records))
    assert df["search_probes"].dropna().tolist() == [[[2e9, 6000.0], [4e9, 3500.0]]]
    assert searched(df)
    points = frontier_points(df)
    assert len(points) == 4 and points["frontier"].nunique() == 2
    table = frontier_table(df)
    assert table["activation_checkpointing"].tolist() == ["full", "none"]  # the largest first
    assert table["n_params"].tolist() == [6 * 10**9, 3 * 10**9]
    assert table["tokens_per_s"].tolist() == [2500.0, 5000.0]  # the best run at the size
    assert table["sizes"].tolist() == [2, 2]
    # a searched run's own probe bounds its frontier; a ladder's failed run bounds the other
    assert table["larger_failed"].tolist() == ["n_layer=16 (8B): oom", "llama-8b: oom"]
    assert table["mfu"].notna().all()
    fig = plot_frontier(df)
    ax = fig.axes[0]
    stars = [line for line in ax.get_lines() if line.get_marker() == "*"]
    assert sorted(float(s.get_xdata()[0]) for s in stars) == [3e9, 6e9]
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert [list(line.get_xdata()) for line in dotted] == [[2e9, 4e9]]
    assert ax.get_xscale() == "log"


def test_a_search_cut_short_keeps_its_set_up_and_its_failed_probe(tmp_path: Path) -> None:
    """A search whose measured run was stopped (status ``error``, its ``n_params`` the configured
    model's) still admits its set-up: a plain run at the size it found is that set-up's frontier,
    bounded by the search's own failed probe, never by the stopped run's status."""
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    cut = variant(base, ckpt="full", n_params=8 * 10**9, tokens=0.0, status="error", search=True)
    cut["run"]["model_search"] = {
        "result": 29,
        "probes": [
            {"n_layer": 28, "n_params": 7 * 10**9, "status": "ok", "tokens_per_s": 112.0},
            {"n_layer": 30, "n_params": 7.6 * 10**9, "status": "killed", "tokens_per_s": None},
            {"n_layer": 29, "n_params": 7.4 * 10**9, "status": "ok", "tokens_per_s": 111.0},
        ],
    }
    records = [
        cut,
        variant(base, ckpt="full", n_params=int(7.4 * 10**9), tokens=115.0),  # measured at 29 blocks
        variant(base, ckpt="none", n_params=2 * 10**9, tokens=900.0),  # no search: no frontier
    ]
    records[1]["config"]["model"]["n_layer"] = 29  # model.n_layer=29: named by its blocks, as a search's
    df = load(write(tmp_path, records))
    table = frontier_table(df)
    assert table["model"].tolist() == ["llama-7b-L29"]
    assert table["n_params"].tolist() == [int(7.4 * 10**9)]
    assert table["tokens_per_s"].tolist() == [115.0]
    assert table["larger_failed"].tolist() == ["n_layer=30 (7.6B): killed"]
    assert unmeasured_lines(df) == []  # the plain run measured the size the search found


def test_a_frontier_row_names_its_blocks_once() -> None:
    assert sized_name("llama3.1-8b", 33) == "llama3.1-8b-L33"
    assert sized_name("llama3.1-8b-L36", 36.0) == "llama3.1-8b-L36"  # a search's name, kept
    assert sized_name("llama3.1-8b-L36", 33) == "llama3.1-8b-L36-L33"  # not silently taken for 33
    assert sized_name("llama3.1-8b", pd.NA) == "llama3.1-8b"
    assert sized_name(None, 33) is None


def test_load_names_by_its_blocks_a_model_name_that_stands_for_two_sizes(tmp_path: Path) -> None:
    """``model.n_layer=33`` keeps the model's name in the record: beside a run of the named size the
    table showed two sizes as one model (and pooled them as repeats)."""
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    default = variant(base, ckpt="none", n_params=8 * 10**9, tokens=900.0)
    deeper = variant(base, ckpt="none", n_params=9 * 10**9, tokens=800.0)
    other = variant(base, ckpt="none", n_params=1 * 10**9, tokens=5000.0)
    for record, name, blocks in (
        (default, "llama-8b", 32),
        (deeper, "llama-8b", 33),
        (other, "llama-1b", 16),
    ):
        record["model"]["name"] = record["config"]["model"]["name"] = name
        record["config"]["model"]["n_layer"] = blocks
    df = load(write(tmp_path, [default, deeper, other])).sort_values("n_layer")
    assert df["model"].tolist() == ["llama-1b", "llama-8b-L32", "llama-8b-L33"]
    assert df["n_layer"].tolist() == [16, 32, 33]


def test_a_search_whose_size_no_run_measured_is_named_under_the_frontier(tmp_path: Path, capsys) -> None:
    """A search cut short after it found its size, with no plain run of that size, vanished from
    --frontier (only ok runs are points): the H200's ZeRO-3 ``none`` and ``selective`` searches. A
    line under the table now says what it found, from its largest ok probe, and what bounded it; a
    set-up whose ok run measured the size gets none."""
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    cut = variant(base, ckpt="none", n_params=8 * 10**9, tokens=0.0, status="error", search=True)
    cut["run"]["model_search"] = {
        "result": 33,
        "probes": [
            {"n_layer": 28, "n_params": 7.16 * 10**9, "status": "ok", "tokens_per_s": 1599.0},
            {"n_layer": 34, "n_params": 8.47 * 10**9, "status": "oom", "tokens_per_s": None},
            {"n_layer": 33, "n_params": 8.25 * 10**9, "status": "ok", "tokens_per_s": 1660.8},
        ],
    }
    measured = variant(base, ckpt="full", n_params=6 * 10**9, tokens=2500.0, search=True)
    df = load(write(tmp_path / "runs", [cut, measured]))
    assert frontier_table(df)["activation_checkpointing"].tolist() == ["full"]
    assert unmeasured_lines(df) == [
        "not measured: activation_checkpointing=none: its search trained up to 8.25B (its probe: 1,661 "
        "tokens/s over one step); its own run ended error (OutOfMemoryError), and no ok run measured that "
        "size; above it n_layer=34 (8.47B): oom"
    ]
    killed = variant(base, ckpt="selective", n_params=8 * 10**9, tokens=0.0, status="error", search=True)
    killed["run"]["model_search"] = {  # the H200's ZeRO-Offload: its one probe was killed
        "result": None,
        "probes": [{"n_layer": 27, "n_params": 6.94 * 10**9, "status": "killed", "tokens_per_s": None}],
    }
    df = load(write(tmp_path / "more", [cut, measured, killed]))
    assert unmeasured_lines(df)[1] == (
        "not measured: activation_checkpointing=selective: its search trained no size it recorded; its own "
        "run ended error (OutOfMemoryError); above it n_layer=27 (6.94B): killed"
    )
    assert main([str(tmp_path / "runs"), "--frontier", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "not measured: activation_checkpointing=none: its search trained up to 8.25B" in out
    report = tmp_path / "report.html"
    assert main([str(tmp_path / "runs"), "--format", "html", "--output", str(report)]) == 0
    assert "not measured: activation_checkpointing=none: its search trained up to 8.25B" in report.read_text()


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_csv_and_json_frontiers_say_what_was_not_measured_on_stderr(tmp_path: Path, capsys, fmt: str) -> None:
    """--frontier --format csv/json dropped the "not measured" lines the other formats show: they now
    go to stderr, and stdout stays a CSV or a JSON array of the frontier's rows."""
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    cut = variant(base, ckpt="none", n_params=8 * 10**9, tokens=0.0, status="error", search=True)
    cut["run"]["model_search"] = {
        "result": 33,
        "probes": [{"n_layer": 33, "n_params": 8.25 * 10**9, "status": "ok", "tokens_per_s": 1660.8}],
    }
    measured = variant(base, ckpt="full", n_params=6 * 10**9, tokens=2500.0, search=True)
    assert main([str(write(tmp_path / "runs", [cut, measured])), "--frontier", "--format", fmt]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out) if fmt == "json" else list(csv.DictReader(io.StringIO(out)))
    assert [row["activation_checkpointing"] for row in rows] == ["full"] and "not measured" not in out
    assert "not measured: activation_checkpointing=none: its search trained up to 8.25B" in err
    plain = write(tmp_path / "plain", [variant(base, ckpt="none", n_params=10**9, tokens=9e3)])
    assert main([str(plain), "--frontier", "--format", fmt]) == 0
    out, err = capsys.readouterr()
    assert NO_SEARCH in err and NO_SEARCH not in out


def test_the_cli_prints_the_frontier_and_the_html_report_adds_it(tmp_path: Path, capsys) -> None:
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    records = [
        variant(base, ckpt="none", n_params=2 * 10**9, tokens=5000.0, search=True),
        variant(base, ckpt="full", n_params=4 * 10**9, tokens=2500.0, search=True),
    ]
    root = write(tmp_path / "runs", records)
    assert main([str(root), "--frontier", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert list(rows[0])[:6] == [
        "activation_checkpointing",
        "model",
        "n_params",
        "micro_batch_size",
        "tokens_per_s",
        "mfu",
    ]
    assert [(r["activation_checkpointing"], r["n_params"]) for r in rows] == [
        ("full", "4000000000"),
        ("none", "2000000000"),
    ]
    report = tmp_path / "report.html"
    assert main([str(root), "--format", "html", "--output", str(report)]) == 0
    text = report.read_text()
    assert "<h2>The largest model per set-up (search.model=largest): its tokens/s and MFU</h2>" in text
    assert text.count("<table>") == 2


def test_the_frontier_footer_speaks_only_of_the_rows_shown(tmp_path: Path, capsys) -> None:
    """Under --frontier the footer judged the best two runs by the metric (runs the table does not show)
    and gave the CPU note for a CPU run outside the table, and counted runs as shown: now no verdict
    (the table is ranked by size), the CPU note only for a row shown, and the set-ups counted."""
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    records = [
        variant(base, ckpt="none", n_params=1 * 10**9, tokens=9000.0),  # faster, smaller: not shown
        variant(base, ckpt="none", n_params=3 * 10**9, tokens=5000.0, search=True),
        variant(base, ckpt="full", n_params=6 * 10**9, tokens=2500.0, search=True),
        variant(base, ckpt="selective", n_params=2 * 10**9, tokens=8000.0),  # no search: no frontier
    ]
    records[-1]["system"]["device_name"] = "cpu"
    assert main([str(write(tmp_path / "gpu", records)), "--frontier"]) == 0
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()[1:3]] == ["full", "none"]
    assert "ignificant" not in out + err and "CPU timings" not in out + err and "selective" not in out
    assert err.strip().splitlines()[-1] == "4 runs (4 ok); 2 set-ups shown (the largest model of each)"
    shown_on_cpu = [
        *records[:3],
        variant(base, ckpt="selective", n_params=2 * 10**9, tokens=8000.0, search=True),
    ]
    shown_on_cpu[-1]["system"]["device_name"] = "cpu"
    assert main([str(write(tmp_path / "cpu", shown_on_cpu)), "--frontier"]) == 0
    out, err = capsys.readouterr()
    assert "CPU timings are indicative only" in out and "3 set-ups shown" in err


def test_no_frontier_without_a_search(tmp_path: Path) -> None:
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    df = load(write(tmp_path, [variant(base, ckpt="none", n_params=10**9, tokens=9000.0)]))
    assert not searched(df)
    with pytest.raises(PlotSkipped, match="search.model=largest"):
        plot_frontier(df)


def test_the_cli_frontier_without_a_search_or_an_ok_run_is_one_line(tmp_path: Path, capsys) -> None:
    """--frontier listed every ok run as a frontier row when no run searched, and printed pandas'
    "Empty DataFrame" for a folder of invalid records: each is now one line and nothing else (csv:
    the header only)."""
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    plain = write(
        tmp_path / "plain", [variant(base, ckpt=c, n_params=10**9, tokens=9e3) for c in ("none", "full")]
    )
    assert main([str(plain), "--frontier"]) == 0
    assert capsys.readouterr().out.strip() == NO_SEARCH
    assert main([str(plain), "--frontier", "--format", "csv"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1  # the header
    bad = [variant(base, ckpt="none", n_params=10**9, tokens=0.0, status="invalid", search=True)]
    assert main([str(write(tmp_path / "bad", bad)), "--frontier", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == NO_OK_RUN and "Empty DataFrame" not in out
    cut = variant(base, ckpt="none", n_params=10**9, tokens=0.0, status="error", search=True)
    cut["run"]["model_search"] = {
        "result": None,
        "probes": [{"n_layer": 4, "n_params": 5 * 10**8, "status": "ok", "tokens_per_s": 118.0}],
    }
    assert main([str(write(tmp_path / "cut", [cut])), "--frontier"]) == 0  # only an interrupted search
    out = capsys.readouterr().out.splitlines()
    assert out[0] == NO_OK_RUN and out[1].startswith("not measured: ") and "trained up to 500M" in out[1]


@pytest.mark.parametrize("width", [120, 64])
def test_the_frontier_table_keeps_params_tokens_and_the_set_up_at_any_width(capsys, width: int) -> None:
    """At the default width --frontier hid ``params`` (the frontier's point) while it showed the
    blank ZeRO++ columns of the FSDP2 set-ups: now the set-up columns that tell no set-up apart go
    first, then the other figures, and the set-up, the size and tokens/s always stay."""
    assert main([str(H200_FRONTIER), "--frontier", "--width", str(width)]) == 0
    out = capsys.readouterr().out.splitlines()
    header, rows = out[0].split(), out[1:9]
    assert {"backend", "cpu_offload", "ckpt", "params", "tokens/s"} <= set(header)
    backends = ["fsdp"] * 3 + ["deepspeed"] * 3 + ["fsdp", "deepspeed"]  # the largest models first
    assert [row.split()[0] for row in rows] == backends
    assert "8,902,709,248" in rows[0] and "3,190" in rows[0]  # params and tokens/s of the largest
    assert all(len(line) <= width for line in out[:9]), out[:9]
    hidden = " ".join(out[9:]).split("columns: ")[1].split(";")[0].split(", ")
    assert {"hpz", "qwz", "qgz", "reshard", "mbs"} <= set(hidden)
    if width == 120:  # the figures stay as long as they fit
        assert {"model", "MFU", "larger_failed"} <= set(header) and "hpz" not in header
        assert "zero" in hidden  # backend=deepspeed tells it already
    else:
        assert header == ["backend", "cpu_offload", "off_optim", "ckpt", "params", "tokens/s"]


def test_the_frontier_legend_names_only_the_keys_that_tell_set_ups_apart() -> None:
    """The legend labelled FSDP2 set-ups ``hpz=-, qwz=-, ...`` (DeepSpeed's ZeRO++ keys, blank for
    them) and the ZeRO-3 one ``reshard=-``: a set-up is now named by the keys that tell the set-ups
    apart, and only those it sets."""
    fig = plot_frontier(load(H200_FRONTIER))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[:8] == [
        "backend=deepspeed, off_optim=cpu, ckpt=full",
        "backend=deepspeed, off_optim=none, ckpt=full",
        "backend=deepspeed, off_optim=none, ckpt=none",
        "backend=deepspeed, off_optim=none, ckpt=selective",
        "backend=fsdp, cpu_offload=false, ckpt=full",
        "backend=fsdp, cpu_offload=false, ckpt=none",
        "backend=fsdp, cpu_offload=false, ckpt=selective",
        "backend=fsdp, cpu_offload=true, ckpt=full",
    ]


def test_telling_columns_takes_set_values_then_what_tells_rows_apart() -> None:
    import pandas as pd

    rows = pd.DataFrame(
        {
            "backend": ["fsdp", "fsdp", "deepspeed", "deepspeed"],
            "hpz": [None, None, 1, 1],  # one set value: the backend says it already
            "qwz": ["", None, "false", "true"],  # blank, None and "" alike; two set values
            "ckpt": ["full", "none", "full", "full"],
            "seed": [1, 1, 1, 1],
        }
    )
    assert telling_columns(rows, list(rows)) == ["backend", "qwz", "ckpt"]
    # A column set for one row only still counts when nothing else tells two rows apart.
    alone = pd.DataFrame({"backend": ["fsdp", "fsdp"], "offload": [None, "cpu"]})
    assert telling_columns(alone, ["backend", "offload"]) == ["offload"]
    assert telling_columns(alone.iloc[:1], ["backend", "offload"]) == []


def test_a_budget_below_the_smallest_size_is_refused_before_launch(hydra_compose) -> None:
    """``search.memory_budget_gib`` under the estimated peak of ``search.min_n_layer`` blocks: a
    ConfigError at planning, naming the key, its value and the smallest size's estimate as the fix;
    a budget at that estimate plans."""
    cfg = hydra_compose([*TINY, "search.model=largest", "search.memory_budget_gib=0.000001"])
    with pytest.raises(ConfigError) as err:
        make_plan(cfg)
    plan = make_plan(hydra_compose(TINY))
    need = estimate(sized(plan, 1), plan.layout).total / GIB
    least = math.ceil(need * 1024) / 1024
    message = str(err.value)
    assert message.startswith("Invalid config: search.memory_budget_gib=1e-6: ") and "\n" not in message
    assert f"n_layer=1 ({need:.4g} GiB per rank)" in message
    assert f"Fix: set search.memory_budget_gib={typed_form(least)} or more" in message  # as typed (#844)
    assert make_plan(hydra_compose([*TINY, "search.model=largest", f"search.memory_budget_gib={least}"]))
    # min_n_layer is the smallest size: 3 blocks need more than 1
    three = hydra_compose(
        [*TINY, "search.model=largest", "search.min_n_layer=3", f"search.memory_budget_gib={least}"]
    )
    with pytest.raises(ConfigError, match="n_layer=3"):
        make_plan(three)


def test_parameter_counts_are_written_with_a_suffix_to_three_significant_figures() -> None:
    """The search's progress and the frontier's ``larger_failed`` wrote a tiny model as ``0.000263 B``:
    counts are written ``263K``, ``12.4M``, ``8.03B`` (rounded before the suffix is picked)."""
    counts = (0, 263, 263_000, 999_999, 12_400_000, 8_030_261_248, 1.2e12)
    assert [format_count(n) for n in counts] == ["0", "263", "263K", "1M", "12.4M", "8.03B", "1.2T"]
    record = {
        "run": {
            "model_search": {"result": 2, "probes": [{"n_layer": 3, "n_params": 263_456, "status": "oom"}]}
        }
    }
    assert search_failed(record) == "n_layer=3 (263K): oom"


def test_an_interrupt_names_the_search_it_cut_short() -> None:
    """The interrupted run's error message says which search held the run (one without a result),
    how many probes finished and where they are; nothing once both searches ended."""
    done = {"result": 3, "probes": [{}, {}]}
    assert search_cut_short({}) == search_cut_short({"model_search": done}) == ""
    assert search_cut_short({"model_search": done, "batch_search": {"result": 2, "probes": [{}]}}) == ""
    cut = {"result": None, "probes": [{}]}
    assert search_cut_short({"model_search": cut}) == (
        " during search.model=largest (1 probe finished, in run.model_search)"
    )
    both = {"model_search": done, "batch_search": {"result": None, "probes": [{}, {}]}}
    assert search_cut_short(both) == " during batch=auto (2 probes finished, in run.batch_search)"


@pytest.mark.parametrize(
    "other",
    [
        ["--pivot", "model"],
        ["--best-by", "model"],
        ["--baseline", "backend=fsdp"],
        ["--columns", "model,predicted_peak_gib"],  # a fresh-user trial: both were ignored in silence
        ["--sort", "tokens_per_s"],
    ],
)
def test_the_frontier_with_an_option_it_would_override_is_refused_in_one_line(capsys, other) -> None:
    """--frontier --pivot printed a pivot and --frontier --best-by model dropped set-ups without a word:
    the combinations are refused in one line naming the other option."""
    with pytest.raises(SystemExit) as exit_:
        main([str(H200_FRONTIER), "--frontier", *other])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--frontier with {other[0]}" in err and f"drop {other[0]}" in err
