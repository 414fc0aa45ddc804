"""Issue 23, item 11: the ready layout sweep, the analysis' layout columns, the layout in plot legends,
and the scaling efficiency of a set-up that has no one-rank run of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import fit_clock, rescaled

import analysis
from analysis.plots import series_labels
from flopsweep.layout import Layout

ROOT = Path(__file__).resolve().parents[2]


BASE = json.loads((ROOT / "tests/fixtures/records/v2-ok/metrics.json").read_text())


DEFAULT = {
    "dp_replicate": 1,
    "dp_shard": -1,
    "tp": 1,
    "pp": 1,
    "pp_schedule": "1F1B",
    "pp_microbatches": None,
}


@pytest.mark.parametrize(
    ("degrees", "schedule", "label"),
    [
        ({"dp_shard": 8}, None, "dp8"),
        ({"dp_replicate": 2, "dp_shard": 4}, None, "dp2x4"),
        ({"dp_shard": 4, "tp": 2}, None, "dp4 tp2"),
        ({"tp": 8}, None, "tp8"),
        ({"pp": 2, "dp_shard": 4}, "1F1B", "pp2/1F1B dp4"),
        ({"pp": 2, "dp_shard": 2, "tp": 2}, "GPipe", "pp2/GPipe dp2 tp2"),
        ({"dp_shard": 8}, "1F1B", "dp8"),  # a schedule without pipeline stages is not named
        ({}, None, "dp1"),
    ],
)
def test_the_layout_label_names_the_degrees_above_one_in_mesh_order(degrees, schedule, label) -> None:
    assert Layout(**degrees).label(schedule) == label


def _record(
    path: Path, *, world: int, tokens_per_device: float, degrees: dict | None = None, **parallel
) -> None:
    """The v2 fixture as if it ran FSDP2 on ``world`` ranks with ``config.parallel`` = the defaults
    updated by ``parallel`` and ``system.parallel`` = ``degrees`` (pure data parallel by default), at
    that rate, every derived figure consistent with its data-parallel degree."""
    r = rescaled(BASE, world=world, tokens_per_device=tokens_per_device)
    layout = Layout(**(degrees or {"dp_shard": world}))
    assert layout.world_size == world
    r["system"]["parallel"] = layout.as_dict()
    m, batch = r["metrics"], r["config"]["batch"]
    m["global_batch_size"] = batch["micro_batch_size"] * batch["grad_accum"] * layout.dp
    m["tokens_per_step"] = m["global_batch_size"] * r["config"]["model"]["seq_len"]
    mean = m["tokens_per_step"] / m["tokens_per_s"]
    n = len(m["iteration_time_s"]["values"])
    m["iteration_time_s"] |= {"mean": mean, "median": mean, "min": mean, "max": mean, "values": [mean] * n}
    flops = r["metrics"]["model_flops_per_iteration"] / (
        batch["micro_batch_size"] * batch["grad_accum"] * world
    )
    for key in ("model_flops_per_iteration", "hardware_flops_per_iteration"):
        m[key] = flops * m["global_batch_size"]
        m[key.replace("flops_per_iteration", "tflops_per_device")] = m[key] / mean / world / 1e12
    m["tflops_per_device"] = None
    m["mfu"] = m["model_tflops_per_device"] / m["peak_tflops"]
    m["hfu"] = m["hardware_tflops_per_device"] / m["peak_tflops"]
    if m.get("measured_matmul_tflops"):
        m["matmul_fraction"] = m["model_tflops_per_device"] / m["measured_matmul_tflops"]
    r["config"]["backend"]["name"] = "fsdp"
    r["config"]["nproc_per_node"] = str(world)
    r["config"]["parallel"] = {**DEFAULT, **parallel}
    r["run"]["id"] = path.name
    path.mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps(fit_clock(r)))


def _layout_sweep(root: Path) -> None:
    """Three layouts of 8 ranks and the one-rank run of the same set-up without a layout."""
    _record(root / "one", world=1, tokens_per_device=1000.0)
    _record(root / "fsdp8", world=8, tokens_per_device=800.0)
    _record(root / "tp2", world=8, tokens_per_device=700.0, degrees={"dp_shard": 4, "tp": 2}, tp=2)
    pp = {"pp": 2, "pp_microbatches": 4}
    _record(root / "pp2", world=8, tokens_per_device=600.0, degrees={"dp_shard": 4, "pp": 2}, **pp)


def test_layout_columns_come_from_system_parallel(tmp_path: Path) -> None:
    _layout_sweep(tmp_path)
    df = analysis.load(tmp_path).set_index("run_id")
    assert df["implausible"].isna().all(), df["implausible"].dropna().to_dict()  # dp, not world, checked
    assert df["layout"].to_dict() == {"one": "dp1", "fsdp8": "dp8", "tp2": "dp4 tp2", "pp2": "pp2/1F1B dp4"}
    assert df.loc["tp2", ["dp", "dp_shard", "tp", "pp"]].tolist() == [4, 4, 2, 1]
    assert df.index[df["tp"].eq(2)].tolist() == ["tp2"]  # --filter tp=2 has a column to read
    old = json.loads(json.dumps(BASE))  # a record from before system.parallel: data parallel
    old["system"].pop("parallel", None)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "metrics.json").write_text(json.dumps(old))
    assert analysis.load(tmp_path / "old")["layout"].tolist() == [f"dp{old['system']['world_size']}"]


def test_the_layout_column_shows_where_it_tells_rows_apart(tmp_path: Path) -> None:
    """At one world size the layout is what tells the rows apart: the table shows it; in a data
    parallel scaling sweep it only repeats the world size: hidden."""
    _layout_sweep(tmp_path / "layouts")
    table = analysis.render(analysis.compact(analysis.load(tmp_path / "layouts")), "table")
    assert "layout" in table and "dp4 tp2" in table and "pp2/1F1B dp4" in table
    for world, rate in ((1, 1000.0), (2, 900.0), (4, 800.0)):
        _record(tmp_path / "scaling" / str(world), world=world, tokens_per_device=rate)
    table = analysis.render(analysis.compact(analysis.load(tmp_path / "scaling")), "table")
    assert "layout" not in table and "scale_eff" in table


def test_scaling_efficiency_says_which_baseline_it_used(tmp_path: Path) -> None:
    """A layout cannot run on one rank: its efficiency is over the one-rank run of the same set-up
    without the layout, and says so; a set-up without any one-rank run is measured from its
    smallest world size, and says so; the usual case (its own one-rank runs) leaves it blank."""
    _layout_sweep(tmp_path / "a")
    df = analysis.load(tmp_path / "a").set_index("run_id")
    eff, base = df["scaling_efficiency"], df["scaling_baseline"]
    assert eff.to_dict() == pytest.approx({"one": 1.0, "fsdp8": 0.8, "tp2": 0.7, "pp2": 0.6})
    assert base.isna()[["one", "fsdp8"]].all()
    assert base[["tp2", "pp2"]].tolist() == ["1-rank run without this layout"] * 2
    assert "scale_base" in analysis.render(analysis.compact(df.reset_index()), "table")

    for world, rate in ((2, 900.0), (4, 810.0)):  # TP 2 at 2 and 4 ranks, no 1-rank run at all
        degrees = {"dp_shard": world // 2, "tp": 2}
        _record(tmp_path / "b" / str(world), world=world, tokens_per_device=rate, degrees=degrees, tp=2)
    df = analysis.load(tmp_path / "b").set_index("run_id")
    assert df["scaling_efficiency"].to_dict() == pytest.approx({"2": 1.0, "4": 0.9})
    assert df["scaling_baseline"].tolist() == ["2 ranks (no 1-rank run)"] * 2


def _cli(capsys, *args) -> str:
    from analysis.__main__ import main

    assert main([str(a) for a in args]) == 0
    return capsys.readouterr().err


def test_a_layout_without_a_baseline_says_what_to_add(tmp_path: Path, capsys) -> None:
    _record(tmp_path / "tp2", world=8, tokens_per_device=700.0, degrees={"dp_shard": 4, "tp": 2}, tp=2)
    err = _cli(capsys, tmp_path, "--columns", "layout,world_size,scaling_efficiency")
    assert [line for line in err.splitlines() if " blank" in line] == [
        f"scale_eff is blank: no 1-rank run of the same set-up without its layout (config.parallel) in "
        f"{tmp_path}; add one with nproc_per_node=1 and the parallel.* keys at their defaults, or run "
        "this layout at two or more world sizes"
    ]


def test_plot_legends_name_the_layout_only_where_it_tells_runs_of_one_world_size_apart() -> None:
    layouts = pd.DataFrame(
        {
            "backend": ["fsdp"] * 3,
            "world_size": [8, 8, 8],
            "micro_batch_size": [4, 4, 4],
            "layout": ["dp8", "dp4 tp2", "pp2/1F1B dp4"],
            "tp": [1, 2, 1],
        }
    )
    labels = series_labels(layouts, x="micro_batch_size", series="backend").tolist()
    assert labels == ["fsdp, layout=dp8", "fsdp, layout=dp4 tp2", "fsdp, layout=pp2/1F1B dp4"]
    scaling = pd.DataFrame(
        {"backend": ["fsdp"] * 3, "world_size": [1, 2, 4], "layout": ["dp1", "dp2", "dp4"]}
    )
    assert series_labels(scaling, x="world_size", series="backend").tolist() == ["fsdp"] * 3


def test_the_layout_sweep_has_distinct_layouts_of_eight_ranks(hydra_compose) -> None:
    """Every point of sweep/layouts-8gpu-llama8b.yaml composes to a parallel config whose degrees make
    8 ranks, no two alike: FSDP 8, HSDP 2x4 and 4x2, TP 2, 4 and 8 beside FSDP, pipelines."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from flopsweep.layout import Layout

    params = hydra_compose.config(["+sweep=layouts-8gpu-llama8b"], hydra=True).hydra.sweeper.params
    (override,) = OverridesParser.create().parse_overrides([f"parallel={params['parallel']}"])
    labels = []
    for value in override.sweep_string_iterator():
        cfg = hydra_compose(["+sweep=layouts-8gpu-llama8b", f"parallel={value}"])
        assert (cfg.model.name, cfg.nproc_per_node, cfg.backend.name) == ("llama3.1-8b", "8", "fsdp")
        layout = Layout.resolve(cfg.parallel, 8)
        labels.append(layout.label(cfg.parallel.pp_schedule))
        if layout.pp > 1:
            assert cfg.parallel.pp_microbatches >= layout.pp
        assert cfg.batch.global_batch_size % (cfg.batch.micro_batch_size * layout.dp) == 0
    assert len(set(labels)) == len(labels) == 11
    assert {"dp8", "dp2x4", "dp4 tp2", "dp2 tp4", "tp8", "pp2/1F1B dp4"} <= set(labels)


def test_a_rank_count_baseline_matches_across_the_layouts_it_resolves_to(tmp_path: Path) -> None:
    """``--baseline world_size=1``: the one-rank run (``dp1``) is every data-parallel run's baseline,
    although their layouts (``dp2``, ``dp4``) differ: the layout follows the rank count."""
    for world, rate in ((1, 1000.0), (2, 900.0), (4, 800.0)):
        _record(tmp_path / str(world), world=world, tokens_per_device=rate)
    df = analysis.compare(analysis.load(tmp_path), {"world_size": 1}, metric="tokens_per_s_per_device")
    assert df.set_index("run_id")["speedup"].to_dict() == pytest.approx({"1": 1.0, "2": 0.9, "4": 0.8})


def test_layout_in_an_option_means_the_parallel_layout_not_the_attention_one() -> None:
    """``--columns layout``, ``--filter layout=...`` and ``--pivot`` take a column's name or its short
    header; ``layout`` is the parallel layout's own name, so it wins over the block-sparse attention
    layout, whose header is ``attn_layout``."""
    from analysis.cli import column_name

    assert column_name("layout") == "layout"
    assert column_name("attn_layout") == "attention_layout"
    assert column_name("attention_layout") == "attention_layout"
