"""benchmarks/plan/llama3.1-8b.md does not drift: the best row of each cluster and every torchtitan row
it shows are recomputed in process (:func:`flopsweep.plan_space.evaluate`, a few set-ups) from the
keys of benchmarks/plan_llama8b.py, from the records flopsweep ships (``predict.measured``, as the plan
reads them), and must print the same figures."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from flopsweep import forecast
from flopsweep import plan_space as ps
from flopsweep.clusters import parse_cluster

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "plan_llama8b.py"
_spec = importlib.util.spec_from_file_location("plan_llama8b", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules["plan_llama8b"] = bench
_spec.loader.exec_module(bench)

TEXT = bench.OUT.read_text()
PLAN_ONLY = ("plan_clusters=", "objective=", "space.", "plan_format=")


def _job(args: tuple[str, ...]) -> list[str]:
    """The job's own keys of a plan's arguments (the plan's keys left out)."""
    return [a for a in args if not a.startswith(PLAN_ONLY)]


def _setup(line: str) -> tuple[str, ps.Setup]:
    """``(cluster, set-up)`` of one ``CLUSTER: flopsweep ...`` line under the table."""
    cluster, _, command = line.strip().partition(": ")
    keys = dict(a.split("=", 1) for a in command.split() if "=" in a)
    layout = "dp"
    if "parallel.dp_replicate" in keys:
        layout = "hsdp"
    elif "parallel.tp" in keys:
        layout = f"tp{keys['parallel.tp']}"
    elif "parallel.pp" in keys:
        layout = f"pp{keys['parallel.pp']}"
    setup = ps.Setup(
        backend=keys["backend"],
        layout=layout,
        checkpointing=keys["activation_checkpointing"],
        precision=keys["precision"],
        micro_batch=int(keys["batch.micro_batch_size"]),
    )
    return cluster, setup


def test_the_best_row_of_each_cluster_does_not_drift(hydra_compose) -> None:
    from flopsweep.job.planrender import count_figure

    best = TEXT.split("the command that runs it:\n", 1)[1].split("\n(plan:", 1)[0].splitlines()
    assert len(best) == 6
    cfg = hydra_compose(_job(bench.QUESTION))
    table = {line.split()[2]: line.split() for line in TEXT.splitlines() if re.match(r"\s+\d+\*\s", line)}
    for line in best:
        cluster, setup = _setup(line)
        row = ps.evaluate(cfg, setup, parse_cluster(cluster), forecast.prediction_records(cfg))
        cells = table[cluster]
        assert row.status == "ok", row.reason
        assert (
            cells[cells.index(f"mb{setup.micro_batch}") + 1] == f"{row.predicted_tokens_per_s_per_gpu:,.0f}"
        )
        days = count_figure(row.budget_days)  # 3 digits below 100 (#524): 33.2, 2,106
        assert days in cells and f"{row.est_peak_gib_per_rank:.1f}" in cells


def test_the_torchtitan_rows_do_not_drift(hydra_compose) -> None:
    cfg = hydra_compose(_job(bench.TORCHTITAN))
    rows = [line for line in TEXT.splitlines() if line.startswith("| table ")]
    assert len(rows) == len(bench.PUBLISHED)
    for line, pub in zip(rows, bench.PUBLISHED, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        cluster = "H100-NVL:1x8:ib400" if pub.gpus == 8 else "H100-NVL:16x8:ib400"
        setup = ps.Setup(
            backend="fsdp",
            layout="dp",
            checkpointing="selective",
            precision=pub.precision,
            micro_batch=2,
            compile=pub.compiled,
        )
        row = ps.evaluate(
            cfg, setup, parse_cluster(cluster), forecast.prediction_records(cfg), min_headroom=0.05
        )
        assert cells[2] == f"{pub.tps:,.0f}" and cells[4] == f"{row.predicted_tokens_per_s_per_gpu:,.0f}"
        assert cells[-1].endswith(f"/ {row.est_peak_gib_per_rank:.1f}")
        assert float(cells[6]) == pytest.approx(pub.tps / row.predicted_tokens_per_s_per_gpu, abs=0.006)
