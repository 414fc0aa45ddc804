"""search.model=largest: its checks, its memory rule, a real CPU search through run.py, and the
frontier table and plot of the analysis."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import make_plan, run_py, run_py_signalled
from unit.test_modelsearch import TINY, sized  # shared with the unit tier

from flopsweep.memory import estimate
from flopsweep.sizesearch import GIB, budget_problem
from flopsweep.text import format_count


def search_run(run_dir: Path, *overrides: str) -> tuple[dict, str]:
    proc = run_py(
        *TINY,
        "search.model=largest",
        "steps.warmup=1",
        "steps.measure=1",
        f"hydra.run.dir={run_dir}",
        *overrides,
        timeout=900,
    )
    return json.loads((run_dir / "metrics.json").read_text()), proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_cpu_search_finds_the_largest_n_layer_under_the_budget(hydra_compose, tmp_path: Path) -> None:
    """The budget lies between the estimated peaks of 5 and 6 blocks: the search finds 5, by real
    probes, and one more block does not fit by the same rule; batch=auto then keeps micro batch 1
    (2 is over the budget at 5 blocks)."""
    plan = make_plan(hydra_compose(TINY))
    est = {n: estimate(sized(plan, n), plan.layout).total for n in (5, 6)}
    budget_gib = (est[5] + est[6]) / 2 / GIB
    assert budget_problem(sized(plan, 6), estimated=est[6], peak=None, budget=int(budget_gib * GIB), nproc=1)
    record, log = search_run(
        tmp_path, f"search.memory_budget_gib={budget_gib:.9f}", "batch=auto", "batch.max_micro_batch_size=4"
    )
    assert record["status"] == "ok", record["error"]
    search = record["run"]["model_search"]
    assert search["result"] == 5 and record["model"]["n_layer"] == 5
    assert record["model"]["name"] == "llama-tiny-L5" and search["n_params"] == record["model"]["n_params"]
    probes = {p["n_layer"]: p for p in search["probes"]}
    assert all(p["status"] == "ok" for n, p in probes.items() if n <= 5)
    assert all(p["status"] == "over_budget" for n, p in probes.items() if n > 5) and 6 in probes
    assert probes[6]["estimated_peak_bytes"] == est[6] and probes[6]["tokens_per_s"] is None
    # the prediction recorded is the found model's (5 blocks), not the configured one's
    assert record["metrics"]["predicted_peak_gib"] == round(est[5] / GIB, 6)
    assert all(p["tokens_per_s"] > 0 for n, p in probes.items() if n <= 5)
    assert search["method"] == "double then bisect, guided by the estimated peak"
    assert list(probes) == [1, 2, 5, 6]  # two points predict the size, one more block confirms it
    batch = record["run"]["batch_search"]
    assert batch["result"] == 1 and [p["status"] for p in batch["probes"]] == ["ok", "over_budget"]
    assert log.count("search.model=largest: probe ") == 4
    size = format_count(search["n_params"])  # llama-tiny's blocks: thousands, not "0.000263 B"
    assert size.endswith(("K", "M")) and f"has n_layer=5 ({size} parameters)" in log, log[-3000:]
    assert sorted(p.name for p in (tmp_path / "model_search").iterdir()) == ["L1", "L2", "L5"]  # 6 never ran


@pytest.mark.slow
def test_a_search_where_nothing_fits_is_invalid_and_runs_nothing(tmp_path: Path) -> None:
    """A budget below the smallest size's estimate: refused before launch (exit 2, one line naming the
    budget), no probe and no search folder; a single run's refusal writes no record (session 43)."""
    run_dir = tmp_path / "run"
    args = ("search.model=largest", "steps.warmup=1", "steps.measure=1", f"hydra.run.dir={run_dir}")
    proc = run_py(*TINY, *args, "search.memory_budget_gib=0.000001", timeout=900)
    [line] = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and line.startswith(
        "flopsweep: Invalid config: search.memory_budget_gib=1e-6:"
    )
    assert "n_layer=1" in line  # config.typed_form
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "model_search").exists()


def probes_logged(log: str) -> list[int]:
    """The ``n_layer`` of every ``search.model=largest: probe K: n_layer=N ...`` line, in order."""
    return [int(n) for n in re.findall(r"search\.model=largest: probe \d+: n_layer=(\d+) ", log)]


@pytest.mark.slow
def test_a_search_interrupted_keeps_its_finished_probes_in_the_record(tmp_path: Path) -> None:
    """SIGTERM once the first probe is logged (a Slurm time limit, ``timeout``): the error record
    written on the way out has ``run.model_search`` with every probe that finished (the first one
    trained, with its tokens/s) and no result, where it used to have no ``model_search`` at all."""
    code, log = run_py_signalled(
        *TINY,
        "search.model=largest",
        "search.max_n_layer=4",  # probes 1, 2, 4: the signal lands in the second
        f"hydra.run.dir={tmp_path}",
        when="search.model=largest: probe 1: ",
    )
    assert code == 143, log[-3000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "error" and record["error"]["type"] == "Terminated", record["error"]
    search = record["run"]["model_search"]
    assert search["result"] is None and search["n_params"] is None
    assert [p["n_layer"] for p in search["probes"]] == probes_logged(log) != []
    finished = f"{len(search['probes'])} probe{'s' if len(search['probes']) > 1 else ''} finished"
    stopped = f"interrupted by SIGTERM during search.model=largest ({finished}, in run.model_search); "
    assert record["error"]["message"] == stopped + "every worker was stopped"
    first = search["probes"][0]
    assert first["n_layer"] == 1 and first["status"] == "ok" and first["tokens_per_s"] > 0
    assert (search["start"], search["limit"], search["micro_batch_size"]) == (1, 4, 1)
    assert "has n_layer=" not in log  # it was stopped during the search


@pytest.mark.slow
def test_a_measured_run_interrupted_after_the_search_keeps_the_search(tmp_path: Path) -> None:
    """SIGTERM once the measured run at the size found has started (its first warm-up step of two;
    a probe has one): the error record keeps the whole search, its result and every probe, and
    names the model measured (3 blocks), not the configured one (llama-tiny's 2)."""
    code, log = run_py_signalled(
        *TINY,
        "search.model=largest",
        "search.max_n_layer=3",
        "steps.warmup=2",
        "steps.measure=50",
        f"hydra.run.dir={tmp_path}",
        when="[flopsweep rank 0] warm-up step 1/2",
    )
    assert code == 143, log[-3000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "error" and record["error"]["type"] == "Terminated", record["error"]
    search = record["run"]["model_search"]
    assert search["result"] == 3 and [p["n_layer"] for p in search["probes"]] == [1, 2, 3] == probes_logged(
        log
    )
    assert all(p["status"] == "ok" for p in search["probes"])
    assert record["error"]["message"] == "interrupted by SIGTERM; every worker was stopped"  # not in a search
    assert record["model"]["n_layer"] == record["config"]["model"]["n_layer"] == 3
    assert record["model"]["name"] == "llama-tiny-L3" and record["model"]["n_params"] == search["n_params"]
