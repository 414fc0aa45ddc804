"""Scaling as a first-class result: ``sweep/scaling.yaml``, ``scaling_efficiency``, the plots."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import rescaled

import analysis
from flopsweep.config import ConfigError
from flopsweep.plan import Environment, plan

ROOT = Path(__file__).resolve().parents[2]


BASE = json.loads((ROOT / "tests/fixtures/records/v2-ok/metrics.json").read_text())


def _record(path: Path, *, backend: str, world: int, tokens_per_device: float, **config) -> None:
    """A copy of the v2 fixture as if it ran ``backend`` on ``world`` ranks, at that rate (every
    derived figure consistent, :func:`helpers.rescaled`)."""
    r = rescaled(BASE, world=world, tokens_per_device=tokens_per_device)
    r["config"]["backend"]["name"] = backend
    r["config"]["nproc_per_node"] = str(world)
    r["config"].update(config)
    r["run"]["id"] = f"{backend}-{world}-{path.name}"
    path.mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps(r))


def test_scaling_efficiency_matches_on_everything_but_the_rank_count(tmp_path) -> None:
    _record(tmp_path / "a", backend="fsdp", world=1, tokens_per_device=1000.0)
    _record(tmp_path / "b", backend="fsdp", world=2, tokens_per_device=900.0)
    _record(tmp_path / "c", backend="fsdp", world=4, tokens_per_device=800.0)
    _record(tmp_path / "d", backend="ddp", world=2, tokens_per_device=950.0)  # no 1-rank ddp run
    _record(tmp_path / "e", backend="fsdp", world=2, tokens_per_device=500.0, seed=7)  # another set-up
    _record(tmp_path / "f", backend="fsdp", world=1, tokens_per_device=999.0, tag="x", timeout_s=5)
    df = analysis.load(tmp_path).set_index("run_id")
    eff = df["scaling_efficiency"]
    assert eff["fsdp-1-a"] == pytest.approx(1000 / 999.5)  # the median of the two 1-rank runs
    assert eff["fsdp-2-b"] == pytest.approx(900 / 999.5)
    assert eff["fsdp-4-c"] == pytest.approx(800 / 999.5)
    assert eff["fsdp-1-f"] == pytest.approx(999 / 999.5)  # tag and run controls do not split a set-up
    assert eff[["ddp-2-d", "fsdp-2-e"]].isna().all()
    assert df.loc["fsdp-2-b", "setup_id"] == df.loc["fsdp-1-a", "setup_id"] != df.loc["fsdp-2-e", "setup_id"]
    figures, skipped = analysis.make_plots(df.reset_index())
    assert "scaling" in figures, skipped
    assert "scale_eff" in analysis.render(analysis.compact(df.reset_index()), "table")


def test_one_rank_count_only_leaves_efficiency_blank(tmp_path) -> None:
    _record(tmp_path / "a", backend="fsdp", world=1, tokens_per_device=1000.0)
    df = analysis.load(tmp_path)
    assert df["scaling_efficiency"].isna().all()
    assert "scale_eff" not in analysis.render(analysis.compact(df), "table")
    _, skipped = analysis.make_plots(df)
    assert "two or more world sizes" in skipped["scaling"]


def test_scaling_sweep_refuses_rank_counts_above_the_visible_gpus(hydra_compose) -> None:
    two_gpus = Environment(cuda_available=True, gpu_count=2, bf16_supported=True, capability=(9, 0))
    points = [[f"backend={b}", f"nproc_per_node={n}"] for b in ("ddp", "zero3") for n in (1, 2)]
    for cfg in (hydra_compose(["+sweep=scaling", *o]) for o in points):
        assert plan(cfg, two_gpus).cfg.nproc_per_node == cfg.nproc_per_node
    for cfg in (hydra_compose(["+sweep=scaling", "backend=fsdp", f"nproc_per_node={n}"]) for n in (4, 8)):
        with pytest.raises(ConfigError, match="more ranks than the 2 visible GPU"):
            plan(cfg, two_gpus)


def test_a_narrow_table_keeps_the_column_that_tells_rows_apart(tmp_path) -> None:
    """Columns with one value everywhere are hidden first: world size stays in a scaling table."""
    _record(tmp_path / "a", backend="fsdp", world=1, tokens_per_device=1000.0)
    _record(tmp_path / "b", backend="fsdp", world=2, tokens_per_device=900.0)
    text = analysis.render(analysis.compact(analysis.load(tmp_path)), "table", width=100)
    assert "world" in text.splitlines()[0], text


def _cli(capsys, *args) -> tuple[str, str]:
    from analysis.__main__ import main

    assert main([str(a) for a in args]) == 0
    out = capsys.readouterr()
    return out.out, out.err


def _blank_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if " blank" in line]


def test_a_blank_scale_eff_says_why_and_what_to_run(tmp_path, capsys) -> None:
    """Issue: ``--columns scaling_efficiency`` showed a blank column and no word why. Each cause
    gets one line on stderr with the fix; stdout (the table) is unchanged."""
    _record(tmp_path / "ddp2", backend="ddp", world=2, tokens_per_device=950.0)
    out, err = _cli(capsys, tmp_path, "--columns", "model,backend,world_size,scaling_efficiency")
    assert _blank_lines(err) == [
        f"scale_eff is blank: no nproc_per_node=1 run of the same set-up in {tmp_path}; "
        "add nproc_per_node=1 to the sweep"
    ]
    assert "blank" not in out

    failed = copy.deepcopy(BASE)  # the 1-rank run of that set-up ran out of memory
    failed["config"]["backend"]["name"], failed["config"]["nproc_per_node"] = "ddp", "1"
    failed["system"]["world_size"], failed["run"]["id"], failed["status"] = 1, "ddp-1-oom", "oom"
    failed["error"] = {
        "type": "OutOfMemoryError",
        "message": "CUDA out of memory",
        "phase": "warmup",
        "rank": 0,
    }
    (tmp_path / "ddp1").mkdir()
    (tmp_path / "ddp1" / "metrics.json").write_text(json.dumps(failed))
    _, err = _cli(capsys, tmp_path, "--columns", "backend,world_size,status,scaling_efficiency")
    assert _blank_lines(err) == [
        f"scale_eff is blank: the nproc_per_node=1 run of the same set-up ended oom in {tmp_path}; "
        "fix it and re-run the sweep with resume=true"
    ]


def test_a_one_rank_sweep_says_to_add_a_rank_count(tmp_path, capsys) -> None:
    _record(tmp_path / "a", backend="fsdp", world=1, tokens_per_device=1000.0)
    _, err = _cli(capsys, tmp_path, "--sort", "scale_eff")
    assert _blank_lines(err) == [
        "scale_eff is blank: the set-up ran at world size 1 only; add nproc_per_node=2 (or more) to the "
        "sweep to measure scaling"
    ]
    _, err = _cli(capsys, tmp_path)  # the default table drops an empty scale_eff: nothing to explain
    assert _blank_lines(err) == []


def test_a_partly_blank_scale_eff_names_the_runs_and_csv_stays_quiet(tmp_path, capsys) -> None:
    _record(tmp_path / "a", backend="fsdp", world=1, tokens_per_device=1000.0)
    _record(tmp_path / "b", backend="fsdp", world=2, tokens_per_device=900.0)
    _record(tmp_path / "d", backend="ddp", world=2, tokens_per_device=950.0)
    _, err = _cli(capsys, tmp_path)
    assert _blank_lines(err) == [
        f"scale_eff is blank for 1 of 3 ok runs (gpt-1.3b ddp x2): no nproc_per_node=1 run of the "
        f"same set-up in {tmp_path}; add nproc_per_node=1 to the sweep"
    ]
    _, err = _cli(capsys, tmp_path, "--format", "csv")  # every column, none asked for by name
    assert _blank_lines(err) == []
    _, err = _cli(capsys, tmp_path, "--baseline", "backend=ddp")
    assert (
        "speedup is blank for 1 of 3 ok runs (gpt-1.3b fsdp x1): no ok backend=ddp run "
        "with the same other set-up"
    ) in err
    _, err = _cli(capsys, tmp_path, "--columns", "backend,breakdown_compute_s,breakdown_idle_s")
    assert _blank_lines(err) == [
        "compute_s, idle_s are blank: the run was not profiled (or its profile failed or is damaged: "
        "see warn); run with profile=true, or fix what its profile_failed warning names"
    ]


def test_sort_by_scale_eff_puts_the_best_scaling_first(tmp_path, capsys) -> None:
    """Issue: ``--sort scaling_efficiency`` put the worst first; higher is better, blanks last."""
    for name, world, rate in (("a", 1, 1000.0), ("b", 2, 900.0), ("c", 4, 800.0), ("d", 8, 950.0)):
        _record(tmp_path / name, backend="fsdp", world=world, tokens_per_device=rate)
    _record(tmp_path / "e", backend="ddp", world=2, tokens_per_device=990.0)  # no 1-rank ddp: blank
    for spec in ("scaling_efficiency", "scale_eff"):
        out, _ = _cli(capsys, tmp_path, "--sort", spec, "--format", "json")
        got = [(r["backend"], r["world_size"]) for r in json.loads(out)]
        assert got == [("fsdp", 1), ("fsdp", 8), ("fsdp", 2), ("fsdp", 4), ("ddp", 2)], spec
    out, _ = _cli(capsys, tmp_path, "--sort", "scale_eff:asc", "--format", "json")
    assert [r["world_size"] for r in json.loads(out)] == [4, 2, 8, 1, 2]


LONG_MODEL = "gpt-1.3b-" + "with-a-model-name-longer-than-its-panel" * 2


def _breakdown(step: float) -> dict:
    parts = {"compute_s": 0.6 * step, "optimizer_s": 0.1 * step, "exposed_comm_s": 0.2 * step}
    return {"step_s": step, **parts, "idle_s": 0.1 * step, "comm_s": 0.3 * step}


def test_every_plot_title_lies_inside_its_rendered_figure(tmp_path) -> None:
    """Issue: the scaling plot's title ran past the figure's edges. Each figure is rendered to PNG
    (Agg) and every title's window extent must lie within the figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for name, world, rate in (("a", 1, 1000.0), ("b", 2, 900.0), ("c", 4, 800.0)):
        _record(tmp_path / name, backend="fsdp", world=world, tokens_per_device=rate)
        rec = json.loads((tmp_path / name / "metrics.json").read_text())
        rec["config"]["model"]["name"] = LONG_MODEL  # a panel title wider than its panel
        rec["metrics"]["breakdown"] = _breakdown(rec["metrics"]["iteration_time_s"]["mean"])
        rec["config"]["search"] = {
            "model": "largest",
            "grow": "n_layer",
            "min_n_layer": 1,
            "max_n_layer": 256,
            "memory_budget_gib": None,
        }
        (tmp_path / name / "metrics.json").write_text(json.dumps(rec))
    df = pd.concat(  # --predict: the predicted-vs-measured plot is drawn too
        [analysis.load(tmp_path, predict=True), analysis.load(ROOT / "tests/fixtures/sweep")],
        ignore_index=True,
    )
    figures, skipped = analysis.make_plots(df)
    # every plot but the energy one (these records, like every CPU run, have no GPU energy)
    assert set(figures) == set(analysis.PLOTS) - {"tokens_vs_joules_per_token"}, skipped
    for name, fig in figures.items():
        canvas = FigureCanvasAgg(fig)
        canvas.print_png(io.BytesIO())  # draws, and lays the figure out
        renderer, box = canvas.get_renderer(), fig.bbox
        titles = [t for t in fig.texts if t.get_text()] + [ax.title for ax in fig.axes if ax.get_title()]
        assert any(t.get_text() for t in fig.texts), name  # a figure title
        for title in titles:
            extent = title.get_window_extent(renderer)
            inside = (
                box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1
            )
            assert inside, (name, title.get_text(), extent, box)
    scaling = figures["scaling"]
    assert "Weak scaling: tokens per second per device vs world size" in " ".join(
        scaling.get_suptitle().split()
    )
    panel = next(ax for ax in scaling.axes if ax.get_title())
    # the name is bounded (analysis.sanitize.label, issue 30 class 10), then wrapped to its panel
    from analysis.sanitize import label

    assert panel.get_title().replace("\n", "") == label(LONG_MODEL) and "\n" in panel.get_title()
