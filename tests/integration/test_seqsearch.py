"""search.grow=seq_len: a real CPU search through run.py, under activation_checkpointing=offload, and
the sequence frontier the analysis makes of its record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_plan, run_py
from unit.test_modelsearch import TINY

from analysis import load
from analysis.frontier import frontier_table
from flopsweep.memory import peak_bytes
from flopsweep.seqsearch import with_seq_len
from flopsweep.sizesearch import GIB

SEARCH = [
    *TINY,
    "attention=standard",  # the s x s scores: the estimate grows with s^2
    "activation_checkpointing=offload",
    "search.model=largest",
    "search.grow=seq_len",
    "search.min_seq_len=64",
    "search.max_seq_len=4096",
]
LONGEST = 600
"""The length the budget is set to fit, and not one token more."""


@pytest.mark.slow
def test_a_cpu_search_finds_the_longest_sequence_under_the_budget(hydra_compose, tmp_path: Path) -> None:
    """The budget lies between the estimated peaks of 600 and 601 tokens: the search probes 64 (runs),
    jumps to the estimate's longest, 600 (runs), and 601 is over the budget by the same rule; the
    measured run is at 600 tokens and the frontier shows it."""
    plan = make_plan(hydra_compose(SEARCH))
    est = {t: peak_bytes(with_seq_len(plan.cfg, t), plan.layout) for t in (LONGEST, LONGEST + 1)}
    budget_gib = (est[LONGEST] + est[LONGEST + 1]) / 2 / GIB
    run_dir = tmp_path / "run"
    proc = run_py(
        *SEARCH,
        f"search.memory_budget_gib={budget_gib:.12f}",
        "steps.warmup=1",
        "steps.measure=1",
        f"hydra.run.dir={run_dir}",
        timeout=600,
    )
    record = json.loads((run_dir / "metrics.json").read_text())
    assert record["status"] == "ok", record["error"]
    search = record["run"]["model_search"]
    assert search["grow"] == "seq_len" and search["result"] == LONGEST
    assert (search["start"], search["limit"], search["step"]) == (64, 4096, 1)
    assert record["config"]["model"]["seq_len"] == LONGEST and record["model"]["n_layer"] == 2
    probes = [(p["seq_len"], p["status"]) for p in search["probes"]]
    assert probes == [(64, "ok"), (LONGEST, "ok"), (LONGEST + 1, "over_budget")]  # one more does not fit
    assert search["probes"][-1]["estimated_peak_bytes"] == est[LONGEST + 1]
    assert all(p["tokens_per_s"] > 0 for p in search["probes"][:2])
    assert record["metrics"]["tokens_per_s"] > 0
    assert record["metrics"]["tokens_per_step"] == LONGEST  # micro batch 1
    assert (proc.stdout + proc.stderr).count("search.grow=seq_len: probe ") == 3
    table = frontier_table(load(tmp_path))
    assert table["grew"].tolist() == ["seq_len"] and table["seq_len"].tolist() == [LONGEST]
    assert table["larger_failed"].tolist() == [f"seq_len={LONGEST + 1}: over_budget"]
